"""Scoring saved models on a task's test data (``trainers.holdout``), a refit's fold context,
and ``load_model`` rebuilding a saved model from its file alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from foldwise.trainers import load_model
from foldwise.trainers.builtin import digits_mlp
from foldwise.trainers.holdout import score, score_saved_models
from foldwise.trainers.job import FoldJob
from foldwise.trainers.task import resolve_task
from tests.trainers.fold_jobs import epochs_of, make_job, run_local

OPTIONS = {"test_fraction": 0.25}
SEEN: dict[str, Any] = {}


def _fold_model(tmp_path: Path, fold: int, **job: Any) -> Path:
    fields: dict[str, Any] = {"params": {"lr": 0.05, "width": 32}, "epochs": 2}
    fields |= {"options": OPTIONS, "artifact_key": "k", "fold": fold, **job}
    run_local(make_job("digits_mlp", **fields), tmp_path / f"fold{fold}")
    return tmp_path / f"fold{fold}" / "model.pt"


def test_an_ensemble_scores_the_mean_of_its_models_probabilities(tmp_path: Path) -> None:
    paths = [_fold_model(tmp_path, fold) for fold in range(3)]
    scores = score_saved_models("digits_mlp", OPTIONS, [p.read_bytes() for p in paths])
    X, y = digits_mlp.load_test_data(OPTIONS)
    probabilities = []
    for path in paths:
        model = load_model(path)  # rebuilt from the file alone
        with torch.no_grad():
            probabilities.append(torch.softmax(model(torch.as_tensor(X)), 1).numpy())
    mean = np.mean(probabilities, axis=0)
    assert scores["ensemble"]["accuracy"] == pytest.approx(np.mean(mean.argmax(1) == y))
    nll = -np.mean(np.log(mean[np.arange(len(y)), y]))
    assert scores["ensemble"]["loss"] == pytest.approx(nll, rel=1e-5)
    assert [m["accuracy"] for m in scores["members"]] == [
        pytest.approx(np.mean(p.argmax(1) == y)) for p in probabilities
    ]
    assert set(scores["ensemble"]) == {"loss", "accuracy", "f1"}


def test_a_saved_model_records_what_rebuilds_it(tmp_path: Path) -> None:
    saved = torch.load(_fold_model(tmp_path, 1), weights_only=False)
    assert (
        saved["task"] == "digits_mlp" and saved["module"] == "foldwise.trainers.builtin.digits_mlp"
    )
    assert saved["params"] == {"lr": 0.05, "width": 32} and saved["fold"] == 1
    assert saved["trainer"]["options"] == OPTIONS and saved["trainer"]["epochs"] == 2
    assert saved["refit"] is False and "code_hash" in saved
    model = load_model(tmp_path / "fold1" / "model.pt")
    assert not model.training
    saved["module"] = "trainers.builtin.digits_mlp"  # a file saved before the packages moved
    torch.save(saved, tmp_path / "before.pt")
    load = "import sys, foldwise.trainers as t; print(type(t.load_model(sys.argv[1])).__name__)"
    done = subprocess.run(  # -P and cwd: only the installed foldwise is importable, no checkout
        [sys.executable, "-P", "-c", load, str(tmp_path / "before.pt")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == type(model).__name__, done.stderr[-2000:]
    with pytest.raises(ValueError, match="is not a foldwise model file"):
        torch.save({"weights": 1}, tmp_path / "other.pt")
        load_model(tmp_path / "other.pt")


class _Refit:
    """The digits with test data kept aside, and a fold function that notes its context as a
    refit sees it."""

    metrics = ["val_accuracy"]

    def load_data(self, options: dict) -> Any:
        return digits_mlp.load_data(options)

    def load_test_data(self, options: dict) -> Any:
        return digits_mlp.load_test_data(options)

    def train_fold(self, ctx: Any) -> None:
        SEEN.update(
            refit=ctx.refit, fold=ctx.fold, train=len(ctx.train_dataset), val=len(ctx.val_dataset)
        )
        ctx.report(0, val_accuracy=0.5)


def test_a_refit_trains_and_validates_on_all_the_training_data_never_the_test_data() -> None:
    job = make_job(
        f"{__name__}:_Refit", options=OPTIONS, epochs=1, objective={"metric": "val_accuracy"}
    )
    refit = FoldJob(**{**job.__dict__, "refit": True})
    assert epochs_of(run_local(refit))[0].metrics["val_accuracy"] == 0.5
    assert SEEN == {"refit": True, "fold": None, "train": 1347, "val": 1347}
    assert refit.fold_seed != job.fold_seed and refit.describe().endswith("refit")
    assert refit.fingerprint() != job.fingerprint()  # a fold's checkpoint never resumes it


class _RegressionTask:
    kind = "regression"

    def load_data(self) -> Any:
        return np.zeros((4, 1)), np.zeros(4)

    def build_model(self, params: dict) -> torch.nn.Module:
        return torch.nn.Linear(1, 1)

    def test_metrics(self, outputs: np.ndarray, targets: np.ndarray) -> dict:
        return {"max_error": float(np.abs(outputs.ravel() - targets).max())}


def test_regression_scores_and_a_tasks_own_test_metrics() -> None:
    task = resolve_task(f"{__name__}:_RegressionTask")
    outputs = np.array([[1.0], [2.0], [4.0]])
    got = score(task, outputs, np.array([1.0, 3.0, 3.0]))
    assert got["mse"] == pytest.approx(2 / 3) and got["mae"] == pytest.approx(2 / 3)
    assert got["r2"] == pytest.approx(0.25) and got["max_error"] == 1.0
