"""Storage: SQLAlchemy 2.0 typed ORM models for studies, trials, fold runs and epoch metrics."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from foldwise.schemas import FoldStatus, JobStatus, Role, StudyStatus, TrialStatus
from foldwise.spec import STORED, StudySpec

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    PostgreSQL keeps the zone; SQLite keeps none, so values are stored as UTC and read back with
    UTC attached. A naive value is taken to be UTC already.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None or value.tzinfo is None:
            return value
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


class StoredSpec(TypeDecorator[StudySpec]):
    """A study's spec: written resolved (every default filled in) as JSON, read back as its
    type. Read as stored, so checks added since it was accepted are not made again.

    A stored spec never changes, and every read of a study row reads it: the type is built once
    per document (``_read_spec``) and shared, so a row's spec is replaced, never changed in
    place."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: StudySpec | None, dialect: Any) -> dict[str, Any] | None:
        return None if value is None else value.resolved()

    def process_result_value(self, value: dict[str, Any] | None, dialect: Any) -> StudySpec | None:
        return None if value is None else _read_spec(json.dumps(value, separators=(",", ":")))


@functools.lru_cache(maxsize=1024)
def _read_spec(document: str) -> StudySpec:
    return StudySpec.model_validate_json(document, context={STORED: True})


def _status(enum: type[StrEnum]) -> Enum:
    # Stored as plain strings: adding a state later needs no ALTER TYPE on PostgreSQL.
    return Enum(enum, native_enum=False, length=16, values_callable=lambda e: [m.value for m in e])


BigId = BigInteger().with_variant(Integer, "sqlite")
"""Ids are 64-bit: BIGINT on PostgreSQL (a SERIAL stops at 2^31, and epoch rows reach that),
INTEGER on SQLite (64-bit already, and only INTEGER PRIMARY KEY is the rowid)."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON}


class StudyRow(Base):
    __tablename__ = "studies"
    __table_args__ = {"sqlite_autoincrement": True}  # ids of deleted studies are never reused

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[StudyStatus] = mapped_column(_status(StudyStatus), index=True)
    spec: Mapped[StudySpec] = mapped_column(StoredSpec)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    stop_requested: Mapped[bool] = mapped_column(default=False)
    waiting: Mapped[str | None] = mapped_column(Text)
    """Why a running study has folds ready that do not start (the cluster is full), or None."""
    delete_requested: Mapped[bool] = mapped_column(default=False, server_default=false())
    """Asked for and not yet carried out by the scheduler: the study is gone to every reader."""
    owner: Mapped[str | None] = mapped_column(String(64))
    """The name of the token that created the study (members may stop and delete their own)."""
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Bumped in the same transaction as every change to the study, its trials, folds or
    epochs: readers compare it to know whether what they hold is current (ETags, caches)."""
    trials_revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Bumped with every change to the study itself or to a trial, not to a fold run or an
    epoch: what the study's summary, trial list and history depend on, which therefore stay
    current (cached, 304) while folds report epochs many times a second."""
    code_hash: Mapped[str | None] = mapped_column(String(64))
    """The content hash of the task package the study runs, as it was at submit (shipped to
    the workers per study); None for a built-in task."""
    warm_start: Mapped[dict[str, Any] | None]
    """What the spec's ``warm_start`` brought in at submit: ``{studies, observations,
    skipped}`` (``schemas.WarmStartSummary``); None without one."""
    task_profile: Mapped[str | None] = mapped_column(Text)
    """The task's profile found at submit (``trainers.task.TaskProfile`` as JSON): its kind
    and what it gives, so later requests need not load its code again; None before 0009."""
    holdout_status: Mapped[JobStatus | None] = mapped_column(_status(JobStatus), index=True)
    """Where its hold-out score is (None: never asked for); what the scheduler polls."""
    holdout: Mapped[dict[str, Any] | None]
    """The hold-out score asked for and what it found (``schemas.Holdout``)."""
    warnings: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    """What its fold runs knew was suspect, one entry per distinct warning
    (``schemas.StudyWarning``; ``db.study_warnings``); None while there is none."""

    trials: Mapped[list[TrialRow]] = relationship(
        back_populates="study", cascade="all, delete-orphan", passive_deletes=True
    )


class TrialRow(Base):
    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("study_id", "number"),
        Index("ix_trials_study_id_status", "study_id", "status"),
        Index("ix_trials_study_id_value", "study_id", "value"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    study_id: Mapped[int] = mapped_column(BigId, ForeignKey("studies.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[TrialStatus] = mapped_column(_status(TrialStatus))
    params: Mapped[dict[str, Any]]
    value: Mapped[float | None] = mapped_column(Float)
    std_error: Mapped[float | None] = mapped_column(Float)
    value_folds: Mapped[int | None] = mapped_column(Integer)
    """How many fold values ``value`` is the mean of: K when completed, fewer when pruned."""
    objective_values: Mapped[list[list[float | None]] | None] = mapped_column(JSON)
    """With several objectives: [mean, standard error] of each, in the spec's order (``value``
    and ``std_error`` are the first's)."""
    constraint_values: Mapped[list[float] | None] = mapped_column(JSON)
    """Each constraint's fold mean, in the spec's order."""
    feasible: Mapped[bool | None]
    """Whether every constraint holds (None: the study has none, or the trial has no value)."""
    pruned_reason: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]

    study: Mapped[StudyRow] = relationship(back_populates="trials")
    fold_runs: Mapped[list[FoldRunRow]] = relationship(
        back_populates="trial",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="(FoldRunRow.fold, FoldRunRow.attempt)",
    )


class FoldRunRow(Base):
    """One attempt at a run of the study's task on the executor: a fold of a trial (``trial_id``,
    ``fold``) or a refit (``refit_id``). A retried run gets a new row with attempt + 1; both
    kinds have the same statuses, epochs and files, written by the same path."""

    __tablename__ = "fold_runs"
    __table_args__ = (
        UniqueConstraint("trial_id", "fold", "attempt"),
        UniqueConstraint("refit_id", "attempt"),
        CheckConstraint(
            "(trial_id IS NOT NULL AND fold IS NOT NULL AND refit_id IS NULL)"
            " OR (trial_id IS NULL AND fold IS NULL AND refit_id IS NOT NULL)",
            name="one_owner",
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    trial_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("trials.id", ondelete="CASCADE")
    )
    fold: Mapped[int | None] = mapped_column(Integer)
    refit_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("refits.id", ondelete="CASCADE"), index=True
    )
    """The refit this is an attempt of (``trial_id`` and ``fold`` are then None)."""
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[FoldStatus] = mapped_column(_status(FoldStatus))
    value: Mapped[float | None] = mapped_column(Float)
    metric_values: Mapped[dict[str, float] | None] = mapped_column(JSON)
    """With several objectives or constraints: the value of each metric they name, read at the
    epoch the first objective picks (``value`` is the first objective's)."""
    error: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    train_seconds: Mapped[float | None] = mapped_column(Float)
    placement: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    """Where each rank ran: [{rank, node_id, node_ip, gpu_ids}], once its workers were placed."""
    checkpoint_epoch: Mapped[int | None] = mapped_column(Integer)
    """The last epoch after which this attempt kept a checkpoint."""
    model_saved: Mapped[bool] = mapped_column(default=False, server_default=false())
    """The fold's model is in the artifact store."""

    trial: Mapped[TrialRow | None] = relationship(back_populates="fold_runs")
    refit: Mapped[RefitRow | None] = relationship(back_populates="runs")
    epochs: Mapped[list[EpochMetricRow]] = relationship(
        back_populates="fold_run",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="EpochMetricRow.epoch",
    )


class EpochMetricRow(Base):
    __tablename__ = "epoch_metrics"
    __table_args__ = (UniqueConstraint("fold_run_id", "epoch"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    fold_run_id: Mapped[int] = mapped_column(BigId, ForeignKey("fold_runs.id", ondelete="CASCADE"))
    epoch: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]]
    restored: Mapped[bool] = mapped_column(default=False, server_default=false())
    """Replayed from an earlier attempt's checkpoint (trained by that attempt)."""
    stopped: Mapped[bool] = mapped_column(default=False, server_default=false())
    """The run was told to stop in this epoch, its last; it counts for nothing."""

    fold_run: Mapped[FoldRunRow] = relationship(back_populates="epochs")


class WarmStartObservationRow(Base):
    """A finished trial of an earlier study, copied at submit into the study it warm-starts:
    the optimizer's prior observation, kept even if that study is deleted later. Not a trial
    of this study. ``params`` are already the configuration of this study's space."""

    __tablename__ = "warm_start_observations"
    __table_args__ = (UniqueConstraint("study_id", "position"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    study_id: Mapped[int] = mapped_column(BigId, ForeignKey("studies.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    """The order the optimizer is told them in, the same at every rebuild."""
    source_study_id: Mapped[int] = mapped_column(BigInteger)
    """No foreign key: the earlier study may be deleted and this copy stays."""
    source_trial_number: Mapped[int] = mapped_column(Integer)
    status: Mapped[TrialStatus] = mapped_column(_status(TrialStatus))
    params: Mapped[dict[str, Any]]
    value: Mapped[float | None] = mapped_column(Float)
    std_error: Mapped[float | None] = mapped_column(Float)
    value_folds: Mapped[int | None] = mapped_column(Integer)


class RefitRow(Base):
    """A trial's params trained on all the training data: asked for through the API (or by the
    end of a study whose hold-out score needs it) as ``queued``, run by the scheduler through
    the fold path, its files under ``refit_artifact_key``. Each attempt is a run
    (``FoldRunRow.refit_id``); a retried attempt resumes from its checkpoint."""

    __tablename__ = "refits"
    __table_args__ = (UniqueConstraint("study_id", "number"), {"sqlite_autoincrement": True})

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    study_id: Mapped[int] = mapped_column(BigId, ForeignKey("studies.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    trial_number: Mapped[int] = mapped_column(Integer)
    status: Mapped[JobStatus] = mapped_column(_status(JobStatus), index=True)
    epochs: Mapped[int] = mapped_column(Integer)
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    test_metrics: Mapped[dict[str, Any] | None]
    """Its model's score on the task's test data (``trainers.holdout``)."""

    runs: Mapped[list[FoldRunRow]] = relationship(
        back_populates="refit",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="FoldRunRow.attempt",
    )
    """Its attempts, each a run like a fold's: its epochs, checkpoint and model."""

    @property
    def last_run(self) -> FoldRunRow | None:
        """Its latest attempt (None while it is queued)."""
        return self.runs[-1] if self.runs else None


class TokenRow(Base):
    """An API token: its secret is shown once when created and stored only as a SHA-256 hash
    (the secret is 256 random bits, so a fast hash is as safe as a slow one)."""

    __tablename__ = "api_tokens"
    __table_args__ = (
        # one active token a name: the check before an insert does not hold against another
        # insert at the same time
        Index(
            "ix_api_tokens_active_name",
            "name",
            unique=True,
            sqlite_where=text("revoked_at IS NULL"),
            postgresql_where=text("revoked_at IS NULL"),
        ),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    role: Mapped[Role] = mapped_column(_status(Role))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]


class SchedulerLeaseRow(Base):
    """Who schedules: the service instance holding the lease until ``expires_ms`` (the
    database's clock, in milliseconds). ``epoch`` grows at each change of hands, and every
    scheduler write checks it, so a former holder's late writes are refused."""

    __tablename__ = "scheduler_leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    epoch: Mapped[int] = mapped_column(Integer)
    expires_ms: Mapped[int] = mapped_column(BigInteger)
    acquired_at: Mapped[datetime] = mapped_column(default=utcnow)
