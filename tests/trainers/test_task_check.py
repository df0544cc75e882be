"""``trainers.task_check``: one fold of a task run here, and the one-line verdicts on it."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from foldwise.trainers.fold_channel import FoldContractError
from foldwise.trainers.report import EpochReport
from foldwise.trainers.task import Task
from foldwise.trainers.task_check import (
    CheckFailed,
    CheckSummary,
    TaskCheck,
    default_metric,
    describe_error,
    prepare_check,
    run_check,
    shown_metrics,
    summarize,
)

TINY = "tests.user_tasks.tiny"
OWN = "tests.user_tasks.own_loop"


def run(name: str, **options) -> tuple[TaskCheck, list[EpochReport], CheckSummary]:
    check = prepare_check(name, **options)
    reports = list(run_check(check, num_threads=1))
    return check, reports, summarize(check, reports)


def failure(name: str, **options) -> str:
    with pytest.raises(CheckFailed) as caught:
        run(name, **options)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_job_is_a_trials_with_the_checks_own_epochs_and_batch() -> None:
    params = {"lr": 0.1, "epochs": 50, "batch_size": 16}
    check = prepare_check(TINY, params=params, epochs=2, fold=1, folds=4, seed=5)
    job = check.job
    assert (job.epochs, job.batch_size) == (2, 16)  # --epochs wins; the params' batch_size
    assert (job.fold, job.folds, job.seed, job.world_size, job.backend) == (1, 4, 5, 1, "gloo")
    assert job.params == params and job.artifact_key is None
    assert (job.objective.metric, job.objective.direction.value) == ("val_loss", "minimize")
    assert prepare_check(TINY, params=params, batch_size=8).job.batch_size == 8


def test_the_objective_defaults_to_the_first_declared_metric_of_an_own_loop() -> None:
    own = SimpleNamespace(load_data=list, train_fold=print, metrics=["val_f1", "val_loss"])
    model = SimpleNamespace(load_data=list, build_model=print)
    assert default_metric(Task("own", own)) == "val_f1"
    assert default_metric(Task("model", model)) == "val_loss"
    check = prepare_check(OWN, metric="val_accuracy", direction="maximize", workers=3)
    objective = check.job.objective
    assert (objective.metric, objective.direction.value, check.job.world_size) == (
        "val_accuracy",
        "maximize",
        3,
    )


@pytest.mark.parametrize(
    ("name", "options", "fragment"),
    [
        ("no_such_module_here", {}, "cannot import 'no_such_module_here'"),
        (TINY, {"metric": "val_f1"}, "reports train_loss, val_loss, val_accuracy"),
        (TINY, {"metric": "epoch_seconds"}, "foldwise measures it"),
        (OWN, {"precision": "bf16"}, "its own train_fold, which precision does not reach"),
        (TINY, {"fold": 3, "folds": 3}, "fold must be in [0, 3), got 3"),
        (TINY, {"params": {"batch_size": 0}}, "batch_size: Input should be greater than"),
        (TINY, {"direction": "up"}, "direction: Input should be 'minimize' or 'maximize'"),
        (TINY, {"device": "tpu"}, "device must be cpu or cuda"),
    ],
)
def test_what_a_study_would_refuse_fails_before_training(name, options, fragment) -> None:
    with pytest.raises(CheckFailed) as caught:
        prepare_check(name, **options)
    assert fragment in str(caught.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_one_line() -> None:
    with pytest.raises(CheckFailed, match="device cuda: torch sees no CUDA device"):
        prepare_check(TINY, device="cuda")


def test_one_rank_reports_every_epoch_and_the_best() -> None:
    check, reports, summary = run(TINY, params={"lr": 0.05}, epochs=3)
    assert [r.epoch for r in reports] == [1, 2, 3]
    shown = set(shown_metrics(check, reports[0]))
    assert shown == {"train_loss", "val_loss", "val_accuracy", "lr"}
    losses = [r.metrics["val_loss"] for r in reports]
    assert summary.best == min(losses) and losses[summary.best_epoch - 1] == summary.best
    assert summary.epochs == 3 and summary.metric == "val_loss" and summary.undeclared == ()
    seconds = [r.metrics["epoch_seconds"] for r in reports]
    assert summary.seconds_per_epoch == pytest.approx(sum(seconds) / 3) and seconds[0] > 0


def test_an_error_in_the_tasks_code_is_named_with_its_line() -> None:
    message = failure(TINY, params={"mode": "raise"}, epochs=1)
    assert message.startswith(f"task '{TINY}' failed before its first report: ValueError: ")
    assert "tiny task refuses mode=raise (tests/user_tasks/tiny.py:" in message
    assert message.endswith(", in build_model)")


def test_a_task_that_never_reports_fails() -> None:
    message = failure(OWN, params={"mode": "silent"}, epochs=1)
    assert "train_fold returned without reporting an epoch" in message


def test_a_diverging_task_fails_at_its_epoch() -> None:
    assert "train_loss became nan at epoch 1" in failure(TINY, params={"mode": "nan"}, epochs=2)


def test_a_declared_metric_never_reported_fails_naming_it() -> None:
    message = failure("tests.user_tasks.declares_more", epochs=2)
    assert message.startswith("task 'tests.user_tasks.declares_more' declares val_f1 but never")
    assert "in 2 epochs (it reported val_loss)" in message


def test_undeclared_metrics_and_a_maximized_objective() -> None:
    check = prepare_check(OWN, metric="val_accuracy", direction="maximize")
    declared = {"val_loss": 0.5, "train_noise": 0.1, "train_loss": 0.4}
    reports = [
        EpochReport(1, {**declared, "val_accuracy": 0.7, "epoch_seconds": 1.0, "grad_norm": 2.0}),
        EpochReport(2, {**declared, "val_accuracy": 0.9, "epoch_seconds": 3.0}),
        EpochReport(3, {**declared, "val_accuracy": 0.8, "epoch_seconds": 2.0}),
    ]
    summary = summarize(check, reports)
    assert (summary.best, summary.best_epoch, summary.seconds_per_epoch) == (0.9, 2, 2.0)
    assert summary.undeclared == ("grad_norm",)
    assert shown_metrics(check, reports[0]) == {**declared, "val_accuracy": 0.7, "grad_norm": 2.0}
    own_timing = EpochReport(4, {**declared, "val_accuracy": 0.8, "train_seconds": 1.5})
    assert shown_metrics(check, own_timing)["train_seconds"] == 1.5  # the task's own, shown


def test_foldwise_contract_errors_keep_their_own_words() -> None:
    error = FoldContractError("the ranks are at different epochs: rank 0 reported epoch 1")
    assert describe_error(error, TINY) == str(error)
    assert describe_error(KeyError("x"), TINY) == "KeyError: 'x'"


@pytest.mark.slow  # two spawned interpreters import torch
def test_two_ranks_name_the_rank_that_failed_not_its_echo() -> None:
    # rank 1 raises before its first report; rank 0 then fails waiting for it (PeerFailed)
    message = failure(OWN, params={"mode": "raise"}, workers=2, epochs=2)
    assert message.startswith(f"task '{OWN}' failed before its first report: rank 1: ")
    assert "RuntimeError: own loop refuses to go on in epoch 0" in message
    assert "tests/user_tasks/own_loop.py:" in message and message.endswith("in _misbehave)")


@pytest.mark.slow  # two spawned interpreters import torch
def test_two_ranks_stream_rank_0s_reports() -> None:
    _, reports, summary = run(TINY, params={"lr": 0.05}, epochs=2, workers=2)
    assert [r.epoch for r in reports] == [1, 2] and summary.epochs == 2
    assert reports[-1].metrics["lr"] == pytest.approx(0.1)  # scaled by the two ranks


@pytest.mark.slow  # two spawned interpreters import torch
def test_spawned_ranks_fork_their_dataloader_workers_as_the_services_workers_do() -> None:
    """A spawned rank's DataLoader workers were spawned too, each importing torch and the
    task again: 40-110 s an epoch against about 1 s in the service."""
    _, reports, _ = run(
        "tests.user_tasks.rank_probe:loader_fork",
        params={"mode": "loader_fork"},
        epochs=1,
        workers=2,
    )
    assert reports[0].metrics["forked"] == 1.0


def test_a_fold_past_the_timeout_fails_saying_where_it_was() -> None:
    started = time.monotonic()
    message = failure(OWN, params={"mode": "sleep"}, epochs=2, timeout=5)
    assert message == (
        f"task '{OWN}' failed before its first report: timed out after 5 s: in train_fold for 5 s"
    )
    assert time.monotonic() - started < 30  # not the abandoned thread's grace


@pytest.mark.slow  # two spawned interpreters import torch
def test_two_ranks_deadlocked_in_a_collective_fail_at_the_timeout_naming_each() -> None:
    # rank 0 waits in an all_reduce that rank 1 skipped; rank 1 waits for rank 0's report
    message = failure(OWN, params={"mode": "skip_collective"}, workers=2, epochs=2, timeout=8)
    assert message.startswith(
        f"task '{OWN}' failed before its first report: timed out after 8 s (--timeout): "
        "rank 0 in train_fold for "
    )
    assert "; rank 1 waiting in ctx.report(epoch=0) for " in message  # its own words


class _NoData:
    def build_model(self, params: dict) -> torch.nn.Module:
        return torch.nn.Linear(4, 2)


class _WrongShape:
    """Six features in the data, a model that takes five."""

    def load_data(self) -> tuple:
        return torch.zeros(40, 6).numpy(), (torch.arange(40) % 2).numpy()

    def build_model(self, params: dict) -> torch.nn.Module:
        return torch.nn.Linear(5, 2)


def test_a_task_without_load_data_fails_before_training() -> None:
    with pytest.raises(CheckFailed, match="has no load_data"):
        prepare_check(f"{__name__}:_NoData")


def test_a_model_that_does_not_fit_the_data_is_one_line() -> None:
    message = failure(f"{__name__}:_WrongShape", epochs=1)
    assert message.startswith(f"task '{__name__}:_WrongShape' failed before its first report: ")
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (26x6 and 5x2)" in message
