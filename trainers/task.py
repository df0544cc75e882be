"""The task interface (DESIGN §6): what a user brings, and how foldwise finds it by name.

A task is any module, class or object with ``load_data`` (the whole training set) and one way
to train a fold:

- ``train_fold(ctx)``: the user's own loop, run on every rank (``trainers.context``);
- ``build_model(params)``: the built-in loop trains it (``trainers.builtin_loop``), with the
  optional hooks ``make_optimizer``, ``make_scheduler``, ``loss_fn`` and ``collate_fn``;
- ``build_module(params)``: a LightningModule, run by a Lightning Trainer
  (``trainers.lightning_loop``).

Tasks with their own loop or a Lightning module declare the metrics they report
(``metrics = ["val_f1", ...]``) so a study's objective can be checked at submit. See
docs/tasks.md.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from foldwise.trainers.report import (
    GPU_METRICS,
    MEASURED_METRICS,
    MODEL_METRICS,
    RESERVED_METRICS,
)

BUILTIN_TASKS: dict[str, str] = {
    "digits_mlp": "foldwise.trainers.builtin.digits_mlp",
    "nas_mlp": "foldwise.trainers.builtin.nas_mlp",
    "nas_cnn": "foldwise.trainers.builtin.nas_cnn",
}
"""Built-in task names and the modules that implement them, imported only when resolved."""

KINDS = ("classification", "regression")


class Loop(StrEnum):
    """How a task's folds are trained."""

    OWN = "own"
    """The task's ``train_fold(ctx)``."""
    BUILTIN = "builtin"
    """foldwise's loop around the task's ``build_model``."""
    LIGHTNING = "lightning"
    """A Lightning Trainer around the task's ``build_module``."""


LOOP_ENTRY = {Loop.OWN: "train_fold", Loop.BUILTIN: "build_model", Loop.LIGHTNING: "build_module"}
BUILTIN_LOOP_METRICS = (
    "train_loss",
    "val_loss",
    "lr",
    "train_seconds",
    "val_seconds",
    "samples_per_second",
)
"""What the built-in loop reports every epoch, besides ``val_accuracy`` or ``val_mse``."""


class TaskNotFound(ValueError):
    """The task name cannot be resolved to a task foldwise can run."""


@dataclass(frozen=True)
class TaskProfile:
    """What the service needs to know of a task without running its code: its kind, how it
    trains, the metrics it declares and which optional parts it has. Travels as JSON of plain
    strings and booleans."""

    kind: str
    loop: Loop
    declared_metrics: tuple[str, ...]
    own_loaders: bool = False
    """The task builds its DataLoaders itself (``train_fold``, or a Lightning task's
    ``build_datamodule``), so foldwise's loader settings do not reach them."""
    test_data: bool = False
    """The task gives test data (``load_test_data``) for a hold-out score."""
    rebuilds_models: bool = False
    """A saved model of the task can be rebuilt (``build_model`` or ``build_module``), to
    predict with it: what a hold-out score needs."""
    option_problems: tuple[tuple[str, str], ...] = ()
    """What the task's ``check_options(options)`` found wrong with the study's
    ``trainer.options``: (option, why) pairs, refused at submit."""

    FLAGS = ("own_loaders", "test_data", "rebuilds_models")

    def metrics(self, *, gpu: bool = False) -> list[str]:
        """Every metric an epoch reports: the declared ones and what foldwise measures."""
        measured = [*MEASURED_METRICS, *MODEL_METRICS, *(GPU_METRICS if gpu else ())]
        return [*self.declared_metrics, *measured]

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": self.kind,
                "loop": self.loop.value,
                "metrics": list(self.declared_metrics),
                **{flag: getattr(self, flag) for flag in self.FLAGS},
                "option_problems": [list(pair) for pair in self.option_problems],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> TaskProfile:
        """The profile a worker sent (or the service stored), checked to be made of our own
        values only."""
        data = json.loads(text)
        kind, loop, metrics = data["kind"], Loop(data["loop"]), data["metrics"]
        flags = {flag: data.get(flag, False) for flag in cls.FLAGS}
        problems = data.get("option_problems", [])
        if (
            kind not in KINDS
            or not all(isinstance(m, str) and m.isidentifier() for m in metrics)
            or not all(isinstance(value, bool) for value in flags.values())
            or not isinstance(problems, list)
            or not all(_text_pair(pair) for pair in problems)
        ):
            raise ValueError(f"not a task profile: {text[:200]}")
        return cls(
            KINDS[KINDS.index(kind)],
            loop,
            tuple(str(m) for m in metrics),
            **flags,
            option_problems=tuple((str(a), str(b)) for a, b in problems),
        )


class Task:
    """A resolved task: the user's object behind one interface, with the defaults filled in."""

    def __init__(self, name: str, obj: Any) -> None:
        self.name = name
        self.obj = obj
        kind = getattr(obj, "kind", "classification")
        if not isinstance(kind, str) or kind not in KINDS:
            raise TaskNotFound(f"task {name!r}: kind must be one of {KINDS}, got {kind!r}")
        # our own strings, never the task's objects: a probe sends them to the service
        self.kind: str = KINDS[KINDS.index(kind)]
        self.loop = _loop_of(name, obj)
        self.declared_metrics = _declared_metrics(name, obj, self.loop)
        self.own_loaders = self.loop is Loop.OWN or (
            self.loop is Loop.LIGHTNING and self.hook("build_datamodule") is not None
        )

    def profile(self, options: dict[str, Any] | None = None) -> TaskProfile:
        """The task's kind, loop and declared metrics (the built-in loop's for a model), and
        what it gives: test data when it has ``load_test_data`` and, if it says so with
        ``has_test_data(options)``, for these ``trainer.options``."""
        return TaskProfile(
            self.kind,
            self.loop,
            tuple(self.declared_metrics),
            own_loaders=self.own_loaders,
            test_data=self.gives_test_data(options or {}),
            rebuilds_models=self.model_builder() is not None,
            option_problems=self.option_problems(options or {}),
        )

    def option_problems(self, options: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        """What the task's optional ``check_options(options)`` (a mapping of option name to
        why it cannot be used) finds wrong with ``trainer.options``, as plain strings."""
        check = self.hook("check_options")
        if check is None:
            return ()
        found = check(options) or {}
        if not isinstance(found, dict):
            raise TaskNotFound(
                f"task {self.name!r}: check_options must return a dict of option name to "
                f"problem, got {type(found).__name__}"
            )
        return tuple((str(name), str(why)) for name, why in found.items())

    def gives_test_data(self, options: dict[str, Any]) -> bool:
        if self.hook("load_test_data") is None:
            return False
        says = self.hook("has_test_data")
        return True if says is None else bool(says(options))

    def model_builder(self) -> Callable[[dict[str, Any]], Any] | None:
        """What rebuilds a saved model of this task from its params: ``build_model`` (the
        built-in loop's, or an own loop's given beside ``train_fold``) or ``build_module``."""
        return self.hook("build_module" if self.loop is Loop.LIGHTNING else "build_model")

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The task's optional function ``name``, or None."""
        found = getattr(self.obj, name, None)
        return found if callable(found) else None


def resolve_task(name: str) -> Task:
    """Find a task by built-in name, "package.module" or "package.module:attr", loading no data."""
    target = BUILTIN_TASKS.get(name, name)
    module_name, _, attr = target.partition(":")
    if not module_name or any(not part.isidentifier() for part in module_name.split(".")):
        raise TaskNotFound(f"task {name!r} is neither a built-in task nor 'package.module:attr'")
    obj = _import(name, module_name)
    if attr:
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise TaskNotFound(f"task {name!r}: module {module_name!r} has no {attr!r}")
            obj = getattr(obj, part)
    obj = _instantiate(name, obj)
    if not callable(getattr(obj, "load_data", None)):
        raise TaskNotFound(f"task {name!r} has no load_data (it gives the training set)")
    return Task(name, obj)


def call_hook(func: Callable[..., Any], *args: Any, ctx: Any) -> Any:
    """``func(*args)``, or ``func(*args, ctx)`` when it takes one more positional argument:
    hooks may ask for the fold's context (its training labels, say)."""
    return func(*args, ctx) if _positional_count(func) > len(args) else func(*args)


def takes_argument(func: Callable[..., Any]) -> bool:
    """Whether ``func`` needs a positional argument (``load_data(options)``)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in positional and p.default is inspect.Parameter.empty for p in params)


def _loop_of(name: str, obj: Any) -> Loop:
    """How the task trains: its own ``train_fold`` (a ``build_model`` beside it only rebuilds
    saved models), else foldwise's loop around ``build_model``, else Lightning's around
    ``build_module``."""
    if callable(getattr(obj, "train_fold", None)):
        if callable(getattr(obj, "build_module", None)):
            raise TaskNotFound(
                f"task {name!r} has both train_fold and build_module: give one way to train a fold"
            )
        return Loop.OWN
    found = [loop for loop, entry in LOOP_ENTRY.items() if callable(getattr(obj, entry, None))]
    if not found:
        raise TaskNotFound(
            f"task {name!r} has no train_fold(ctx), build_model(params) or build_module(params)"
        )
    if len(found) > 1:
        names = " and ".join(LOOP_ENTRY[loop] for loop in found)
        raise TaskNotFound(f"task {name!r} has both {names}: give one way to train a fold")
    return found[0]


def _declared_metrics(name: str, obj: Any, loop: Loop) -> list[str]:
    if loop is Loop.BUILTIN:
        score = (
            "val_accuracy" if getattr(obj, "kind", "classification") != "regression" else "val_mse"
        )
        return [*BUILTIN_LOOP_METRICS[:2], score, *BUILTIN_LOOP_METRICS[2:]]
    declared = getattr(obj, "metrics", None)
    if not isinstance(declared, list | tuple) or not declared:
        raise TaskNotFound(
            f"task {name!r} trains with its own {LOOP_ENTRY[loop]}: declare the metrics it "
            "reports, e.g. metrics = ['val_loss', 'val_f1']"
        )
    metrics = []
    for metric in declared:
        if not isinstance(metric, str) or not metric.isidentifier():
            raise TaskNotFound(f"task {name!r}: metrics holds {metric!r}, not a metric name")
        if metric in RESERVED_METRICS:
            raise TaskNotFound(f"task {name!r}: foldwise measures {metric!r} itself")
        metrics.append(str(metric))
    return list(dict.fromkeys(metrics))


def _text_pair(pair: Any) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)


def _positional_count(func: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return 0
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return 1_000
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in positional)


def _import(name: str, module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise TaskNotFound(f"task {name!r}: cannot import {module_name!r} ({err})") from err
    except Exception as err:  # the user's module raised while importing
        raise TaskNotFound(
            f"task {name!r}: importing {module_name!r} failed: {type(err).__name__}: {err}"
        ) from err


def _instantiate(name: str, obj: Any) -> Any:
    """A class is instantiated with no arguments so plain methods work as the task's functions."""
    if not inspect.isclass(obj):
        return obj
    try:
        return obj()
    except Exception as err:
        raise TaskNotFound(f"task {name!r}: cannot instantiate {obj.__name__}() ({err})") from err
