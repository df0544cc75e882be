"""Checks of a submitted spec that need the server side: the task must be one this service
permits and report the objective metric, the optimizer must accept its options, and one fold
must fit the cluster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError

from foldwise.spec import StudySpec
from optimizers.base import OptionError
from service.cluster_fit import NodeCapacity, fold_fit_problem
from service.study_optimizer import build_optimizer
from service.task_policy import task_choices, task_kind, task_name_problem


def check_runnable(
    spec: StudySpec,
    *,
    task_modules: Sequence[str] = (),
    describe: Callable[[str], str] | None = None,
    nodes: Sequence[NodeCapacity] = (),
) -> None:
    """Raise a 422 naming the field when the study could not run. ``task_modules``: packages
    whose modules may be tasks; ``describe``: a user task's kind, found in a worker (else in a
    subprocess); ``nodes``: the cluster's (empty: not known, so not checked). Blocking."""
    from trainers.fold_training import epoch_metric_names
    from trainers.task import TaskNotFound

    name = spec.trainer.task
    problem = task_name_problem(name, task_modules)
    if problem is not None:
        raise _invalid(("trainer", "task"), problem, name)
    try:
        kind = task_kind(name, describe)
    except TaskNotFound as exc:
        message = f"{exc}; {task_choices(task_modules)}"
        raise _invalid(("trainer", "task"), message, name) from exc
    resources, parallel = spec.resources, spec.parallel
    metrics = epoch_metric_names(kind, gpu=resources.gpus_per_worker > 0)
    if spec.objective.metric not in metrics:
        raise _invalid(
            ("objective", "metric"),
            f"task {name!r} ({kind}) reports {', '.join(metrics)}",
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
    except OptionError as exc:  # at the option itself, as a model's error would be
        value = spec.optimizer.options.get(exc.name)
        raise _invalid(("optimizer", "options", exc.name), str(exc), value) from exc
    except (ValueError, TypeError, OverflowError) as exc:
        raise _invalid(("optimizer", "options"), str(exc), spec.optimizer.options) from exc


def _invalid(loc: tuple[str, ...], message: str, value: Any) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "value_error", "loc": ("body", *loc), "msg": message, "input": value}]
    )
