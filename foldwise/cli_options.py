"""Options and arguments the ``foldwise`` commands share, and the client each one uses."""

from __future__ import annotations

from typing import Annotated

import typer

from foldwise.client import DEFAULT_URL, Client
from foldwise.study import MAX_POLL_SECONDS

UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Service URL [default: the global --url]", show_default=False),
]
StudyId = Annotated[int, typer.Argument(help="Study id", show_default=False)]
PollInterval = Annotated[
    float,
    typer.Option(min=0.1, max=MAX_POLL_SECONDS, help="Seconds between polls"),
]


def client_for(ctx: typer.Context, url: str | None) -> Client:
    """A client for the command's ``--url``, else the global one, with the global token."""
    root = ctx.find_root().obj or {}
    return Client(url or root.get("url") or DEFAULT_URL, token=root.get("token"))
