"""A user's project may have its own top-level ``service``, ``trainers``, ``optimizers`` and
``migrations`` packages: foldwise's own install inside the foldwise package, so a real service
started in that project runs a study whose task lives in the project's ``trainers`` and uses the
project's other three, on the scheduler's side (the task's description) and on the Ray workers.
Each of the project's packages says whose it is, and the task refuses to load beside ours."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

NAMES = ("service", "trainers", "optimizers", "migrations")
TASK = '''"""The project's own task, in the project's own trainers package."""

import numpy as np
from torch import nn

import migrations
import optimizers
import service
import trainers

packages = (service, trainers, optimizers, migrations)
found = {p.__name__: getattr(p, "OWNER", p.__file__) for p in packages}
if set(found.values()) != {"the project"}:
    raise ImportError(f"not the project's packages: {found}")

kind = "classification"
metrics = ["val_loss", "val_accuracy"]


def load_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


def build_model(params):
    return nn.Linear(4, 2)
'''


def test_a_project_with_packages_named_like_ours_runs_its_task(tmp_path: Path) -> None:
    project = tmp_path / "project"
    for name in NAMES:
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text('OWNER = "the project"\n')
    (project / "trainers" / "lab_task.py").write_text(TASK)
    live = LiveService(
        f"sqlite:///{tmp_path / 'foldwise.db'}",
        tmp_path / "service.log",
        cwd=project,
        env={"FOLDWISE_TASK_MODULES": ",".join(NAMES)},
    ).start()
    try:
        with live.http() as api:
            spec = study_spec(
                name="own-names",
                space={"lr": {"type": "float", "low": 1e-2, "high": 1e-1, "log": True}},
                budget={"trials": 1},
                parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 1},
                resources={"cpus_per_worker": 1},
                trainer={"task": "trainers.lab_task", "epochs": 1, "batch_size": 16},
            )
            created = api.post("/studies", json=spec)
            assert created.status_code == 201, created.text
            study_id = created.json()["id"]
            deadline = time.monotonic() + 240
            while (study := api.get(f"/studies/{study_id}").json())["status"] not in (
                "completed",
                "failed",
            ):
                assert time.monotonic() < deadline, study
                time.sleep(0.5)
            trials = api.get(f"/studies/{study_id}/trials").json()["data"]
            assert study["status"] == "completed", (study, trials)
            assert [t["status"] for t in trials] == ["completed"]
            assert study["spec"]["trainer"]["task"] == "trainers.lab_task"
    finally:
        live.stop()
