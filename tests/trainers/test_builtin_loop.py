"""The built-in loop keeps no silent trap: schedulers set the rate used, warm-up and scaling
compose with them, clipping and precision apply, a Dataset is read lazily with its
augmentation every epoch and for training only, hooks see the fold, batches may be dicts."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from foldwise.trainers.job import FoldJob
from foldwise.trainers.lr_schedule import step_scaled
from tests.trainers.fold_jobs import epochs_of, make_job, run_local
from tests.user_tasks import hooks

TASK = "tests.user_tasks.hooks"


def _job(**overrides: Any) -> FoldJob:
    fields: dict[str, Any] = {
        "params": {"lr": 0.1},
        "folds": 4,
        "epochs": 3,
        "batch_size": 25,
        "warmup_epochs": 0,
        "objective": {"metric": "val_accuracy", "direction": "maximize"},
    }
    return make_job(TASK, **{**fields, **overrides})


def _lrs(job: FoldJob) -> list[float]:
    return [e.metrics["lr"] for e in epochs_of(run_local(job))]


def test_a_per_step_scheduler_sets_the_rate_used_and_reported() -> None:
    lrs = _lrs(_job(params={"lr": 0.1, "schedule": "onecycle"}, epochs=4))
    steps, epochs = hooks.SEEN["scheduler"]
    assert (steps, epochs) == (6, 4)  # 150 training samples in batches of 25
    reference = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    schedule = torch.optim.lr_scheduler.OneCycleLR(reference, max_lr=0.1, total_steps=24)
    used = []
    for _ in range(24):
        used.append(reference.param_groups[0]["lr"])
        reference.step()
        schedule.step()
    assert lrs == pytest.approx([used[steps * (e + 1) - 1] for e in range(4)])
    assert lrs[0] > 0.09 and lrs[3] < 0.001  # near its peak after 6 steps, then annealed


def test_an_epoch_scheduler_steps_once_an_epoch() -> None:
    assert _lrs(_job(params={"lr": 0.1, "schedule": "step"})) == pytest.approx([0.1, 0.05, 0.025])
    lrs = _lrs(_job(params={"lr": 0.1, "schedule": "plateau"}, epochs=5))
    assert all(b <= a for a, b in zip(lrs, lrs[1:], strict=False))


def test_warm_up_and_scaling_multiply_the_schedulers_rate_at_the_step_only() -> None:
    weight = torch.zeros(1, requires_grad=True)
    seen: list[float] = []

    class Recording(torch.optim.SGD):
        def step(self, closure: Any = None) -> Any:
            seen.append(self.param_groups[0]["lr"])
            return super().step(closure)

    optimizer = Recording([weight], lr=0.1)
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)  # chainable
    weight.grad = torch.ones(1)
    used = []
    for factor in (1.0, 1.5, 2.0):
        used.append(step_scaled(optimizer, factor))
        schedule.step()
    assert seen == pytest.approx([0.1, 0.05 * 1.5, 0.025 * 2.0])
    assert used == pytest.approx(seen)  # what the step used is what is reported
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0125)  # the scheduler's own


def test_class_weights_come_from_the_folds_training_labels() -> None:
    epochs = epochs_of(run_local(_job(params={"lr": 0.1, "weighted": True})))
    counts = hooks.SEEN["counts"]
    assert sum(counts) == 150 and counts[0] > 2 * counts[1]  # 3 in 4 are class 0
    assert epochs[-1].metrics["val_accuracy"] > 0.8


def test_a_dataset_is_read_per_batch_augmented_for_training_only() -> None:
    hooks.READS.update(train=0, eval=0)
    events = run_local(_job(epochs=2))
    assert hooks.READS == {"train": 2 * 150, "eval": 2 * 50}  # every epoch, nothing stacked
    assert epochs_of(events)[-1].metrics["val_accuracy"] > 0.7  # dict batches reach the model


def test_dataloader_workers_read_the_dataset() -> None:
    epochs = epochs_of(run_local(_job(epochs=2, num_workers=1)))
    assert epochs[-1].metrics["val_accuracy"] > 0.7


def test_gradient_clipping_applies() -> None:
    free = epochs_of(run_local(_job(params={"lr": 0.5})))
    clipped = epochs_of(run_local(_job(params={"lr": 0.5}, clip_grad_norm=1e-6)))
    first = free[0].metrics["train_loss"]
    assert clipped[-1].metrics["train_loss"] == pytest.approx(
        clipped[0].metrics["train_loss"], rel=0.01
    )  # steps of 1e-6 in norm leave the model where it was
    assert free[-1].metrics["train_loss"] < 0.9 * first


def test_bf16_autocast_trains_on_cpu() -> None:
    epochs = epochs_of(run_local(_job(precision="bf16", epochs=2)))
    assert epochs[-1].metrics["val_accuracy"] > 0.7


def test_searched_settings_are_the_jobs() -> None:
    job = _job(params={"lr": 0.1, "batch_size": 50, "epochs": 2})
    trainer = job.trainer.for_trial(job.params)
    epochs = epochs_of(run_local(FoldJob(**{**job.__dict__, "trainer": trainer})))
    assert len(epochs) == 2 and hooks.SEEN["scheduler"] == (3, 2)  # 150 samples in 50s
