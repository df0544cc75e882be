"""Wire format of the REST API responses (DESIGN §4), shared by service, SDK and CLI."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, computed_field

from foldwise.ansi import strip_ansi
from foldwise.space import StrictModel
from foldwise.spec import StudySpec

T = TypeVar("T")

PlainText = Annotated[str, AfterValidator(strip_ansi)]
"""Text for people (errors, tracebacks, reasons): terminal colour codes are dropped on the way
in, so rows stored before the executor stripped them read clean in every face."""


class StudyStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (StudyStatus.COMPLETED, StudyStatus.STOPPED, StudyStatus.FAILED)


class TrialStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    PRUNED = "pruned"

    @property
    def finished(self) -> bool:
        return self in (TrialStatus.COMPLETED, TrialStatus.FAILED, TrialStatus.PRUNED)


class FoldStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    LOST = "lost"
    """The service stopped while this attempt ran; a later attempt re-runs the fold."""
    CANCELLED = "cancelled"
    PRUNED = "pruned"
    """Stopped by the pruning rule: its curve was clearly worse than other trials' runs of the
    same fold; its value is the one it had reached."""


class JobStatus(StrEnum):
    """Where a study's refit or hold-out score is: asked for, running, or ended."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.COMPLETED, JobStatus.FAILED)


class Role(StrEnum):
    """What a token may do: viewers read; members also create studies and stop or delete
    their own; admins stop or delete any study."""

    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Page(_Out, Generic[T]):
    data: list[T]
    count: int = Field(..., description="Rows matching the query, before limit and offset")


class Progress(_Out):
    budget: int
    finished: int
    running: int
    pending: int
    completed: int
    failed: int
    pruned: int


class TrialSummary(_Out):
    id: int
    number: int
    status: TrialStatus
    params: dict[str, Any]
    value: float | None = None
    std_error: float | None = None
    value_folds: int | None = Field(
        None, description="How many folds the value rests on: all of them unless pruned"
    )
    pruned_reason: PlainText | None = Field(None, description="Why the trial was pruned")
    error: PlainText | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    objective_values: list[list[float | None]] | None = Field(
        None,
        description="With several objectives: [fold mean, standard error] of each, in the "
        "order of the spec's objectives (value and std_error are the first's)",
    )
    constraint_values: list[float] | None = Field(
        None, description="Each constraint's fold mean, in the order of the spec's constraints"
    )
    feasible: bool | None = Field(
        None, description="Whether every constraint holds (null: no constraints, or no value)"
    )


class ObjectiveName(_Out):
    metric: str
    direction: Literal["minimize", "maximize"]


class ParetoFront(_Out):
    """A study's Pareto front: completed trials that respect every constraint and that no other
    such trial beats on every objective."""

    objectives: list[ObjectiveName] = Field(
        ..., description="The objectives, in the order of each trial's objective_values"
    )
    data: list[TrialSummary]
    count: int


class ObjectivePoints(_Out):
    """Completed trials in objective space, for the dashboard's Pareto plot: parallel arrays,
    ``values[j][i]`` the j-th objective of trial ``number[i]``."""

    objectives: list[ObjectiveName]
    number: list[int]
    values: list[list[float | None]]
    feasible: list[bool | None] = Field(..., description="null: the study has no constraints")
    front: list[bool] = Field(..., description="Whether the trial is on the Pareto front")
    count: int = Field(..., description="Completed trials in all")
    sampled: bool = Field(..., description="Only some of them are here (the front always is)")


class WarmStartSummary(_Out):
    """What a study's ``warm_start`` brought in at submit."""

    studies: list[int] = Field(..., description="The earlier studies named in the spec")
    observations: int = Field(
        ...,
        description="Their finished trials that seed the optimizer (not trials of this study)",
    )
    skipped: int = Field(
        ...,
        description="Their finished trials left out: outside this study's space, or past "
        "the limit of observations",
    )


class HoldoutObjective(_Out):
    """The study's objective on the test set, next to its cross-validated value."""

    metric: str = Field(..., description="The study's objective metric (a validation metric)")
    test_metric: str = Field(
        ..., description="The test metric of the same name without val_ (val_loss: loss)"
    )
    cv: float | None = Field(None, description="The trial's cross-validated value (fold mean)")
    cv_std_error: float | None = None
    folds: float | None = Field(
        None,
        description="The mean of the fold models' own test scores: the models the CV value "
        "rests on, on data none saw (the difference is the CV value's selection bias)",
    )
    ensemble: float | None = None
    refit: float | None = None


class Holdout(_Out):
    """A study's score on the task's test data: the best (or a named) trial's fold models as
    an ensemble and/or a model refit on all the training data. Never part of the
    optimisation."""

    status: JobStatus
    trial: int | None = Field(..., description="The trial scored (its number)")
    score: str = Field(..., description="ensemble | refit | both")
    requested_at: datetime
    finished_at: datetime | None = None
    ensemble: dict[str, float] | None = Field(
        None, description="Metrics of the mean of the trial's fold models' predictions"
    )
    folds: dict[str, float] | None = Field(
        None, description="The mean of each fold model's own metrics on the test data"
    )
    refit: dict[str, float] | None = Field(
        None, description="Metrics of the model refit on all the training data"
    )
    refit_number: int | None = Field(None, description="The refit scored (GET .../refits/N)")
    objective: HoldoutObjective | None = None
    error: PlainText | None = Field(
        None,
        description="Why the score failed, or the half of it that did (`refit: ...`) beside "
        "the other's result",
    )


class StudyWarning(_Out):
    """Something the study's fold runs knew was suspect about what they reported, once per
    distinct message: a metric computed over one rank's share of a fold, validation read
    through the training transforms, what Lightning or the task's own code warned of."""

    kind: str = Field(
        ...,
        description="partial_metric | augmented_validation | validation_samples | lightning "
        "| task",
    )
    message: PlainText
    trials: list[int] = Field(
        default_factory=list, description="The trials whose fold runs said it (the first 100)"
    )
    runs: int = Field(..., description="How many fold runs said it")
    first_seen: datetime
    last_seen: datetime


class Study(_Out):
    id: int
    name: str
    status: StudyStatus
    spec: StudySpec = Field(..., description="The spec as stored: every default filled in")
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: PlainText | None = None
    owner: str | None = Field(None, description="The name of the token that created it")
    stop_requested: bool = Field(
        False, description="A stop was asked for; the scheduler is carrying it out"
    )
    waiting: PlainText | None = Field(
        None,
        description="Why the study has fold runs ready that do not start (the cluster's "
        "resources are in use), or that Ray has not placed for over 10 s, or null",
    )
    progress: Progress
    best_trial: TrialSummary | None = None
    warm_start: WarmStartSummary | None = Field(
        None, description="The prior observations its spec's warm_start brought in, or null"
    )
    code_hash: str | None = Field(
        None,
        description="Content hash of the task package the study runs, as it was when it was "
        "submitted; null for a built-in task",
    )
    holdout: Holdout | None = Field(
        None, description="Its score on the task's test data, once asked for, or null"
    )
    warnings: list[StudyWarning] = Field(
        default_factory=list,
        description="What its fold runs knew was suspect about their results, each once, "
        "with the trials it concerns",
    )


class EpochMetrics(_Out):
    epoch: int
    metrics: dict[str, float] = Field(
        ..., description="What the task reported and foldwise measured of the epoch"
    )
    restored: bool = Field(
        False, description="Replayed from an earlier attempt's checkpoint (trained by it)"
    )
    stopped: bool = Field(
        False, description="The run was stopped in this epoch (racing, pruning, the study)"
    )


class RankPlacement(_Out):
    """Where one rank of a fold run ran."""

    rank: int
    node_id: str = Field(..., description="The Ray node's id")
    node_ip: str | None = None
    gpu_ids: list[str] = Field(default_factory=list, description="GPUs Ray gave the rank")


class FoldRun(_Out):
    fold: int
    attempt: int
    status: FoldStatus
    value: float | None = None
    metric_values: dict[str, float] | None = Field(
        None,
        description="With several objectives or constraints: each metric they name, at the "
        "epoch the first objective picks",
    )
    error: PlainText | None = None
    traceback: PlainText | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    train_seconds: float | None = Field(None, description="Time inside training epochs")
    placement: list[RankPlacement] | None = Field(
        None, description="The node (and GPUs) each rank ran on; null until placed"
    )
    checkpoint_epoch: int | None = Field(
        None, description="Last epoch this attempt checkpointed, if any"
    )
    model_saved: bool = Field(
        False, description="The fold's model was saved: GET .../folds/{fold}/model"
    )
    epochs: list[EpochMetrics] = Field(default_factory=list)

    @computed_field(
        description="Epochs this attempt took over from an earlier attempt's checkpoint"
    )
    @property
    def resumed_epochs(self) -> int:
        return sum(1 for e in self.epochs if e.restored)


class Trial(TrialSummary):
    folds: list[FoldRun] = Field(default_factory=list)

    @computed_field(description="Epoch timings exist: GET .../trials/{number}/timeline")
    @property
    def has_timeline(self) -> bool:
        return any("epoch_start" in e.metrics for f in self.folds for e in f.epochs)

    @computed_field(description="Some fold saved its model")
    @property
    def has_models(self) -> bool:
        return any(f.model_saved for f in self.folds)


class Refit(_Out):
    """A trial's params trained on all the training data through the fold path (DDP,
    checkpoints, the study's code); its model downloads like a fold's."""

    number: int = Field(..., description="The refit's number in its study, from 1")
    trial: int = Field(..., description="The trial whose params it trains")
    status: JobStatus
    epochs: int = Field(..., description="The epochs it trains")
    attempt: int = Field(0, description="Its attempt: above 0 after its workers were lost")
    requested_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: PlainText | None = None
    curve: list[EpochMetrics] = Field(
        default_factory=list,
        description="What each epoch reported, validated on the training data itself",
    )
    test_metrics: dict[str, float] | None = Field(
        None,
        description="Its model's score on the task's test data, when it has some (a completed "
        "refit whose score failed says why in error)",
    )
    model_saved: bool = Field(False, description="Its model is in the artifact store")


class HoldoutRequest(StrictModel):
    """``POST /studies/{id}/holdout``: score an ended study's trial on the task's test data."""

    score: Literal["ensemble", "refit", "both"] | None = Field(
        None, description="Default: the spec's holdout.score, else ensemble"
    )
    trial: int | None = Field(
        None, ge=0, le=2**31 - 1, description="The completed trial to score (default: the best)"
    )
    epochs: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Epochs of the refit it needs (default: the spec's holdout.epochs, else "
        "the median of the trial's folds' best epochs)",
    )


class RefitRequest(StrictModel):
    """``POST /studies/{id}/refits``: train an ended study's trial on all the training data."""

    trial: int | None = Field(
        None, ge=0, le=2**31 - 1, description="The completed trial (default: the best)"
    )
    epochs: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Default: the median of the trial's folds' best epochs",
    )


# -- the dashboard's plots: GET /studies/{id}/insights/... as parallel column arrays ------------


class BestSteps(BaseModel):
    number: list[int]
    value: list[float]


class PrunedHistory(BaseModel):
    count: int = Field(..., description="Pruned trials in the study")
    sampled: bool = Field(..., description="True when fewer points than matched are returned")
    number: list[int]
    value: list[float] = Field(..., description="Mean over the folds the trial ran")
    std_error: list[float | None]
    value_folds: list[int | None] = Field(..., description="How many folds the value rests on")
    reason: list[str | None] = Field(..., description="Why the trial was pruned")


class History(BaseModel):
    count: int = Field(..., description="Completed trials in the study")
    sampled: bool = Field(..., description="True when fewer points than matched are returned")
    cursor: datetime | None = Field(..., description="Pass back as ``since`` to get what's new")
    number: list[int]
    value: list[float]
    std_error: list[float | None]
    params: dict[str, list[Any]] = Field(..., description="One column per space parameter")
    feasible: list[bool | None] = Field(
        ..., description="Whether each meets the study's constraints (null: it has none)"
    )
    best: BestSteps = Field(
        ...,
        description="Steps of the best-so-far line over all matches that meet the constraints",
    )
    pruned: PrunedHistory = Field(
        ...,
        description="Pruned trials, at most a quarter of ``max_points`` of them (sampled the "
        "same way); their partial means take no part in ``best``",
    )


class SelectionEstimate(BaseModel):
    """The best trial's K-fold mean beside what to expect of it on new data: the best of many
    trials on the same folds is picked for being lucky on them (pruners/selection.py)."""

    number: int = Field(..., description="The best trial")
    value: float = Field(..., description="Its mean over its folds")
    corrected: float = Field(
        ...,
        description="Its value made worse by the bias of picking it among the candidates "
        "(Tibshirani & Tibshirani 2009): what to expect of its fold models on new data",
    )
    bias: float = Field(..., description="corrected - value in the worse direction, never < 0")
    trials: int = Field(
        ..., description="The candidates it was picked among: the completed, feasible trials"
    )
    method: Literal["tibshirani-2009"] = "tibshirani-2009"


class TopFolds(BaseModel):
    folds: int = Field(..., description="K, the folds per trial")
    number: list[int]
    value: list[float | None]
    std_error: list[float | None]
    fold_values: list[list[float | None]] = Field(..., description="[trial][fold]")
    selection: SelectionEstimate | None = Field(
        None,
        description="The best trial's value beside its selection-corrected estimate; null "
        "for a study of several objectives or with no completed feasible trial",
    )


class Curves(BaseModel):
    metric: str
    cursor: int = Field(..., description="Pass back as ``after`` to get only newer epochs")
    running: list[int] = Field(..., description="Numbers of the trials running now")
    trial: list[int]
    fold: list[int]
    attempt: list[int]
    epoch: list[int]
    value: list[float | None]
