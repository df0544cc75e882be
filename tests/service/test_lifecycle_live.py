"""A study's life in a real service: refused when it could never run, a hung fold failed with
the reason, stop and delete giving back every Ray resource, nothing left running, artifacts gone
with their study and ids never reused; and `foldwise serve` bounding a request's head. On the
shared live service (tests/shared_service.py: a local Ray with 4 CPUs)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_service import LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live(shared_service: LiveService) -> LiveService:
    return shared_service


@pytest.fixture
def api(live: LiveService) -> Iterator[httpx.Client]:
    with live.http() as client:
        yield client


def _tiny(modes: list[str], **overrides: Any) -> dict[str, Any]:
    """One trial of the tiny task, one at a time, unless `overrides` say otherwise."""
    one = {
        "budget": {"trials": 1},
        "parallel": {"trial_groups": 1, "folds": 2, "workers_per_fold": 2},
    }
    return tiny_task_spec(modes, **{**one, **overrides})


ONE_RANK = {"trial_groups": 1, "folds": 2, "workers_per_fold": 1}
"""For a user error in build_model: it ends the fold's worker group, so each such fold starts
new worker processes, and one rank shows it as well as two."""


def _wait(api: httpx.Client, study_id: int, done: Any, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        study = api.get(f"/studies/{study_id}").json()
        if done(study):
            return study
        time.sleep(0.5)
    raise TimeoutError(f"study {study_id} never got there: {study}")


def _finished(study: dict[str, Any]) -> bool:
    return study["status"] in ("completed", "stopped", "failed")


def _nothing_running(api: httpx.Client, study_id: int) -> None:
    """No trial of the study, and no fold run of any trial, is left running."""
    trials = api.get(f"/studies/{study_id}/trials", params={"limit": 1000}).json()["data"]
    assert all(t["status"] not in ("running", "pending") for t in trials), trials
    for trial in trials:
        folds = api.get(f"/studies/{study_id}/trials/{trial['number']}").json()["folds"]
        assert all(f["status"] != "running" for f in folds), folds


def _ray_is_free(api: httpx.Client, timeout: float = 30) -> dict[str, Any]:
    """Until no worker group is busy and every CPU not held by an idle warm group is free."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ray = api.get("/health").json()["ray"]
        if ray["busy_groups"] == 0 and ray["cpus_free"] + ray["idle_cpus"] >= ray["cpus"]:
            return ray
        time.sleep(0.5)
    raise AssertionError(f"Ray resources still held: {ray}")


@pytest.mark.parametrize(
    ("overrides", "loc"),
    [
        ({"parallel": {"folds": 2, "workers_per_fold": 1000}}, "workers_per_fold"),
        ({"resources": {"cpus_per_worker": 64}}, "cpus_per_worker"),
        ({"resources": {"cpus_per_worker": 0.5, "gpus_per_worker": 4}}, "gpus_per_worker"),
    ],
)
def test_a_fold_no_node_can_place_is_refused_at_submit(
    api: httpx.Client, overrides: dict[str, Any], loc: str
) -> None:
    before = api.get("/studies").json()["count"]
    response = api.post("/studies", json=_tiny(["ok"], **overrides))
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"][-1] == loc and "the cluster has" in error["msg"], error
    assert api.get("/studies").json()["count"] == before


def test_a_hung_fold_fails_its_trial_with_the_reason(api: httpx.Client) -> None:
    spec = _tiny(["hang"])
    spec["trainer"]["fold_timeout"] = 8
    study = api.post("/studies", json=spec).json()
    study = _wait(api, study["id"], _finished)
    assert study["status"] == "failed", study
    assert "timed out" in study["error"] and "trainer.fold_timeout (8 s)" in study["error"]
    trial = api.get(f"/studies/{study['id']}/trials/0").json()
    assert trial["status"] == "failed" and "timed out" in trial["error"]
    _nothing_running(api, study["id"])
    _ray_is_free(api)


def test_stop_gives_back_every_ray_resource_and_the_next_study_runs(api: httpx.Client) -> None:
    # Two trials x two folds x two ranks of one CPU, more than the 4 CPUs: some folds run, the
    # others wait to be placed.
    greedy = _tiny(["ok"], budget={"trials": 4}, resources={"cpus_per_worker": 1})
    greedy["parallel"] = {"trial_groups": 2, "folds": 2, "workers_per_fold": 2}
    greedy["trainer"]["epochs"] = 500
    first = api.post("/studies", json=greedy).json()
    _wait(api, first["id"], lambda s: s["progress"]["running"] > 0)
    asked = api.post(f"/studies/{first['id']}/stop")
    assert asked.status_code == 202 and asked.json()["stop_requested"] is True, asked.text
    assert _wait(api, first["id"], _finished)["status"] == "stopped"
    _nothing_running(api, first["id"])
    _ray_is_free(api)
    second = api.post("/studies", json=_tiny(["ok"])).json()
    assert _wait(api, second["id"], _finished)["status"] == "completed"


def test_delete_of_a_running_study_frees_ray_and_its_id_is_never_reused(
    api: httpx.Client,
) -> None:
    spec = _tiny(["ok"], budget={"trials": 50})
    spec["trainer"]["epochs"] = 500
    doomed = api.post("/studies", json=spec).json()
    _wait(api, doomed["id"], lambda s: s["progress"]["running"] > 0)
    assert api.delete(f"/studies/{doomed['id']}").status_code == 202
    assert api.get(f"/studies/{doomed['id']}").status_code == 404  # at once, to every reader
    _ray_is_free(api)
    after = api.post("/studies", json=_tiny(["ok"])).json()
    assert after["id"] > doomed["id"]
    assert _wait(api, after["id"], _finished)["status"] == "completed"


def test_delete_removes_the_artifacts_and_model_routes_check_the_fold(
    api: httpx.Client, live: LiveService
) -> None:
    study = api.post("/studies", json=_tiny(["ok"])).json()
    assert _wait(api, study["id"], _finished)["status"] == "completed"
    folder = Path(live.env["FOLDWISE_ARTIFACT_DIR"]) / f"study-{study['id']}"
    assert api.get(f"/studies/{study['id']}/best/folds/1/model").status_code == 200
    beyond_k = api.get(f"/studies/{study['id']}/trials/0/folds/2/model")
    assert beyond_k.status_code == 404 and "has 2 folds" in beyond_k.json()["detail"]
    assert folder.is_dir()
    assert api.delete(f"/studies/{study['id']}").status_code == 202
    deadline = time.monotonic() + 30  # the scheduler carries the deletion out within a poll
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not folder.exists()
    newer = api.post("/studies", json=_tiny(["ok"])).json()
    assert newer["id"] > study["id"]
    assert api.get(f"/studies/{newer['id']}/trials/0/folds/0/model").status_code == 404
    api.post(f"/studies/{newer['id']}/stop")


def test_workers_hold_no_service_settings_or_database_credentials(api: httpx.Client) -> None:
    study = api.post("/studies", json=_tiny(["env"], parallel=ONE_RANK)).json()
    study = _wait(api, study["id"], _finished)
    trial = api.get(f"/studies/{study['id']}/trials/0").json()
    assert "worker environment holds: []" in trial["error"], trial["error"]


def test_a_study_whose_last_trials_fail_the_same_way_stops_as_failed(api: httpx.Client) -> None:
    spec = _tiny(
        ["raise"], budget={"trials": 20, "max_consecutive_failures": 3}, parallel=ONE_RANK
    )
    study = _wait(api, api.post("/studies", json=spec).json()["id"], _finished)
    assert study["status"] == "failed", study
    assert study["error"].startswith("the last 3 trials failed with the same error: ")
    assert "tiny task refuses mode=raise" in study["error"]
    trials = api.get(f"/studies/{study['id']}/trials", params={"limit": 100}).json()["data"]
    assert 3 <= len(trials) < 20 and all(t["status"] == "failed" for t in trials)
    _nothing_running(api, study["id"])


def test_metrics_count_what_the_scheduler_did(api: httpx.Client) -> None:
    study = api.post("/studies", json=_tiny(["ok"])).json()
    assert _wait(api, study["id"], _finished)["status"] == "completed"
    text = api.get("/metrics").text
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(lines['foldwise_trials_ended_total{status="completed"}']) >= 1
    assert float(lines['foldwise_fold_runs_ended_total{status="completed"}']) >= 2
    assert float(lines["foldwise_fold_queue_wait_seconds_count"]) >= 2
    assert float(lines['foldwise_suggestion_seconds_count{optimizer="random"}']) >= 1
    assert lines["foldwise_scheduler_leader"] == "1.0"
    assert lines['foldwise_studies{status="completed"}'] != "0.0"


def test_foldwise_serve_answers_a_head_past_its_bound_with_431(
    live: LiveService, api: httpx.Client
) -> None:
    # uvicorn's own protocol read a header of any size (100 MB: 15 s of a blocked event loop)
    port = int(live.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 40_000)
        sock.settimeout(30)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    padded = api.get("/health", headers={"X-Pad": "a" * 20_000})  # within the 32 KiB default
    assert padded.status_code == 200
