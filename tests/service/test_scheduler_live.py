"""The scheduler in a real service: failures are data, stop works, bad input is one CLI line."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from tests.live_service import FOLDWISE_BIN, ROOT, LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(shared_service: LiveService) -> LiveService:
    """The shared service, whose first start met a port another process held."""
    return shared_service


def test_a_busy_port_fails_the_start_at_once_and_the_harness_takes_another(service) -> None:
    log = service.log(tail=10**8)
    (busy,) = re.findall(r"^error: cannot listen on 127\.0\.0\.1:(\d+): .*in use", log, re.M)
    assert int(busy) != service.port
    first_start = log.split(f"cannot listen on 127.0.0.1:{busy}")[0]
    assert "scheduler started" not in first_start  # refused before Ray or the scheduler started
    assert service.http().get("/health").json()["ray"]["ok"]


def test_failing_trials_are_recorded_and_the_study_goes_on(service: LiveService) -> None:
    client = service.sdk()
    # one rank: a user error in build_model ends its worker group, so each such fold starts
    # new worker processes
    one_rank = {"trial_groups": 2, "folds": 2, "workers_per_fold": 1}
    spec = tiny_task_spec(["ok", "raise", "nan"], parallel=one_rank)
    study = client.create_study(spec).wait(timeout=600, poll=1)
    trials = study.trials()
    assert study.status is StudyStatus.COMPLETED, study.data.error
    assert len(trials) == 6 and study.data.progress.finished == 6
    by_mode: dict[str, list] = {}
    for trial in trials:
        by_mode.setdefault(trial.params["mode"], []).append(trial)
    assert set(by_mode) == {"ok", "raise", "nan"}, "seed 1 should draw every mode"
    assert all(t.status is TrialStatus.COMPLETED and t.value is not None for t in by_mode["ok"])
    for trial in by_mode["raise"]:
        assert trial.status is TrialStatus.FAILED
        assert "tiny task refuses mode=raise" in trial.error
        detail = study.trial(trial.number)
        assert any(
            f.status is FoldStatus.FAILED and "ValueError" in (f.traceback or "")
            for f in detail.folds
        )
    for trial in by_mode["nan"]:
        assert trial.status is TrialStatus.FAILED and "nan" in trial.error.lower()


def test_a_crashed_worker_is_retried_as_a_new_attempt(service: LiveService) -> None:
    spec = tiny_task_spec(["crash"], budget={"trials": 1})
    spec["trainer"]["retries"] = 1
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=600, poll=1)
        trial = study.trial(0)
    # "crash" kills rank 1 in every attempt: each fold is tried twice, then the trial fails.
    assert trial.status is TrialStatus.FAILED
    attempts = sorted((f.fold, f.attempt) for f in trial.folds if f.status is FoldStatus.FAILED)
    assert (0, 1) in attempts or (1, 1) in attempts, trial.folds
    # Its only trial failed: the study failed, and says why.
    assert study.status is StudyStatus.FAILED
    assert study.data.error.startswith("all 1 trials failed; most often: fold ")
    assert "workers lost" in study.data.error


def test_stop_cancels_running_trials(service: LiveService) -> None:
    spec = tiny_task_spec(["ok"], budget={"trials": 50})
    spec["trainer"]["epochs"] = 200
    with service.sdk() as client:
        study = client.create_study(spec)
        deadline = time.monotonic() + 120
        while study.refresh().data.progress.running == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        stop = subprocess.run(
            [str(FOLDWISE_BIN), "--url", service.url, "stop", str(study.id)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=service.cli_env,
        )
        assert stop.returncode == 0, stop.stderr
        study.refresh()
        trials = study.trials()
    assert study.status is StudyStatus.STOPPED
    assert len(trials) < 50
    assert all(t.status.finished for t in trials)
    assert any(t.error and "stopped" in t.error for t in trials)


def test_cli_errors_are_one_line(service: LiveService, tmp_path: Path) -> None:
    missing = subprocess.run(
        [str(FOLDWISE_BIN), "--url", service.url, "status", "9999"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=service.cli_env,
    )
    assert missing.returncode == 1
    assert "not found" in missing.stderr and "Traceback" not in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nspace: {x: {type: int, low: 3, high: 1}}\n"
        "budget: {trials: 1}\ntrainer: {task: digits_mlp}\n"
    )
    submitted = subprocess.run(
        [str(FOLDWISE_BIN), "--url", service.url, "submit", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=service.cli_env,
    )
    assert submitted.returncode == 1 and "space" in submitted.stderr
    assert "Traceback" not in submitted.stderr
