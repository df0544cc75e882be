"""Where the SDK and the CLI find a token for a service when none is given.

In order: the ``token`` argument (``--token``), ``FOLDWISE_TOKEN``, then this user's credentials
file (``$FOLDWISE_CREDENTIALS``, else ``$XDG_CONFIG_HOME/foldwise/credentials.json``, else
``~/.config/foldwise/credentials.json``): a JSON map from service URL to token, readable by its
owner only. ``make run`` keeps its local admin token there (``foldwise token create --save``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def credentials_path() -> Path:
    explicit = os.environ.get("FOLDWISE_CREDENTIALS")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "foldwise" / "credentials.json"


def find_token(url: str, token: str | None = None) -> str | None:
    """The token to use for ``url``: the one given, ``FOLDWISE_TOKEN``, or the saved one."""
    return token or os.environ.get("FOLDWISE_TOKEN") or _saved().get(url.rstrip("/"))


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be one the service made, or None: tokens are printable ASCII
    without spaces, so a space or a character such as a pasted no-break space (which HTTP
    headers cannot carry either) came from how it was copied."""
    for at, char in enumerate(token, start=1):
        if not "!" <= char <= "~":
            what = "a space" if char == " " else f"the character {char!r} (U+{ord(char):04X})"
            return f"the token holds {what} at position {at}, which no token has: copy it again"
    return None


def save_token(url: str, token: str) -> Path:
    """Keep ``token`` for ``url`` in the credentials file (created owner-only); returns it."""
    path = credentials_path()
    saved = _saved()
    saved[url.rstrip("/")] = token
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(saved, handle, indent=2, sort_keys=True)
    os.chmod(path, 0o600)
    return path


def _saved() -> dict[str, str]:
    try:
        saved = json.loads(credentials_path().read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in saved.items()} if isinstance(saved, dict) else {}
