"""Racing by dominance: a study scored on several metrics prunes a trial that is clearly
dominated, on the same folds, by a member of its Pareto front, or clearly infeasible.

The single-objective rules (:mod:`pruners.racing`) apply to each objective:

- *clearly dominated*: some member of the front (a completed, feasible, non-dominated trial)
  beats the trial on every objective, each by its rule on the folds both ran: ``forgiving``,
  by more than the member's worst fold lies from its mean on that metric; ``ttest``, by a
  one-sided paired t-test at level ``alpha``; ``posterior``, when the probability that its
  mean over all folds beats the member's is below ``alpha``. A trial only worse on some
  objectives may still join the front, so it goes on.
- *clearly infeasible*: every fold it finished breaks a constraint's limit, and their mean by
  more than the front's largest fold spread on that metric (``forgiving``; with no front yet,
  by any amount), by a one-sided t-test at level ``alpha`` (``ttest``), or with a probability
  below ``alpha`` that its mean over all folds meets the limit (``posterior``). A parameter
  count reported with the first fold is then decided at once.

The verdict depends only on stored fold metrics, so a restarted scheduler reaches the same one.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats

from foldwise.pruners.racing import chance_to_beat, clearly_worse
from foldwise.racing import Racing
from foldwise.spec import Constraint, StudySpec

FoldMetrics = Mapping[int, Mapping[str, float]]
"""Fold index → the scored metrics of that fold."""


@dataclass(frozen=True)
class FrontMember:
    """A trial of the study's Pareto front and the scored metrics of each of its folds."""

    number: int
    metrics: FoldMetrics


def dominance_verdict(
    spec: StudySpec, metrics: FoldMetrics, front: Sequence[FrontMember]
) -> str | None:
    """Why the trial whose finished folds scored ``metrics`` should be pruned, or None to go
    on. No verdict before ``racing.min_folds`` folds or once every fold has run."""
    racing, folds = spec.racing, spec.fold_count
    if racing.rule == "off" or not (racing.min_folds or 1) <= len(metrics) < folds:
        return None
    whole = [m for m in front if len(m.metrics) >= folds]
    for constraint in spec.constraints:
        reason = _infeasible(racing, constraint, metrics, whole, folds=folds)
        if reason:
            return f"after {len(metrics)} of {folds} folds: {reason}"
    for member in whole:
        reason = _dominated(spec, metrics, member)
        if reason:
            return f"after {len(metrics)} of {folds} folds: {reason}"
    return None


def _dominated(spec: StudySpec, metrics: FoldMetrics, member: FrontMember) -> str | None:
    racing = spec.racing
    shared = sorted(k for k in metrics if k in member.metrics)
    if len(shared) < (racing.min_folds or 1):
        return None
    parts = []
    for objective in spec.all_objectives:
        sign = -1.0 if objective.maximize else 1.0  # losses: lower is better
        name = objective.metric
        mine = [sign * metrics[k][name] for k in shared]
        theirs = [sign * member.metrics[k][name] for k in shared]
        everywhere = [sign * fold[name] for fold in member.metrics.values()]
        worse = clearly_worse(racing, mine, theirs, everywhere, folds=spec.fold_count)
        if worse is None:
            return None
        if racing.rule == "forgiving":
            test = f"by {worse[0]:.2g} > {worse[1]:.2g}"
        elif racing.rule == "posterior":
            test = f"probability {worse[0]:.2g} to beat it"
        else:
            test = f"p = {worse[0]:.2g}"
        mean_mine = statistics.fmean(sign * v for v in mine)
        mean_theirs = statistics.fmean(sign * v for v in theirs)
        parts.append(f"{name} {mean_mine:.4g} vs {mean_theirs:.4g} ({test})")
    rule = {
        "forgiving": "forgiving rule",
        "posterior": f"each below {racing.alpha:g}, over all {spec.fold_count} folds",
    }.get(racing.rule, f"paired t-tests < {racing.alpha:g}")
    return (
        f"dominated by trial {member.number} of the front on the same folds: "
        f"{'; '.join(parts)} ({rule})"
    )


def _infeasible(
    racing: Racing,
    constraint: Constraint,
    metrics: FoldMetrics,
    front: Sequence[FrontMember],
    *,
    folds: int,
) -> str | None:
    values = [fold[constraint.metric] for fold in metrics.values()]
    if not all(constraint.gap(v) > 0 for v in values):
        return None
    mean = statistics.fmean(values)
    excess = abs(mean - constraint.value)
    if racing.rule == "forgiving":
        tolerance = max((_spread(m, constraint.metric) for m in front), default=0.0)
        if not excess > tolerance:
            return None
        if front:
            test = f"by {excess:.4g}, more than the front's fold spread {tolerance:.2g}"
        else:
            test = f"by {excess:.4g}, with no front yet to forgive by"
    elif racing.rule == "posterior":
        gaps = [constraint.gap(v) for v in values]
        chance = chance_to_beat(gaps, [0.0] * len(gaps), folds=folds) if len(gaps) > 1 else 1.0
        if not chance < racing.alpha:
            return None
        test = f"probability {chance:.2g} < {racing.alpha:g} that its mean over all folds meets it"
    else:
        p_value = _limit_p_value(values, constraint)
        if not p_value < racing.alpha:
            return None
        test = f"t-test p = {p_value:.2g} < {racing.alpha:g}"
    where = f"{constraint.metric} {mean:.4g} breaks {constraint.op} {constraint.value:g}"
    return f"infeasible: {where} on every finished fold, {test}"


def _spread(member: FrontMember, metric: str) -> float:
    """How far the member's fold values of ``metric`` lie from their mean, at most."""
    values = [fold[metric] for fold in member.metrics.values()]
    mean = statistics.fmean(values)
    return max(abs(v - mean) for v in values)


def _limit_p_value(values: list[float], constraint: Constraint) -> float:
    """One-sided p-value that the fold mean does not break the limit."""
    if len(values) < 2:
        return 1.0
    gaps = [constraint.gap(v) for v in values]
    if statistics.stdev(gaps) == 0.0:
        return 0.0
    return float(stats.ttest_1samp(gaps, 0.0, alternative="greater").pvalue)
