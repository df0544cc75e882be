"""Racing across folds: is a trial clearly worse than the incumbent on the folds it has run?

Every trial of a study is scored on the same folds, so a trial's fold values are compared with
the incumbent's values on the *same fold indices* (a paired comparison: the fold-to-fold
difficulty both share cancels out). The verdict depends only on those stored values, so a
restarted scheduler reaches the same one.

- ``forgiving`` is the paired form of the lenient rule of Bergman, Purucker & Hutter (AutoML
  2024: stop when the trial's mean is worse than the incumbent's worst fold). Here the trial's
  mean is compared with the incumbent's mean *on the same folds*, and the trial is pruned when
  it is worse by more than the incumbent's own worst fold lies from the incumbent's mean: the
  incumbent's fold spread is the tolerance.
- ``ttest`` is a one-sided paired t-test of the fold differences (tidymodels' racing and
  F-race test the same paired design; a signed-rank test cannot reach p < 0.1 on 3 folds).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from scipy import stats

from foldwise.racing import Racing


@dataclass(frozen=True)
class Incumbent:
    """The best completed trial of a study: its number and the value of each of its folds."""

    number: int
    values: Mapping[int, float]


def race_verdict(
    racing: Racing,
    values: Mapping[int, float],
    incumbent: Incumbent | None,
    *,
    folds: int,
    maximize: bool,
) -> str | None:
    """Why the trial whose finished folds have ``values`` should be pruned, or None to go on.

    No verdict before ``racing.min_folds`` folds, once every fold has run, or without an
    incumbent that ran the same folds.
    """
    if racing.rule == "off" or incumbent is None:
        return None
    shared = sorted(k for k in values if k in incumbent.values)
    if len(shared) < (racing.min_folds or 1) or len(values) >= folds:
        return None
    if len(incumbent.values) < folds:  # not a full trial: nothing to measure its spread on
        return None
    sign = -1.0 if maximize else 1.0  # losses: lower is better
    mine = [sign * values[k] for k in shared]
    theirs = [sign * incumbent.values[k] for k in shared]
    worse = clearly_worse(racing, mine, theirs, [sign * v for v in incumbent.values.values()])
    if worse is None:
        return None
    if racing.rule == "forgiving":
        gap, slack = worse
        test = (
            f"worse by {gap:.2g}, more than the incumbent's worst fold lies from its mean "
            f"({slack:.2g}; forgiving rule)"
        )
    else:
        test = f"paired t-test p = {worse[0]:.2g} < {racing.alpha:g}"
    return (
        f"after {len(shared)} of {folds} folds: {_mean_and_error([sign * v for v in mine])} "
        f"vs incumbent (trial {incumbent.number}) "
        f"{statistics.fmean(sign * v for v in theirs):.4g} on the same folds, {test}"
    )


def clearly_worse(
    racing: Racing, mine: list[float], theirs: list[float], reference: list[float]
) -> tuple[float, float] | None:
    """Whether losses ``mine`` are clearly worse than ``theirs`` (the same folds) by the rule:
    ``forgiving``, (gap of the means, slack) when the gap is more than the slack, how far the
    worst of ``reference`` (every fold of the one compared with) lies from its mean; ``ttest``,
    (p-value, alpha) when the one-sided paired t-test's p is below alpha; otherwise None."""
    if racing.rule == "forgiving":
        gap = statistics.fmean(mine) - statistics.fmean(theirs)
        slack = max(reference) - statistics.fmean(reference)
        return (gap, slack) if gap > slack else None
    p_value = paired_p_value(mine, theirs)
    return (p_value, racing.alpha) if p_value < racing.alpha else None


def paired_p_value(mine: list[float], theirs: list[float]) -> float:
    """One-sided p-value that ``mine`` (losses) is no worse than ``theirs``, fold by fold."""
    differences = [a - b for a, b in zip(mine, theirs, strict=True)]
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    if spread == 0.0 or not math.isfinite(spread):
        return 0.0 if mean > 0 else 1.0
    t = mean / (spread / math.sqrt(len(differences)))
    return float(stats.t.sf(t, df=len(differences) - 1))


def _mean_and_error(values: list[float]) -> str:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.4g}"
    return f"{mean:.4g} ± {statistics.stdev(values) / math.sqrt(len(values)):.2g}"
