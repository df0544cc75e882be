"""Checks of a submitted spec that need the server side: the task must be found and report the
objective metric, the optimizer must accept its options, and one fold must fit the cluster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError

from foldwise.spec import StudySpec
from service.cluster_fit import NodeCapacity, fold_fit_problem
from service.study_optimizer import build_optimizer


def check_runnable(spec: StudySpec, nodes: Sequence[NodeCapacity] = ()) -> None:
    """Raise a 422 naming the field when the study could not run; ``nodes`` are the cluster's
    (empty: not known, so not checked). Blocking: imports the task and builds the optimizer."""
    from trainers.fold_training import epoch_metric_names
    from trainers.task import TaskNotFound, resolve_task

    try:
        task = resolve_task(spec.trainer.task)
    except TaskNotFound as exc:
        raise _invalid(("trainer", "task"), str(exc), spec.trainer.task) from exc
    resources, parallel = spec.resources, spec.parallel
    metrics = epoch_metric_names(task.kind, gpu=resources.gpus_per_worker > 0)
    if spec.objective.metric not in metrics:
        raise _invalid(
            ("objective", "metric"),
            f"task {spec.trainer.task!r} ({task.kind}) reports {', '.join(metrics)}",
            spec.objective.metric,
        )
    problem = fold_fit_problem(
        nodes,
        workers=parallel.workers_per_fold,
        cpus=resources.cpus_per_worker,
        gpus=resources.gpus_per_worker,
    )
    if problem is not None:
        raise _invalid(problem.loc, problem.message, None)
    try:
        build_optimizer(spec)
    except (ValueError, TypeError, OverflowError) as exc:
        raise _invalid(("optimizer", "options"), str(exc), spec.optimizer.options) from exc


def _invalid(loc: tuple[str, ...], message: str, value: Any) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": ("body", *loc), "msg": message, "input": value}]
    )
