"""Training throughput of every fold path against a hand-written PyTorch DDP loop, the cost of
one report, and the time from placement to the first step on warm Ray workers.

Same model (an MLP), synthetic data, fold, per-rank batch and optimizer (Adam) for every
variant, in the same run: a hand-written loop (its own process group, DistributedSampler and
DDP, batches sliced from tensors), the built-in loop, an own loop written with the fold
context's helpers (``train_fold``), and a LightningModule. samples/s counts the training
samples of all ranks over the training pass of an epoch (validation excluded); the first epoch
is a warm-up; each figure is the best of ``--repeats`` runs, interleaved so that background
load hits every variant alike. Usage:

    .venv/bin/python benchmarks/trainer_throughput.py [--samples 24000] [--epochs 4] [--ray]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.throughput_tasks import build_model, load_data  # noqa: E402
from foldwise.cv import CVScheme  # noqa: E402
from foldwise.spec import Objective, TrainerSpec  # noqa: E402
from foldwise.trainers.ddp import free_port, process_group  # noqa: E402
from foldwise.trainers.fold_runner import run_fold  # noqa: E402
from foldwise.trainers.job import FoldJob  # noqa: E402
from foldwise.trainers.report import EpochReport  # noqa: E402
from foldwise.trainers.splits import make_folds  # noqa: E402

TASKS = "benchmarks.throughput_tasks"
VARIANTS = {
    "hand": "hand-written DDP loop",
    "builtin": "built-in loop (build_model)",
    "own": "own loop (train_fold, ctx helpers)",
    "lightning": "Lightning module",
}


def _job(args: argparse.Namespace, task: str, world_size: int, **options: Any) -> FoldJob:
    trainer = TrainerSpec(
        task=f"{TASKS}:{task}",
        epochs=args.epochs,
        batch_size=args.batch,
        warmup_epochs=0,
        options={"samples": args.samples, **options},
    )
    objective = Objective(metric="value" if task == "Reports" else "val_accuracy")
    return FoldJob(
        trainer=trainer,
        params={"lr": 1e-3},
        fold=0,
        folds=5,
        objective=objective,
        world_size=world_size,
    )


def hand_written(rank: int, world_size: int, args: argparse.Namespace, port: int) -> list[float]:
    """The DDP loop a user writes: process group, sampler, DDP, slices; train seconds/epoch."""
    X, y = load_data({"samples": args.samples})
    train, _ = make_folds(len(y), 5, 0, scheme=CVScheme.STRATIFIED, targets=y)[0]
    X, y = torch.as_tensor(X[train]), torch.as_tensor(y[train])
    with process_group(
        backend="gloo", rank=rank, world_size=world_size, master_addr="127.0.0.1",
        master_port=port,
    ):  # fmt: skip
        torch.manual_seed(0)
        model: nn.Module = build_model({})
        if world_size > 1:
            model = DistributedDataParallel(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        sampler = DistributedSampler(range(len(y)), num_replicas=world_size, rank=rank, seed=0)
        seconds = []
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            order = torch.as_tensor(list(iter(sampler)))
            started = time.perf_counter()
            for start in range(0, len(order), args.batch):
                idx = order[start : start + args.batch]
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(X[idx]), y[idx]).backward()
                optimizer.step()
            seconds.append(time.perf_counter() - started)
        del model, optimizer
        gc.collect()  # DDP before its process group (see trainers.ddp.release_models)
    return seconds


def _rate_of(reports: list[EpochReport], world_size: int, samples: int) -> float:
    """Best samples/s of all ranks after the first epoch, from a fold's reports."""
    rates = []
    for report in reports[1:]:
        m = report.metrics
        seen = m.get("train_samples", samples / world_size) * world_size
        rates.append(seen / m["train_seconds"])
    return max(rates)


def _fold_rate(rank: int, job: FoldJob, port: int, out: Any) -> None:
    torch.set_num_threads(1)
    reports = [
        e
        for e in run_fold(job, rank=rank, master_addr="127.0.0.1", master_port=port)
        if isinstance(e, EpochReport)
    ]
    if rank == 0:
        out.put(reports)


def _hand_rate(rank: int, world_size: int, args: argparse.Namespace, port: int, out: Any) -> None:
    torch.set_num_threads(1)
    seconds = hand_written(rank, world_size, args, port)
    if rank == 0:
        out.put(seconds)


def measure(variant: str, world_size: int, args: argparse.Namespace) -> float:
    """Samples/s of all ranks together for one variant, ``world_size`` spawned ranks."""
    queue = mp.get_context("spawn").SimpleQueue()
    train_samples = args.samples * 4 // 5
    if variant == "hand":
        mp.spawn(_hand_rate, args=(world_size, args, free_port(), queue), nprocs=world_size)
        seconds = queue.get()
        return max(train_samples / s for s in seconds[1:])
    task = {"builtin": "BuiltIn", "own": "OwnLoop", "lightning": "Lightning"}[variant]
    job = _job(args, task, world_size)
    mp.spawn(_fold_rate, args=(job, free_port(), queue), nprocs=world_size)
    return _rate_of(queue.get(), world_size, train_samples)


def report_cost(args: argparse.Namespace, world_size: int) -> float:
    """Seconds one ctx.report takes, on ``world_size`` ranks (the mean of many)."""
    queue = mp.get_context("spawn").SimpleQueue()
    job = _job(args, "Reports", world_size, reports=args.reports)
    mp.spawn(_fold_rate, args=(job, free_port(), queue), nprocs=world_size)
    return queue.get()[-1].metrics["value"]


async def placement_to_first_step(args: argparse.Namespace) -> list[tuple[str, float]]:
    """Seconds from a 2-rank group's placement (the pool hands it over) to the own loop's first
    step, through the service's Ray executor: a cold group, then warm ones."""
    from foldwise.service.executor import FoldRunStats, RayExecutor

    ex = RayExecutor(num_cpus=2, worker_pythonpath=[str(ROOT)])
    await ex.start()
    rows = []
    try:
        for attempt in range(1 + args.warm_runs):
            job = _job(args, "OwnLoop", 2)
            job = FoldJob(
                **{**job.__dict__, "trainer": job.trainer.model_copy(update={"epochs": 1})}
            )
            stats = FoldRunStats(world_size=2)
            asked = time.time()
            reports = [
                e
                async for e in ex.run_fold(
                    job, cpus_per_worker=1.0, gpus_per_worker=0, stats=stats
                )
                if isinstance(e, EpochReport)
            ]
            placed = asked + stats.acquire_seconds
            label = "cold (new actors)" if attempt == 0 else "warm"
            rows.append((label, reports[0].metrics["first_step_at"] - placed))
    finally:
        await ex.shutdown()
    return rows


def _interleaved(
    args: argparse.Namespace, runs: list[tuple[str, int]], measure_one: Callable[..., float]
) -> dict[tuple[str, int], float]:
    best: dict[tuple[str, int], float] = {}
    for _ in range(args.repeats):
        for variant, world_size in runs:
            rate = measure_one(variant, world_size, args)
            best[(variant, world_size)] = max(best.get((variant, world_size), 0.0), rate)
            print(f"  {variant} x{world_size}: {rate:,.0f} samples/s", file=sys.stderr)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=24_000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64, help="per-rank batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reports", type=int, default=200, help="reports timed for the cost")
    parser.add_argument("--ray", action="store_true", help="also time placement to first step")
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--ranks", default="1,2", help="world sizes to measure: 1, 2 or 1,2")
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be 2 or more: the first epoch warms up and is not timed")
    worlds = sorted({int(w) for w in args.ranks.split(",") if w.strip().isdigit()})
    if not worlds or not set(worlds) <= {1, 2}:
        parser.error("--ranks takes 1, 2 or 1,2")
    torch.set_num_threads(1)  # one core per rank, the same for every variant
    runs = [(variant, world) for world in worlds for variant in VARIANTS]
    best = _interleaved(args, runs, measure)
    print(
        f"torch {torch.__version__}, 1 thread per rank, {args.samples} samples x 128 "
        f"features (fold 0 of 5: {args.samples * 4 // 5} training samples), per-rank batch "
        f"{args.batch}, best of {args.repeats}\n"
    )
    print("| variant | ranks | samples/s | vs hand-written DDP loop |")
    print("|---|---:|---:|---:|")
    for world in worlds:
        for variant, label in VARIANTS.items():
            rate = best[(variant, world)]
            ratio = rate / best[("hand", world)]
            print(f"| {label} | {world} | {rate:,.0f} | {ratio:.2f} |")
    costs = {world: report_cost(args, world) for world in worlds}
    heads = {1: "1 rank", 2: "2 ranks (gloo)"}
    print(f"\n| one ctx.report | {' | '.join(heads[w] for w in worlds)} |")
    print(f"|---|{'---:|' * len(worlds)}")
    print(f"| mean of {args.reports} | {' | '.join(f'{costs[w] * 1e3:.2f} ms' for w in worlds)} |")
    if args.ray:
        rows = asyncio.run(placement_to_first_step(args))
        warm = [s for label, s in rows if label == "warm"]
        print("\n| placement to first step, 2 ranks on Ray | seconds |\n|---|---:|")
        print(f"| {rows[0][0]} | {rows[0][1]:.2f} |")
        if warm:  # none with --warm-runs 0
            print(
                f"| warm (median of {len(warm)}, max) | {statistics.median(warm):.2f}, "
                f"{max(warm):.2f} |"
            )


if __name__ == "__main__":
    main()
