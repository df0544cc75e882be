"""The shipped examples through a real service, on 2-rank DDP folds with racing on: an own
loop (examples/shapes.yaml) and a Lightning module (examples/lightning.yaml).
benchmarks/loops_end_to_end.py compares what they cost with the built-in loop."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from tests.live_service import LiveService

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 3


@pytest.fixture(scope="module")
def service(shared_service: LiveService) -> LiveService:
    return shared_service


def _example(file: str, **changes: Any) -> dict[str, Any]:
    spec = yaml.safe_load((ROOT / "examples" / file).read_text())
    spec = copy.deepcopy(spec)
    spec["budget"]["trials"] = TRIALS  # kept small for the suite
    for section, values in changes.items():
        spec[section] = {**spec.get(section, {}), **values} if isinstance(values, dict) else values
    return spec


def _run(service: LiveService, spec: dict[str, Any]) -> tuple[Any, list[Any], Any]:
    """The finished study, its trials and its best trial; prints what the study cost."""
    started = time.monotonic()
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=900, poll=1)
        trials = [study.trial(t.number) for t in study.trials()]
        best = study.best_trial
    seconds = time.monotonic() - started
    runs = sum(len(t.folds) for t in trials)
    epochs = sum(len(f.epochs) for t in trials for f in t.folds)
    name = spec["name"]
    print(f"\n{name}: {seconds:.1f} s, {len(trials)} trials, {runs} fold runs, {epochs} epochs")
    return study, trials, best


def _check(study: Any, trials: list[Any], best: Any, metric: str) -> None:
    assert study.status is StudyStatus.COMPLETED, study.data.error
    assert len(trials) == TRIALS
    assert all(t.status in (TrialStatus.COMPLETED, TrialStatus.PRUNED) for t in trials)
    completed = [f for t in trials for f in t.folds if f.status is FoldStatus.COMPLETED]
    assert completed and all(len(f.placement) == 2 for f in completed)  # 2-rank DDP folds
    assert all(f.model_saved and metric in f.epochs[-1].metrics for f in completed)
    assert best is not None and best.value > 0.5


def test_the_own_loop_example_runs_as_a_study(service: LiveService) -> None:
    study, trials, best = _run(service, _example("shapes.yaml"))
    _check(study, trials, best, "val_f1")
    assert {t.params["batch_size"] for t in trials} <= {16, 32}  # searched, shown per trial
    assert study.data.code_hash is not None  # the examples package, as it was submitted


def test_the_lightning_example_runs_as_a_study(service: LiveService) -> None:
    study, trials, best = _run(service, _example("lightning.yaml"))
    _check(study, trials, best, "val_acc")
