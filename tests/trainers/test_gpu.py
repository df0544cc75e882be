"""The GPU path: NCCL, cuda:{local} placement, fp16 with a gradient scaler. Skipped cleanly
without CUDA."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from foldwise.trainers.ddp import free_port, resolve_device
from foldwise.trainers.fold_runner import run_fold
from foldwise.trainers.job import FoldJob
from tests.trainers.fold_jobs import epochs_of, make_job, run_local

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _job(world_size: int, **trainer) -> FoldJob:
    job = make_job(params={"lr": 0.02}, epochs=2, batch_size=16, world_size=world_size, **trainer)
    return FoldJob(**{**job.__dict__, "backend": "nccl"})


def test_nccl_backend_defaults_to_cuda_0() -> None:
    assert resolve_device("nccl", None) == torch.device("cuda", 0)


@pytest.mark.parametrize("precision", ["32", "fp16", "bf16"])
def test_one_rank_trains_on_the_gpu_and_reports_gpu_memory(precision: str) -> None:
    epochs = epochs_of(run_local(_job(1, precision=precision)))
    assert len(epochs) == 2 and epochs[-1].metrics["gpu_mem_mb"] > 0
    assert epochs[-1].metrics["val_loss"] < epochs[0].metrics["val_loss"] * 1.5


def _rank_main(rank: int, port: int) -> None:
    device = f"cuda:{rank}"
    for event in run_fold(
        _job(2), rank=rank, master_addr="127.0.0.1", master_port=port, device=device
    ):
        assert event.metrics["gpu_mem_mb"] > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_ranks_over_nccl_each_on_its_own_gpu() -> None:
    mp.spawn(_rank_main, args=(free_port(),), nprocs=2)
