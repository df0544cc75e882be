"""SIGTERM to the whole process group of ``foldwise serve`` on a local Ray, as a terminal or a
supervisor sends it, mid-fold, and a Ctrl-C on top while it stops: the service stops once and
exits 0 with no traceback and no crash report from Ray's driver, none of its Ray processes is
left, the study and its trial stay ``running`` in the database, and the next start finishes the
study. A killed service takes its Ray with it."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_service import LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow

CRASH_MARKS = ("Aborted", "Stack trace", "*** SIGTERM", "Check failed", "core dumped")


def _group_leader(service: LiveService) -> LiveService:
    """Start ``service`` as the leader of a new session and process group, as a shell starts a
    job, so that its group can be signalled without signalling pytest."""
    service.start(new_session=True)
    assert service.process is not None and os.getpgid(service.process.pid) == service.process.pid
    return service


def _session_processes(sid: int) -> list[str]:
    """The live (not zombie) processes of session ``sid``, as ``pid name``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        fields = rest.split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(f"{entry.name} {name}")
    return found


def _wait_for(check: Any, timeout: float, what: Any) -> Any:
    """``check()``'s first true value; on timeout an error saying ``what()``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.25)
    raise TimeoutError(what())


def _fold_with_epochs(api: httpx.Client, study_id: int) -> bool:
    """Whether a fold run of the study is running and has reported an epoch."""
    trials = api.get(f"/studies/{study_id}/trials").json()["data"]
    if not trials:
        return False
    folds = api.get(f"/studies/{study_id}/trials/{trials[0]['number']}").json()["folds"]
    return any(f["status"] == "running" and f["epochs"] for f in folds)


def _statuses(db: Path) -> tuple[list[str], list[str], list[str]]:
    """Study, trial and fold-run statuses straight from the database."""
    with sqlite3.connect(db) as conn:
        return tuple(  # type: ignore[return-value]
            [row[0] for row in conn.execute(f"SELECT status FROM {table} ORDER BY id")]
            for table in ("studies", "trials", "fold_runs")
        )


def test_sigterm_to_the_process_group_stops_cleanly_and_the_study_resumes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "f.db"
    spec = tiny_task_spec(
        ["ok"],
        budget={"trials": 1},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 2},
        trainer={
            "task": "tests.user_tasks.tiny:task",
            "epochs": 12,
            "batch_size": 8,
            "checkpoint_every": 1,
        },
    )
    service = _group_leader(LiveService(f"sqlite:///{db}", tmp_path / "first.log"))
    assert service.process is not None
    pid = service.process.pid
    try:
        with service.http() as api:
            study_id = api.post("/studies", json=spec).raise_for_status().json()["id"]
            _wait_for(lambda: _fold_with_epochs(api, study_id), 60, lambda: "no fold ran")
        os.killpg(pid, signal.SIGTERM)
        time.sleep(0.05)  # while it stops, a Ctrl-C on top (what `make run`'s script sent)
        os.kill(pid, signal.SIGINT)
        returncode = service.process.wait(timeout=60)
    finally:
        if service.process.poll() is None:
            os.killpg(pid, signal.SIGKILL)
    log = service.log(tail=100_000)
    assert returncode == 0, log
    assert not [mark for mark in CRASH_MARKS if mark in log], log
    assert "Traceback" not in log and "already stopping (SIGINT)" in log, log
    _wait_for(lambda: not _session_processes(pid), 15, lambda: _session_processes(pid))

    studies, trials, folds = _statuses(db)
    assert studies == ["running"] and trials == ["running"], (studies, trials, folds)
    assert "lost" in folds and "failed" not in folds, folds  # to run again, not failed
    assert "cancelled" not in folds, folds  # its trial did not end: the service stopped

    again = LiveService(f"sqlite:///{db}", tmp_path / "second.log").start()
    try:
        with again.http() as api:
            done = _wait_for(
                lambda: (s := api.get(f"/studies/{study_id}").json())["status"] != "running" and s,
                120,
                again.log,
            )
            trial = api.get(f"/studies/{study_id}/trials/0").json()
        assert done["status"] == "completed", (done, again.log())
        assert _statuses(db)[1] == ["completed"]
        resumed = [
            run
            for run in trial["folds"]
            if run["attempt"] > 0 and any(e["restored"] for e in run["epochs"])
        ]
        assert resumed, trial["folds"]  # the stopped folds went on from their checkpoints
    finally:
        again.stop()


def test_ray_dies_with_a_killed_service(tmp_path: Path) -> None:
    """Ray's processes lead process groups of their own, but SIGKILL of the service (nothing of
    it runs) takes every one with it within seconds: the GCS and raylet by the kernel's
    fate-sharing, the raylet's agents by the service's watchdog (they would wait a minute for
    the dead GCS). A fresh service's Ray holds no idle workers: folds run in actors of their
    own environment."""
    service = LiveService(f"sqlite:///{tmp_path / 'f.db'}", tmp_path / "service.log")
    service = _group_leader(service)
    assert service.process is not None
    pid = service.process.pid
    try:
        names = {p.split(" ", 1)[1] for p in _session_processes(pid)}
        assert {"gcs_server", "raylet"} <= names, names
        assert any(name.startswith("ray::Dashboard") for name in names), names  # comm: 15 chars
        assert "ray::IDLE" not in names, names  # no idle workers started that no fold could use
        service.kill()
        _wait_for(lambda: not _session_processes(pid), 10, lambda: _session_processes(pid))
    finally:  # whatever failed above, nothing of this service outlives the test
        if service.process.poll() is None:
            service.kill()
        for process in _session_processes(pid):
            os.kill(int(process.split(" ", 1)[0]), signal.SIGKILL)
