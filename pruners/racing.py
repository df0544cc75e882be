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
- ``posterior`` asks what the trial's answer will be once every fold has run: the probability
  that its mean over all K folds comes out better than the incumbent's. The fold differences
  are modelled as independent normal draws of unknown mean and variance (Jeffreys' prior), so
  the differences of the folds still to run follow the posterior predictive; the trial is
  pruned when that probability is below ``alpha``. For a trial behind, the probability is
  never above the t-test's p on the same folds, and the further below it the fewer folds are
  left to change the mean (at 4 of 5 folds a trial clearly behind cannot catch up): at any
  ``alpha`` below 0.5 it prunes no later than the t-test.
- ``model`` asks the same question of the study's fold model (:mod:`pruners.fold_model`):
  each fold's offset and the trial-by-fold noise are learnt from every trial of the study, not
  from the differences with the incumbent alone, so one fold is enough to judge by, a hard fold
  is not held against the trial that drew it, and the incumbent's own fold noise is not
  counted twice. Until the study has a pool to learn from, nothing is pruned.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from scipy import stats

from foldwise.pruners.fold_model import FoldModel
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
    model: FoldModel | None = None,
) -> str | None:
    """Why the trial whose finished folds have ``values`` should be pruned, or None to go on.

    No verdict before ``racing.min_folds`` folds, once every fold has run, or without an
    incumbent that ran the same folds; the ``model`` rule also none without the study's fold
    ``model`` (fitted in the same direction: losses, the values negated when maximizing).
    """
    if racing.rule == "off" or incumbent is None:
        return None
    if racing.rule == "model":
        return _model_verdict(
            racing, values, incumbent, folds=folds, maximize=maximize, model=model
        )
    shared = sorted(k for k in values if k in incumbent.values)
    if len(shared) < (racing.min_folds or 1) or len(values) >= folds:
        return None
    if len(incumbent.values) < folds:  # not a full trial: nothing to measure its spread on
        return None
    sign = -1.0 if maximize else 1.0  # losses: lower is better
    mine = [sign * values[k] for k in shared]
    theirs = [sign * incumbent.values[k] for k in shared]
    reference = [sign * v for v in incumbent.values.values()]
    worse = clearly_worse(racing, mine, theirs, reference, folds=folds)
    if worse is None:
        return None
    if racing.rule == "forgiving":
        gap, slack = worse
        test = (
            f"worse by {gap:.2g}, more than the incumbent's worst fold lies from its mean "
            f"({slack:.2g}; forgiving rule)"
        )
    elif racing.rule == "posterior":
        test = (
            f"probability {worse[0]:.2g} < {racing.alpha:g} that its mean over all {folds} "
            "folds beats the incumbent's"
        )
    else:
        test = f"paired t-test p = {worse[0]:.2g} < {racing.alpha:g}"
    return (
        f"after {len(shared)} of {folds} folds: {_mean_and_error([sign * v for v in mine])} "
        f"vs incumbent (trial {incumbent.number}) "
        f"{statistics.fmean(sign * v for v in theirs):.4g} on the same folds, {test}"
    )


def behind(
    racing: Racing,
    values: Mapping[int, float],
    incumbent: Incumbent | None,
    *,
    folds: int,
    maximize: bool,
    model: FoldModel | None = None,
) -> bool:
    """Whether the trial whose finished folds have ``values`` is behind the incumbent: the
    fold model gives it less than even odds to beat it over all folds (``model`` rule), or its
    mean on the folds both ran is worse (the other rules). Not behind without an incumbent
    that ran every fold, without the fold model (``model`` rule) or before any fold."""
    if incumbent is None or len(incumbent.values) < folds or not values:
        return False
    sign = -1.0 if maximize else 1.0
    if racing.rule == "model":
        if model is None:
            return False
        return _model_chance(model, values, incumbent, folds=folds, maximize=maximize)[0] < 0.5
    shared = [k for k in values if k in incumbent.values]
    if not shared:
        return False
    gap = statistics.fmean(sign * (values[k] - incumbent.values[k]) for k in shared)
    return gap > 0


def behind_a_peer(
    values: Mapping[int, float], peers: list[Mapping[int, float]], *, maximize: bool
) -> bool:
    """Before the study has an incumbent: whether some other trial in flight (``peers``, the
    values of their finished folds) did better than the trial whose finished folds have
    ``values`` on the folds both ran."""
    sign = -1.0 if maximize else 1.0
    for peer in peers:
        shared = [k for k in values if k in peer]
        if shared and statistics.fmean(sign * (values[k] - peer[k]) for k in shared) > 0:
            return True
    return False


def _model_verdict(
    racing: Racing,
    values: Mapping[int, float],
    incumbent: Incumbent,
    *,
    folds: int,
    maximize: bool,
    model: FoldModel | None,
) -> str | None:
    """The ``model`` rule: prune when the fold model gives the trial a probability below
    ``alpha`` that its mean over all folds beats the incumbent's."""
    if model is None or len(incumbent.values) < folds:
        return None
    if len(values) < (racing.min_folds or 1) or len(values) >= folds:
        return None
    sign = -1.0 if maximize else 1.0
    chance, losses, target = _model_chance(
        model, values, incumbent, folds=folds, maximize=maximize
    )
    if not chance < racing.alpha:
        return None
    centre, scale, _dof = model.predict_mean(losses, folds)
    return (
        f"after {len(values)} of {folds} folds: {_mean_and_error(list(values.values()))}, "
        f"expected {sign * centre:.4g} ± {scale:.2g} over all {folds} folds vs incumbent "
        f"(trial {incumbent.number}) {sign * target:.4g}, probability {chance:.2g} < "
        f"{racing.alpha:g} to beat it (fold model of {model.trials} trials)"
    )


def _model_chance(
    model: FoldModel,
    values: Mapping[int, float],
    incumbent: Incumbent,
    *,
    folds: int,
    maximize: bool,
) -> tuple[float, dict[int, float], float]:
    """The fold model's probability that the trial's mean over all folds beats the
    incumbent's, with the trial's fold values and the incumbent's mean as losses."""
    sign = -1.0 if maximize else 1.0
    losses = {k: sign * v for k, v in values.items()}
    target = statistics.fmean(sign * v for v in incumbent.values.values())
    return model.chance_below(losses, target, folds), losses, target


def clearly_worse(
    racing: Racing,
    mine: list[float],
    theirs: list[float],
    reference: list[float],
    *,
    folds: int,
) -> tuple[float, float] | None:
    """Whether losses ``mine`` are clearly worse than ``theirs`` (the same folds) by the rule:
    ``forgiving``, (gap of the means, slack) when the gap is more than the slack, how far the
    worst of ``reference`` (every fold of the one compared with, ``folds`` in all) lies from
    its mean; ``ttest``, (p-value, alpha) when the one-sided paired t-test's p is below alpha;
    ``posterior``, (probability, alpha) when the probability that the mean of ``mine`` over all
    ``folds`` beats that of the one compared with is below alpha; otherwise None."""
    if racing.rule == "forgiving":
        gap = statistics.fmean(mine) - statistics.fmean(theirs)
        slack = max(reference) - statistics.fmean(reference)
        return (gap, slack) if gap > slack else None
    if racing.rule == "posterior":
        chance = chance_to_beat(mine, theirs, folds=folds)
        return (chance, racing.alpha) if chance < racing.alpha else None
    p_value = paired_p_value(mine, theirs)
    return (p_value, racing.alpha) if p_value < racing.alpha else None


def chance_to_beat(mine: list[float], theirs: list[float], *, folds: int) -> float:
    """The posterior probability that the mean of losses ``mine`` over all ``folds`` folds
    comes out below that of ``theirs``, from the folds both ran (at least two).

    With n of K folds run, d̄ and s the mean and standard deviation of the differences
    ``mine - theirs``, and the differences independent normal draws under Jeffreys' prior,
    the mean difference over all K folds is d̄ + (K - n)/K · s · sqrt(1/n + 1/(K - n)) · T,
    T Student's t with n - 1 degrees of freedom (the mean of the K - n differences to come
    follows the posterior predictive). Equal differences (s = 0) leave no doubt: 0 when they
    are behind, else 1."""
    n, mean, spread = _paired(mine, theirs)
    if n >= folds or spread is None:  # every fold has run, or equal differences: no doubt
        return 0.0 if mean > 0 else 1.0
    left = folds - n
    scale = left / folds * spread * math.sqrt(1 / n + 1 / left)
    return float(stats.t.cdf(-mean / scale, df=n - 1))


def paired_p_value(mine: list[float], theirs: list[float]) -> float:
    """One-sided p-value that ``mine`` (losses) is no worse than ``theirs``, fold by fold."""
    n, mean, spread = _paired(mine, theirs)
    if spread is None:
        return 0.0 if mean > 0 else 1.0
    return float(stats.t.sf(mean / (spread / math.sqrt(n)), df=n - 1))


def _paired(mine: list[float], theirs: list[float]) -> tuple[int, float, float | None]:
    """How many fold differences ``mine - theirs`` there are, their mean and their standard
    deviation (None when they are all equal: nothing is in doubt, a tie is not behind)."""
    differences = [a - b for a, b in zip(mine, theirs, strict=True)]
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    return len(differences), mean, spread if spread > 0.0 and math.isfinite(spread) else None


def _mean_and_error(values: list[float]) -> str:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.4g}"
    return f"{mean:.4g} ± {statistics.stdev(values) / math.sqrt(len(values)):.2g}"
