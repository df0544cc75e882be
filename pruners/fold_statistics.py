"""A trial's statistics from its folds: its value and standard error, and the values a study
scored on several metrics keeps beside them (each objective's mean and error, each
constraint's mean and whether all hold)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from foldwise.pruners.dominance import FrontMember
from foldwise.spec import StudySpec


def aggregate(values: list[float]) -> tuple[float, float]:
    """The trial's value (mean over folds) and its standard error (sample std / sqrt(K))."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, statistics.stdev(values) / math.sqrt(len(values))


def partial_std_error(values: list[float], spread: float | None) -> float | None:
    """The standard error of a pruned trial's partial mean; with one fold value, from
    ``spread``, the fold standard deviation of a trial that ran every fold (the incumbent)."""
    if len(values) >= 2:
        return aggregate(values)[1]
    return spread


def scored_fields(
    spec: StudySpec, metrics: dict[int, dict[str, float]], front: Sequence[FrontMember] = ()
) -> dict[str, Any]:
    """A trial's values beyond its value, from its folds' scored metrics: each objective's
    [mean, standard error] (several objectives), each constraint's fold mean and whether all
    hold (constraints). Empty for a study scored on one metric alone. A trial pruned after one
    fold takes the front's fold standard deviation of a metric as its standard error (as a
    pruned trial of one objective takes the incumbent's)."""
    if not spec.scored_metrics or not metrics:
        return {}
    folds = [metrics[k] for k in sorted(metrics)]
    fields: dict[str, Any] = {}
    if spec.objectives:
        fields["objective_values"] = [
            [statistics.fmean(values), partial_std_error(values, front_spread(front, o.metric))]
            for o in spec.objectives
            for values in [[fold[o.metric] for fold in folds]]
        ]
    if spec.constraints:
        means = [statistics.fmean(fold[c.metric] for fold in folds) for c in spec.constraints]
        fields["constraint_values"] = means
        fields["feasible"] = all(c.holds(m) for c, m in zip(spec.constraints, means, strict=True))
    return fields


def front_spread(front: Sequence[FrontMember], metric: str) -> float | None:
    """The largest fold standard deviation of ``metric`` among the front's members."""
    spreads = [
        statistics.stdev(fold[metric] for fold in member.metrics.values())
        for member in front
        if len(member.metrics) >= 2
    ]
    return max(spreads, default=None)
