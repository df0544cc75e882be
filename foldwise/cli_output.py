"""What every CLI command prints with: Rich consoles and one-line failures."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` in red on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def fail_without_server(exc: ModuleNotFoundError) -> NoReturn:
    """A missing server extra is for the user to fix; a missing module of ours is a bug."""
    if (exc.name or "").split(".")[0] in ("foldwise", "service", "optimizers", "trainers"):
        raise exc
    fail(
        f"the foldwise service needs the server extras (no module {exc.name!r}): "
        "pip install 'foldwise[server]'"
    )
