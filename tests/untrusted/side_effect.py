"""A task whose module writes a file when imported: the id of the process that imported it, at
the path in ``SIDE_EFFECT_MARKER``. The service must never import it itself: it is refused by
name, or loaded only in a worker or a subprocess."""

from __future__ import annotations

import os
from pathlib import Path

from tests.user_tasks.tiny import build_model, kind, load_data  # noqa: F401  (the task)

if marker := os.environ.get("SIDE_EFFECT_MARKER"):
    Path(marker).write_text(str(os.getpid()))
