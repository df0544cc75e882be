"""What every CLI command prints with: Rich consoles and one-line failures."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
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
    if (exc.name or "").split(".")[0] == "foldwise":
        raise exc
    fail(
        f"the foldwise service needs the server extras (no module {exc.name!r}): "
        "pip install 'foldwise[server]'"
    )


def program_name(argv0: str | None = None) -> str:
    """How to run this CLI again from the same directory, for the commands it suggests:
    ``foldwise`` when that is the one on PATH, else the path it was started by
    (``.venv/bin/foldwise`` under ``make run``, whose virtual environment is not on PATH)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    path = Path(argv0)
    if path.stem != "foldwise" or len(path.parts) == 1 or not path.is_file():
        return "foldwise"
    on_path = shutil.which("foldwise")
    if on_path is not None and os.path.samefile(on_path, path):
        return "foldwise"
    return shlex.quote(argv0)


def write_chunks(chunks: Iterable[bytes], path: Path | None) -> None:
    """Write ``chunks`` to stdout as they come (a reader that stops early, such as ``head``,
    just ends it), or to ``path`` whole or not at all: into a file beside it, renamed over it
    once the last chunk is in, so a failed download leaves what was there."""
    if path is None:
        try:
            for chunk in chunks:
                sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        except BrokenPipeError:  # Python's advice: no second error when it flushes at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
        os.replace(partial, path)
    except BaseException:
        os.unlink(partial)
        raise
