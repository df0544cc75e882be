"""The models a study leaves: the fold models and refit models of a trial, downloaded, and one
rebuilt from its file (``load_model``).

A model file (``model.pt``) holds everything needed to rebuild it: the task and its module,
the hash of the task code the study ran, the trial's params, the trainer settings, the fold
(or the refit), the epoch and its metrics, and the weights. ``load_model`` imports the task
from where Python finds it here (the same code: compare ``code_hash`` with the study's) and
calls its ``build_model(params)`` (or ``build_module``) to load the weights into. Needs torch.
"""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from foldwise.study import Study


def load_model(path: str | os.PathLike[str], *, map_location: str = "cpu") -> nn.Module:
    """The model saved at ``path`` (a fold's or a refit's), rebuilt by its task with its
    weights loaded, in eval mode; ``torch.load(path, weights_only=False)`` reads what else
    the file says (params, epoch, metrics, code_hash, ...)."""
    try:
        import torch
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "foldwise.load_model needs torch: pip install 'foldwise[server]'"
        ) from exc
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


def download_trial_models(
    study: Study, trial: int, directory: str | os.PathLike[str], *, refits: bool = True
) -> list[Path]:
    """Trial ``trial``'s fold models (and, with ``refits``, its refits' models) written to
    ``directory`` as ``study{id}-trial{n}-fold{k}-model.pt`` (``-refit{r}-``): the files."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    client, base = study.client, f"/studies/{study.id}"
    paths = []
    folds = sorted({f.fold for f in study.trial(trial).folds if f.model_saved})
    for fold in folds:
        name = f"study{study.id}-trial{trial}-fold{fold}-model.pt"
        missing = f"fold {fold} of trial {trial} of study {study.id} has no model"
        path = f"{base}/trials/{trial}/folds/{fold}/model"
        paths.append(client.download(path, folder / name, missing=missing))
    if refits:
        for refit in client.fetch_refits(study.id):
            if refit.trial != trial or not refit.model_saved:
                continue
            name = f"study{study.id}-trial{trial}-refit{refit.number}-model.pt"
            missing = f"refit {refit.number} of study {study.id} has no model"
            path = f"{base}/refits/{refit.number}/model"
            paths.append(client.download(path, folder / name, missing=missing))
    return paths


def _task_object(target: str) -> Any:
    """The task at ``package.module[:attr]`` (a class is instantiated, as the service does)."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj() if inspect.isclass(obj) else obj
