"""Starting or joining Ray from the service process.

``init_ray`` keeps the service's settings (``FOLDWISE_*``, the database URL among them) out of
what Ray's processes inherit, and quiets a warning that a start from a worker thread always gives.

A local Ray's own processes (GCS, raylet, their agents) are started in a process group of their
own, so a SIGTERM sent to the service's process group (by a terminal, a supervisor, ``kill --
-PGID``) reaches the service alone: it shuts Ray down after its last fold has been put away.
In the service's group they died with it at once, and the driver then aborted while it shut
down (exit -6, after Ray's C++ report of the SIGTERM). They still die with the service when it is
killed outright: Ray starts them with ``PR_SET_PDEATHSIG`` (kernel fate-sharing).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

log = logging.getLogger(__name__)


def init_ray(**kwargs: Any) -> None:
    """``ray.init(**kwargs)`` with the service's settings out of the environment: a local Ray's
    processes, and so its workers, inherit it, and task code runs there. Workers never hold
    database credentials. A local start (no address, or ``"local"``) puts Ray's processes in a
    process group of their own; SIGTERM keeps the handler it had before."""
    _quiet_ray_startup_warnings()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("FOLDWISE_")}
    local = kwargs.get("address") in (None, "local")
    try:
        with _sigterm_kept(), _own_process_group(local):
            ray.init(**kwargs)
    finally:
        os.environ.update(saved)


@contextmanager
def _own_process_group(enabled: bool) -> Iterator[None]:
    """Every process Ray's start-up spawns leads a new process group, where the kernel makes it
    die with its parent (Linux). Elsewhere Ray's reaper kills Ray's processes by the process
    group they share with it, so they are left where they are."""
    from ray._private import services, utils

    popen = getattr(services, "ConsolePopen", None)
    linux = sys.platform.startswith("linux")
    if not (enabled and popen is not None and linux and utils.detect_fate_sharing_support()):
        yield
        return

    class _GroupLeaderPopen(popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = _GroupLeaderPopen
    try:
        yield
    finally:
        services.ConsolePopen = popen


@contextmanager
def _sigterm_kept() -> Iterator[None]:
    """Take SIGTERM back from Ray's crash handler, which the driver puts in front of it and
    which prints a C++ "stack trace" (``*** SIGTERM received ...``) for every ordinary stop
    before it passes the signal on. In the main thread, Python's handler (Ray's own, if it set
    one) is installed again; in a worker thread, where ``signal.signal`` is refused and Ray sets
    no Python handler, the C handler from before ``ray.init`` is put back with ``sigaction``."""
    if threading.current_thread() is threading.main_thread():
        try:
            yield
        finally:
            handler = signal.getsignal(signal.SIGTERM)
            if handler is not None:
                signal.signal(signal.SIGTERM, handler)
        return
    libc = _libc()
    before = ctypes.create_string_buffer(_SIGACTION_BYTES)
    saved = libc is not None and libc.sigaction(signal.SIGTERM, None, before) == 0
    try:
        yield
    finally:
        if saved and libc.sigaction(signal.SIGTERM, before, None) != 0:
            log.warning("could not restore the SIGTERM handler after ray.init")


_SIGACTION_BYTES = 512
"""Larger than ``struct sigaction`` on every libc (152 bytes on glibc x86-64); it is copied
whole and never read."""


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        libc.sigaction.restype = ctypes.c_int
    except (AttributeError, OSError):
        return None
    return libc


def _quiet_ray_startup_warnings() -> None:
    """ray.init from a worker thread warns that it cannot install a SIGTERM handler: intended."""
    logging.getLogger("ray._private.worker").addFilter(
        lambda record: "SIGTERM handler" not in record.getMessage()
    )
