"""100 pollers for 10 s against a real service while a study runs, on SQLite and PostgreSQL.

The pollers start together and ask again a second after each answer: 100 requests in flight at
once, every second, the load that once wedged the service (a request's session held a pooled
connection across thread hops while the threads waited for connections). Latency figures are
the benchmark's business (`benchmarks/api_load.py`); this checks what must never happen: an
error, a time-out (a client waits 5 s at most: a wedged pool shows there first, since the
pool's and SQLite's own waits last 30 s), a pool or lock message in the log, a study that stops
making progress.
The load starts once the study trains (its first epoch stored): how long Ray takes to start fold
workers on a busy machine is not what this checks, and progress is counted in epochs, not in
whole trials, so a slow machine that finishes no trial in the window is still seen to progress.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from benchmarks.api_load import LOAD_SPEC, LOG_ALARMS, drive, endpoints
from tests.live_service import LiveService

pytestmark = pytest.mark.slow

CLIENTS, SECONDS, TIMEOUT = 100, 10, 5.0
WARM_TIMEOUT = 240


def training_progress(client: httpx.Client, study_id: int) -> tuple[int, int]:
    """(finished trials, newest epoch row of a running trial): either grows while folds train."""
    finished = client.get(f"/studies/{study_id}").json()["progress"]["finished"]
    cursor = client.get(f"/studies/{study_id}/insights/curves").json()["cursor"]
    return finished, cursor


def wait_training(client: httpx.Client, study_id: int) -> tuple[int, int]:
    """Until the study has stored an epoch; its progress then."""
    deadline = time.monotonic() + WARM_TIMEOUT
    while time.monotonic() < deadline:
        progress = training_progress(client, study_id)
        if progress != (0, 0):
            return progress
        time.sleep(0.5)
    raise TimeoutError(f"study {study_id} stored no epoch within {WARM_TIMEOUT} s")


def test_100_pollers_for_10_seconds_while_a_study_runs(database_url: str, tmp_path: Path) -> None:
    service = LiveService(database_url, tmp_path / "service.log", ray_num_cpus=1).start()
    try:
        with service.http(timeout=30) as client:
            study_id = client.post("/studies", json=LOAD_SPEC).raise_for_status().json()["id"]
            before = wait_training(client, study_id)
            stats = asyncio.run(
                drive(
                    service.url,
                    endpoints(study_id),
                    clients=CLIENTS,
                    seconds=SECONDS,
                    interval=1.0,
                    timeout=TIMEOUT,
                    conditional=False,
                    headers=service.headers,
                )
            )
            after = client.get(f"/studies/{study_id}").json()
            finished, cursor = training_progress(client, study_id)
            stopped = client.post(f"/studies/{study_id}/stop").json()
        log = service.log(tail=10**9)
    finally:
        service.stop()
    # every client asks at least once and each answer is timed or counted as an error, so no
    # errors means every client was served, within TIMEOUT each time
    errors = {name: dict(s.errors) for name, s in stats.items() if s.errors}
    assert not errors, errors
    assert sum(len(s.latencies) for s in stats.values()) >= CLIENTS
    assert not [alarm for alarm in LOG_ALARMS if alarm in log], log[-4000:]
    assert finished > before[0] or cursor > before[1], (before, after["progress"])
    assert after["progress"]["failed"] == 0, after["progress"]
    assert after["status"] == "running" and stopped["stop_requested"]
