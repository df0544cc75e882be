"""The task interface (DESIGN §6): what a user brings, and how foldwise finds it by name.

A task is any module, class or object with `load_data()` and `build_model(params)`; optional
`make_optimizer(model, params)`, `loss_fn(params)` and `kind` ("classification" or "regression").
`load_data` may take one required argument: the study's trainer options (a dict), and returns
`(X, y)` arrays or a map-style torch `Dataset` of `(x, y)` pairs (stacked into arrays once).
See docs/tasks.md.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

BUILTIN_TASKS: dict[str, str] = {
    "digits_mlp": "trainers.builtin.digits_mlp",
    "nas_mlp": "trainers.builtin.nas_mlp",
    "nas_cnn": "trainers.builtin.nas_cnn",
}
"""Built-in task names and the modules that implement them, imported only when resolved."""

KINDS = ("classification", "regression")


class TaskNotFound(ValueError):
    """The task name cannot be resolved to something with `load_data` and `build_model`."""


class Task:
    """A resolved task: the user's object behind one interface, with the defaults filled in."""

    def __init__(self, name: str, obj: Any) -> None:
        self.name = name
        self._obj = obj
        kind = getattr(obj, "kind", "classification")
        if not isinstance(kind, str) or kind not in KINDS:
            raise TaskNotFound(f"task {name!r}: kind must be one of {KINDS}, got {kind!r}")
        # our own string, never the task's object: a probe sends it to the service's process
        self.kind: str = KINDS[KINDS.index(kind)]

    def load_data(self, options: dict[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The whole training set as numpy arrays; foldwise makes the folds."""
        load: Callable[..., Any] = self._obj.load_data
        data = load(options or {}) if _takes_argument(load) else load()
        if isinstance(data, Dataset):
            return _stack_dataset(self.name, data)
        X, y = data
        return np.asarray(X), np.asarray(y)

    def build_model(self, params: dict[str, Any]) -> nn.Module:
        return self._obj.build_model(params)

    def make_optimizer(self, model: nn.Module, params: dict[str, Any]) -> torch.optim.Optimizer:
        """The task's optimizer, or Adam with `lr` and `weight_decay` from the params."""
        custom = getattr(self._obj, "make_optimizer", None)
        if custom is not None:
            return custom(model, params)
        lr = float(params.get("lr", 1e-3))
        weight_decay = float(params.get("weight_decay", 0.0))
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)

    def loss_fn(self, params: dict[str, Any]) -> nn.Module:
        """The task's loss (mean over the batch), or cross-entropy / MSE by kind."""
        custom = getattr(self._obj, "loss_fn", None)
        if custom is not None:
            return custom(params)
        return nn.CrossEntropyLoss() if self.kind == "classification" else nn.MSELoss()


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
    missing = [m for m in ("load_data", "build_model") if not callable(getattr(obj, m, None))]
    if missing:
        raise TaskNotFound(f"task {name!r} has no {' or '.join(missing)}")
    return Task(name, obj)


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


def _takes_argument(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in positional and p.default is inspect.Parameter.empty for p in params)


def _stack_dataset(name: str, data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """A map-style Dataset of (x, y) pairs as two arrays, so foldwise can make the folds."""
    try:
        pairs = [data[i] for i in range(len(data))]  # type: ignore[arg-type]
    except TypeError as err:
        raise TaskNotFound(f"task {name!r}: load_data's Dataset needs __len__ ({err})") from err
    if not pairs:
        raise ValueError(f"task {name!r}: load_data returned an empty Dataset")
    xs = [torch.as_tensor(x) for x, _ in pairs]
    ys = [torch.as_tensor(y) for _, y in pairs]
    return torch.stack(xs).numpy(), torch.stack(ys).numpy()
