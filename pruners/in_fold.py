"""Pruning inside a fold: is a fold run's curve clearly worse than the other trials' runs of the
same fold at the same epoch (median, asha), or on course to end worse than the best of them
(curve: ``curve_fit``)?

The reference runs are the study's ended fold runs (read from the database when a study starts,
then added as runs end), so a decision depends only on stored results. A run that ended early
(early stopping) keeps its best value at later epochs; a run stopped by pruning or racing counts
only at the epochs it reached.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from foldwise.pruners.curve_fit import optimistic_final
from foldwise.racing import Pruning


@dataclass(frozen=True)
class _Curve:
    best: list[float]
    """Best value so far after each epoch, as a loss (lower is better)."""
    finished: bool
    """Trained to its end (or its early stop), so its last value holds at later epochs."""


class FoldCurves:
    """Learning curves of ended fold runs, by fold index, in loss form."""

    def __init__(self, *, maximize: bool) -> None:
        self.sign = -1.0 if maximize else 1.0
        self._runs: dict[int, list[_Curve]] = defaultdict(list)

    def add(self, fold: int, values: Sequence[float], *, finished: bool) -> None:
        """Remember an ended run of ``fold`` whose objective after each epoch was ``values``."""
        if values:
            self._runs[fold].append(_Curve(best_so_far(values, self.sign), finished))

    def at(self, fold: int, epoch: int) -> list[float]:
        """Each reference run's best loss after ``epoch`` epochs (1-based)."""
        found = []
        for curve in self._runs.get(fold, ()):
            if len(curve.best) >= epoch:
                found.append(curve.best[epoch - 1])
            elif curve.finished:
                found.append(curve.best[-1])
        return found

    def finals(self, fold: int) -> list[float]:
        """Each finished reference run's best loss at its end."""
        return [curve.best[-1] for curve in self._runs.get(fold, ()) if curve.finished]


def prune_verdict(
    pruning: Pruning, curves: FoldCurves, fold: int, values: Sequence[float], *, epochs: int
) -> str | None:
    """Why the run of ``fold`` whose objective after each epoch so far was ``values`` should be
    stopped now, or None to go on. ``epochs`` is how many it would train in all."""
    epoch = len(values)
    if pruning.rule == "off" or epoch < pruning.warmup_epochs or epoch >= epochs:
        return None
    if pruning.rule == "asha" and not _is_rung(epoch, pruning.warmup_epochs, pruning.eta):
        return None
    if pruning.rule == "curve":
        return _curve_verdict(pruning, curves, fold, values, epochs=epochs)
    others = curves.at(fold, epoch)
    if len(others) < pruning.min_runs:
        return None
    mine = best_so_far(values, curves.sign)[-1]
    shown = curves.sign * mine
    where = f"fold {fold} at epoch {epoch}"
    if pruning.rule == "median":
        median = statistics.median(others)
        if not mine > median:
            return None
        return (
            f"{where}: {shown:.4g}, worse than the median {curves.sign * median:.4g} of "
            f"{len(others)} other trials' runs of that fold (median rule)"
        )
    rank = 1 + sum(1 for other in others if other < mine)  # ties go on
    keep = max(1, (len(others) + 1) // pruning.eta)
    if rank <= keep:
        return None
    return (
        f"{where}: {shown:.4g} ranks {rank} of {len(others) + 1} runs of that fold at this "
        f"rung; the top {keep} go on (asha, eta {pruning.eta})"
    )


def _curve_verdict(
    pruning: Pruning, curves: FoldCurves, fold: int, values: Sequence[float], *, epochs: int
) -> str | None:
    """The curve rule: stop the run when even the most optimistic extrapolation of its curve to
    its last epoch (``curve_fit.optimistic_final``) ends worse than the best finished run of the
    same fold."""
    finals = curves.finals(fold)
    if len(finals) < pruning.min_runs:
        return None
    losses = best_so_far(values, curves.sign)
    bound = optimistic_final(losses, epochs)
    target = min(finals)
    if bound is None or not bound > target:
        return None
    sign = curves.sign
    return (
        f"fold {fold} at epoch {len(values)}: {sign * losses[-1]:.4g}, on course for no "
        f"better than {sign * bound:.4g} at epoch {epochs}, against the best "
        f"{sign * target:.4g} of {len(finals)} other trials' finished runs of that fold "
        "(curve rule)"
    )


def best_so_far(values: Sequence[float], sign: float) -> list[float]:
    """Running best of ``values`` as losses (``sign`` -1 turns a maximised metric into one);
    a non-finite value never counts as best."""
    out: list[float] = []
    best = math.inf
    for value in values:
        loss = sign * float(value)
        if math.isfinite(loss) and loss < best:
            best = loss
        out.append(best)
    return out


def _is_rung(epoch: int, first: int, eta: int) -> bool:
    """Whether ``epoch`` is one of first, first x eta, first x eta^2, ..."""
    rung = first
    while rung < epoch:
        rung *= eta
    return rung == epoch
