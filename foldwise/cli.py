"""The ``foldwise`` command line: submit studies and follow them (DESIGN §9); the service adds
``serve``, ``db`` and ``token`` and the trainers ``task`` (entry points, ``foldwise.cli``).

Commands are thin: they call the SDK and ``cli_render``. Every ``FoldwiseError`` becomes one red
line on stderr and exit code 1 (``FoldwiseGroup``); usage errors keep Typer's exit code 2.
"""

from __future__ import annotations

import shlex
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from foldwise import __version__, cli_holdout, cli_output, cli_render
from foldwise.cli_options import PollInterval, StudyId, UrlOption, client_for
from foldwise.cli_output import console, err_console, fail, program_name
from foldwise.client import DEFAULT_URL, TRIAL_SORT, Client
from foldwise.errors import FoldwiseError
from foldwise.schemas import StudyStatus, TrialStatus
from foldwise.study import Study


class FoldwiseGroup(TyperGroup):
    """Turns an SDK error raised by any command into one line on stderr, never a traceback."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FoldwiseError as exc:
            fail(str(exc))


app = typer.Typer(
    cls=FoldwiseGroup,
    help="Hyperparameter and architecture search for PyTorch, K-fold cross-validated.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _trial_sort(value: str) -> str:
    if not TRIAL_SORT.fullmatch(value):
        raise typer.BadParameter(
            "use best, or number, value, duration or params.<name>; '-' first for descending"
        )
    return value


def _version(value: bool) -> None:
    if value:
        console.print(f"foldwise {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    url: Annotated[
        str, typer.Option("--url", envvar="FOLDWISE_URL", help="URL of the foldwise service")
    ] = DEFAULT_URL,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="FOLDWISE_TOKEN",
            help="API token [default: the one saved for --url, see foldwise token create]",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version")
    ] = False,
) -> None:
    ctx.obj = {"url": url, "token": token}


@app.command()
def submit(
    ctx: typer.Context,
    spec: Annotated[str, typer.Argument(help="Study spec file (YAML or JSON)")],
    watch: Annotated[bool, typer.Option("--watch", help="Follow the study until it ends")] = False,
    interval: PollInterval = 2.0,
    url: UrlOption = None,
) -> None:
    """Validate a study spec, create the study, and say where to watch it."""
    with client_for(ctx, url) as client:
        study = client.create_study(spec)
        console.print(f"created study [bold]{study.id}[/] ({escape(study.name)})")
        console.print(f"dashboard: {client.url}/dashboard/studies/{study.id}", soft_wrap=True)
        if not watch:
            command = escape(_command(client))
            console.print(f"watch it:  {command} watch {study.id}", soft_wrap=True)
            return
        _follow(study, interval, _command(client))


@app.command()
def studies(
    ctx: typer.Context,
    status: Annotated[StudyStatus | None, typer.Option(help="Only studies in this state")] = None,
    url: UrlOption = None,
) -> None:
    """List studies with their progress and best value."""
    with client_for(ctx, url) as client:
        rows = client.list_studies(status)
    if not rows:
        console.print("no studies")
        return
    console.print(cli_render.studies_table([study.data for study in rows]))


@app.command()
def status(ctx: typer.Context, study_id: StudyId, url: UrlOption = None) -> None:
    """Show a study: spec summary, status, progress and best trial."""
    with client_for(ctx, url) as client:
        console.print(cli_render.study_details(client.fetch_study(study_id)))


@app.command()
def watch(
    ctx: typer.Context,
    study_id: StudyId,
    interval: PollInterval = 2.0,
    url: UrlOption = None,
) -> None:
    """Follow a study with a progress bar until it ends, then show its best trial.

    Exits 0 when the study completed or was stopped, 1 when it failed.
    """
    with client_for(ctx, url) as client:
        _follow(client.get_study(study_id), interval, _command(client))


@app.command()
def trials(
    ctx: typer.Context,
    study_id: StudyId,
    status: Annotated[TrialStatus | None, typer.Option(help="Only trials in this state")] = None,
    sort: Annotated[
        str,
        typer.Option(
            callback=_trial_sort,
            help="best, number, value, duration or params.<name>; a leading - for descending",
        ),
    ] = "number",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Rows to show")] = 50,
    csv: Annotated[
        bool,
        typer.Option(
            "--csv", help="Write every trial as CSV, with each fold's value (no --limit)"
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            dir_okay=False,
            help="With --csv: write to this file instead of stdout",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
) -> None:
    """List a study's trials: status, value ± standard error, duration, parameters; a pruned
    trial with the folds its value rests on and why it was pruned. With --csv, every trial as
    CSV (the service's GET /studies/ID/trials.csv)."""
    if output is not None and not csv:
        raise typer.BadParameter("--output writes the CSV: add --csv", param_hint="--output")
    if csv:
        with client_for(ctx, url) as client:
            chunks = client.iter_trials_csv(study_id, status=status, sort=sort)
            try:
                cli_output.write_chunks(chunks, output)
            except OSError as exc:
                fail(f"cannot write {output or 'stdout'}: {exc.strerror or exc}")
        if output is not None:
            console.print(f"wrote the trials of study {study_id} to {escape(str(output))}")
        return
    with client_for(ctx, url) as client:
        page = client.fetch_trials(study_id, status=status, sort=sort, limit=limit)
        folds = None
        if any(trial.status is TrialStatus.PRUNED for trial in page.data):  # "2/5 folds"
            folds = client.fetch_study(study_id).spec.fold_count
    if not page.data:
        console.print(f"study {study_id} has no {status.value + ' ' if status else ''}trials yet")
        return
    console.print(cli_render.trials_table(page.data, total=page.count, folds=folds))


@app.command()
def best(ctx: typer.Context, study_id: StudyId, url: UrlOption = None) -> None:
    """Show the best trial so far: value ± standard error and its parameters; with several
    objectives, the Pareto front."""
    with client_for(ctx, url) as client:
        study = client.fetch_study(study_id)
        still = "" if study.status.finished else " yet"
        if study.spec.objectives:
            front = client.fetch_pareto(study_id)
            if not front.data:
                fail(f"study {study_id} has no feasible completed trial{still}")
            console.print(cli_render.pareto_view(study, front))
            return
        selection = None if study.best_trial is None else client.fetch_top_folds(study_id, 1)
    if study.best_trial is None:
        feasible = " that meets its constraints" if study.spec.constraints else ""
        fail(f"study {study_id} has no completed trial{feasible}{still}")
    estimate = selection.selection if selection is not None else None
    console.print(cli_render.best_trial_view(study, study.best_trial, estimate))


@app.command()
def stop(
    ctx: typer.Context,
    study_id: StudyId,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until the scheduler has stopped it")
    ] = True,
    url: UrlOption = None,
) -> None:
    """Stop a study: no new trials, running ones are cancelled."""
    with client_for(ctx, url) as client:
        study = client.get_study(study_id).stop(wait=wait)
    state = "stopping" if study.data.stop_requested else study.status.value
    console.print(f"study {study.id} ({escape(study.name)}) is {state}")


app.command()(cli_holdout.holdout)
app.command()(cli_holdout.refit)
app.command()(cli_holdout.models)


COMMANDS_GROUP = "foldwise.cli"
"""The entry point group whose entries add commands to the CLI (pyproject.toml)."""


def _add_installed_commands(cli: typer.Typer) -> None:
    """The commands the rest of foldwise adds (entry points of group ``foldwise.cli``, each a
    ``register(app)``): the service's ``serve``, ``db`` and ``token``, the trainers' ``task``."""
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        entry.load()(cli)


_add_installed_commands(app)


def _follow(study: Study, interval: float, command: str) -> None:
    """Watch ``study`` to its end, then say how long it took and how to look at its results
    (``command`` runs this CLI); exit 1 if it failed, 130 on Ctrl-C (the study goes on)."""
    try:
        final = cli_render.watch_study(study, console, interval=interval)
    except KeyboardInterrupt:
        err_console.print(f"stopped watching; study {study.id} keeps running")
        raise typer.Exit(130) from None
    took = cli_render.wall_time_text(study.data)
    if took is not None:
        console.print(took)
    console.print("next:")
    for line in cli_render.next_steps(study.id, command):
        console.print(f"  {escape(line)}", soft_wrap=True)
    if final is StudyStatus.FAILED:
        raise typer.Exit(1)


def _command(client: Client) -> str:
    """The command line that runs this CLI against ``client``'s service, for a new shell."""
    where = "" if client.url == DEFAULT_URL else f" --url {shlex.quote(client.url)}"
    return f"{program_name()}{where}"
