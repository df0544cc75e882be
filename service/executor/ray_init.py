"""Starting or joining Ray from the service process.

``init_ray`` keeps the service's settings (``FOLDWISE_*``, the database URL among them) out of
what Ray's processes inherit, and quiets a warning that a start from a worker thread always gives.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import ray


def init_ray(**kwargs: Any) -> None:
    """``ray.init(**kwargs)`` with the service's settings out of the environment: a local Ray's
    processes, and so its workers, inherit it, and task code runs there. Workers never hold
    database credentials."""
    _quiet_ray_startup_warnings()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("FOLDWISE_")}
    try:
        ray.init(**kwargs)
    finally:
        os.environ.update(saved)


def _quiet_ray_startup_warnings() -> None:
    """ray.init from a worker thread warns that it cannot install a SIGTERM handler: intended."""
    logging.getLogger("ray._private.worker").addFilter(
        lambda record: "SIGTERM handler" not in record.getMessage()
    )
