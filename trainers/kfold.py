"""Deterministic K-fold splits: the same seed gives the same folds for every trial of a study."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold


def make_folds(
    y: np.ndarray, k: int, seed: int, *, stratified: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`k` (train indices, validation indices) pairs; validation folds partition the samples.

    Stratified splits keep each class's share in every fold (use it for classification).
    """
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    y = np.asarray(y)
    if len(y) < k:
        raise ValueError(f"cannot make {k} folds from {len(y)} samples")
    splitter = (StratifiedKFold if stratified else KFold)(
        n_splits=k, shuffle=True, random_state=seed
    )
    X_dummy = np.zeros((len(y), 1))
    return [(train, val) for train, val in splitter.split(X_dummy, y if stratified else None)]
