"""``foldwise token create|list|revoke``: the operator's commands for API tokens.

They talk to the service's database (``--database-url``, else ``FOLDWISE_DATABASE_URL``), like
``foldwise db upgrade``: whoever runs them runs the service. A new token is printed once; the
database keeps only its hash.
"""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from foldwise.cli_output import console, fail, fail_without_server
from foldwise.credentials import credentials_path, save_token
from foldwise.schemas import Role

token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)

DatabaseUrl = Annotated[
    str | None,
    typer.Option(help="SQLAlchemy URL [default: FOLDWISE_DATABASE_URL]", show_default=False),
]


def _database_failure(action: str, exc: Exception) -> NoReturn:
    """A driver error, a missing database or an outdated schema: one line, not a traceback."""
    fail(f"cannot {action}: {type(exc).__name__}: {exc}".splitlines()[0])


def _admin() -> Any:
    """The server-side token functions and the default database URL."""
    try:
        from foldwise.service import token_admin
        from foldwise.service.config import Settings
    except ModuleNotFoundError as exc:
        fail_without_server(exc)
    return token_admin, Settings().database_url


@token_app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Who or what uses it; studies record it as owner")],
    role: Annotated[Role, typer.Option(help="admin, member or viewer")] = Role.MEMBER,
    replace: Annotated[
        bool, typer.Option("--replace", help="Revoke the tokens of this name first")
    ] = False,
    save: Annotated[
        bool, typer.Option("--save", help="Keep it for --url where the CLI and SDK look")
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Create a token and print it, once."""
    token_admin, default_url = _admin()
    try:
        secret = token_admin.create_token(database_url or default_url, name, role, replace=replace)
    except token_admin.TokenError as exc:
        fail(str(exc))
    except Exception as exc:
        _database_failure("create the token", exc)
    if save:
        url = (ctx.find_root().obj or {}).get("url")
        try:
            path = save_token(url, secret)
        except OSError as exc:  # the token exists: its secret must not be lost with the file
            console.print(secret, soft_wrap=True)
            fail(
                f"the token above was created but not saved: cannot write {credentials_path()}: "
                f"{exc.strerror or exc}"
            )
        console.print(f"saved for {escape(url)} in {escape(str(path))}")
    console.print(secret, soft_wrap=True)


@token_app.command("list")
def list_(
    revoked: Annotated[bool, typer.Option("--revoked", help="Show revoked tokens too")] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """List the tokens: name, role, created, revoked."""
    token_admin, default_url = _admin()
    try:
        rows = token_admin.list_tokens(database_url or default_url, revoked=revoked)
    except Exception as exc:
        _database_failure("list the tokens", exc)
    if not rows:
        console.print("no tokens")
        return
    table = Table("Name", "Role", "Created", "Revoked")
    for row in rows:
        revoked_at = row.revoked_at.strftime("%Y-%m-%d %H:%M") if row.revoked_at else ""
        table.add_row(
            escape(row.name), row.role.value, row.created_at.strftime("%Y-%m-%d %H:%M"), revoked_at
        )
    console.print(table)


@token_app.command("revoke")
def revoke(
    name: Annotated[str, typer.Argument(help="The token's name")],
    database_url: DatabaseUrl = None,
) -> None:
    """Revoke the tokens of this name (the service refuses them within seconds)."""
    token_admin, default_url = _admin()
    try:
        count = token_admin.revoke_token(database_url or default_url, name)
    except token_admin.TokenError as exc:
        fail(str(exc))
    except Exception as exc:
        _database_failure("revoke the tokens", exc)
    console.print(f"revoked {count} token{'s' if count != 1 else ''} named {escape(name)}")
