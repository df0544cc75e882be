"""A study runs its task as it was when it was submitted, in a real service with a local Ray:
an edit reaches the next study without a restart, a running study keeps its code, and another
instance with an empty code cache runs a study's copy from the artifact store.

The task package lives in the service's working directory (``FOLDWISE_TASK_MODULES=labedit``);
the version there when the service starts raises, so a fold that ran the code Ray was given at
start, and not the study's copy, would fail."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_service import FOLDWISE_BIN, ROOT, LiveService
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

TASK = '''"""A task the tests edit between studies."""

import numpy as np
from torch import nn

kind = "classification"


def load_data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


def build_model(params):
    {body}
'''
AT_START = TASK.format(body='raise ValueError("the task as the service started ran")')
WORKS = TASK.format(body="return nn.Linear(4, 2)")
REFUSES = TASK.format(body='raise ValueError("the edited task refuses to build")')


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("taskcode")
    (home / "labedit").mkdir()
    (home / "labedit" / "__init__.py").write_text("")
    _write(home, AT_START)
    return home


def _service(home: Path, name: str) -> LiveService:
    """A service in ``home`` with its own code cache (a second one is a new instance)."""
    return LiveService(
        f"sqlite:///{home / 'foldwise.db'}",
        home / f"{name}.log",
        cwd=home,
        env={
            "FOLDWISE_TASK_MODULES": "labedit",
            "FOLDWISE_ARTIFACT_DIR": str(home / "artifacts"),
            "FOLDWISE_CODE_CACHE_DIR": str(home / f"{name}-code"),
        },
    )


@pytest.fixture(scope="module")
def live(home: Path) -> Iterator[LiveService]:
    service = _service(home, "first").start()
    yield service
    service.stop()


@pytest.fixture
def api(live: LiveService) -> Iterator[httpx.Client]:
    with live.http() as client:
        yield client


def _write(home: Path, source: str) -> None:
    (home / "labedit" / "task.py").write_text(source)


def _spec(name: str) -> dict[str, Any]:
    return study_spec(
        name=name,
        space={"lr": {"type": "float", "low": 1e-2, "high": 1e-1, "log": True}},
        budget={"trials": 1},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 1},
        resources={"cpus_per_worker": 1},
        trainer={"task": "labedit.task", "epochs": 1, "batch_size": 32},
    )


def _submit(api: httpx.Client, name: str) -> dict[str, Any]:
    response = api.post("/studies", json=_spec(name))
    assert response.status_code == 201, response.text
    return response.json()


def _wait(api: httpx.Client, study_id: int, done: Any, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        study = api.get(f"/studies/{study_id}").json()
        if done(study):
            return study
        time.sleep(0.5)
    raise TimeoutError(f"study {study_id} never got there: {study}")


def _finished(study: dict[str, Any]) -> bool:
    return study["status"] in ("completed", "stopped", "failed")


def _trials(api: httpx.Client, study_id: int) -> list[dict[str, Any]]:
    return api.get(f"/studies/{study_id}/trials").json()["data"]


def _completed(api: httpx.Client, study_id: int) -> dict[str, Any]:
    study = _wait(api, study_id, _finished)
    assert study["status"] == "completed", (study, _trials(api, study_id))
    assert [t["status"] for t in _trials(api, study_id)] == ["completed"]
    return study


def test_an_edited_task_runs_in_the_next_study_without_a_restart(
    home: Path, live: LiveService, api: httpx.Client
) -> None:
    _write(home, WORKS)
    first = _submit(api, "works")
    _completed(api, first["id"])
    _write(home, REFUSES)
    edited = _submit(api, "refuses")
    _wait(api, edited["id"], _finished)
    [trial] = _trials(api, edited["id"])
    assert trial["status"] == "failed" and "the edited task refuses to build" in trial["error"]
    assert len(first["code_hash"]) == 64 and edited["code_hash"] != first["code_hash"]
    _write(home, WORKS)  # the same files again: the same snapshot, its warm workers
    again = _submit(api, "works again")
    assert again["code_hash"] == first["code_hash"]
    _completed(api, again["id"])
    assert api.get(f"/studies/{first['id']}").json()["code_hash"] == first["code_hash"]
    shown = subprocess.run(
        [str(FOLDWISE_BIN), "--url", live.url, "status", str(first["id"])],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=live.cli_env,
    )
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("code")]
    assert line.split() == ["code", first["code_hash"][:12]]


def test_a_running_study_keeps_its_code_when_the_file_changes(
    home: Path, api: httpx.Client
) -> None:
    _write(home, WORKS + "# a new edition: new workers\n")
    study = _submit(api, "kept")
    _wait(api, study["id"], lambda s: s["status"] != "queued")
    _write(home, REFUSES)
    _completed(api, study["id"])


POISONER = '''"""A task whose study with trainer.options.poison tries to change the code of the
next study of the same snapshot: on disk (its unpacked file) and in memory (its module)."""

import sys
from pathlib import Path

import numpy as np
from torch import nn

kind = "classification"
POISONED = False
SEEN = {}


def load_data(options):
    SEEN.update(options=options)
    if options.get("poison"):
        here = Path(__file__)
        here.write_text(here.read_text() + "\\nraise RuntimeError('poisoned on disk')\\n")
        sys.modules[__name__].POISONED = True
    rng = np.random.default_rng(3)
    X = rng.normal(size=(64, 4)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.int64)


def build_model(params):
    if POISONED and not SEEN["options"].get("poison"):
        raise RuntimeError("poisoned in memory")
    return nn.Linear(4, 2)
'''


def _poisoning_spec(name: str, poison: bool) -> dict[str, Any]:
    spec = _spec(name)
    spec["trainer"]["options"] = {"poison": True} if poison else {}
    return spec


def test_no_study_can_change_the_code_another_study_of_the_same_snapshot_runs(
    home: Path, live: LiveService, api: httpx.Client
) -> None:
    """The first study writes to its unpacked code and to its module in memory; the next study
    of the same snapshot, on the same warm workers, runs the code as submitted."""
    _write(home, POISONER)
    poisoner = api.post("/studies", json=_poisoning_spec("poisoner", True)).json()
    _completed(api, poisoner["id"])  # its own folds ran before it wrote anything
    victim = api.post("/studies", json=_poisoning_spec("victim", False)).json()
    assert victim["code_hash"] == poisoner["code_hash"]
    _completed(api, victim["id"])


def test_a_code_cache_changed_while_the_service_was_down_is_unpacked_afresh(
    home: Path, live: LiveService
) -> None:
    """What anything appended to the service's code cache is never run: after a restart, a
    study of the same snapshot runs the stored copy, and the cache holds it again."""
    _write(home, WORKS)
    with live.http() as api:
        first = _submit(api, "before the restart")
        _completed(api, first["id"])
    cached = home / "first-code" / first["code_hash"] / "labedit" / "task.py"
    original = cached.read_text()
    live.stop()
    cached.write_text(original + "\nraise RuntimeError('poisoned in the cache')\n")
    live.start()
    with live.http() as api:
        again = _submit(api, "after the restart")
        assert again["code_hash"] == first["code_hash"]
        _completed(api, again["id"])
    assert cached.read_text() == original


def test_another_instance_runs_the_studys_code_from_the_artifact_store(
    home: Path, live: LiveService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API-only instance takes the study while no scheduler runs, the file is edited, and
    a scheduling instance with an empty code cache runs the study's folds: from the store."""
    live.stop()
    monkeypatch.chdir(home)
    _write(home, WORKS + "# the edition another instance must find\n")
    settings = {
        "task_modules": ["labedit"],
        "artifact_dir": home / "artifacts",
        "code_cache_dir": home / "api-code",
    }
    with signed_in_client(f"sqlite:///{home / 'foldwise.db'}", **settings) as api:
        response = api.post("/studies", json=_spec("across instances"))
    assert response.status_code == 201, response.text
    study = response.json()
    _write(home, REFUSES)
    successor = _service(home, "successor").start()
    try:
        with successor.http() as api:
            _completed(api, study["id"])
    finally:
        successor.stop()
    assert (home / "successor-code" / study["code_hash"] / "labedit" / "task.py").exists()
