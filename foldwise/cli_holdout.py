"""``foldwise holdout``, ``refit`` and ``models``: what comes after a study's trials, and how a
study's score on the task's test data reads in ``status`` and ``best``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from foldwise.cli_options import PollInterval, StudyId, UrlOption, client_for
from foldwise.cli_output import console, fail
from foldwise.cli_render import holdout_view, metrics_text
from foldwise.errors import FoldwiseError

SCORES = ("ensemble", "refit", "both")


def holdout(
    ctx: typer.Context,
    study_id: StudyId,
    score: Annotated[
        str | None,
        typer.Option(
            help="ensemble (the fold models' mean prediction), refit (a model trained on all "
            "the training data) or both [default: the spec's holdout.score, else ensemble]",
            show_default=False,
        ),
    ] = None,
    trial: Annotated[
        int | None,
        typer.Option(min=0, help="The completed trial to score [default: the best]"),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(min=1, help="Epochs of the refit [default: its folds' median best epoch]"),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait for the score and show it")
    ] = True,
    interval: PollInterval = 2.0,
    url: UrlOption = None,
) -> None:
    """Score an ended study's best trial on the task's test data, beside its CV value."""
    if score is not None and score not in SCORES:
        raise typer.BadParameter(f"use one of {', '.join(SCORES)}", param_hint="--score")
    with client_for(ctx, url) as client:
        study = client.get_study(study_id)
        if not wait:
            study.holdout(score=score, trial=trial, epochs=epochs, wait=False)
            console.print(f"asked for study {study_id}'s hold-out score")
            return
        result = study.holdout(score=score, trial=trial, epochs=epochs, poll=interval)
    console.print(holdout_view(result), soft_wrap=True)


def refit(
    ctx: typer.Context,
    study_id: StudyId,
    trial: Annotated[
        int | None,
        typer.Argument(help="The completed trial [default: the best]", show_default=False),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(min=1, help="Epochs [default: the trial's folds' median best epoch]"),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until it ends")] = True,
    interval: PollInterval = 2.0,
    url: UrlOption = None,
) -> None:
    """Train an ended study's trial on all its training data, as its folds trained."""
    with client_for(ctx, url) as client:
        done = client.get_study(study_id).refit(
            trial=trial, epochs=epochs, wait=wait, poll=interval
        )
    state = done.status.value
    console.print(
        f"refit {done.number} of study {study_id} (trial {done.trial}, {done.epochs} epochs) "
        f"is {state}"
    )
    if done.test_metrics:
        console.print(f"test: {metrics_text(done.test_metrics)}", soft_wrap=True)
    if done.model_saved:
        console.print(f"its model: {escape(program_hint(ctx))} models {study_id} {done.trial}")


def models(
    ctx: typer.Context,
    study_id: StudyId,
    trial: Annotated[
        int | None,
        typer.Argument(help="The trial [default: the best]", show_default=False),
    ] = None,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", file_okay=False, help="Directory to write them to"),
    ] = Path("."),
    url: UrlOption = None,
) -> None:
    """Download a trial's fold models and its refits' models (foldwise.trainers.load_model
    rebuilds one)."""
    with client_for(ctx, url) as client:
        try:
            paths = client.get_study(study_id).download_models(output, trial=trial)
        except OSError as exc:
            fail(f"cannot write to {output}: {exc.strerror or exc}")
    if not paths:
        raise FoldwiseError(f"study {study_id}'s trial kept no model")
    for path in paths:
        console.print(escape(str(path)), soft_wrap=True)


def program_hint(ctx: typer.Context) -> str:
    return ctx.find_root().info_name or "foldwise"
