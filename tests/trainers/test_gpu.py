"""The GPU path: NCCL and cuda:{local} placement. Skipped cleanly without CUDA."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from trainers.ddp import free_port, resolve_device
from trainers.fold_runner import run_fold
from trainers.job import FoldJob

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _job(world_size: int) -> FoldJob:
    return FoldJob(
        task="tests.user_tasks.tiny",
        params={"lr": 0.02},
        fold=0,
        folds=3,
        epochs=2,
        batch_size=16,
        world_size=world_size,
        backend="nccl",
    )


def test_nccl_backend_defaults_to_cuda_0() -> None:
    assert resolve_device("nccl", None) == torch.device("cuda", 0)


def test_one_rank_trains_on_the_gpu_and_reports_gpu_memory() -> None:
    epochs = list(run_fold(_job(1), rank=0, master_addr="127.0.0.1", master_port=free_port()))
    assert len(epochs) == 2 and epochs[-1]["gpu_mem_mb"] > 0
    assert epochs[-1]["val_loss"] < epochs[0]["val_loss"] * 1.5


def _rank_main(rank: int, port: int) -> None:
    device = f"cuda:{rank}"
    for metrics in run_fold(
        _job(2), rank=rank, master_addr="127.0.0.1", master_port=port, device=device
    ):
        assert torch.cuda.current_device() == rank
        assert metrics["gpu_mem_mb"] > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_ranks_over_nccl_each_on_its_own_gpu() -> None:
    mp.spawn(_rank_main, args=(free_port(),), nprocs=2)
