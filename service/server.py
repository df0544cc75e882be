"""Serving the app: the port is taken first, then Ray and the scheduler start, then requests.

uvicorn alone starts the app (Ray, the scheduler) before it binds its port, so a busy port was
found only after Ray's start-up, and Ray's own sockets, opened meanwhile on ports the system
picks, could take the very port the service was about to bind. Requests are read by uvicorn's
httptools protocol with a bound on each request's head (``service.header_limit``).

A stop is one graceful stop. The first SIGTERM or SIGINT stops the server and the app (the
scheduler puts its folds away, Ray shuts down); signals that arrive meanwhile (a terminal's
Ctrl-C after a supervisor's SIGTERM, a script that passes a signal on) are noted, not obeyed:
uvicorn would skip the app's shutdown on a second SIGINT and leave its tasks to be cancelled
mid-way, with a traceback. A third signal quits at once (``QUIT_AT_ONCE``; Ray's processes die
with the service). Nothing is raised again after the stop, so it exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI

from foldwise.service.config import Settings
from foldwise.service.hardening.header_limit import bounded_head_protocol

STARTUP_FAILURE = 3
"""uvicorn's exit status when the app fails to start."""

QUIT_AT_ONCE = 130
"""The exit status of a third stop signal, which does not wait for the graceful stop."""

log = logging.getLogger("foldwise")


class Server(uvicorn.Server):
    """uvicorn's server, stopped once by the first SIGTERM or SIGINT (see the module's text)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stop_signals = 0

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        before = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stop_signals += 1
        if self.stop_signals == 1:
            self.should_exit = True
        elif self.stop_signals == 2:
            log.warning(
                "already stopping (%s): the running folds are being put away; a third stop "
                "signal quits at once",
                signal.Signals(sig).name,
            )
        else:
            os._exit(QUIT_AT_ONCE)


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (an IPv6 address when ``host`` has a colon); raises
    OSError when the port is taken or the address is not this machine's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart reuses the port
        sock.bind((host, port))
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


def serve(create_app: Callable[[], FastAPI], settings: Settings, listener: socket.socket) -> None:
    """Start the app ``create_app`` makes and serve it on ``listener`` until stopped; exits with
    STARTUP_FAILURE if the app cannot start."""
    config = uvicorn.Config(
        create_app,
        factory=True,
        host=settings.host,
        port=settings.port,
        access_log=settings.access_log,
        http=bounded_head_protocol(settings.max_header_bytes),
    )
    server = Server(config)
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
