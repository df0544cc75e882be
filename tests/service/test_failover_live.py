"""One scheduler per database, and fail-over: two services on one database, one study. The
follower serves the API but schedules nothing while the leader holds the lease; SIGKILL the
leader and the follower takes the lease within its time and finishes the study, nothing lost
and nothing run twice. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_service import LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow

LEASE_SECONDS = 4.0
BUDGET, GROUPS, FOLDS = 4, 1, 2
EPOCH_SECONDS = 0.25


def _service(url: str, log: Path) -> LiveService:
    env = {"FOLDWISE_SCHEDULER_LEASE_SECONDS": str(LEASE_SECONDS)}
    return LiveService(url, log, ray_num_cpus=2, env=env)


def _scheduler(service: LiveService) -> dict[str, Any]:
    return httpx.get(f"{service.url}/health", timeout=5).json()["scheduler"]


def _trials(api: httpx.Client, study_id: int) -> list[dict[str, Any]]:
    return api.get(f"/studies/{study_id}/trials", params={"limit": 1000}).json()["data"]


def _watch(api: httpx.Client, study_id: int, until: Any, seen: list[int], timeout: float) -> None:
    """Poll the study's trials until ``until(trials)``; ``seen`` collects how many ran at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        trials = _trials(api, study_id)
        seen.append(sum(t["status"] == "running" for t in trials))
        if until(trials):
            return
        time.sleep(0.25)
    raise TimeoutError(f"study {study_id} never got there: {trials}")


def test_the_follower_takes_over_when_the_leader_is_killed(
    database_url: str, tmp_path: Path
) -> None:
    spec = tiny_task_spec(
        ["ok"],
        budget={"trials": BUDGET},
        parallel={"trial_groups": GROUPS, "folds": FOLDS, "workers_per_fold": 1},
        trainer={"task": "tests.user_tasks.tiny:task", "epochs": 6, "batch_size": 16},
    )
    # epochs that wait rather than compute: a trial stays in flight for 1.5 s and more, for
    # little CPU (the suite runs beside it)
    spec["space"]["epoch_seconds"] = {"type": "categorical", "choices": [EPOCH_SECONDS]}
    leader = _service(database_url, tmp_path / "leader.log").start()
    follower: LiveService | None = None
    try:
        assert _scheduler(leader)["leader"] is True
        follower = _service(database_url, tmp_path / "follower.log").start()
        standing = _scheduler(follower)
        assert standing["leader"] is False
        assert standing["holder"] == _scheduler(leader)["holder"]

        # Submitted through the follower: it stores the study, the leader runs it.
        api = follower.http()
        created = api.post("/studies", json=spec)
        assert created.status_code == 201, created.text
        study_id = created.json()["id"]
        in_flight: list[int] = []
        _watch(
            api,
            study_id,
            lambda ts: (
                sum(t["status"] == "completed" for t in ts) >= 2
                and any(t["status"] == "running" for t in ts)
            ),
            in_flight,
            timeout=300,
        )
        assert "running study" not in follower.log(tail=10**6)

        leader.kill()
        killed_at = time.monotonic()
        while not _scheduler(follower)["leader"]:
            assert time.monotonic() - killed_at < LEASE_SECONDS + 10, follower.log()
            time.sleep(0.1)
        took_over = time.monotonic() - killed_at
        print(
            f"\ntake-over after SIGKILL of the leader: {took_over:.2f} s (lease {LEASE_SECONDS} s)"
        )
        assert took_over <= LEASE_SECONDS + 5

        _watch(
            api,
            study_id,
            lambda _ts: api.get(f"/studies/{study_id}").json()["status"] != "running",
            in_flight,
            timeout=600,
        )
        study = api.get(f"/studies/{study_id}").json()
        trials = _trials(api, study_id)
        details = [api.get(f"/studies/{study_id}/trials/{t['number']}").json() for t in trials]
    finally:
        leader.stop()
        if follower is not None:
            follower.stop()

    assert study["status"] == "completed", study
    assert [t["number"] for t in trials] == list(range(BUDGET))
    assert all(t["status"] == "completed" for t in trials), [t["error"] for t in trials]
    params = [json.dumps(t["params"], sort_keys=True) for t in trials]
    assert len(set(params)) == BUDGET, params
    assert max(in_flight) <= GROUPS, in_flight
    for trial in details:
        completed = sorted(f["fold"] for f in trial["folds"] if f["status"] == "completed")
        assert completed == list(range(FOLDS)), trial["folds"]
        assert all(f["status"] in ("completed", "lost") for f in trial["folds"]), trial["folds"]
