"""``foldwise holdout``, ``refit`` and ``models`` and the SDK calls behind them, against a
scripted HTTP server: what they send, what they print, how they fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from foldwise import cli
from foldwise.client import Client
from foldwise.errors import FoldwiseError
from tests.foldwise.conftest import best_answers

runner = CliRunner()

HOLDOUT = {
    "status": "completed",
    "trial": 2,
    "score": "both",
    "requested_at": "2025-01-01T10:05:00Z",
    "finished_at": "2025-01-01T10:06:00Z",
    "ensemble": {"loss": 0.1234, "accuracy": 0.96},
    "refit": {"loss": 0.1111, "accuracy": 0.97},
    "refit_number": 1,
    "objective": {
        "metric": "val_loss",
        "test_metric": "loss",
        "cv": 0.0987,
        "cv_std_error": 0.004,
        "ensemble": 0.1234,
        "refit": 0.1111,
    },
    "error": None,
}


def refit_json(status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "number": 1,
        "trial": 2,
        "status": status,
        "epochs": 6,
        "attempt": 0,
        "requested_at": "2025-01-01T10:05:00Z",
        "curve": [],
        "test_metrics": {"loss": 0.1111, "accuracy": 0.97} if status == "completed" else None,
        "model_saved": status == "completed",
        **extra,
    }


def test_holdout_asks_waits_and_shows_the_score_beside_the_cv_value(stub, make_study) -> None:
    polls = []

    def handle(request):
        if request.method == "POST":
            return 202, make_study(status="completed", holdout={**HOLDOUT, "status": "queued"})
        polls.append(1)
        status = "running" if len(polls) < 3 else "completed"
        return 200, make_study(status="completed", holdout={**HOLDOUT, "status": status})

    stub.handle = handle
    args = ["holdout", "7", "--score", "both", "--trial", "2", "--epochs", "6"]
    result = runner.invoke(cli.app, [*args, "--interval", "0.1", "--url", stub.url])
    assert result.exit_code == 0, result.output
    post = stub.requests[1]
    assert (post.method, post.path) == ("POST", "/studies/7/holdout")
    assert post.body == {"score": "both", "trial": 2, "epochs": 6}
    assert len(polls) >= 3
    assert result.stdout.strip() == (
        "hold-out (trial 2): ensemble loss 0.1234, accuracy 0.96; refit loss 0.1111, "
        "accuracy 0.97; CV val_loss 0.0987 ± 0.004"
    )


def test_a_failed_score_is_one_line_and_a_bad_score_a_usage_error(stub, make_study) -> None:
    failed = {**HOLDOUT, "status": "failed", "error": "refit 1 failed: out of memory"}
    stub.handle = lambda request: (202 if request.method == "POST" else 200,
                                   make_study(status="stopped", holdout=failed))  # fmt: skip
    result = runner.invoke(cli.app, ["holdout", "7", "--url", stub.url])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: study 7's hold-out score failed: refit 1 failed: out of memory"
    )
    result = runner.invoke(cli.app, ["holdout", "7", "--score", "all", "--url", stub.url])
    assert result.exit_code == 2 and "use one of ensemble, refit, both" in result.output


def test_status_and_best_show_the_hold_out_score(stub, make_study) -> None:
    stub.handle = best_answers(make_study(status="completed", holdout=HOLDOUT))
    status = runner.invoke(cli.app, ["status", "7", "--url", stub.url])
    assert status.exit_code == 0, status.output
    assert "hold-out   trial 2: ensemble loss 0.1234" in status.stdout
    assert "folds      by the task's kind" in status.stdout  # the stored spec left it open
    best = runner.invoke(cli.app, ["best", "7", "--url", stub.url])
    assert best.exit_code == 0 and "hold-out (trial 2): ensemble loss 0.1234" in best.stdout


def test_refit_waits_for_its_end_and_says_where_its_model_is(stub, make_study) -> None:
    reads = []

    def handle(request):
        if request.path == "/studies/7":
            return 200, make_study(status="completed")
        if request.method == "POST":
            return 202, refit_json("queued")
        reads.append(1)
        return 200, refit_json("running" if len(reads) < 2 else "completed")

    stub.handle = handle
    result = runner.invoke(
        cli.app, ["refit", "7", "2", "--epochs", "6", "--interval", "0.1", "--url", stub.url]
    )
    assert result.exit_code == 0, result.output
    post = next(r for r in stub.requests if r.method == "POST")
    assert (post.path, post.body) == ("/studies/7/refits", {"trial": 2, "epochs": 6})
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "refit 1 of study 7 (trial 2, 6 epochs) is completed"
    assert lines[1] == "test: loss 0.1111, accuracy 0.97"
    assert lines[2].endswith("models 7 2")


def test_models_writes_every_fold_and_refit_model_whole(stub, make_study, tmp_path) -> None:
    def handle(request):
        path = request.path
        if path == "/studies/7":
            return 200, make_study(status="completed")
        if path == "/studies/7/trials/2":
            folds = [
                {"fold": k, "attempt": 0, "status": "completed", "model_saved": True}
                for k in range(2)
            ]
            return 200, {**make_study()["best_trial"], "folds": folds}
        if path == "/studies/7/refits":
            other = refit_json(number=2, trial=5)
            return 200, {"data": [refit_json(), other], "count": 2}
        if path.endswith("/model"):
            return 200, path.encode()
        return 404, {"detail": "Not Found"}

    stub.handle = handle
    result = runner.invoke(cli.app, ["models", "7", "2", "-o", str(tmp_path), "--url", stub.url])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "study7-trial2-fold0-model.pt",
        "study7-trial2-fold1-model.pt",
        "study7-trial2-refit1-model.pt",  # trial 5's refit is not trial 2's
    ]
    refit = (tmp_path / "study7-trial2-refit1-model.pt").read_bytes()
    assert refit == b"/studies/7/refits/1/model"
    assert result.stdout.split() == [str(tmp_path / name) for name in names]


def test_a_download_that_fails_leaves_no_file(stub, tmp_path: Path) -> None:
    stub.handle = lambda request: (404, {"detail": "no saved model"})
    with Client(stub.url) as client, pytest.raises(FoldwiseError, match="refit 1 has none"):
        client.download("/studies/7/refits/1/model", tmp_path / "m.pt", missing="refit 1 has none")
    assert list(tmp_path.iterdir()) == []


def test_a_refit_that_failed_raises_with_its_error(stub, make_study) -> None:
    stub.handle = lambda request: (
        202 if request.method == "POST" else 200,
        refit_json("failed", error="ValueError: bad params")
        if "refits" in request.path
        else make_study(status="completed"),
    )
    with Client(stub.url) as client:
        study = client.get_study(7)
        with pytest.raises(FoldwiseError, match="refit 1 of study 7 failed: ValueError: bad"):
            study.refit(poll=0.1)
