"""Deterministic K-fold splits: the same seed gives the same folds for every trial of a study."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold


def make_folds(
    n: int, k: int, seed: int, *, stratify: np.ndarray | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`k` (train indices, validation indices) pairs over `n` samples; the validation folds
    partition them. With `stratify` (the labels), each class keeps its share in every fold."""
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    if n < k:
        raise ValueError(f"cannot make {k} folds from {n} samples")
    X_dummy = np.zeros((n, 1))
    if stratify is None:
        splits = KFold(n_splits=k, shuffle=True, random_state=seed).split(X_dummy)
    else:
        splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        splits = splitter.split(X_dummy, np.asarray(stratify))
    return [(train, val) for train, val in splits]
