"""The whole path of a user: the service runs a study the SDK submits and the CLI watches."""

from __future__ import annotations

import statistics
import subprocess
import time

import pytest
import yaml

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from tests.live_service import FOLDWISE_BIN, ROOT, LiveService

pytestmark = pytest.mark.slow

TRIALS, FOLDS, WORKERS, EPOCHS = 4, 2, 2, 3


def _digits_spec() -> dict:
    spec = yaml.safe_load((ROOT / "examples" / "digits.yaml").read_text())
    spec["budget"] = {"trials": TRIALS}
    spec["parallel"] = {"trial_groups": 2, "folds": FOLDS, "workers_per_fold": WORKERS}
    spec["trainer"]["epochs"] = EPOCHS
    spec["racing"] = {"rule": "off"}  # every fold of every trial runs: checked below
    return spec


def _cli(
    service: LiveService, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FOLDWISE_BIN), "--url", service.url, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=service.cli_env,
    )


def test_digits_study_through_sdk_and_cli(shared_service: LiveService) -> None:
    service = shared_service
    with service.sdk() as client:
        started = time.monotonic()
        study = client.create_study(_digits_spec())
        watch = _cli(service, "watch", str(study.id), "--interval", "1", timeout=900)
        wall = time.monotonic() - started
        print(
            f"\nend-to-end study: {TRIALS} trials x {FOLDS} folds x {WORKERS} ranks "
            f"x {EPOCHS} epochs in {wall:.1f} s"
        )
        assert watch.returncode == 0, watch.stdout + watch.stderr + service.log()
        assert "best" in watch.stdout.lower()
        study.refresh()
        assert study.status is StudyStatus.COMPLETED, study.data
        _check_stored_trials(study)
        best = _cli(service, "best", str(study.id))
        assert best.returncode == 0 and f"{study.best_trial.value:.4g}"[:4] in best.stdout
        listing = _cli(service, "trials", str(study.id), "--sort", "best")
        assert listing.returncode == 0 and "completed" in listing.stdout


def _check_stored_trials(study) -> None:
    trials = study.trials()
    assert [t.number for t in trials] == list(range(TRIALS))
    assert all(t.status is TrialStatus.COMPLETED for t in trials), [t.error for t in trials]
    for summary in trials:
        trial = study.trial(summary.number)
        # a fold may have been retried after its workers were lost (a worker process that
        # died, say), never after an error of the training itself: one completed run per fold
        completed = [f for f in trial.folds if f.status is FoldStatus.COMPLETED]
        assert sorted(f.fold for f in completed) == list(range(FOLDS))
        for retried in (f for f in trial.folds if f.status is not FoldStatus.COMPLETED):
            lost = retried.status is FoldStatus.FAILED and retried.error.startswith("workers lost")
            assert lost or retried.status is FoldStatus.LOST, retried
            (done,) = [f for f in completed if f.fold == retried.fold]
            assert retried.attempt < done.attempt
        values = [f.value for f in completed]
        assert trial.value == pytest.approx(statistics.fmean(values))
        assert trial.std_error == pytest.approx(statistics.stdev(values) / FOLDS**0.5)
        for fold in completed:
            assert 1 <= len(fold.epochs) <= EPOCHS
            assert [e.epoch for e in fold.epochs] == list(range(1, len(fold.epochs) + 1))
            metrics = fold.epochs[-1].metrics
            assert {"train_loss", "val_loss", "val_accuracy", "samples_per_second"} <= set(metrics)
            assert fold.value == pytest.approx(min(e.metrics["val_loss"] for e in fold.epochs))
            assert fold.train_seconds and fold.train_seconds > 0
        assert set(trial.params) >= {"lr", "depth", "width_1", "act", "dropout"}
        assert ("width_2" in trial.params) == (trial.params["depth"] >= 2)
