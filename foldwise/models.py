"""The models a study leaves: the fold models and refit models of a trial, downloaded
(``foldwise.trainers.load_model`` rebuilds one from its file, with torch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from foldwise.study import Study


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
