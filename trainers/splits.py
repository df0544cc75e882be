"""Cross-validation splits (the study's ``cv:``): the same seed and data give the same folds for
every trial, on every worker and after every restart.

Each scheme is scikit-learn's splitter of that name, so the folds are what a user of
scikit-learn expects: ``kfold`` (KFold), ``stratified`` (StratifiedKFold), ``group``
(GroupKFold), ``stratified_group`` (StratifiedGroupKFold), ``time_series`` (TimeSeriesSplit:
ordered, never shuffled, an expanding window with an optional ``gap``) and ``predefined``
(PredefinedSplit: fold ids from the task, -1 for samples always trained on). With ``repeats``
the schemes the seed shuffles split again with another seed: fold ``r * k + i`` is fold ``i``
of repeat ``r``, and repeat 0 is the split without repeats. The folds are derived, not stored:
``load_data`` must give the same samples in the same order every time. Data that cannot be
split as asked raises ``SplitError`` saying why in numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.model_selection import (
    GroupKFold,
    KFold,
    PredefinedSplit,
    StratifiedGroupKFold,
    StratifiedKFold,
    TimeSeriesSplit,
)

from foldwise.cv import REPEATABLE_SCHEMES, CVScheme, default_scheme
from foldwise.trainers.fold_data import TaskData, per_sample_values
from foldwise.trainers.fold_errors import SplitError
from foldwise.trainers.job import FoldJob
from foldwise.trainers.task import Task

Fold = tuple[np.ndarray, np.ndarray]


def fold_indices(job: FoldJob, task: Task, data: TaskData) -> Fold:
    """The (training, validation) indices of ``job``'s fold under its study's ``cv`` (a scheme
    left open gets the task kind's default); ``SplitError`` when the data cannot be split so.
    The groups or fold ids a scheme needs are read from the task here, and only then."""
    cv, options = job.cv, job.trainer.options
    scheme = cv.scheme or default_scheme(task.kind)
    groups = fold_ids = None
    if scheme in (CVScheme.GROUP, CVScheme.STRATIFIED_GROUP):
        groups = per_sample_values(task, data.dataset, options, "groups")
    if scheme is CVScheme.PREDEFINED:
        fold_ids = per_sample_values(task, data.dataset, options, "fold_ids")
    folds = make_folds(
        len(data),
        job.folds // cv.repeats,
        job.seed,
        scheme=scheme,
        repeats=cv.repeats,
        gap=cv.gap,
        targets=data.targets,
        groups=groups,
        fold_ids=fold_ids,
        # a study stored before cv existed split a rare class as StratifiedKFold does
        small_classes=cv.scheme is None,
    )
    return folds[job.fold]


def make_folds(
    n: int,
    k: int,
    seed: int,
    *,
    scheme: CVScheme | str = CVScheme.KFOLD,
    repeats: int = 1,
    gap: int = 0,
    targets: Sequence[Any] | np.ndarray | None = None,
    groups: Sequence[Any] | np.ndarray | None = None,
    fold_ids: Sequence[Any] | np.ndarray | None = None,
    small_classes: bool = False,
) -> list[Fold]:
    """``k * repeats`` (train indices, validation indices) pairs over ``n`` samples, by
    ``scheme``; within a repeat the validation folds never overlap (for ``time_series`` they
    follow one another and training is what came before). ``targets`` are the class labels
    (stratified schemes), ``groups`` a group per sample (grouped schemes), ``fold_ids`` a fold
    per sample (``predefined``). A class with fewer samples than folds is refused unless
    ``small_classes`` (scikit-learn then warns and leaves some folds without it)."""
    try:
        scheme = CVScheme(scheme)
    except ValueError:
        raise ValueError(f"scheme must be one of {', '.join(CVScheme)}, got {scheme!r}") from None
    if k < 2:
        raise ValueError(f"k must be >= 2, got {k}")
    if repeats < 1 or (repeats > 1 and scheme not in REPEATABLE_SCHEMES):
        raise ValueError(f"{scheme} splits the same way every time: repeats must be 1")
    if n < k:
        raise SplitError(f"cannot make {k} folds from {n} samples")
    folds: list[Fold] = []
    for repeat in range(repeats):
        splits = _split(
            n, k, repeat_seed(seed, repeat), scheme, gap, targets, groups, fold_ids, small_classes
        )
        folds.extend((np.asarray(train), np.asarray(val)) for train, val in splits)
    return folds


def repeat_seed(seed: int, repeat: int) -> int:
    """The seed of repeat ``repeat``: the study's own for the first, then ones drawn from
    both (a study of seed s repeats none of the splits of a study of seed s + 1)."""
    if repeat == 0:
        return seed
    return int(np.random.SeedSequence([seed, repeat]).generate_state(1)[0])


def _split(
    n: int,
    k: int,
    seed: int,
    scheme: CVScheme,
    gap: int,
    targets: Any,
    groups: Any,
    fold_ids: Any,
    small_classes: bool,
) -> list[Fold]:
    X = np.zeros((n, 1))
    if scheme == "kfold":
        return list(KFold(n_splits=k, shuffle=True, random_state=seed).split(X))
    if scheme == "stratified":
        y = _per_sample("targets", targets, n, scheme, "class labels")
        if not small_classes:
            _check_classes(y, k)
        splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        return list(splitter.split(X, y))
    if scheme == "group":
        g = _per_sample("groups", groups, n, scheme, "load_groups(options)")
        _check_groups(g, k, scheme)
        return list(GroupKFold(n_splits=k, shuffle=True, random_state=seed).split(X, groups=g))
    if scheme == "stratified_group":
        y = _per_sample("targets", targets, n, scheme, "class labels")
        g = _per_sample("groups", groups, n, scheme, "load_groups(options)")
        _check_groups(g, k, scheme)
        splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
        return list(splitter.split(X, y, groups=g))
    if scheme == "time_series":
        return _time_series(n, k, gap)
    ids = _per_sample("fold_ids", fold_ids, n, scheme, "load_fold_ids(options)")
    return _predefined(ids, k)


def _per_sample(what: str, values: Any, n: int, scheme: str, source: str) -> np.ndarray:
    if values is None:
        raise SplitError(f"cv.scheme {scheme} needs the task's {what}: give {source}")
    array = np.asarray(values)
    if array.ndim != 1 or len(array) != n:
        raise SplitError(
            f"cv.scheme {scheme}: the task gives {what} of shape {array.shape} for {n} samples "
            f"(one per sample is needed)"
        )
    return array


def _check_classes(y: np.ndarray, k: int) -> None:
    labels, counts = np.unique(y, return_counts=True)
    smallest = int(np.argmin(counts))
    if counts[smallest] < k:
        label = labels[smallest]
        label = label.item() if isinstance(label, np.generic) else label
        raise SplitError(
            f"cv.scheme stratified: class {label!r} has "
            f"{counts[smallest]} sample{'s' if counts[smallest] != 1 else ''}, fewer than "
            f"parallel.folds ({k}), so some folds would have none of it: use fewer folds or "
            "cv.scheme kfold"
        )


def _check_groups(groups: np.ndarray, k: int, scheme: str) -> None:
    count = len(np.unique(groups))
    if count < k:
        raise SplitError(
            f"cv.scheme {scheme}: the data has {count} group{'s' if count != 1 else ''}, fewer "
            f"than parallel.folds ({k}): every fold needs a group of its own"
        )


def _time_series(n: int, k: int, gap: int) -> list[Fold]:
    """TimeSeriesSplit's folds: validation blocks of ``n // (k + 1)`` samples at the end, each
    trained on every sample before it but the ``gap`` just before it."""
    size = n // (k + 1)
    if size < 1 or n - gap - size * k < 1:
        raise SplitError(
            f"cv.scheme time_series: {n} samples cannot make {k} folds with a gap of {gap} "
            f"(each fold validates on {max(size, 0)} samples and the first trains on "
            f"{max(n - gap - size * k, 0)})"
        )
    return list(TimeSeriesSplit(n_splits=k, gap=gap).split(np.zeros((n, 1))))


def _predefined(ids: np.ndarray, k: int) -> list[Fold]:
    """Fold i validates on the samples of the i-th smallest fold id; -1 always trains."""
    if not np.issubdtype(ids.dtype, np.integer):
        raise SplitError(
            f"cv.scheme predefined: fold ids must be whole numbers (-1: always trained on), "
            f"got {ids.dtype}"
        )
    named = np.unique(ids[ids != -1])
    if (named < 0).any():
        raise SplitError(
            f"cv.scheme predefined: fold id {int(named[0])}: ids are 0 and up, or -1 for "
            "samples always trained on"
        )
    if len(named) != k:
        shown = ", ".join(str(int(i)) for i in named[:10]) + (", ..." if len(named) > 10 else "")
        raise SplitError(
            f"cv.scheme predefined: the task's fold ids name {len(named)} fold"
            f"{'s' if len(named) != 1 else ''} ({shown}); parallel.folds is {k}"
        )
    return list(PredefinedSplit(ids).split())
