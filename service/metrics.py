"""The service's Prometheus metrics (``GET /metrics``).

Counters and histograms are this process's: the scheduler's store counts trials and folds as it
records their end, the executor observes how long each fold waited for its workers, and the
study runner how long each suggestion took. Gauges (studies by status, trials and folds in
flight, whether this instance schedules) are read from the database at each scrape, so every
instance on a database reports the same state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from foldwise.schemas import FoldStatus, StudyStatus, TrialStatus
from foldwise.service.db.models import FoldRunRow, StudyRow, TrialRow

__all__ = ["CONTENT_TYPE_LATEST", "exposition"]

_WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)
_SUGGEST_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

TRIALS_ENDED = Counter(
    "foldwise_trials_ended",
    "Trials this instance's scheduler recorded as ended, by how they ended",
    ["status"],
)
FOLDS_ENDED = Counter(
    "foldwise_fold_runs_ended",
    "Fold runs this instance's scheduler recorded as ended, by how they ended",
    ["status"],
)
FOLD_QUEUE_WAIT = Histogram(
    "foldwise_fold_queue_wait_seconds",
    "Time a fold waited for a worker group (Ray resources) before it started",
    buckets=_WAIT_BUCKETS,
)
SUGGESTION_SECONDS = Histogram(
    "foldwise_suggestion_seconds",
    "Time the optimizer took to take in the history and suggest a batch of configurations",
    ["optimizer"],
    buckets=_SUGGEST_BUCKETS,
)

DB_COMMITS = Counter(
    "foldwise_db_commits",
    "Write transactions this process committed, by lane (api, scheduler, lease, reports)",
    ["lane"],
)
LOOP_LAG_SECONDS = Histogram(
    "foldwise_event_loop_lag_seconds",
    "How late the service's event loop ran a callback it was asked to run on time",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10),
)
REPORT_WRITE_SECONDS = Histogram(
    "foldwise_report_write_seconds",
    "From a fold run's report (an epoch, a checkpoint) reaching the scheduler to its batch "
    "committing",
    buckets=_WAIT_BUCKETS,
)
REPORT_BATCH_ROWS = Histogram(
    "foldwise_report_batch_reports",
    "Fold reports written in each of the scheduler's batches",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000),
)
FOLD_SLOT_SECONDS = Counter(
    "foldwise_fold_slot_seconds",
    "Slot-seconds of the running studies' fold slots, busy (its fold run trains on its "
    "workers) or idle (empty, or its run waits for workers); "
    "busy / (busy + idle) is the slot utilisation",
    ["state"],
)


@dataclass(frozen=True)
class DatabaseState:
    """What the gauges report, read in one session at scrape time."""

    studies: dict[str, int]
    trials_running: int
    folds_running: int

    @classmethod
    def read(cls, session: Session) -> DatabaseState:
        by_status = select(StudyRow.status, func.count()).where(
            StudyRow.delete_requested.is_(False)
        )
        counts = dict.fromkeys((s.value for s in StudyStatus), 0)
        for status, n in session.execute(by_status.group_by(StudyRow.status)):
            counts[StudyStatus(status).value] = n
        trials = select(func.count()).where(TrialRow.status == TrialStatus.RUNNING)
        folds = select(func.count()).where(FoldRunRow.status == FoldStatus.RUNNING)
        return cls(counts, session.scalar(trials) or 0, session.scalar(folds) or 0)


class _StateCollector(Collector):
    def __init__(self, state: DatabaseState, leader: bool | None) -> None:
        self.state, self.leader = state, leader

    def collect(self) -> Iterator[GaugeMetricFamily]:
        studies = GaugeMetricFamily(
            "foldwise_studies", "Studies in the database, by status", labels=["status"]
        )
        for status, n in self.state.studies.items():
            studies.add_metric([status], n)
        yield studies
        yield GaugeMetricFamily(
            "foldwise_trials_running", "Trials running now", value=self.state.trials_running
        )
        yield GaugeMetricFamily(
            "foldwise_fold_runs_running",
            "Fold runs (one DDP job each) running now",
            value=self.state.folds_running,
        )
        if self.leader is not None:
            yield GaugeMetricFamily(
                "foldwise_scheduler_leader",
                "1 when this instance holds the scheduler's lease and schedules",
                value=int(self.leader),
            )


def exposition(state: DatabaseState, leader: bool | None) -> bytes:
    """The text format of this process's metrics and the database state's gauges."""
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(_StateCollector(state, leader))
    return generate_latest(REGISTRY) + generate_latest(scrape)
