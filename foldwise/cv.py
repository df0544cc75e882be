"""How a study splits its data into folds (``cv:``) and scores its best trial on test data
(``holdout:``): the spec's types for both, and the rules they share with the splitter and the
service (docs/cv.md)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from foldwise.limits import MAX_INT
from foldwise.space import StrictModel


class CVScheme(StrEnum):
    """How a trial's folds are made: scikit-learn's splitter of the same name (docs/cv.md)."""

    KFOLD = "kfold"
    STRATIFIED = "stratified"
    GROUP = "group"
    STRATIFIED_GROUP = "stratified_group"
    TIME_SERIES = "time_series"
    PREDEFINED = "predefined"


REPEATABLE_SCHEMES = frozenset({CVScheme.KFOLD, CVScheme.STRATIFIED, CVScheme.GROUP})
"""Schemes whose folds the seed shuffles, so that a repeat splits anew (stratified_group
assigns groups greedily: its seed only breaks ties)."""
MAX_FOLD_RUNS = 100
"""``parallel.folds`` x ``cv.repeats``: the fold runs of one trial."""


class CrossValidation(StrictModel):
    """How the data is split into each trial's folds: the same folds for every trial, derived
    from the study's seed and the task's data."""

    scheme: Annotated[CVScheme | None, Field(strict=False)] = Field(
        None,
        description="stratified (the default for classification) | kfold (the default for "
        "regression) | group | stratified_group (groups from the task's load_groups) | "
        "time_series (ordered, never shuffled, an expanding window) | predefined (fold ids "
        "from the task's load_fold_ids)",
    )
    repeats: int = Field(
        1,
        ge=1,
        le=MAX_FOLD_RUNS // 2,
        description="Repeated K-fold: the split is made this many times with other seeds, and "
        "every repeat's folds are folds of the trial (kfold, stratified, group)",
    )
    gap: int = Field(
        0,
        ge=0,
        le=MAX_INT,
        description="time_series: samples left out between each training window and the "
        "validation block after it",
    )


class HoldoutSpec(StrictModel):
    """Score the best trial on the task's test data (``load_test_data``) when the study ends:
    never part of the optimisation."""

    score: Literal["ensemble", "refit", "both"] = Field(
        "ensemble",
        description="ensemble: the mean of the best trial's fold models' predictions; refit: "
        "a model trained on all the training data with the best params; both",
    )
    epochs: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Epochs of the refit (default: the median of the best trial's folds' "
        "best epochs)",
    )


LABELLED_SCHEMES = frozenset({CVScheme.STRATIFIED, CVScheme.STRATIFIED_GROUP})
"""Schemes that keep each class's share in every fold: for classification only."""


def default_scheme(kind: str) -> CVScheme:
    """The scheme a spec that names none gets: stratified for classification, else kfold."""
    return CVScheme.STRATIFIED if kind == "classification" else CVScheme.KFOLD
