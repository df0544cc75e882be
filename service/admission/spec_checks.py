"""Checks of a submitted spec that need the server side: the task must be one this service
permits, small enough to ship, and report the objective metric, the optimizer must accept its
options, and one fold must fit the cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from foldwise.cv import LABELLED_SCHEMES, default_scheme
from foldwise.optimizers.base import OptionError
from foldwise.service.admission.cluster_fit import NodeCapacity, fold_fit_problem
from foldwise.service.admission.task_policy import (
    Describe,
    task_choices,
    task_name_problem,
    task_profile,
)
from foldwise.service.hardening.errors import invalid_field
from foldwise.service.study_optimizer import build_optimizer
from foldwise.service.task_code import CodeCache, CodeSnapshot, TaskCodeError, snapshot_task
from foldwise.spec import StudySpec, TrainerSpec
from foldwise.trainers.lr_schedule import default_settings
from foldwise.trainers.report import MODEL_METRICS
from foldwise.trainers.task import Loop, TaskNotFound, TaskProfile


@dataclass(frozen=True)
class Runnable:
    """What a study that can run needs kept: the snapshot of its task's package (None for a
    built-in task, or without a code cache) and the task's profile."""

    snapshot: CodeSnapshot | None
    profile: TaskProfile


def check_runnable(
    spec: StudySpec,
    *,
    task_modules: Sequence[str] = (),
    describe: Describe | None = None,
    nodes: Sequence[NodeCapacity] = (),
    code_cache: CodeCache | None = None,
) -> Runnable:
    """Raise a 422 naming the field when the study could not run. ``task_modules``: packages
    whose modules may be tasks; ``describe``: a user task's profile, found in a worker (else
    in a subprocess); ``nodes``: the cluster's (empty: not known, so not checked). With a
    ``code_cache``, a user task's package is copied as it is now (``service.task_code``), and
    that copy is what is checked and kept, for the study to run. A ``cv.scheme`` left open is
    filled in from the task's kind. Blocking."""
    name = spec.trainer.task
    problem = task_name_problem(name, task_modules)
    if problem is not None:
        raise invalid_field(("trainer", "task"), problem, name)
    snapshot = code = None
    if code_cache is not None:
        try:
            snapshot = snapshot_task(name, [os.getcwd()])
            code = None if snapshot is None else code_cache.unpack(snapshot)
        except (TaskCodeError, OSError) as exc:
            raise invalid_field(("trainer", "task"), str(exc), name) from exc
    try:
        profile = task_profile(name, describe, code, spec.trainer.options)
    except TaskNotFound as exc:
        message = f"{exc}; {task_choices(task_modules)}"
        raise invalid_field(("trainer", "task"), message, name) from exc
    for option, why in profile.option_problems:
        value = spec.trainer.options.get(option)
        raise invalid_field(("trainer", "options", option), why, value)
    reports = f"task {name!r} ({profile.kind}) reports {', '.join(profile.declared_metrics)}"
    several = spec.objectives is not None
    for i, objective in enumerate(spec.all_objectives):
        metric = objective.metric
        if metric not in (*profile.declared_metrics, *MODEL_METRICS):
            message = reports
            if metric in profile.metrics(gpu=True):
                message += f"; {metric} is what foldwise measures of an epoch, not an objective"
            loc = ("objectives", i, "metric") if several else ("objective", "metric")
            raise invalid_field(loc, message, metric)
    resources, parallel = spec.resources, spec.parallel
    known = profile.metrics(gpu=resources.gpus_per_worker > 0)
    for i, constraint in enumerate(spec.constraints):
        if constraint.metric not in known:
            measured = ", ".join(m for m in known if m not in profile.declared_metrics)
            message = f"{reports}; foldwise measures {measured}"
            raise invalid_field(("constraints", i, "metric"), message, constraint.metric)
    for setting, message in unused_trainer_settings(spec.trainer, profile, name):
        raise invalid_field(("trainer", setting), message, getattr(spec.trainer, setting))
    resolve_cv(spec, profile)
    resolve_learning_rate(spec, profile)
    check_splits_and_holdout(spec, profile, name)
    problem = fold_fit_problem(
        nodes,
        workers=parallel.workers_per_fold,
        cpus=resources.cpus_per_worker,
        gpus=resources.gpus_per_worker,
    )
    if problem is not None:
        raise invalid_field(problem.loc, problem.message, None)
    try:
        build_optimizer(spec)
    except OptionError as exc:  # at the option itself, as a model's error would be
        value = spec.optimizer.options.get(exc.name)
        raise invalid_field(("optimizer", "options", exc.name), str(exc), value) from exc
    except (ValueError, TypeError, OverflowError) as exc:
        raise invalid_field(("optimizer", "options"), str(exc), spec.optimizer.options) from exc
    return Runnable(snapshot, profile)


def resolve_cv(spec: StudySpec, profile: TaskProfile) -> None:
    """Fill in a ``cv.scheme`` the spec left open: the task kind's default, so the stored spec
    says how its folds are made."""
    if spec.cv.scheme is None:
        spec.cv.scheme = default_scheme(profile.kind)


def resolve_learning_rate(spec: StudySpec, profile: TaskProfile) -> None:
    """Fill in the ``trainer.lr_scaling`` and ``warmup_epochs`` a spec left open: its loop's
    defaults (an own ``train_fold`` trains at the rates it wrote; foldwise's loops scale
    linearly with a warm-up), so the stored spec says what every fold applies."""
    scaling, warmup = default_settings(own_loop=profile.loop is Loop.OWN)
    if spec.trainer.lr_scaling is None:
        spec.trainer.lr_scaling = scaling  # type: ignore[assignment]
    if spec.trainer.warmup_epochs is None:
        spec.trainer.warmup_epochs = warmup


def check_splits_and_holdout(spec: StudySpec, profile: TaskProfile, name: str) -> None:
    """The split fits the task's kind, and a hold-out score has the test data and the model
    builder it needs. What only the data can tell (too few groups, a class smaller than the
    folds) ends the study at its first fold instead."""
    scheme = spec.cv.scheme
    if scheme in LABELLED_SCHEMES and profile.kind != "classification":
        message = (
            f"{scheme} keeps each class's share in every fold; task {name!r} is a "
            f"{profile.kind} task: use kfold or group"
        )
        raise invalid_field(("cv", "scheme"), message, scheme.value)
    if spec.holdout is None:
        return
    if not profile.test_data:
        message = (
            f"task {name!r} gives no test data with these trainer.options: add "
            "load_test_data(options)"
        )
        raise invalid_field(("holdout",), message, spec.holdout.score)
    if not profile.rebuilds_models:
        message = (
            f"task {name!r} trains with its own train_fold, and a hold-out score rebuilds its "
            "saved models to predict the test data: add build_model(params), the model your "
            "loop trains (ctx.save_model saves its weights)"
        )
        raise invalid_field(("holdout", "score"), message, spec.holdout.score)


LOOP_SETTINGS = ("precision", "clip_grad_norm", "num_workers", "val_batch_size")
"""Trainer settings foldwise applies in its own loops (built-in, Lightning), not in a task's
own ``train_fold``: there they would be silently ignored."""
LOADER_SETTINGS = ("num_workers", "val_batch_size")
"""Trainer settings of the DataLoaders foldwise builds: a task that builds its own (a Lightning
``build_datamodule``) would ignore them."""


def unused_trainer_settings(
    trainer: TrainerSpec, profile: TaskProfile, name: str
) -> list[tuple[str, str]]:
    """The settings a spec gives explicitly that the task's loop would not use, each with the
    words that say so."""
    if profile.loop is Loop.OWN:
        unused, builder = LOOP_SETTINGS, "its own train_fold"
        instead = "(it sets the built-in loop and Lightning): read your own setting from "
        instead += "trainer.options instead"
    elif profile.own_loaders:
        unused, builder = LOADER_SETTINGS, "the DataLoaders of its build_datamodule"
        instead = "(it sets the DataLoaders foldwise builds): read ctx.trainer there instead"
    else:
        return []
    defaults = TrainerSpec.model_fields
    return [
        (
            setting,
            f"task {name!r} trains with {builder}, which trainer.{setting} does not "
            f"reach {instead}",
        )
        for setting in unused
        if setting in trainer.model_fields_set
        and getattr(trainer, setting) != defaults[setting].default
    ]
