"""Optuna over the same K folds, for ``benchmarks/racing.py``: its TPE or GP sampler, alone or
with its ``WilcoxonPruner`` racing a trial's folds against the best trial's.

A trial trains its folds one after another in this process, each with foldwise's own fold
runner (one rank, the same training and the same fold value a foldwise fold run gives), reports
each fold's value as step = fold and, with the pruner, asks it after each fold, as Optuna's
documentation does for cross-validation. Fold-epochs are counted from the epoch reports.
Sequential: its wall time is not comparable with the service's 4 fold slots.

Needs the peers (``make bench-peers``).
"""

from __future__ import annotations

import math
import time
from typing import Any

from foldwise.space import condition_order
from foldwise.spec import StudySpec
from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_errors import TrainingDiverged
from foldwise.trainers.fold_runner import run_fold
from foldwise.trainers.job import FoldJob
from foldwise.trainers.objective import fold_value
from foldwise.trainers.report import EpochReport

OPTUNA_OPTIMIZERS = ("optuna_tpe", "optuna_gp")
OPTUNA_MODES = ("off", "wilcoxon")
"""No pruner, or ``WilcoxonPruner(p_threshold=0.1)``."""


def run_optuna_study(spec: StudySpec, optimizer: str, mode: str, seed: int) -> dict[str, Any]:
    """The fields of a ``racing.Run`` (past its labels) for one Optuna study of ``spec``."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    samplers = {"optuna_tpe": optuna.samplers.TPESampler, "optuna_gp": optuna.samplers.GPSampler}
    pruner = (
        optuna.pruners.WilcoxonPruner(p_threshold=0.1)
        if mode == "wilcoxon"
        else optuna.pruners.NopPruner()
    )
    study = optuna.create_study(
        direction=spec.objective.direction.value,
        sampler=samplers[optimizer](seed=seed),
        pruner=pruner,
    )
    started = time.time()
    epoch_ends: list[float] = []
    completed: list[tuple[float, float]] = []
    folds = spec.parallel.folds

    def objective(trial: Any) -> float:
        params = _suggest(trial, spec)
        values = []
        for fold in range(folds):
            values.append(train_fold_in_process(spec, params, fold, epoch_ends, started))
            trial.report(values[-1], fold)
            if trial.should_prune():
                raise optuna.TrialPruned
        mean = sum(values) / len(values)
        completed.append((time.time() - started, mean))
        return mean

    study.optimize(objective, spec.budget.trials)
    states = [t.state for t in study.trials]
    return {
        "wall": time.time() - started,
        "utilisation": math.nan,
        "fold_epochs": len(epoch_ends),
        "trials": len(states),
        "pruned": sum(s == optuna.trial.TrialState.PRUNED for s in states),
        "best": min((v for _t, v in completed), default=math.nan),  # as racing.run_study
        "fold_runs": 0,
        "folds": folds,
        "completed": completed,
        "epoch_ends": epoch_ends,
    }


def _suggest(trial: Any, spec: StudySpec) -> dict[str, Any]:
    """The trial's params, define-by-run: a conditional parameter only where its condition
    holds, as foldwise's space has it."""
    params: dict[str, Any] = {}
    for name in condition_order(spec.space):
        param = spec.space[name]
        if not param.is_active(params):
            continue
        if param.type == "categorical":
            params[name] = trial.suggest_categorical(name, list(param.choices))
        elif param.type == "int":
            params[name] = trial.suggest_int(name, param.low, param.high, log=param.log)
        else:
            params[name] = trial.suggest_float(name, param.low, param.high, log=param.log)
    return params


def train_fold_in_process(
    spec: StudySpec, params: dict[str, Any], fold: int, epoch_ends: list[float], started: float
) -> float:
    """Train one fold here and return its value (NaN when its training diverged: the trial
    fails, as a foldwise fold that diverges fails its trial); each epoch's end goes into
    ``epoch_ends``."""
    job = FoldJob.from_spec(spec, params=params, fold=fold)
    epochs = []
    events = run_fold(job, rank=0, master_addr="127.0.0.1", master_port=free_port())
    try:
        for event in events:
            if isinstance(event, EpochReport) and not event.restored:
                epochs.append(event.metrics)
                epoch_ends.append(time.time() - started)
    except TrainingDiverged:
        return math.nan
    objective = spec.objective
    return fold_value(epochs, objective.metric, objective.direction.value, objective.use)
