"""The cross-validation schemes on scikit-learn's bundled data and generated groups and series:
what each promises (no leak across its boundary), reproducible from the seed, and a one-line
refusal, in numbers, of data that cannot be split as asked."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris

from foldwise.trainers.splits import SplitError, make_folds


def _labels() -> np.ndarray:
    return np.repeat(np.arange(3), [50, 30, 20])


def _groups(n: int = 300, count: int = 17, seed: int = 0) -> np.ndarray:
    """Patients with 5 to 30 samples each."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, count, size=n)


def _same(a: list, b: list) -> bool:
    return all(
        np.array_equal(ta, tb) and np.array_equal(va, vb)
        for (ta, va), (tb, vb) in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("scheme", ["kfold", "stratified", "group"])
def test_the_same_seed_gives_the_same_folds_and_another_seed_others(scheme: str) -> None:
    y, g = load_iris(return_X_y=True)[1], _groups(150, 12)
    split = {"scheme": scheme, "targets": y, "groups": g}
    assert _same(make_folds(150, 5, 7, **split), make_folds(150, 5, 7, **split))
    assert not _same(make_folds(150, 5, 7, **split), make_folds(150, 5, 8, **split))


@pytest.mark.parametrize("scheme", ["kfold", "stratified", "group"])
def test_validation_folds_partition_the_samples_in_every_repeat(scheme: str) -> None:
    y = load_digits().target
    folds = make_folds(len(y), 4, 0, scheme=scheme, repeats=3, targets=y, groups=_groups(len(y)))
    assert len(folds) == 12
    for repeat in range(3):
        block = folds[repeat * 4 : repeat * 4 + 4]
        seen = np.concatenate([val for _, val in block])
        assert sorted(seen.tolist()) == list(range(len(y)))
        for train, val in block:
            assert not set(train) & set(val) and len(train) + len(val) == len(y)
    # repeats split differently, and repeat 0 is the split without repeats
    assert not _same(folds[:4], folds[4:8])
    alone = make_folds(len(y), 4, 0, scheme=scheme, targets=y, groups=_groups(len(y)))
    assert _same(folds[:4], alone)


def test_stratified_group_folds_partition_the_samples_and_are_reproducible() -> None:
    y, groups = load_digits().target, _groups(1797, 40)
    split = {"scheme": "stratified_group", "targets": y, "groups": groups}
    folds = make_folds(len(y), 4, 0, **split)
    assert sorted(np.concatenate([v for _, v in folds]).tolist()) == list(range(len(y)))
    assert _same(folds, make_folds(len(y), 4, 0, **split))


def test_stratified_folds_keep_class_shares() -> None:
    y = _labels()
    for _, val in make_folds(len(y), 5, 3, scheme="stratified", targets=y):
        assert np.bincount(y[val], minlength=3).tolist() == [10, 6, 4]


@pytest.mark.parametrize("scheme", ["group", "stratified_group"])
def test_no_group_is_in_two_folds(scheme: str) -> None:
    y = load_digits().target
    groups = _groups(len(y), 40, seed=4)
    for train, val in make_folds(len(y), 5, 1, scheme=scheme, targets=y, groups=groups):
        assert not set(groups[train]) & set(groups[val])


def test_time_series_never_validates_before_it_trains() -> None:
    n, k, gap = 500, 4, 7
    folds = make_folds(n, k, 0, scheme="time_series", gap=gap)
    assert len(folds) == k
    ends = []
    for train, val in folds:
        assert train.max() + gap < val.min()  # no validation index precedes a training index
        assert np.array_equal(train, np.arange(train.max() + 1))  # an expanding window
        assert np.array_equal(val, np.arange(val.min(), val.max() + 1))  # a contiguous block
        ends.append(val.max())
    assert ends == sorted(ends) and ends[-1] == n - 1
    # the same folds whatever the seed: a series is never shuffled
    assert _same(folds, make_folds(n, k, 99, scheme="time_series", gap=gap))


def test_predefined_folds_are_the_tasks_own() -> None:
    ids = np.array([0, 1, 2, -1, 2, 1, 0, -1, 1, 0])
    folds = make_folds(10, 3, 0, scheme="predefined", fold_ids=ids)
    for fold, (train, val) in enumerate(folds):
        assert val.tolist() == np.flatnonzero(ids == fold).tolist()
        assert {3, 7} <= set(train.tolist())  # -1: always trained on
    named = np.array([10, 30, 20, 10, 30, 20])  # any ids: fold i is the i-th smallest
    assert [v.tolist() for _, v in make_folds(6, 3, 0, scheme="predefined", fold_ids=named)] == [
        [0, 3], [2, 5], [1, 4],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"scheme": "stratified", "targets": np.repeat([0, 1, 2], [40, 40, 3])},
            "cv.scheme stratified: class 2 has 3 samples, fewer than parallel.folds (5)",
        ),
        (
            {"scheme": "group", "groups": np.arange(83) % 3},
            "cv.scheme group: the data has 3 groups, fewer than parallel.folds (5)",
        ),
        (
            {"scheme": "stratified_group", "targets": np.arange(83) % 2, "groups": np.zeros(83)},
            "cv.scheme stratified_group: the data has 1 group, fewer than parallel.folds (5)",
        ),
        ({"scheme": "group"}, "cv.scheme group needs the task's groups: give load_groups"),
        (
            {"scheme": "time_series", "gap": 70},
            "cv.scheme time_series: 83 samples cannot make 5 folds with a gap of 70",
        ),
        (
            {"scheme": "predefined", "fold_ids": np.arange(83) % 4},
            "cv.scheme predefined: the task's fold ids name 4 folds (0, 1, 2, 3); "
            "parallel.folds is 5",
        ),
        (
            {"scheme": "predefined", "fold_ids": np.full(83, 0.5)},
            "cv.scheme predefined: fold ids must be whole numbers",
        ),
        (
            {"scheme": "group", "groups": np.zeros(10)},
            "cv.scheme group: the task gives groups of shape (10,) for 83 samples",
        ),
    ],
)
def test_data_that_cannot_be_split_as_asked_says_why_in_numbers(options, message) -> None:
    with pytest.raises(SplitError) as caught:
        make_folds(83, 5, 0, **options)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_bad_arguments_are_value_errors() -> None:
    with pytest.raises(ValueError, match="k must be >= 2"):
        make_folds(100, 1, 0)
    with pytest.raises(SplitError, match="cannot make 5 folds from 3 samples"):
        make_folds(3, 5, 0)
    for scheme in ("time_series", "predefined", "stratified_group"):
        with pytest.raises(ValueError, match=f"{scheme} splits the same way every time"):
            make_folds(100, 3, 0, scheme=scheme, repeats=2)
    with pytest.raises(ValueError, match="scheme must be one of"):
        make_folds(100, 3, 0, scheme="loo")
