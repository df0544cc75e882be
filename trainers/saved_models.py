"""A model a study saved, rebuilt from its file alone (``load_model``).

A model file (``model.pt``) holds everything needed to rebuild it: the task and its module,
the hash of the task code the study ran, the trial's params, the trainer settings, the fold
(or the refit), the epoch and its metrics, and the weights. ``load_model`` imports the task
from where Python finds it here (the same code: compare ``code_hash`` with the study's) and
calls its ``build_model(params)`` (or ``build_module``) to load the weights into.
"""

from __future__ import annotations

import importlib
import inspect
import os
from typing import Any

import torch
from torch import nn


def load_model(path: str | os.PathLike[str], *, map_location: str = "cpu") -> nn.Module:
    """The model saved at ``path`` (a fold's or a refit's), rebuilt by its task with its
    weights loaded, in eval mode; ``torch.load(path, weights_only=False)`` reads what else
    the file says (params, epoch, metrics, code_hash, ...)."""
    saved = torch.load(path, map_location=map_location, weights_only=False)
    if not isinstance(saved, dict) or "state_dict" not in saved or "params" not in saved:
        raise ValueError(f"{path} is not a foldwise model file")
    task = _task_object(saved.get("module") or saved["task"])
    builder = getattr(task, "build_module", None) or getattr(task, "build_model", None)
    if not callable(builder):
        raise ValueError(
            f"task {saved['task']!r} has no build_model(params) to rebuild its saved model"
        )
    model = builder(saved["params"])
    model.load_state_dict(saved["state_dict"])
    return model.eval()


_BUILTIN_BEFORE = "trainers.builtin."
"""Where a built-in task's module was in model files saved before the server's packages were
installed inside foldwise (``foldwise.trainers.builtin``)."""


def _task_object(target: str) -> Any:
    """The task at ``package.module[:attr]`` (a class is instantiated, as the service does)."""
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError:
        if not module_name.startswith(_BUILTIN_BEFORE):
            raise
        obj = importlib.import_module(f"foldwise.{module_name}")
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj() if inspect.isclass(obj) else obj
