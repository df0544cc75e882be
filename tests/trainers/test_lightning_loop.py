"""Lightning tasks as folds: the module's logged metrics are the reports, the Trainer stops when
told, checkpoints resume, a datamodule factory gets the fold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import torch.multiprocessing as mp

from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_runner import run_fold
from foldwise.trainers.job import FoldJob
from foldwise.trainers.lightning_loop import logged_metrics
from foldwise.trainers.report import ArtifactKind, EpochReport, FoldWarning, SavedArtifact
from tests.trainers.fold_jobs import epochs_of, make_job, run_local
from tests.user_tasks import lightning_probe as probe

TASK = "examples.tasks.lightning_digits"


def _job(task: str = TASK, **overrides: Any) -> FoldJob:
    fields: dict[str, Any] = {
        "params": {"lr": 0.01, "width": 32},
        "epochs": 3,
        "batch_size": 64,
        "objective": {"metric": "val_acc", "direction": "maximize"},
        "artifact_key": "k",
    }
    return make_job(task, **{**fields, **overrides})


def test_a_lightning_module_trains_a_fold_and_its_logged_metrics_are_reported(
    tmp_path: Path,
) -> None:
    events = run_local(_job(precision="bf16", clip_grad_norm=1.0), tmp_path)
    epochs = epochs_of(events)
    assert [e.epoch for e in epochs] == [1, 2, 3]
    assert {"val_acc", "val_loss", "train_loss", "epoch_seconds"} <= set(epochs[0].metrics)
    assert epochs[-1].metrics["val_acc"] > 0.8
    saved = [(e.kind, e.epoch) for e in events if isinstance(e, SavedArtifact)]
    best = max(epochs, key=lambda e: e.metrics["val_acc"]).epoch
    assert saved == [(ArtifactKind.CHECKPOINT, 1), (ArtifactKind.CHECKPOINT, 2)] + [
        (ArtifactKind.MODEL, best)
    ]
    model = torch.load(tmp_path / "model.pt", weights_only=False)
    assert "net.0.weight" in model["state_dict"]


def test_a_stopped_lightning_fold_ends_after_its_epoch() -> None:
    asked: list[int] = []

    def stop_after_two() -> bool:
        asked.append(1)
        return len(asked) >= 2

    epochs = epochs_of(run_local(_job(epochs=6), stop_requested=stop_after_two))
    assert [(e.epoch, e.stopped) for e in epochs] == [(1, False), (2, True)]


def test_a_retried_lightning_fold_resumes_from_its_checkpoint() -> None:
    first = run_local(_job(epochs=4))
    checkpoint = [e for e in first if isinstance(e, SavedArtifact)][1]
    assert (checkpoint.kind, checkpoint.epoch) == (ArtifactKind.CHECKPOINT, 2)
    resumed = epochs_of(run_local(_job(epochs=4, resume=True), restore=checkpoint.data))
    assert [(e.epoch, e.restored) for e in resumed] == [
        (1, True), (2, True), (3, False), (4, False),
    ]  # fmt: skip
    # the optimizer, scheduler and weights came back: epoch 3 goes on from epoch 2
    assert resumed[2].metrics["val_loss"] < resumed[0].metrics["val_loss"]


class _WithDataModule:
    """The digits module, with its data through a LightningDataModule built for the fold."""

    metrics = ["val_acc", "val_loss", "train_loss"]
    built: list[Any] = []

    def load_data(self) -> Any:
        from examples.tasks.lightning_digits import load_data

        return load_data()

    def build_module(self, params: dict) -> pl.LightningModule:
        from examples.tasks.lightning_digits import build_module

        return build_module(params)

    def build_datamodule(self, ctx: Any) -> pl.LightningDataModule:
        self.built.append((ctx.fold, len(ctx.train_dataset), len(ctx.val_dataset)))
        return pl.LightningDataModule.from_datasets(
            train_dataset=ctx.train_dataset, val_dataset=ctx.val_dataset, batch_size=64
        )


def test_a_datamodule_factory_gets_the_fold() -> None:
    epochs = epochs_of(run_local(_job(f"{__name__}:_WithDataModule", epochs=2, fold=1)))
    assert len(epochs) == 2 and epochs[-1].metrics["val_acc"] > 0.7
    assert _WithDataModule.built == [(1, 1198, 599)]


def test_logged_names_become_report_names() -> None:
    logged = {"val/acc": torch.tensor(0.5), "loss": 2, "vector": torch.ones(3)}
    assert logged_metrics(logged) == {"val_acc": 0.5, "loss": 2.0}


def _probe_rank(rank: int, job: FoldJob, port: int, out: Path) -> None:
    torch.set_num_threads(1)
    asked: list[int] = []

    def stop_on_rank_1_after_three() -> bool:  # one rank asks: every rank must stop
        asked.append(1)
        return rank == 1 and len(asked) >= 3

    reports, said = [], []
    for event in run_fold(
        job,
        rank=rank,
        master_addr="127.0.0.1",
        master_port=port,
        num_threads=1,
        stop_requested=stop_on_rank_1_after_three,
    ):
        if isinstance(event, EpochReport):
            reports.append((event.epoch, event.stopped, event.metrics))
        elif isinstance(event, FoldWarning):
            said.append((str(event.kind), event.message))
    torch.save((reports, said), out / f"rank{rank}.pt")


def _probe(tmp_path: Path, task: str, **params: Any) -> tuple[list, list]:
    """The probe on two ranks for up to 6 epochs (rank 1 asks to stop after its third
    report): rank 0's reports and warnings."""
    job = make_job(
        task,
        params=params,
        world_size=2,
        epochs=6,
        batch_size=10,
        lr_scaling="linear",
        warmup_epochs=1,
        objective={"metric": "val_loss"},
    )
    mp.spawn(_probe_rank, args=(job, free_port(), tmp_path), nprocs=2)
    assert torch.load(tmp_path / "rank1.pt", weights_only=False) == ([], [])  # rank 0 says
    return torch.load(tmp_path / "rank0.pt", weights_only=False)


@pytest.mark.slow  # spawns two interpreters that import torch and Lightning
def test_two_lightning_ranks_split_the_data_scale_the_rate_and_stop_together(
    tmp_path: Path,
) -> None:
    reports, said = _probe(tmp_path, "tests.user_tasks.lightning_probe", interval="epoch")
    assert [(epoch, stopped) for epoch, stopped, _ in reports] == [
        (1, False), (2, False), (3, True),
    ]  # fmt: skip
    first, second, third = (metrics for _, _, metrics in reports)
    # the two ranks read the training fold once between them (133 samples, one padded), and
    # the validation fold's 67 exactly once (Lightning's sampler would pad it to 68)
    assert first["train_samples"] == 134 == second["train_samples"]
    assert first["val_samples"] == 67 == second["val_samples"]
    # the module's StepLR halves its own rate every epoch, as in plain Lightning ...
    assert [m["own_lr"] for m in (first, second, third)] == pytest.approx(
        [probe.BASE_LR, probe.BASE_LR / 2, probe.BASE_LR / 4]
    )
    # ... and each step used it scaled by 2 ranks, reached over the first epoch's steps
    assert probe.BASE_LR < first["optimizer_lr"] < 2 * probe.BASE_LR
    assert second["optimizer_lr"] == pytest.approx(2 * second["own_lr"])
    assert third["optimizer_lr"] == pytest.approx(2 * third["own_lr"])
    # logged in the module's own on_train_epoch_end: reported with its own epoch
    assert [metrics["epoch_mark"] for _, _, metrics in reports] == [1.0, 2.0, 3.0]
    assert said == []  # every metric synced, every sample counted once


@pytest.mark.slow  # spawns two interpreters that import torch and Lightning
def test_a_datamodule_on_two_ranks_steps_its_scheduler_counts_each_sample_once_and_flags(
    tmp_path: Path,
) -> None:
    reports, said = _probe(
        tmp_path, "tests.user_tasks.lightning_probe:with_datamodule", interval="step", unsynced=1
    )
    first, second, _ = (metrics for _, _, metrics in reports)
    assert first["train_samples"] == 134 and first["val_samples"] == 67  # not 68: no padding
    steps = 7  # 67 training samples a rank in batches of 10
    assert first["own_lr"] == pytest.approx(probe.BASE_LR * 0.9 ** (steps - 1))
    assert second["own_lr"] == pytest.approx(probe.BASE_LR * 0.9 ** (2 * steps - 1))
    assert first["optimizer_lr"] == pytest.approx(first["own_lr"] * (1 + (steps - 1) / steps))
    assert second["optimizer_lr"] == pytest.approx(2 * second["own_lr"])
    kinds = {kind for kind, _ in said}
    assert "partial_metric" in kinds  # val_rank_loss, logged without sync_dist
    (partial,) = [message for kind, message in said if kind == "partial_metric"]
    assert partial.startswith("val_rank_loss differs from rank to rank in the same epoch")
    assert any("sync_dist=True" in message for kind, message in said if kind == "lightning")


@pytest.mark.parametrize("interval", ["epoch", "step"])
def test_one_rank_steps_the_modules_scheduler_and_records_the_rate_it_used(interval) -> None:
    job = make_job(
        "tests.user_tasks.lightning_probe",
        params={"interval": interval},
        epochs=3,
        batch_size=10,
        objective={"metric": "val_loss"},
    )
    reports = epochs_of(run_local(job))
    own = [r.metrics["own_lr"] for r in reports]
    if interval == "epoch":
        assert own == pytest.approx([probe.BASE_LR * 0.5**e for e in range(3)])
    else:  # 133 training samples in batches of 10: 14 steps an epoch
        assert own == pytest.approx([probe.BASE_LR * 0.9 ** (14 * e + 13) for e in range(3)])
    assert [r.metrics["optimizer_lr"] for r in reports] == pytest.approx(own)  # one rank: 1x
    assert [r.metrics["val_samples"] for r in reports] == [67.0] * 3
