"""Whether one fold run of a study can ever be placed on the Ray cluster as it is.

A fold run is a placement group of ``workers_per_fold`` bundles of ``cpus_per_worker`` CPUs and
``gpus_per_worker`` GPUs: packed onto one node when it uses GPUs (NCCL ranks together), spread
over nodes as needed when not (see ``service.executor.pool``). A study whose fold can never be
placed would sit ``running`` for ever, so it is refused at submit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class NodeCapacity:
    """What one alive node offers in all (not what is free now)."""

    cpus: float
    gpus: float


@dataclass(frozen=True)
class FitProblem:
    loc: tuple[str, ...]
    message: str


def fold_fit_problem(
    nodes: Sequence[NodeCapacity], *, workers: int, cpus: float, gpus: float
) -> FitProblem | None:
    """Why a fold of this shape can never be placed on ``nodes``, or None when it can."""
    if not nodes:
        return None  # nothing known about the cluster: let the scheduler find out
    most_cpus = max(n.cpus for n in nodes)
    most_gpus = max(n.gpus for n in nodes)
    if not any(n.cpus >= cpus and n.gpus >= gpus for n in nodes):
        if gpus > most_gpus:
            where = "resources", "gpus_per_worker"
            why = f"{gpus:g} GPUs per worker: the largest node has {most_gpus:g}"
        elif cpus > most_cpus:
            where = "resources", "cpus_per_worker"
            why = f"{cpus:g} CPUs per worker: the largest node has {most_cpus:g}"
        else:
            where = ("resources",)
            why = f"no node has {cpus:g} CPUs and {gpus:g} GPUs for one worker"
        return FitProblem(where, f"{why} (the cluster has {len(nodes)} nodes)")
    if gpus > 0:
        if not any(n.cpus >= workers * cpus and n.gpus >= workers * gpus for n in nodes):
            return FitProblem(
                ("parallel", "workers_per_fold"),
                f"{workers} workers with {gpus:g} GPUs each run on one node (NCCL), and no "
                f"node has {workers * gpus:g} GPUs and {workers * cpus:g} CPUs",
            )
        return None
    slots = sum(math.floor(n.cpus / cpus + 1e-9) for n in nodes)
    if slots < workers:
        total = sum(n.cpus for n in nodes)
        return FitProblem(
            ("parallel", "workers_per_fold"),
            f"{workers} workers of {cpus:g} CPUs need {workers * cpus:g} CPUs; the cluster "
            f"has {total:g} and can place {slots} such workers",
        )
    return None


def fold_capacity(
    nodes: Sequence[NodeCapacity], *, workers: int, cpus: float, gpus: float
) -> int | None:
    """How many fold runs of this shape the cluster holds at once; None when nothing is known
    about it. GPU folds pack onto one node each; CPU folds may spread over nodes."""
    if not nodes:
        return None
    if gpus > 0:
        return sum(
            min(
                math.floor(n.cpus / (workers * cpus) + 1e-9),
                math.floor(n.gpus / (workers * gpus) + 1e-9),
            )
            for n in nodes
        )
    return sum(math.floor(n.cpus / cpus + 1e-9) for n in nodes) // workers
