"""The built-in loop through the fold runner: metrics, DDP, early stopping, stops, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from foldwise.trainers.ddp import free_port, process_group, wrap_model
from foldwise.trainers.fold_channel import TrainingDiverged
from foldwise.trainers.fold_runner import run_fold
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import EpochReport
from foldwise.trainers.task import TaskNotFound
from tests.trainers.fold_jobs import TIMING, epochs_of, make_job, run_local, stable

EXPECTED = {"train_loss", "val_loss", "val_accuracy", "lr", "optimizer_lr", "n_params"} | TIMING


def _job(**overrides) -> FoldJob:
    # 7 folds of 300 samples: 257 training samples, an odd count that DistributedSampler pads,
    # and a per-rank batch of 15 that leaves an uneven last batch.
    fields = {"params": {"lr": 0.02}, "folds": 7, "seed": 3, "epochs": 4, "batch_size": 15}
    return make_job(**{**fields, **overrides})


def _rank_main(rank: int, job: FoldJob, ports: tuple[int, int], out: str) -> None:
    """One spawned rank: check DDP's initial broadcast, then run the fold and save its metrics."""
    torch.set_num_threads(1)
    with process_group(
        backend="gloo", rank=rank, world_size=2, master_addr="127.0.0.1", master_port=ports[0]
    ):
        torch.manual_seed(100 + rank)  # deliberately different initial weights per rank
        model = wrap_model(torch.nn.Linear(4, 3), torch.device("cpu"))
        checksum = torch.stack([p.detach().sum() for p in model.parameters()]).sum()
        sums = [torch.zeros(()) for _ in range(2)]
        dist.all_gather(sums, checksum)
    events = list(
        run_fold(job, rank=rank, master_addr="127.0.0.1", master_port=ports[1], num_threads=1)
    )
    epochs = [{"epoch": e.epoch, **e.metrics} for e in events if isinstance(e, EpochReport)]
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"checksums": [float(s) for s in sums], "epochs": epochs})
    )


@pytest.mark.slow  # about 9 s on 2 cores: two spawned interpreters import torch
def test_two_rank_fold_reports_from_rank_0_and_loss_falls(tmp_path: Path) -> None:
    job = _job(world_size=2)
    mp.spawn(_rank_main, args=(job, (free_port(), free_port()), str(tmp_path)), nprocs=2)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[0]["checksums"][0] == results[0]["checksums"][1]  # DDP broadcast rank 0's
    epochs0, epochs1 = results[0]["epochs"], results[1]["epochs"]
    assert epochs1 == []  # only rank 0 streams the fold's reports
    assert [e["epoch"] for e in epochs0] == [1, 2, 3, 4]
    assert set(epochs0[0]) == EXPECTED | {"epoch"}
    assert epochs0[-1]["train_loss"] < epochs0[0]["train_loss"]
    assert epochs0[-1]["val_loss"] < epochs0[0]["val_loss"]
    assert epochs0[0]["lr"] < epochs0[-1]["lr"] == pytest.approx(0.04)  # warm-up to 2 x lr


def test_single_rank_fold_learns() -> None:
    epochs = epochs_of(run_local(_job(epochs=5, params={"lr": 0.02, "mode": "ok"})))
    assert [e.epoch for e in epochs] == [1, 2, 3, 4, 5] and set(epochs[0].metrics) == EXPECTED
    assert epochs[-1].metrics["val_accuracy"] > 0.6
    assert epochs[-1].metrics["val_loss"] < epochs[0].metrics["val_loss"]
    assert all(e.metrics["lr"] == pytest.approx(0.02) for e in epochs)  # one rank: not scaled
    assert all(e.metrics["n_params"] == 12 * 16 + 3 for e in epochs)  # tiny: 8 -> 16 -> 3
    assert not any(e.restored or e.stopped for e in epochs)
    assert not dist.is_initialized()


def test_same_job_gives_same_metrics() -> None:
    runs = [stable(epochs_of(run_local(_job(epochs=2)))) for _ in range(2)]
    assert runs[0] == runs[1]


def test_early_stopping_on_the_objective() -> None:
    job = _job(epochs=30, params={"lr": 0.5}, early_stopping={"patience": 1, "min_delta": 10.0})
    assert len(epochs_of(run_local(job))) == 2  # nothing beats epoch 1 by more than min_delta


def test_nan_loss_raises_training_diverged() -> None:
    with pytest.raises(TrainingDiverged, match="train_loss became nan at epoch 1"):
        run_local(_job(params={"mode": "nan"}))
    assert not dist.is_initialized()


def test_user_errors_surface_unchanged() -> None:
    with pytest.raises(ValueError, match="tiny task refuses mode=raise"):
        run_local(_job(params={"mode": "raise"}))
    with pytest.raises(TaskNotFound):
        run_local(_job(task="tests.user_tasks.nope"))
    with pytest.raises(RuntimeError, match="lacks the objective metric 'val_mse'"):
        run_local(_job(objective={"metric": "val_mse"}))
    assert not dist.is_initialized()


def test_job_validation() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        _job(batch_size=0)
    with pytest.raises(ValueError, match="fold must be in"):
        _job(fold=7)
    assert _job(world_size=2).batch_size == 15


def test_a_stop_request_ends_the_run_after_the_epoch_and_saves_no_model(tmp_path: Path) -> None:
    asked: list[int] = []

    def stop_after_two() -> bool:
        asked.append(1)
        return len(asked) >= 2

    job = _job(epochs=6, artifact_key="k", checkpoint_every=1)
    events = run_local(job, tmp_path, stop_requested=stop_after_two)
    epochs = epochs_of(events)
    assert [(e.epoch, e.stopped) for e in epochs] == [(1, False), (2, True)]
    assert not (tmp_path / "model.pt").exists()
