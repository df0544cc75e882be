"""100 pollers for 30 s against a real service while a study runs, on SQLite and PostgreSQL.

The pollers start together and ask again a second after each answer: 100 requests in flight at
once, every second, the load that once wedged the service (a request's session held a pooled
connection across thread hops while the threads waited for connections). Latency figures are
the benchmark's business (`benchmarks/api_load.py`); this checks what must never happen: an
error, a time-out, a pool or lock message in the log, a study that stops making progress.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.api_load import LOAD_SPEC, LOG_ALARMS, drive, endpoints, finished_trials
from tests.live_service import LiveService

pytestmark = pytest.mark.slow

CLIENTS, SECONDS, TIMEOUT = 100, 30, 5.0


def test_100_pollers_for_half_a_minute_while_a_study_runs(
    database_url: str, tmp_path: Path
) -> None:
    service = LiveService(database_url, tmp_path / "service.log", ray_num_cpus=1).start()
    try:
        with service.http(timeout=30) as client:
            study_id = client.post("/studies", json=LOAD_SPEC).raise_for_status().json()["id"]
            before = finished_trials(client, study_id)
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
            stopped = client.post(f"/studies/{study_id}/stop").json()
        log = service.log(tail=10**9)
    finally:
        service.stop()
    errors = {name: dict(s.errors) for name, s in stats.items() if s.errors}
    assert not errors, errors
    assert all(len(s.latencies) >= SECONDS / 2 for s in stats.values())  # every client served
    assert not [alarm for alarm in LOG_ALARMS if alarm in log], log[-4000:]
    progress = after["progress"]
    assert progress["finished"] > before and progress["failed"] == 0, progress
    assert after["status"] == "running" and stopped["stop_requested"]
