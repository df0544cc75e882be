"""Fixtures for the SDK and CLI tests: a real HTTP server whose answers each test scripts.

The service is not needed to test how the SDK and the CLI speak HTTP and treat its errors; the
end-to-end tests against the real service live with the service's tests.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from foldwise.spec import StudySpec

Answer = tuple[int, Any]
"""Status code and JSON body (``None`` for no body; ``bytes`` are sent as they are)."""


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StubApi:
    """The server's state: ``handle`` answers each request; ``requests`` records them."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)
    handle: Callable[[Request], Answer] = lambda request: (404, {"detail": "Not Found"})


def _handler_class(stub: StubApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request(
                self.command,
                parts.path,
                dict(parse_qsl(parts.query)),
                json.loads(raw) if raw else None,
                {k.lower(): v for k, v in self.headers.items()},
            )
            stub.requests.append(request)
            status, body = stub.handle(request)
            payload = (
                body
                if isinstance(body, bytes)
                else b""
                if body is None
                else (json.dumps(body).encode())
            )
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


@pytest.fixture
def stub() -> Iterator[StubApi]:
    api = StubApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(api))
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield api
    server.shutdown()
    server.server_close()


@pytest.fixture
def dead_url() -> str:
    """The URL of a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


SPEC: dict[str, Any] = {
    "name": "digits-mlp",
    "objective": {"metric": "val_loss", "direction": "minimize"},
    "space": {
        "lr": {"type": "float", "low": 1.0e-4, "high": 0.3, "log": True},
        "depth": {"type": "int", "low": 1, "high": 3},
        "act": {"type": "categorical", "choices": ["relu", "tanh"]},
    },
    "optimizer": {"name": "gp"},
    "budget": {"trials": 10},
    "parallel": {"trial_groups": 2, "folds": 5, "workers_per_fold": 2},
    "trainer": {"task": "digits_mlp", "epochs": 3},
}


def trial_json(number: int, value: float | None = 0.1234567, **extra: Any) -> dict[str, Any]:
    return {
        "id": 100 + number,
        "number": number,
        "status": "completed",
        "params": {"lr": 0.0123456, "depth": 2, "act": "relu"},
        "value": value,
        "std_error": 0.00421,
        "started_at": "2025-01-01T10:00:00Z",
        "finished_at": "2025-01-01T10:01:05Z",
        **extra,
    }


def study_json(
    study_id: int = 7, status: str = "running", finished: int = 3, **extra: Any
) -> dict[str, Any]:
    return {
        "id": study_id,
        "name": "digits-mlp",
        "status": status,
        "spec": StudySpec.model_validate(SPEC).resolved(),
        "created_at": "2025-01-01T09:59:00Z",
        "started_at": "2025-01-01T10:00:00Z",
        "finished_at": None,
        "error": None,
        "progress": {
            "budget": 10,
            "finished": finished,
            "running": 2,
            "pending": 0,
            "completed": finished,
            "failed": 0,
            "pruned": 0,
        },
        "best_trial": trial_json(2) if finished else None,
        **extra,
    }


def best_answers(study: dict[str, Any], selection: dict[str, Any] | None = None) -> Callable:
    """A stub's ``handle`` for ``foldwise best``: the study, and its top folds with
    ``selection`` (the best trial's selection-corrected estimate, or none)."""

    def handle(request: Request) -> Answer:
        if request.path.endswith("/insights/folds"):
            top = {"folds": 3, "number": [], "value": [], "std_error": [], "fold_values": []}
            return 200, {**top, "selection": selection}
        return 200, study

    return handle


@pytest.fixture
def spec_dict() -> dict[str, Any]:
    """A valid spec document (a fresh copy: tests may break it)."""
    return copy.deepcopy(SPEC)


@pytest.fixture
def make_study() -> Callable[..., dict[str, Any]]:
    """``make_study(id, status, finished, **fields)``: a study as the API returns it."""
    return study_json


@pytest.fixture
def make_trial() -> Callable[..., dict[str, Any]]:
    """``make_trial(number, value, **fields)``: a trial summary as the API returns it."""
    return trial_json
