"""Racing and pruning in a real service: clearly worse trials stop early and say why."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from tests.live_service import LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow

FOLDS, EPOCHS = 3, 10
EPOCH_SECONDS = 0.2


@pytest.fixture(scope="module")
def service(shared_service: LiveService) -> LiveService:
    return shared_service


def ok_or_flat(**overrides) -> dict:
    """One trial group, each trial either learning (ok) or stuck at log 3 (flat)."""
    spec = tiny_task_spec(
        ["ok", "flat"],
        optimizer={"name": "random", "seed": 0},
        budget={"trials": 8},
        parallel={"trial_groups": 1, "folds": FOLDS, "workers_per_fold": 1},
    )
    spec["space"]["lr"].update(low=0.05, high=0.051)  # ok trials all learn alike
    spec["trainer"].update(epochs=EPOCHS, batch_size=32)
    spec.update(overrides)
    return spec


def test_racing_cancels_the_remaining_folds_of_a_clearly_worse_trial(service) -> None:
    spec = ok_or_flat(racing={"rule": "forgiving", "min_folds": 1})
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=600, poll=1)
        trials = [study.trial(t.number) for t in study.trials()]
        best = study.best_trial
    assert study.status is StudyStatus.COMPLETED
    assert len(trials) == 8 and study.data.progress.finished == 8  # the budget counts them
    first_ok = min(t.number for t in trials if t.params["mode"] == "ok")
    late_flats = [t for t in trials if t.params["mode"] == "flat" and t.number > first_ok]
    assert late_flats, "seed 0 should draw a flat trial after an ok one"
    # racing runs more trials' first folds at once than trial_groups (to keep the slots busy):
    # a flat trial is pruned once an ok one has completed, after however many of its folds had
    # ended by then; one whose folds all ended before that completes
    pruned = [t for t in trials if t.status is TrialStatus.PRUNED]
    assert pruned and study.data.progress.pruned == len(pruned)
    assert all(t.params["mode"] == "flat" for t in pruned)
    for trial in pruned:
        assert 1 <= trial.value_folds < FOLDS and trial.value is not None
        assert trial.pruned_reason.startswith(f"after {trial.value_folds} of {FOLDS} folds: 1.09")
        assert "on the same folds" in trial.pruned_reason and trial.error is None
        ran = {f.fold: f for f in trial.folds}
        done = [f for f in trial.folds if f.status is FoldStatus.COMPLETED]
        assert len(done) == trial.value_folds
        assert trial.value == pytest.approx(sum(f.value for f in done) / len(done))
        # the other folds were never started or were stopped: never run to the end
        assert all(f.status is FoldStatus.CANCELLED for f in ran.values() if f not in done)
    for trial in trials:
        if trial.status is TrialStatus.COMPLETED:
            assert trial.value_folds == FOLDS and trial.pruned_reason is None
        assert all(f.status is not FoldStatus.RUNNING for f in trial.folds)
    assert best.params["mode"] == "ok"


def test_pruning_stops_a_fold_run_whose_curve_is_below_the_median(service) -> None:
    spec = ok_or_flat(pruning={"rule": "median", "warmup_epochs": 1, "min_runs": 1})
    # epochs of 0.2 s: a stop decided in the first half reaches its rank before the last epoch
    spec["space"]["epoch_seconds"] = {"type": "categorical", "choices": [EPOCH_SECONDS]}
    # seed 5 draws "ok" first (a draw from an empty history depends on the seed and space
    # alone), so the first flat run after it has only ok runs as references
    spec["optimizer"]["seed"] = 5
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=600, poll=1)
        trials = [study.trial(t.number) for t in study.trials()]
    assert study.status is StudyStatus.COMPLETED
    pruned = [t for t in trials if t.status is TrialStatus.PRUNED]
    modes = [t.params["mode"] for t in sorted(trials, key=lambda t: t.number)]
    assert modes[0] == "ok" and "flat" in modes, modes
    # a flat run is worse than any ok run: the median of references that are all ok runs
    # prunes it (an ok run may be pruned too: it is compared with runs as good as itself)
    first_flat = min(t.number for t in trials if t.params["mode"] == "flat")
    assert first_flat in {t.number for t in pruned}, modes
    early = []
    for trial in pruned:
        stopped = [f for f in trial.folds if f.status is FoldStatus.PRUNED]
        assert stopped and "median rule" in trial.pruned_reason
        assert trial.pruned_reason in {f.error for f in stopped}
        for run in stopped:
            # it ends after the epoch it is in when the stop reaches it (how many it trains
            # after the decision depends on the machine's load): decided in the first half, it
            # never reaches its last epoch; its value is the one it had reached when the rule
            # decided
            decided = int(re.search(r"at epoch (\d+)", run.error).group(1))
            if decided <= EPOCHS // 2:
                early.append(run)
                assert len(run.epochs) < EPOCHS
            losses = [e.metrics["val_loss"] for e in run.epochs[:decided]]
            assert run.value == pytest.approx(min(losses))
        # the trial's value: the mean of the pruned fold's and of the folds that had finished
        # by then (other folds, stopped in their last epoch, may still finish after it)
        done = [f for f in trial.folds if f.status is FoldStatus.COMPLETED]
        assert 1 <= trial.value_folds <= len(done) + 1
    assert early, "a flat run is decided after its first epochs"


def test_slot_use_and_pruned_trials_are_in_the_metrics(service) -> None:
    with service.http() as http:
        response = http.get("/metrics")
    assert response.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    busy = samples[("foldwise_fold_slot_seconds_total", (("state", "busy"),))]
    idle = samples[("foldwise_fold_slot_seconds_total", (("state", "idle"),))]
    assert busy > 0 and idle >= 0  # the studies above ran one trial at a time
    assert samples[("foldwise_trials_ended_total", (("status", "pruned"),))] >= 1
    assert samples[("foldwise_fold_runs_ended_total", (("status", "pruned"),))] >= 1
