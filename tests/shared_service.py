"""One live service for the live test files that need no settings of their own.

Starting ``foldwise serve`` with its local Ray costs about 8 core-seconds, and a study's first
folds about 4 more per new worker process; a warm worker group runs the next fold for a fraction
of that. The files in ``SHARING_FILES`` run first, one after another, in one test process
(under pytest-xdist, ``SharedServiceScheduling`` gives a worker process a file at a time, and
all of these as one), and share one service and its warm worker pool. The service stops after
the last of their tests.

What sharing asks of those files: count their own studies (the service holds every file's), and
leave nothing running (whatever a file leaves queued or running is stopped when it ends, and
the next file waits until no worker group is busy, so it finds the service's Ray free).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

from tests.live_service import ROOT, LiveService

SHARING_FILES = frozenset(
    {
        "tests/service/dashboard/test_live_study.py",
        "tests/service/dashboard/test_pareto_plot.py",
        "tests/service/test_artifacts_live.py",
        "tests/service/test_pareto_live.py",
        "tests/service/test_examples_live.py",
        "tests/service/test_exports_live.py",
        "tests/service/test_holdout_live.py",
        "tests/service/test_lifecycle_live.py",
        "tests/service/test_racing_live.py",
        "tests/service/test_scheduler_live.py",
        "tests/service/test_study_warnings_live.py",
        "tests/test_end_to_end.py",
        "tests/test_readme_live.py",
    }
)
"""The test files (from the repository root) that use ``shared_service``."""

TASK_MODULES = "examples,tests.user_tasks"
"""The task packages of every sharing file: the examples and the suite's user tasks."""


SHARED = pytest.StashKey["SharedService"]()
"""Where the session's ``SharedService`` is kept, for ``pytest_runtest_teardown``."""


class SharedServiceScheduling(LoadFileScheduling):
    """pytest-xdist's ``--dist loadfile``, but with the sharing files as one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        path = super()._split_scope(nodeid)
        return "the files sharing a live service" if path in SHARING_FILES else path


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of pytest-xdist's, when loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadFileScheduling | None:
    if config.getoption("dist") == "loadfile":
        return SharedServiceScheduling(config, log)
    return None


def shares(path: Path) -> bool:
    """Whether the test file at ``path`` is one of ``SHARING_FILES``."""
    return path.is_relative_to(ROOT) and path.relative_to(ROOT).as_posix() in SHARING_FILES


@pytest.hookimpl(trylast=True)  # after the other files' order (tests/conftest.py)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The sharing files first (they are slow files all), each in its order, so they run in a
    row without pytest-xdist too."""
    items.sort(key=lambda item: not shares(item.path))


@pytest.hookimpl(trylast=True)  # after the module's fixtures were torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared service after the last test of the sharing files."""
    shared = item.config.stash.get(SHARED, None)
    if shared is not None and shares(item.path):
        if nextitem is None or not shares(nextitem.path):
            shared.stop()


class SharedService:
    """The service, started on first use; stopped after the sharing files' last test."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.live: LiveService | None = None

    def start(self) -> LiveService:
        """The service, started on first use. It is first asked to listen on a port another
        process holds, so the harness's move to another port (``LiveService.start``) runs once
        for every suite; ``test_scheduler_live`` reads the refusal in its log."""
        if self.live is None:
            live = LiveService(
                f"sqlite:///{self.root / 'shared.db'}",
                self.root / "service.log",
                env={"FOLDWISE_TASK_MODULES": TASK_MODULES},
            )
            with socket.socket() as taken:
                taken.bind(("127.0.0.1", live.port))
                taken.listen()
                live.start()
            self.live = live
        return self.live

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def last_study_id(http: httpx.Client) -> int:
    """The newest study's id, 0 when there is none."""
    studies = http.get("/studies", params={"limit": 1}).json()["data"]
    return max((s["id"] for s in studies), default=0)


def stop_studies_after(http: httpx.Client, first: int, timeout: float = 120) -> None:
    """Stop every study newer than ``first`` that has not ended, and wait until they have and
    no worker group is busy (a hold-out score or a refit may still run)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [
            study["id"]
            for status in ("queued", "running")
            for study in http.get("/studies", params={"status": status, "limit": 1000}).json()[
                "data"
            ]
            if study["id"] > first
        ]
        busy = http.get("/health").json()["ray"]["busy_groups"]
        if not left and not busy:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"studies {left} or {busy} worker groups still busy after {timeout} s"
            )
        for study_id in left:
            http.post(f"/studies/{study_id}/stop")
        time.sleep(0.5)


@pytest.fixture(scope="session")
def _shared_service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SharedService]:
    shared = SharedService(tmp_path_factory.mktemp("shared-service"))
    request.config.stash[SHARED] = shared
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def shared_service(
    request: pytest.FixtureRequest, _shared_service: SharedService
) -> Iterator[LiveService]:
    """The shared service (for a module in ``SHARING_FILES``); what the module leaves running
    is stopped when it ends."""
    assert shares(request.path), f"add {request.path} to SHARING_FILES"
    live = _shared_service.start()
    with live.http() as http:
        first = last_study_id(http)
    yield live
    with live.http() as http:
        stop_studies_after(http, first)
