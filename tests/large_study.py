"""A large study written straight into a database with bulk inserts (trials, fold runs,
epochs; some running, failed or pruned), for the dashboard's tests and its scale benchmark."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, insert, select

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db.engine import make_session_factory
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, TrialRow
from foldwise.spec import StudySpec

FAILURE = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
PRUNED_REASON = (
    "after 1 of {folds} folds: 0.4121 vs incumbent (trial 3) 0.1052 on the same folds, worse by "
    "0.31, more than the incumbent's worst fold lies from its mean (0.013; forgiving rule)"
)
TRACEBACK = """Traceback (most recent call last):
  File "trainers/fold_runner.py", line 88, in run_fold
    loss = step(model, batch)
  File "trainers/fold_runner.py", line 131, in step
    output = model(inputs)
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"""
SPACE = {
    "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
    "depth": {"type": "int", "low": 1, "high": 3},
    "width_1": {"type": "int", "low": 16, "high": 256, "log": True},
    "width_2": {"type": "int", "low": 16, "high": 256, "log": True, "when": {"depth": {"gte": 2}}},
    "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
    "dropout": {"type": "float", "low": 0.0, "high": 0.5},
}


def scale_spec(trials: int, folds: int, epochs: int, groups: int) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": f"scale-{trials}x{folds}x{epochs}",
            "objective": {"metric": "val_loss", "direction": "minimize"},
            "space": SPACE,
            "optimizer": {"name": "random", "seed": 0},
            "budget": {"trials": trials},
            "parallel": {"trial_groups": groups, "folds": folds, "workers_per_fold": 1},
            "trainer": {"task": "digits_mlp", "epochs": epochs},
        }
    )


def fill_study(
    engine: Engine,
    *,
    trials: int,
    folds: int,
    epochs: int,
    running: int = 4,
    failure_rate: float = 0.03,
    pruned_rate: float = 0.0,
    seed: int = 0,
) -> int:
    """Create one running study whose last ``running`` trials are mid-training; return its id.
    A ``pruned_rate`` share of the finished trials were raced away after their first fold.

    Rows go in as executemany ``INSERT``s on the connection and ids are read back with one
    ``SELECT`` per table, so 1M epoch rows take seconds and PostgreSQL's sequences stay right.
    """
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(seconds=30 * trials + 600)
    with make_session_factory(engine).begin() as session:
        study = study_repo.create_study(session, scale_spec(trials, folds, epochs, running))
        study_repo.mark_study(session, study, StudyStatus.RUNNING)
        study.started_at = study.created_at = start
        session.flush()
        db = session.connection()
        trial_rows = [
            _trial(
                rng, study.id, n, trials - n <= running, start, folds, failure_rate, pruned_rate
            )
            for n in range(trials)
        ]
        db.execute(insert(TrialRow.__table__), [row for row, _ in trial_rows])
        ids = dict(
            db.execute(
                select(TrialRow.number, TrialRow.id).where(TrialRow.study_id == study.id)
            ).all()
        )
        runs = [
            run
            for row, values in trial_rows
            for run in _fold_runs(rng, ids[row["number"]], row, values, epochs)
        ]
        db.execute(insert(FoldRunRow.__table__), [row for row, _, _ in runs])
        _insert_epochs(db, rng, runs, _fold_run_ids(db, study.id))
        return study.id


def _insert_epochs(
    db: Connection,
    rng: random.Random,
    runs: list[tuple[dict[str, Any], float, int]],
    run_ids: dict[tuple[int, int, int], int],
) -> None:
    """Epoch rows in batches of 50,000, so memory stays flat at a million rows."""
    batch: list[dict[str, Any]] = []
    for row, target, done in runs:
        run_id = run_ids[row["trial_id"], row["fold"], row["attempt"]]
        batch.extend(_epochs(rng, run_id, target, done))
        if len(batch) >= 50_000:
            db.execute(insert(EpochMetricRow.__table__), batch)
            batch = []
    if batch:
        db.execute(insert(EpochMetricRow.__table__), batch)


def _fold_run_ids(db: Connection, study_id: int) -> dict[tuple[int, int, int], int]:
    query = (
        select(FoldRunRow.trial_id, FoldRunRow.fold, FoldRunRow.attempt, FoldRunRow.id)
        .join(TrialRow, FoldRunRow.trial_id == TrialRow.id)
        .where(TrialRow.study_id == study_id)
    )
    return {(t, f, a): i for t, f, a, i in db.execute(query)}


def _trial(
    rng: random.Random,
    study_id: int,
    number: int,
    running: bool,
    start: datetime,
    folds: int,
    failure_rate: float,
    pruned_rate: float = 0.0,
) -> tuple[dict[str, Any], list[float]]:
    """A trial row and the values its folds will have (mean and s.e. filled in when finished;
    a pruned trial's value is its first fold's)."""
    params = _params(rng)
    began = start + timedelta(seconds=30 * number)
    values = [_objective(params) + rng.gauss(0, 0.02) for _ in range(folds)]
    failed = not running and rng.random() < failure_rate
    pruned = not (running or failed) and pruned_rate > 0 and rng.random() < pruned_rate
    status = TrialStatus.COMPLETED
    if running or failed:
        status = TrialStatus.RUNNING if running else TrialStatus.FAILED
    elif pruned:
        status, values = TrialStatus.PRUNED, values[:1]
    done = status is TrialStatus.COMPLETED
    row = {
        "study_id": study_id,
        "number": number,
        "status": status,
        "params": params,
        "value": statistics.fmean(values) if done or pruned else None,
        "std_error": statistics.stdev(values) / math.sqrt(folds) if done and folds > 1 else None,
        "value_folds": len(values) if done or pruned else None,
        "pruned_reason": PRUNED_REASON.format(folds=folds) if pruned else None,
        "error": f"fold {folds - 1}: {FAILURE}" if failed else None,
        "created_at": began,
        "started_at": began,
        "finished_at": None if running else began + timedelta(seconds=rng.uniform(20, 90)),
    }
    return row, values


def _params(rng: random.Random) -> dict[str, Any]:
    depth = rng.randint(1, 3)
    params: dict[str, Any] = {
        "lr": math.exp(rng.uniform(math.log(1e-4), math.log(0.3))),
        "depth": depth,
        "width_1": int(math.exp(rng.uniform(math.log(16), math.log(256)))),
        "act": rng.choice(["relu", "tanh", "gelu"]),
        "dropout": rng.uniform(0, 0.5),
    }
    if depth >= 2:
        params["width_2"] = int(math.exp(rng.uniform(math.log(16), math.log(256))))
    return params


def _fold_runs(
    rng: random.Random, trial_id: int, trial: dict[str, Any], values: list[float], epochs: int
) -> Iterator[tuple[dict[str, Any], float, int]]:
    """Fold attempts as (row, target value, epochs done): some retried, the last of a failure."""
    for fold, value in enumerate(values):
        began = trial["started_at"]
        if trial["status"] is TrialStatus.RUNNING:
            yield (
                _run(trial_id, fold, 0, FoldStatus.RUNNING, began),
                value,
                rng.randint(1, epochs - 1),
            )
            continue
        attempt = 0
        if rng.random() < 0.05:
            lost = _run(trial_id, fold, 0, FoldStatus.LOST, began, error="the service stopped")
            yield lost, value, rng.randint(1, epochs - 1)
            attempt = 1
        ended = trial["finished_at"]
        if trial["status"] is TrialStatus.FAILED and fold == len(values) - 1:
            failed = _run(trial_id, fold, attempt, FoldStatus.FAILED, began, ended, error=FAILURE)
            yield {**failed, "traceback": TRACEBACK}, value, 1
            continue
        run = _run(trial_id, fold, attempt, FoldStatus.COMPLETED, began, ended, value=value)
        yield run, value, epochs


def _run(
    trial_id: int,
    fold: int,
    attempt: int,
    status: FoldStatus,
    began: datetime,
    ended: datetime | None = None,
    *,
    value: float | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    seconds = None if ended is None else (ended - began).total_seconds() * 0.9
    return {
        "trial_id": trial_id,
        "fold": fold,
        "attempt": attempt,
        "status": status,
        "value": value,
        "error": error,
        "traceback": None,
        "started_at": began,
        "finished_at": ended if status is not FoldStatus.LOST else began,
        "train_seconds": seconds,
    }


def _epochs(rng: random.Random, run_id: int, target: float, done: int) -> Iterator[dict[str, Any]]:
    """Per-epoch metrics whose validation loss decays towards the fold's value."""
    for epoch in range(1, done + 1):
        val_loss = target + (1.2 - target) * math.exp(-epoch / 4) + rng.gauss(0, 0.005)
        seconds = rng.uniform(1.0, 1.4)
        metrics = {
            "train_loss": val_loss * 0.9,
            "val_loss": val_loss,
            "val_accuracy": max(0.0, min(1.0, 1.0 - val_loss / 1.5)),
            "lr": 0.01,
            "epoch_seconds": seconds,
            "samples_per_second": 1437 / seconds,
        }
        yield {"fold_run_id": run_id, "epoch": epoch, "metrics": metrics}


def _objective(params: dict[str, Any]) -> float:
    """A smooth landscape with its optimum near lr = 0.01 and wide first layers."""
    lr_term = (math.log10(params["lr"]) + 2) ** 2 * 0.08
    width_term = 0.15 / math.log2(params["width_1"])
    act_term = {"relu": 0.0, "gelu": 0.01, "tanh": 0.04}[params["act"]]
    return 0.08 + lr_term + width_term + act_term + 0.1 * params["dropout"] ** 2
