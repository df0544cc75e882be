"""The one-epoch baseline for ``benchmarks/racing.py``: train every configuration one epoch
on one fold, keep the best fifth, and cross-validate those on every fold (Egele et al. 2023
found that so plain a rule matches many multi-fidelity methods at a tenth of their compute,
so a rule that spends folds and epochs must beat it).

The configurations are foldwise's random search's for the seed, the same ones the ``random``
optimizer's runs of that seed train (its n-th configuration depends on the seed and n alone),
so the baseline is paired with full CV on the same configurations. Its folds train one after
another in this process with foldwise's own fold runner
(``racing_optuna.train_fold_in_process``), so its wall time is not comparable with the
service's fold slots.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from benchmarks.racing_optuna import train_fold_in_process
from foldwise.optimizers import create_optimizer
from foldwise.spec import StudySpec

ONE_EPOCH_MODE = "one_epoch"
TOP_SHARE = 0.2
"""The share of the configurations, ranked by their one-epoch value, that run every fold."""


def run_one_epoch_study(spec: StudySpec, seed: int) -> dict[str, Any]:
    """The fields of a ``racing.Run`` (past its labels) for the baseline on ``spec``."""
    trials = spec.budget.trials
    optimizer = create_optimizer(
        "random", spec.space, direction=spec.objective.direction, seed=seed
    )
    configs = optimizer.suggest(trials)
    one_epoch = spec.model_copy(
        update={"trainer": spec.trainer.model_copy(update={"epochs": 1}), "early_stopping": None}
    )
    started = time.time()
    epoch_ends: list[float] = []
    sign = 1.0 if spec.objective.direction.value == "minimize" else -1.0
    first = [sign * train_fold_in_process(one_epoch, p, 0, epoch_ends, started) for p in configs]
    ranked = sorted(range(trials), key=lambda i: (math.isnan(first[i]), first[i], i))
    kept = ranked[: max(1, round(TOP_SHARE * trials))]
    completed: list[tuple[float, float]] = []
    for index in kept:
        folds = range(spec.parallel.folds)
        values = [
            train_fold_in_process(spec, configs[index], k, epoch_ends, started) for k in folds
        ]
        if not any(math.isnan(v) for v in values):  # a diverged fold fails the trial
            completed.append((time.time() - started, statistics.fmean(values)))  # as the service
    return {
        "wall": time.time() - started,
        "utilisation": math.nan,
        "fold_epochs": len(epoch_ends),
        "trials": trials,
        "pruned": trials - len(kept),
        "best": min((v for _t, v in completed), default=math.nan),  # as racing.run_study
        "fold_runs": trials + len(kept) * spec.parallel.folds,
        "folds": spec.parallel.folds,
        "completed": completed,
        "epoch_ends": epoch_ends,
    }
