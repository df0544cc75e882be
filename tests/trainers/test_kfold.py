from __future__ import annotations

import numpy as np
import pytest

from trainers.kfold import make_folds


def _labels() -> np.ndarray:
    return np.repeat(np.arange(3), [50, 30, 20])


def test_same_seed_gives_same_folds() -> None:
    a = make_folds(100, 5, seed=7, stratify=_labels())
    b = make_folds(100, 5, seed=7, stratify=_labels())
    for (ta, va), (tb, vb) in zip(a, b, strict=True):
        assert np.array_equal(ta, tb) and np.array_equal(va, vb)


def test_different_seed_gives_different_folds() -> None:
    a = make_folds(100, 5, seed=1)
    b = make_folds(100, 5, seed=2)
    assert not all(np.array_equal(va, vb) for (_, va), (_, vb) in zip(a, b, strict=True))


@pytest.mark.parametrize("stratified", [True, False])
def test_validation_folds_partition_the_samples(stratified: bool) -> None:
    y = _labels()
    folds = make_folds(len(y), 4, seed=0, stratify=y if stratified else None)
    assert len(folds) == 4
    all_val = np.concatenate([val for _, val in folds])
    assert sorted(all_val.tolist()) == list(range(len(y)))
    for train, val in folds:
        assert not set(train) & set(val)
        assert len(train) + len(val) == len(y)


def test_stratified_folds_keep_class_shares() -> None:
    y = _labels()
    for _, val in make_folds(len(y), 5, seed=3, stratify=y):
        assert np.bincount(y[val], minlength=3).tolist() == [10, 6, 4]


def test_rejects_bad_k() -> None:
    with pytest.raises(ValueError, match="k must be >= 2"):
        make_folds(100, 1, seed=0)
    with pytest.raises(ValueError, match="cannot make 5 folds from 3 samples"):
        make_folds(3, 5, seed=0)
