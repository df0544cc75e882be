"""DDP correctness: disjoint shards covering the fold; 2 ranks == 1 rank at the same batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_data import train_sampler
from foldwise.trainers.fold_runner import run_fold_in_directory
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import MODEL_FILE
from tests.trainers.fold_jobs import make_job

TOLERANCE = 1e-5
"""Largest absolute parameter difference allowed between the 1-rank and the 2-rank run.

Both runs do the same arithmetic except the order of float32 sums: DDP averages two half-batch
gradients where one rank averages the whole batch. Measured: 6e-8 after 3 epochs."""


def rank_shard(
    train_idx: np.ndarray, *, world_size: int, rank: int, seed: int, epoch: int
) -> np.ndarray:
    sampler = train_sampler(
        len(train_idx), rank=rank, world_size=world_size, seed=seed, shuffle=True
    )
    sampler.set_epoch(epoch)
    return train_idx[list(iter(sampler))]


@pytest.mark.parametrize(("n", "world"), [(240, 2), (257, 2), (101, 4), (9, 3)])
def test_shards_are_disjoint_and_cover_the_training_fold(n: int, world: int) -> None:
    train_idx = np.arange(1000, 1000 + n)
    for epoch in range(3):
        shards = [
            rank_shard(train_idx, world_size=world, rank=r, seed=5, epoch=epoch)
            for r in range(world)
        ]
        assert len({len(s) for s in shards}) == 1  # same step count on every rank
        together = np.concatenate(shards)
        assert set(together) == set(train_idx)  # every training sample, every epoch
        padding = len(together) - n
        assert 0 <= padding < world  # only the padding repeats, to even the ranks out
        if n % world == 0:
            assert padding == 0 and len(set(together)) == len(together)  # disjoint


def test_shards_shuffle_differently_each_epoch_but_reproducibly() -> None:
    idx = np.arange(200)
    first = rank_shard(idx, world_size=2, rank=0, seed=1, epoch=0)
    assert not np.array_equal(first, rank_shard(idx, world_size=2, rank=0, seed=1, epoch=1))
    assert np.array_equal(first, rank_shard(idx, world_size=2, rank=0, seed=1, epoch=0))


def _job(world_size: int, batch_size: int) -> FoldJob:
    # 5 folds of 300 samples: 240 training samples, so 2 ranks get 120 each with no padding,
    # and the global batch of 32 leaves an uneven last batch (240 = 7 x 32 + 16).
    return make_job(
        params={"lr": 0.01, "width": 16},
        fold=1,
        folds=5,
        seed=11,
        epochs=3,
        batch_size=batch_size,
        world_size=world_size,
        lr_scaling="none",
        warmup_epochs=0,
        objective={"use": "last"},
        artifact_key="k",
    )


def _rank_main(rank: int, job: FoldJob, port: int, directory: Path) -> None:
    torch.set_num_threads(1)
    for _ in run_fold_in_directory(
        job, directory, rank=rank, master_addr="127.0.0.1", master_port=port, num_threads=1
    ):
        pass


@pytest.mark.slow  # spawns two interpreters that import torch
def test_two_ranks_reach_the_parameters_of_one_rank_with_the_same_global_batch(
    tmp_path: Path,
) -> None:
    one, two, half = _job(1, 32), _job(2, 16), _job(1, 16)
    _rank_main(0, one, free_port(), tmp_path / "one")
    mp.spawn(_rank_main, args=(two, free_port(), tmp_path / "two"), nprocs=2)
    _rank_main(0, half, free_port(), tmp_path / "half")  # another global batch: differs clearly
    single, double, other = (
        torch.load(tmp_path / name / MODEL_FILE)["state_dict"] for name in ("one", "two", "half")
    )
    assert single.keys() == double.keys() == other.keys()
    assert _max_difference(single, double) < TOLERANCE
    assert _max_difference(single, other) > 1000 * TOLERANCE


def _max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
