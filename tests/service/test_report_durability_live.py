"""What a SIGKILL may lose with fold reports written in batches, on each backend: at most the
reports of the batch not yet written, which the lost fold runs report again when they run
again; never a fold end stored without its epochs, a verdict or a trial (DESIGN §7)."""

from __future__ import annotations

import json
import time
from collections import Counter

import httpx
import pytest
from sqlalchemy import func, select

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db.engine import make_engine, make_session_factory
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, TrialRow
from tests.databases import bring_to_head
from tests.live_service import LiveService
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

BUDGET, EPOCHS = 12, 3


def _runs(url: str) -> list[tuple[int, int, int, FoldStatus, int]]:
    """(trial number, fold, attempt, status, epochs stored) of every fold run."""
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            epochs = (
                select(func.count())
                .where(EpochMetricRow.fold_run_id == FoldRunRow.id)
                .scalar_subquery()
            )
            query = select(
                TrialRow.number, FoldRunRow.fold, FoldRunRow.attempt, FoldRunRow.status, epochs
            ).join(FoldRunRow.trial)
            return [tuple(row) for row in session.execute(query)]
    finally:
        engine.dispose()


def _trials(url: str) -> list[tuple[int, TrialStatus]]:
    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as session:
            return [tuple(r) for r in session.execute(select(TrialRow.number, TrialRow.status))]
    finally:
        engine.dispose()


def test_a_kill_loses_no_fold_end_verdict_or_trial_and_the_lost_runs_report_again(
    database_url: str, tmp_path
) -> None:
    bring_to_head(database_url)
    cluster = {"nodes": 1, "cpus_per_node": 4, "epoch_seconds": [0.4, 0.4]}
    env = {
        "FOLDWISE_EXECUTOR": "simulated",
        "FOLDWISE_SIMULATED_CLUSTER": json.dumps(cluster),
        "FOLDWISE_AUTH": "false",
        "FOLDWISE_REPORT_TICK_SECONDS": "1.5",  # a kill finds reports waiting for their batch
    }
    document = study_spec(
        space={"x": {"type": "float", "low": 0.0, "high": 1.0}},
        budget={"trials": BUDGET},
        parallel={"trial_groups": 2, "folds": 2, "workers_per_fold": 1},
        trainer={"task": "digits_mlp", "epochs": EPOCHS, "batch_size": 64},
    )
    service = LiveService(database_url, tmp_path / "first.log", env=env, admin_token=False)
    service.start()
    try:
        study = httpx.post(f"{service.url}/studies", json=document, timeout=30).json()["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = _runs(database_url)
            if sum(r[3] is FoldStatus.COMPLETED for r in runs) >= 4 and any(
                r[3] is FoldStatus.RUNNING and r[4] >= 1 for r in runs
            ):
                break
            time.sleep(0.1)
        time.sleep(0.5)  # mid-epoch, mid-tick
        service.kill()
    finally:
        service.stop()
    before = _runs(database_url)
    trials_before = dict(_trials(database_url))
    # a fold end is stored with every epoch before it, whatever the batches held
    assert all(r[4] == EPOCHS for r in before if r[3] is FoldStatus.COMPLETED), before
    interrupted = [r for r in before if r[3] is FoldStatus.RUNNING]
    assert interrupted, before

    again = LiveService(database_url, tmp_path / "second.log", env=env, admin_token=False)
    again.start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            answer = httpx.get(f"{again.url}/studies/{study}", timeout=30).json()
            if answer["status"] in (StudyStatus.COMPLETED, StudyStatus.FAILED):
                break
            time.sleep(0.3)
    finally:
        again.stop()
    assert answer["status"] == StudyStatus.COMPLETED, again.log()
    after = _runs(database_url)
    trials_after = dict(_trials(database_url))
    assert len(trials_after) == BUDGET  # no trial lost, none made twice
    assert set(trials_after.values()) == {TrialStatus.COMPLETED}
    for number, status in trials_before.items():  # every verdict taken stands
        if status is TrialStatus.COMPLETED:
            assert trials_after[number] is TrialStatus.COMPLETED
    # what the kill cut short was marked lost and ran again, reporting every epoch anew
    statuses = {(r[0], r[1], r[2]): r[3] for r in after}
    for number, fold, attempt, *_ in interrupted:
        assert statuses[(number, fold, attempt)] is FoldStatus.LOST
        assert statuses.get((number, fold, attempt + 1)) is FoldStatus.COMPLETED
    completed = Counter((r[0], r[1]) for r in after if r[3] is FoldStatus.COMPLETED)
    assert set(completed.values()) == {1} and len(completed) == BUDGET * 2
    assert all(r[4] == EPOCHS for r in after if r[3] is FoldStatus.COMPLETED)
