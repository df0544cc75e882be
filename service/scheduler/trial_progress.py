"""Where each trial in flight stands, and which of their folds free slots go to.

With racing on, a trial's folds run in two waves: its first ``min_folds`` folds, then, once
those finished without the trial being pruned, all the others (which racing can still stop
after each of them finishes); with ``racing.stepwise``, a trial behind the incumbent runs one
more fold at a time instead, while the slots it would have taken go to other trials. Free
slots go to the oldest trial first, so trials finish, and make room for new ones, in the order
they started.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from foldwise.service.scheduler.fold_task import FoldTask
from foldwise.service.scheduler.store import TrialHandle


@dataclass
class TrialProgress:
    """A trial in flight: the values of its finished folds and the tasks of its running ones."""

    handle: TrialHandle
    values: dict[int, float] = field(default_factory=dict)
    running: dict[int, FoldTask] = field(default_factory=dict)
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    """The scored metrics of each finished fold, when the study has several objectives or
    constraints."""
    stepping: bool = False
    """Racing runs its folds one at a time now (``racing.stepwise``: it is behind the
    incumbent), so that it can be stopped after each."""

    def waiting_folds(self, folds: int) -> list[int]:
        """Folds neither finished nor running, in order."""
        return [k for k in range(folds) if k not in self.values and k not in self.running]


def folds_to_start(
    trials: Iterable[TrialProgress], *, folds: int, min_folds: int | None, free: int
) -> list[tuple[TrialProgress, int]]:
    """At most ``free`` (trial, fold) pairs to start now; ``min_folds`` None: no racing, every
    fold of a trial may run at once."""
    ready = []
    for trial in sorted(trials, key=lambda t: t.handle.number):
        wave = folds if min_folds is None or len(trial.values) >= min_folds else min_folds
        if trial.stepping:
            wave = min(wave, len(trial.values) + 1)
        room = wave - len(trial.values) - len(trial.running)
        ready += [(trial, fold) for fold in trial.waiting_folds(folds)[: max(room, 0)]]
    return ready[: max(free, 0)]
