"""How the CLI shows studies and trials: number and time formats, Rich tables and panels.

Pure functions of the API's schema objects, so they are tested without a terminal or a service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from foldwise import schemas
from foldwise.client import Study
from foldwise.spec import StudySpec

NONE = "-"
CODE_HASH_SHOWN = 12
"""Characters of a study's code hash ``foldwise status`` shows (as git shows commits)."""
STATUS_STYLES = {
    "queued": "cyan",
    "running": "blue",
    "pending": "cyan",
    "completed": "green",
    "stopped": "yellow",
    "pruned": "yellow",
    "failed": "red",
    "lost": "yellow",
    "cancelled": "yellow",
}


def fmt_number(value: float | None) -> str:
    """A metric value to 4 significant digits (``0.08412``, ``1.235e+04``)."""
    return NONE if value is None else f"{value:.4g}"


def fmt_value(value: float | None, std_error: float | None = None) -> str:
    """``value ± s.e.``, the standard error to 2 significant digits."""
    if value is None:
        return NONE
    return fmt_number(value) if std_error is None else f"{value:.4g} ± {std_error:.2g}"


def fmt_param(value: Any) -> str:
    return fmt_number(value) if isinstance(value, float) else str(value)


def fmt_params(params: Mapping[str, Any]) -> str:
    """``lr=0.01 depth=2 act=relu`` on one line."""
    return " ".join(f"{name}={fmt_param(value)}" for name, value in params.items())


def fmt_time(moment: datetime | None, now: datetime | None = None) -> str:
    """``42s ago``/``5m ago``/``3h ago`` within a day, else ``2025-11-22 04:39`` (UTC)."""
    if moment is None:
        return NONE
    moment = _aware(moment)
    age = (_aware(now or datetime.now(UTC)) - moment).total_seconds()
    if age < 5:
        return "just now"
    if age < 86_400:
        return f"{fmt_duration(age, precise=False)} ago"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def fmt_duration(seconds: float | None, *, precise: bool = True) -> str:
    """``12.3s``, ``3m05s``, ``1h02m``, ``3d04h``; the largest unit only when not ``precise``."""
    if seconds is None:
        return NONE
    if seconds < 60:
        return f"{seconds:.1f}s" if precise else f"{int(seconds)}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if precise else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m" if precise else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h" if precise else f"{days}d"


def fmt_span(start: datetime | None, end: datetime | None) -> str:
    """The time from ``start`` to ``end``, or a dash if either is unknown."""
    if start is None or end is None:
        return NONE
    return fmt_duration((_aware(end) - _aware(start)).total_seconds())


def status_text(status: str) -> Text:
    return Text(str(status), style=STATUS_STYLES.get(str(status), ""))


def front_hint(study: schemas.Study) -> str:
    """Where a study of several objectives keeps its best trials."""
    return f"its Pareto front: foldwise best {study.id}"


def objective_text(spec: StudySpec) -> str:
    """``val_loss (minimize)``; several objectives and constraints in a row:
    ``val_loss (minimize), n_params (minimize); n_params <= 250000``."""
    text = ", ".join(f"{o.metric} ({o.direction.value})" for o in spec.all_objectives)
    limits = [f"{c.metric} {c.op} {c.value:g}" for c in spec.constraints]
    return f"{text}; {', '.join(limits)}" if limits else text


def geometry_text(spec: StudySpec) -> str:
    """``2 trials × 5 folds × 2 workers`` (N_G × K × N_W)."""
    parallel = spec.parallel
    counts = (
        (parallel.trial_groups, "trial"),
        (parallel.folds, "fold"),
        (parallel.workers_per_fold, "worker"),
    )
    return " × ".join(f"{n} {noun}" if n == 1 else f"{n} {noun}s" for n, noun in counts)


def cv_text(spec: StudySpec) -> str:
    """``stratified, 3 repeats`` / ``time_series, gap 10`` (a scheme left open reads as the
    task's default)."""
    cv = spec.cv
    parts = [str(cv.scheme or "by the task's kind")]
    if cv.repeats > 1:
        parts.append(f"{cv.repeats} repeats")
    if cv.gap:
        parts.append(f"gap {cv.gap}")
    return ", ".join(parts)


def studies_table(studies: Sequence[schemas.Study]) -> Table:
    """One row per study: id, name, status, progress, best value, optimizer, created."""
    table = Table(title=None, header_style="bold")
    for column in ("id", "name", "status", "trials", "best", "optimizer", "created"):
        table.add_column(column, justify="right" if column in ("id", "trials") else "left")
    for study in studies:
        best = study.best_trial
        table.add_row(
            str(study.id),
            study.name,
            status_text(study.status),
            f"{study.progress.finished}/{study.progress.budget}",
            fmt_value(best.value if best else None),
            study.spec.optimizer.name,
            fmt_time(study.created_at),
        )
    return table


def trials_table(
    trials: Sequence[schemas.TrialSummary], *, total: int | None = None, folds: int | None = None
) -> Table:
    """One row per trial: number, status, value ± s.e., duration, params (or error); a pruned
    trial's value says how many of the ``folds`` (K) it rests on, and its row why it stopped;
    a trial that breaks the study's constraints is marked so (``sort best`` lists it after
    every feasible one)."""
    shown = len(trials)
    caption = None if total is None or total <= shown else f"{shown} of {total} trials"
    table = Table(header_style="bold", caption=caption)
    table.add_column("#", justify="right")
    for column in ("status", "value ± s.e.", "time", "params"):
        table.add_column(column)
    for trial in trials:
        params = fmt_params(trial.params)
        if trial.error:
            params = f"{params}  [{trial.error.splitlines()[0][:80]}]" if params else trial.error
        detail = Text(params)
        if trial.pruned_reason:
            detail.append(f"\npruned: {trial.pruned_reason}", style=STATUS_STYLES["pruned"])
        value = Text(trial_value_text(trial, folds))
        if trial.feasible is False:
            value.append("\ninfeasible", style=STATUS_STYLES["pruned"])
        table.add_row(
            str(trial.number),
            status_text(trial.status),
            value,
            fmt_span(trial.started_at, trial.finished_at),
            detail,
        )
    return table


def trial_value_text(trial: schemas.TrialSummary, folds: int | None = None) -> str:
    """``0.31 ± 0.02``, and for a value on fewer than all folds ``0.31 ± 0.02 (2/5 folds)``."""
    value = fmt_value(trial.value, trial.std_error)
    rests_on = trial.value_folds
    partial = trial.status is schemas.TrialStatus.PRUNED or (
        folds is not None and rests_on is not None and rests_on < folds
    )
    if trial.value is None or rests_on is None or not partial:
        return value
    return f"{value} ({rests_on}/{folds} folds)" if folds else f"{value} ({rests_on} folds)"


def study_details(study: schemas.Study) -> Table:
    """Key/value grid for ``foldwise status``: spec summary, times, progress, best trial."""
    spec, progress = study.spec, study.progress
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    rows: list[tuple[str, RenderableType]] = [
        ("study", f"{study.id} {study.name}"),
        ("status", status_text(study.status)),
        ("objective", objective_text(spec)),
        ("optimizer", spec.optimizer.name),
        ("parallel", geometry_text(spec)),
        ("folds", cv_text(spec)),
        ("trials", progress_text(progress)),
        ("created", fmt_time(study.created_at)),
        ("duration", fmt_span(study.started_at, study.finished_at or datetime.now(UTC))),
        ("best", best_summary(study.best_trial) if not spec.objectives else front_hint(study)),
    ]
    if study.warm_start is not None:
        rows.insert(7, ("warm start", warm_start_text(study.warm_start)))
    if study.code_hash is not None:  # the snapshot of a user task's package the study runs
        rows.insert(4, ("code", study.code_hash[:CODE_HASH_SHOWN]))
    if study.holdout is not None:
        rows.append(("hold-out", f"trial {study.holdout.trial}: {holdout_text(study.holdout)}"))
    if study.error:
        rows.append(("error", Text(study.error, style="red")))
    for warning in study.warnings:
        rows.append(("warning", warning_text(warning)))
    for key, value in rows:
        grid.add_row(key, value)
    return grid


def warning_text(warning: schemas.StudyWarning) -> Text:
    """A study's warning in yellow, with the trials it concerns: ``... (trials 0, 3, 4)``."""
    named = ", ".join(map(str, warning.trials[:10]))
    more = f" and {len(warning.trials) - 10} more" if len(warning.trials) > 10 else ""
    where = f" (trial{'s' if len(warning.trials) > 1 else ''} {named}{more})" if named else ""
    return Text(f"{warning.message}{where}", style="yellow")


def progress_text(progress: schemas.Progress) -> str:
    """``12/40 finished (10 completed, 1 failed, 1 pruned; 2 running, 0 pending)``."""
    return (
        f"{progress.finished}/{progress.budget} finished ({progress.completed} completed, "
        f"{progress.failed} failed, {progress.pruned} pruned; {progress.running} running, "
        f"{progress.pending} pending)"
    )


def warm_start_text(warm: schemas.WarmStartSummary) -> str:
    """``41 prior observations from studies 3, 7 (9 skipped)``."""
    named = ", ".join(map(str, warm.studies))
    studies = "study" if len(warm.studies) == 1 else "studies"
    return (
        f"{warm.observations} prior observations from {studies} {named} ({warm.skipped} skipped)"
    )


def best_summary(trial: schemas.TrialSummary | None) -> str:
    """``#12 0.08412 ± 0.0031`` or a dash."""
    if trial is None:
        return NONE
    return f"#{trial.number} {fmt_value(trial.value, trial.std_error)}"


def best_trial_view(
    study: schemas.Study,
    trial: schemas.TrialSummary,
    selection: schemas.SelectionEstimate | None = None,
) -> Group:
    """The best trial's value ± s.e. on the objective, its selection-corrected estimate when
    known, then its parameters one per row."""
    head = Text.assemble(
        ("best trial ", "bold"),
        (f"#{trial.number}", "bold cyan"),
        " of study ",
        f"{study.id} {study.name}: ",
        (fmt_value(trial.value, trial.std_error), "bold green"),
        f"  {objective_text(study.spec)}",
    )
    params = Table(header_style="bold", show_edge=False)
    params.add_column("parameter")
    params.add_column("value")
    for name, value in trial.params.items():
        params.add_row(name, fmt_param(value))
    parts: list[RenderableType] = [head]
    if selection is not None and selection.number == trial.number:
        parts.append(selection_view(selection))
    parts.append(params)
    holdout = study.holdout
    if holdout is not None and holdout.trial == trial.number:
        parts.append(holdout_view(holdout))
    return Group(*parts)


def selection_view(selection: schemas.SelectionEstimate) -> Text:
    """``expect 0.1461 on new data (0.023 worse, for being the best of 30 trials on the same
    folds; Tibshirani & Tibshirani 2009)``."""
    return Text.assemble(
        "expect ",
        (f"{selection.corrected:.4g}", "bold yellow"),
        f" on new data ({selection.bias:.2g} worse, for being the best of "
        f"{selection.trials} trial{'s' if selection.trials != 1 else ''} on the same folds; "
        "Tibshirani & Tibshirani 2009)",
    )


def pareto_view(study: schemas.Study, front: schemas.ParetoFront) -> Group:
    """The study's Pareto front: a row per trial, each objective's value ± s.e., then its
    parameters."""
    head = Text.assemble(
        ("Pareto front", "bold"),
        f" of study {study.id} {study.name}: {front.count} trials, none beaten on every "
        "objective by another feasible one",
    )
    table = Table(header_style="bold", show_edge=False)
    table.add_column("trial", justify="right")
    for objective in front.objectives:
        table.add_column(f"{objective.metric} ({objective.direction})", justify="right")
    table.add_column("params")
    for trial in front.data:
        values = trial.objective_values or [[trial.value, trial.std_error]]
        table.add_row(
            f"#{trial.number}",
            *(fmt_value(mean, se) for mean, se in values),
            ", ".join(f"{k}={fmt_param(v)}" for k, v in trial.params.items()),
        )
    return Group(head, table)


def wall_time_text(study: schemas.Study) -> str | None:
    """``study 7 took 2m05s (wall time from its submission to its end)``, once it has ended."""
    if study.finished_at is None:
        return None
    took = fmt_span(study.created_at, study.finished_at)
    return f"study {study.id} took {took} (wall time from its submission to its end)"


def next_steps(study_id: int, command: str) -> list[str]:
    """Commands to look at a study's results, each a line a shell runs as it is (what it does
    follows as a comment); ``command`` runs the CLI (``.venv/bin/foldwise --url ...``)."""
    steps = [
        (f"{command} trials {study_id} --sort best", "its trials, best first"),
        (f"{command} status {study_id}", "its spec, progress, timing and best trial"),
        (
            f"{command} trials {study_id} --csv -o study-{study_id}-trials.csv",
            "every trial with each fold's value, as CSV",
        ),
    ]
    width = max(len(line) for line, _ in steps)
    return [f"{line.ljust(width)}  # {what}" for line, what in steps]


def _aware(moment: datetime) -> datetime:
    """Times without a zone are UTC (what the service stores)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def watch_study(study: Study, console: Console, *, interval: float) -> schemas.StudyStatus:
    """Show a progress bar of finished/budget trials until the study ends, then its best trial.

    Returns the final status; the SDK's errors propagate (the CLI prints them).
    """
    columns = (
        TextColumn(f"study {study.id}"),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as bar:
        task = bar.add_task(study.status.value, total=study.data.progress.budget, detail="")

        def update(current: Study) -> None:
            progress, best = current.data.progress, current.data.best_trial
            detail = f"{progress.running} running  best {fmt_value(best.value if best else None)}"
            bar.update(
                task,
                completed=progress.finished,
                total=progress.budget,
                description=current.status.value,
                detail=detail,
            )

        study.wait(poll=interval, on_update=update)
    data = study.data
    console.print(
        Text.assemble(
            f"study {data.id} ", status_text(data.status), ": ", progress_text(data.progress)
        )
    )
    if data.error:
        console.print(Text(data.error, style="red"))
    if data.best_trial is None:
        console.print("no trial completed")
    else:
        console.print(best_trial_view(data, data.best_trial))
    return data.status


def holdout_view(result: schemas.Holdout) -> Text:
    """``hold-out (trial 4): ensemble loss 0.0712, accuracy 0.9800, f1 0.9797; refit ...``,
    with the objective beside its CV value."""
    text = Text.assemble(("hold-out", "bold"), f" (trial {result.trial}): ")
    text.append(holdout_text(result))
    return text


def holdout_text(result: schemas.Holdout) -> str:
    """One line: what the score found, or where it is."""
    if result.status is not schemas.JobStatus.COMPLETED:
        why = f": {result.error}" if result.error else ""
        return f"{result.status.value}{why}"
    parts = []
    for name, metrics in (("ensemble", result.ensemble), ("refit", result.refit)):
        if metrics:
            parts.append(f"{name} {metrics_text(metrics)}")
    objective = result.objective
    if objective is not None and objective.cv is not None:
        cv = f"{objective.cv:.4g}"
        if objective.cv_std_error is not None:
            cv += f" ± {objective.cv_std_error:.2g}"
        if objective.folds is not None:  # the same models, on data none of them saw
            cv += f" (its fold models on the test data: {objective.folds:.4g})"
        parts.append(f"CV {objective.metric} {cv}")
    return "; ".join(parts)


def metrics_text(metrics: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.4g}" for name, value in metrics.items())
