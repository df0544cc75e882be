"""Per-fold overhead of the Ray executor: cold pool (new actors) vs warm pool (reused actors).

Overhead = fold wall time (call to last epoch) minus the time spent inside training epochs.
Run: `.venv/bin/python benchmarks/fold_overhead.py [--reps 3] [--epochs 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from foldwise.service.executor import FoldRunStats, RayExecutor
from foldwise.spec import TrainerSpec
from foldwise.trainers.job import FoldJob


async def measure(ex: RayExecutor, job: FoldJob, cpus: float, cold: bool) -> FoldRunStats:
    """One fold run; a cold run first kills every idle group so that new actors start."""
    if cold:
        ex.pool.clear_idle()
    stats = FoldRunStats(world_size=job.world_size)
    async for _ in ex.run_fold(job, cpus_per_worker=cpus, gpus_per_worker=0, stats=stats):
        pass
    assert stats.cold == cold, "pool state is not what this measurement needs"
    return stats


async def run(args: argparse.Namespace) -> list[tuple[int, str, list[FoldRunStats]]]:
    ex = RayExecutor(num_cpus=args.num_cpus)
    started = time.perf_counter()
    await ex.start()
    print(f"Ray started in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    rows = []
    try:
        for world_size in (1, 2):
            job = FoldJob(
                trainer=TrainerSpec(task=args.task, epochs=args.epochs, batch_size=64),
                params={"lr": 0.01},
                fold=0,
                folds=3,
                world_size=world_size,
            )
            for pool in ("cold", "warm"):
                runs = [
                    await measure(ex, job, args.cpus_per_worker, pool == "cold")
                    for _ in range(args.reps)
                ]
                rows.append((world_size, pool, runs))
                print(f"  done: world size {world_size}, {pool}", file=sys.stderr)
    finally:
        await ex.shutdown()
    return rows


def print_table(rows: list[tuple[int, str, list[FoldRunStats]]], reps: int) -> None:
    print(
        f"| world size | pool | overhead s (median of {reps}) | overhead range | "
        "fold wall s | training s |"
    )
    print("|---|---|---|---|---|---|")
    for world_size, pool, runs in rows:
        overheads = [r.overhead_seconds for r in runs]
        wall = statistics.median(r.wall_seconds for r in runs)
        train = statistics.median(r.train_seconds for r in runs)
        print(
            f"| {world_size} | {pool} | {statistics.median(overheads):.2f} | "
            f"{min(overheads):.2f}-{max(overheads):.2f} | {wall:.2f} | {train:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--task", default="digits_mlp")
    parser.add_argument("--num-cpus", type=float, default=4)
    parser.add_argument("--cpus-per-worker", type=float, default=0.5)
    args = parser.parse_args()
    print_table(asyncio.run(run(args)), args.reps)


if __name__ == "__main__":
    main()
