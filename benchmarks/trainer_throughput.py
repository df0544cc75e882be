"""Training throughput of the fold runner against a hand-written PyTorch loop, and 2 ranks vs 1.

Same model (an MLP), same synthetic data, same fold, per-rank batch and optimizer (Adam) in the
same run; samples/s counts training samples over the training phase of each epoch (validation
excluded), the first epoch is a warm-up, and each figure is the best of `--repeats` runs,
interleaved so that background load hits every variant alike. Usage:

    .venv/bin/python benchmarks/trainer_throughput.py [--samples 24000] [--epochs 4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainers.ddp import free_port  # noqa: E402
from trainers.fold_runner import run_fold  # noqa: E402
from trainers.job import FoldJob  # noqa: E402
from trainers.kfold import make_folds  # noqa: E402

FEATURES, CLASSES, WIDTH = 128, 10, 256
TASK = "benchmarks.trainer_throughput"
kind = "classification"


def load_data(options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(int(options["samples"]), FEATURES)).astype(np.float32)
    y = (X @ rng.normal(size=(FEATURES, CLASSES))).argmax(axis=1).astype(np.int64)
    return X, y


def build_model(params: dict[str, Any]) -> nn.Module:
    return nn.Sequential(
        nn.Linear(FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
        nn.Linear(WIDTH, CLASSES),
    )  # fmt: skip


def _job(args: argparse.Namespace, world_size: int) -> FoldJob:
    return FoldJob(
        task=TASK, params={"lr": 1e-3}, fold=0, folds=5, seed=0, epochs=args.epochs,
        batch_size=args.batch, world_size=world_size, monitor=True,
        options={"samples": args.samples},
    )  # fmt: skip


def plain_loop(args: argparse.Namespace) -> float:
    """The loop a user would write: shuffle, slice, forward, backward, step."""
    X, y = load_data({"samples": args.samples})
    train, _ = make_folds(y, 5, 0, stratified=True)[0]
    X, y = torch.as_tensor(X[train]), torch.as_tensor(y[train])
    torch.manual_seed(0)
    model = build_model({})
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    rates = []
    for epoch in range(args.epochs):
        started = time.perf_counter()
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(epoch))
        for start in range(0, len(y), args.batch):
            idx = order[start : start + args.batch]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(X[idx]), y[idx])
            loss.backward()
            optimizer.step()
        rates.append(len(y) / (time.perf_counter() - started))
    return max(rates[1:])


def _rank(rank: int, job: FoldJob, port: int, out: Any) -> None:
    torch.set_num_threads(1)
    epochs = list(run_fold(job, rank=rank, master_addr="127.0.0.1", master_port=port))
    if rank == 0:
        out.put(max(e["samples_per_second"] for e in epochs[1:]))


def fold_runner(args: argparse.Namespace, world_size: int) -> float:
    """Samples/s of all ranks together, as the fold runner reports it."""
    job = _job(args, world_size)
    if world_size == 1:
        epochs = list(run_fold(job, rank=0, master_addr="127.0.0.1", master_port=free_port()))
        return max(e["samples_per_second"] for e in epochs[1:])
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_rank, args=(job, free_port(), queue), nprocs=world_size)
    return queue.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=24_000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64, help="per-rank batch")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one core per rank, the same for every variant
    best: dict[str, float] = {"plain": 0.0, "runner1": 0.0, "runner2": 0.0}
    for _ in range(args.repeats):
        best["plain"] = max(best["plain"], plain_loop(args))
        best["runner1"] = max(best["runner1"], fold_runner(args, 1))
        best["runner2"] = max(best["runner2"], fold_runner(args, 2))
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread per rank, "
        f"{args.samples} samples x {FEATURES} features, per-rank batch {args.batch}"
    )
    print("| variant | samples/s | ratio |")
    print("|---|---:|---:|")
    print(f"| hand-written loop, 1 process | {best['plain']:,.0f} | 1.00 |")
    ratio = best["runner1"] / best["plain"]
    print(f"| fold runner, 1 rank | {best['runner1']:,.0f} | {ratio:.2f} x loop |")
    ratio2 = best["runner2"] / best["runner1"]
    print(f"| fold runner, 2 ranks (gloo) | {best['runner2']:,.0f} | {ratio2:.2f} x 1 rank |")


if __name__ == "__main__":
    main()
