"""The service's commands of the ``foldwise`` CLI: ``serve``, ``db upgrade`` and ``token``.

The CLI (``foldwise.cli``) knows nothing of the service: it adds these through the entry point
``foldwise.cli`` (pyproject.toml), as fastapi-cli does. Registering imports only Typer; each
command imports the service's modules when it runs, so ``foldwise --help`` stays fast.
"""

from __future__ import annotations

import functools
import logging
import re
import signal
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape

from foldwise.cli_output import console, fail, fail_without_server
from foldwise.service.cli_tokens import token_app

db_app = typer.Typer(help="Manage the service's database.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the service's commands to the ``foldwise`` CLI."""
    app.command()(serve)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address [default: settings]")] = None,
    port: Annotated[int | None, typer.Option(help="Port [default: settings]")] = None,
    upgrade_db: Annotated[
        bool, typer.Option("--upgrade-db", help="Upgrade an outdated database schema first")
    ] = False,
) -> None:
    """Run the service (API, dashboard and scheduler); settings come from FOLDWISE_* variables."""
    chosen: dict[str, Any] = {"host": host, "port": port, "upgrade_db": upgrade_db or None}
    try:
        from foldwise.service.config import Settings
        from foldwise.service.db.schema import OutdatedSchema, prepare_database
        from foldwise.service.server import listen
        from foldwise.service.server import serve as run_server
    except ModuleNotFoundError as exc:
        fail_without_server(exc)
    try:  # the options given here over the FOLDWISE_* variables, handed to the app as one object
        settings = Settings(**{name: value for name, value in chosen.items() if value is not None})
    except ValidationError as exc:  # a setting refused: its message, in one line
        fail(_setting_problem(exc))
    try:  # before anything starts: a busy port fails at once, and nothing can take it later
        listener = listen(settings.host, settings.port)
    except OSError as exc:
        fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    try:
        from foldwise.service.app import create_app  # Ray and torch: after the port is taken
    except ModuleNotFoundError as exc:
        fail_without_server(exc)
    try:
        prepare_database(settings.database_url, upgrade=settings.upgrade_db)
    except OutdatedSchema as exc:
        fail(str(exc))
    _log_service_events()
    logging.getLogger("foldwise").info("listening on http://%s:%d", settings.host, settings.port)
    # The server takes SIGTERM and SIGINT once it runs (one graceful stop, exit 0); a SIGTERM
    # before that is a clean exit too.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    run_server(functools.partial(create_app, settings), settings, listener)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


@db_app.command("upgrade")
def db_upgrade(
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL [default: FOLDWISE_DATABASE_URL]")
    ] = None,
) -> None:
    """Create the database schema or upgrade it to the newest revision."""
    try:
        from foldwise.service.config import Settings
        from foldwise.service.db.schema import upgrade_database
    except ModuleNotFoundError as exc:
        fail_without_server(exc)
    url = database_url or Settings().database_url
    try:
        revision = upgrade_database(url)
    except Exception as exc:  # a driver or migration error: one line, not a traceback
        fail(f"cannot upgrade the database: {type(exc).__name__}: {exc}".splitlines()[0])
    shown = escape(_hide_password(url))
    console.print(f"database {shown} is at revision [bold]{revision}[/] (head)", soft_wrap=True)


def _log_service_events() -> None:
    """The service's own lines (a study or trial ended, the scheduler's lease) at INFO, in
    uvicorn's style; other libraries keep their own levels."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("foldwise")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)


def _setting_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(map(str, error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _hide_password(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
