"""Serving the app: the port is taken first, then Ray and the scheduler start, then requests.

uvicorn alone starts the app (Ray, the scheduler) before it binds its port, so a busy port was
found only after Ray's start-up, and Ray's own sockets, opened meanwhile on ports the system
picks, could take the very port the service was about to bind. Requests are read by uvicorn's
httptools protocol with a bound on each request's head (``service.header_limit``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

from service.config import Settings
from service.header_limit import bounded_head_protocol

STARTUP_FAILURE = 3
"""uvicorn's exit status when the app fails to start."""


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
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:
        pass
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
