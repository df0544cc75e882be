"""``foldwise task check NAME``: one fold of a task trained here, without a service or Ray.

The work is in ``task_check`` (it needs torch, from the server extras), imported only
when the command runs, so ``foldwise --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from foldwise.cli_output import console, fail
from foldwise.limits import DEFAULT_CHECK_TIMEOUT_S, MAX_FOLD_TIMEOUT_S
from foldwise.spec import Direction

if TYPE_CHECKING:
    from foldwise.trainers.report import EpochReport
    from foldwise.trainers.task_check import CheckSummary, TaskCheck

task_app = typer.Typer(help="Try a task here before a study runs it.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``foldwise task`` to the ``foldwise`` CLI (entry point ``foldwise.cli``)."""
    app.add_typer(task_app, name="task")


class Precision(StrEnum):
    FULL = "32"
    BF16 = "bf16"
    FP16 = "fp16"


class Device(StrEnum):
    CPU = "cpu"
    CUDA = "cuda"


LOOPS = {
    "own": "its own train_fold",
    "builtin": "the built-in loop around build_model",
    "lightning": "Lightning, with build_module",
}


@task_app.command("check")
def check(
    name: Annotated[
        str,
        typer.Argument(
            help='Built-in task name or "package.module[:attr]", imported from the current '
            "directory",
            show_default=False,
        ),
    ],
    params: Annotated[
        str | None,
        typer.Option(metavar="JSON", help="The trial's params, a JSON object: '{\"lr\": 0.01}'"),
    ] = None,
    options: Annotated[
        str | None,
        typer.Option(metavar="JSON", help="trainer.options, a JSON object passed to the task"),
    ] = None,
    epochs: Annotated[int, typer.Option(min=1, max=100_000, help="Epochs to train")] = 3,
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Batch per rank (default: the params' batch_size, else 64)"),
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Ranks of the fold (2 or more: spawned processes)")
    ] = 1,
    fold: Annotated[int, typer.Option(min=0, help="Which fold to train, from 0")] = 0,
    folds: Annotated[int, typer.Option(min=2, max=100, help="K: how many folds the data has")] = 3,
    metric: Annotated[
        str | None,
        typer.Option(
            help="Objective (default: val_loss for the built-in loop, else the first declared)"
        ),
    ] = None,
    direction: Annotated[Direction, typer.Option(help="Objective's direction")] = (
        Direction.MINIMIZE
    ),
    precision: Annotated[
        Precision | None,
        typer.Option(
            help="trainer.precision of the built-in loop and Lightning (default: 32)",
            show_default=False,
        ),
    ] = None,
    device: Annotated[Device, typer.Option(help="cuda: one GPU a rank, NCCL")] = Device.CPU,
    seed: Annotated[int, typer.Option(help="Study seed: the folds and initial weights")] = 0,
    timeout: Annotated[
        float,
        typer.Option(
            min=1,
            max=MAX_FOLD_TIMEOUT_S,
            help="Seconds the fold may take (trainer.fold_timeout); a rank still training then "
            "fails the check, saying where each rank was",
        ),
    ] = DEFAULT_CHECK_TIMEOUT_S,
) -> None:
    """Train one fold of a task here, without a service or Ray, as a study's trial would.

    Prints each epoch's metrics and time. Fails in one line on what would otherwise only show
    as failed trials: a task that does not import or lacks load_data, an error in its code, a
    model that does not fit the data, a metric it declares but never reports.
    """
    params_value = _json_object(params, "--params")
    options_value = _json_object(options, "--options")
    _import_from_here()
    try:
        from foldwise.trainers import task_check
    except ModuleNotFoundError as exc:
        _fail_without_torch(exc)
    try:
        prepared = task_check.prepare_check(
            name,
            params=params_value,
            options=options_value,
            epochs=epochs,
            batch_size=batch_size,
            workers=workers,
            fold=fold,
            folds=folds,
            metric=metric,
            direction=direction.value,
            precision=None if precision is None else precision.value,
            device=device.value,
            seed=seed,
            timeout=timeout,
        )
        console.print(_header(prepared, params_value), soft_wrap=True)
        data, notes = task_check.inspect_data(prepared)
        for note in notes:
            console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
        reports = []
        for report in task_check.run_check(prepared, data=data):
            reports.append(report)
            shown = task_check.shown_metrics(prepared, report)
            console.print(_epoch_line(report, shown), soft_wrap=True)
        summary = task_check.summarize(prepared, reports)
    except task_check.CheckFailed as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("stopped", code=130)
    for line in _closing_lines(summary, prepared.job.objective.direction.value):
        console.print(line, soft_wrap=True)


def _json_object(text: str | None, option: str) -> dict[str, Any]:
    """The JSON object an option holds; anything else is a usage error (exit code 2)."""
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint=option) from None
    if not isinstance(value, dict):
        raise typer.BadParameter(
            f"a JSON object is needed, such as '{{\"lr\": 0.01}}', not {type(value).__name__}",
            param_hint=option,
        )
    return value


def _import_from_here() -> None:
    """Tasks import from the current directory, as ``python -m`` would find them."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def _fail_without_torch(exc: ModuleNotFoundError) -> NoReturn:
    if (exc.name or "").split(".")[0] in ("foldwise", "trainers"):
        raise exc  # a module of ours missing is a bug, not the user's to fix
    fail(
        f"foldwise task check trains with torch and the trainers (no module {exc.name!r}): "
        "pip install 'foldwise[server]'"
    )


def _header(prepared: TaskCheck, params: dict[str, Any]) -> str:
    job, task = prepared.job, prepared.task
    parts = [
        f"fold {job.fold}/{job.folds}",
        f"{_count(job.world_size, 'rank')} on {prepared.device}",
        _count(job.epochs, "epoch"),
        f"batch {job.batch_size}",
        f"objective {job.objective.metric} ({job.objective.direction.value})",
        *([f"params {json.dumps(params)}"] if params else []),
    ]
    return f"checking [bold]{escape(task.name)}[/] ({LOOPS[task.loop.value]}): " + escape(
        ", ".join(parts)
    )


def _epoch_line(report: EpochReport, metrics: dict[str, float]) -> str:
    shown = "  ".join(f"{name}={_number(value)}" for name, value in metrics.items())
    seconds = report.metrics.get("epoch_seconds", 0.0)
    return escape(f"epoch {report.epoch}  {shown}  ({seconds:.2f} s)")


def _closing_lines(summary: CheckSummary, direction: str) -> list[str]:
    """A note on metrics the task reports without declaring them, then the verdict."""
    lines = []
    if summary.undeclared:
        undeclared = escape(", ".join(summary.undeclared))
        lines.append(
            f"note: reported but not in the task's metrics: {undeclared} (a study cannot take "
            "them as its objective)"
        )
    epochs = _count(summary.epochs, "epoch")
    best = f"{summary.metric} best {_number(summary.best)} at epoch {summary.best_epoch}"
    per_epoch = f"{summary.seconds_per_epoch:.2f} s per epoch"
    lines.append(f"[bold green]ok:[/] {escape(f'{epochs}; {best} ({direction}); {per_epoch}')}")
    return lines


def _number(value: float) -> str:
    """Four decimals where they read well, four significant digits elsewhere."""
    return f"{value:.4f}" if value == 0 or 1e-3 <= abs(value) < 1e4 else f"{value:.4g}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
