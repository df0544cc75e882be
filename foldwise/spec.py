"""The study spec: one JSON/YAML document that describes a whole study (DESIGN §3).

Validation happens here so that the API, the CLI and the SDK reject the same documents with the
same messages. The resolved spec (every default filled in) is what the service stores.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from foldwise.cv import MAX_FOLD_RUNS, REPEATABLE_SCHEMES, CrossValidation, CVScheme, HoldoutSpec
from foldwise.json_values import find_unsafe
from foldwise.limits import (
    DEFAULT_FOLD_TIMEOUT_S,
    IDENTIFIER,
    MAX_ABS_BOUND,
    MAX_CPUS_PER_WORKER,
    MAX_FOLD_TIMEOUT_S,
    MAX_GPUS_PER_WORKER,
    MAX_INT,
    MAX_MINUTES,
    MAX_NAME_LENGTH,
    MAX_OPTIONS_BYTES,
    MAX_PARAMS,
    MAX_SEED,
    MAX_TEXT_LENGTH,
    MAX_WARM_START_STUDIES,
    METRIC_NAME,
    MIN_CPUS_PER_WORKER,
    MIN_FOLD_TIMEOUT_S,
    MIN_GPU_FRACTION,
    TASK_NAME,
)
from foldwise.racing import Pruning, Racing
from foldwise.space import (
    STORED,
    CategoricalParam,
    ConditionError,
    IntParam,
    Param,
    StrictModel,
    check_conditions_can_hold,
    condition_order,
)

SEARCHED_SETTINGS: dict[str, tuple[int, int]] = {
    "batch_size": (1, 1_000_000),
    "epochs": (1, 100_000),
}
"""Trainer settings a search space may hold as parameters, with the values they may take: a
trial's value replaces ``trainer.<name>`` for that trial's folds."""

OptimizerName = Literal["random", "gp", "evolution", "nas_evolution"]
OPTIMIZER_NAMES: tuple[OptimizerName, ...] = get_args(OptimizerName)
"""Optimizers a spec may name; the service's registry implements exactly these."""


def _small_options(options: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(options, default=str))
    if size > MAX_OPTIONS_BYTES:
        raise ValueError(f"options take {size} bytes as JSON; at most {MAX_OPTIONS_BYTES}")
    return options


Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Options = Annotated[dict[str, Any], AfterValidator(_small_options)]


class Direction(StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


class Objective(StrictModel):
    metric: str = Field(
        "val_loss",
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=METRIC_NAME,
        description="Per-epoch metric to optimise; the service lists the task's metrics",
    )
    direction: Annotated[Direction, Field(strict=False)] = Direction.MINIMIZE
    use: Literal["best", "last"] = Field(
        "best", description="Take each fold's best epoch or its last one"
    )

    @property
    def maximize(self) -> bool:
        return self.direction is Direction.MAXIMIZE


MAX_OBJECTIVES = 4
MAX_CONSTRAINTS = 8


class Constraint(StrictModel):
    """A limit a trial must respect on a metric its task reports (a parameter count, a latency):
    the trial's fold mean of ``metric`` must be ``op`` ``value``. A trial that breaks it is
    infeasible: data for the optimizer, never on the Pareto front, not a failure."""

    metric: str = Field(
        ...,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        pattern=METRIC_NAME,
        description="A metric the task reports (at any epoch: a count reported once will do)",
    )
    op: Literal["<=", ">="] = Field(..., description="The fold mean must be <= or >= value")
    value: float = Field(..., ge=-MAX_ABS_BOUND, le=MAX_ABS_BOUND)

    def gap(self, mean: float) -> float:
        """``mean``'s signed distance past the limit, relative to the limit's size (so limits
        on different scales add up fairly): positive when broken, negative with room left."""
        gap = mean - self.value if self.op == "<=" else self.value - mean
        return gap / max(abs(self.value), 1.0)

    def violation(self, mean: float) -> float:
        """By how much ``mean`` breaks the limit, relative to its size (0 if it holds)."""
        return max(0.0, self.gap(mean))

    def holds(self, mean: float) -> bool:
        return self.violation(mean) == 0


class OptimizerSpec(StrictModel):
    name: OptimizerName = "gp"
    seed: Seed | None = Field(None, description="Defaults to the study seed")
    options: Options = Field(default_factory=dict, description="Checked by the optimizer")


class Budget(StrictModel):
    trials: int = Field(..., ge=1, le=100_000)
    max_minutes: float | None = Field(
        None, gt=0, le=MAX_MINUTES, description="No new trials after this long (a year at most)"
    )
    max_consecutive_failures: int = Field(
        5,
        ge=1,
        le=100_000,
        description="The study fails when this many trials in a row failed with the same error",
    )


class Parallel(StrictModel):
    trial_groups: int = Field(
        1,
        ge=1,
        le=1024,
        description="N_G: trials in flight at once, and the study's N_G x folds fold slots; "
        "with racing, which holds trials to their first folds, more trials start whenever "
        "the slots would wait",
    )
    folds: int = Field(5, ge=2, le=100, description="K: cross-validation folds per trial")
    workers_per_fold: int = Field(1, ge=1, le=1024, description="N_W: DDP ranks per fold run")


class Resources(StrictModel):
    cpus_per_worker: float = Field(
        1.0,
        ge=MIN_CPUS_PER_WORKER,
        le=MAX_CPUS_PER_WORKER,
        description="Logical CPUs per DDP rank, to 4 decimals (Ray's precision)",
    )
    gpus_per_worker: float = Field(
        0.0,
        ge=0,
        le=MAX_GPUS_PER_WORKER,
        description="GPUs per rank: a whole number, or a fraction of one with one rank per fold",
    )

    @field_validator("cpus_per_worker")
    @classmethod
    def _ray_precision(cls, cpus: float) -> float:
        return round(cpus, 4)

    @field_validator("gpus_per_worker")
    @classmethod
    def _whole_or_fraction(cls, gpus: float) -> float:
        if gpus > 1 and not float(gpus).is_integer():
            raise ValueError("more than one GPU per worker must be a whole number")
        if 0 < gpus < MIN_GPU_FRACTION:
            raise ValueError(f"a fraction of a GPU must be at least {MIN_GPU_FRACTION}")
        return round(gpus, 4)


class TrainerSpec(StrictModel):
    task: str = Field(
        ...,
        min_length=1,
        max_length=MAX_TEXT_LENGTH,
        pattern=TASK_NAME,
        description='Built-in name or "package.module:attr"',
    )
    epochs: int = Field(10, ge=1, le=100_000)
    batch_size: int = Field(
        64,
        ge=1,
        le=1_000_000,
        description="Batch per DDP rank; the global batch is this times N_W",
    )
    lr_scaling: Literal["linear", "sqrt", "none"] | None = Field(
        None,
        description="How the learning rate grows with the number of ranks. Left out: linear "
        "for the built-in loop and Lightning, none for an own train_fold (it trains at the "
        "rates it wrote); the stored spec says which",
    )
    warmup_epochs: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="Epochs of gradual warm-up to the scaled rate. Left out: 1 for the "
        "built-in loop and Lightning, 0 for an own train_fold",
    )
    retries: int = Field(1, ge=0, le=10, description="Relaunches of a fold whose workers died")
    checkpoint_every: int = Field(
        1,
        ge=0,
        le=100_000,
        description="Rank 0 checkpoints every N epochs (0: never); a retried fold resumes there",
    )
    fold_timeout: float = Field(
        DEFAULT_FOLD_TIMEOUT_S,
        gt=0,
        le=MAX_FOLD_TIMEOUT_S,
        description=f"Seconds a fold run may take in all (at least {MIN_FOLD_TIMEOUT_S:g}); a "
        "longer one fails as hung",
        json_schema_extra={"minimum": MIN_FOLD_TIMEOUT_S},
    )
    precision: Literal["32", "bf16", "fp16"] = Field(
        "32",
        description="32: float32; bf16: bfloat16 autocast (CPU or GPU); fp16: float16 autocast "
        "with a gradient scaler (GPU only). The built-in loop and Lightning tasks use it",
    )
    clip_grad_norm: float | None = Field(
        None,
        gt=0,
        le=MAX_ABS_BOUND,
        description="Clip the gradients' global norm to this before each step (built-in loop, "
        "Lightning)",
    )
    num_workers: int = Field(
        0,
        ge=0,
        le=64,
        description="DataLoader worker processes per rank (built-in loop, Lightning); 0 reads "
        "batches in the training process",
    )
    val_batch_size: int = Field(
        1024,
        ge=1,
        le=1_000_000,
        description="Validation batch per rank (built-in loop, Lightning)",
    )
    options: Options = Field(default_factory=dict, description="Passed to the task as-is")

    @field_validator("fold_timeout")
    @classmethod
    def _runnable_timeout(cls, seconds: float, info: ValidationInfo) -> float:
        """A fold cannot start and report within less than ``MIN_FOLD_TIMEOUT_S`` (a spec
        stored before this check keeps its value)."""
        if seconds < MIN_FOLD_TIMEOUT_S and not (info.context or {}).get(STORED):
            raise ValueError(
                f"a fold run needs at least {MIN_FOLD_TIMEOUT_S:g} s to start its workers and "
                "report an epoch"
            )
        return seconds

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_name(cls, value: Any) -> Any:
        """``precision: 32`` reads as the name ``"32"`` (YAML makes it a number)."""
        return "32" if value == 32 and not isinstance(value, bool) else value

    def for_trial(self, params: dict[str, Any]) -> TrainerSpec:
        """These settings with the ones a trial's params search (``SEARCHED_SETTINGS``)."""
        searched = {name: int(params[name]) for name in SEARCHED_SETTINGS if name in params}
        return self.model_copy(update=searched) if searched else self

    @field_validator("task", mode="wrap")
    @classmethod
    def _task_name(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> str:
        """Says what a task name looks like instead of quoting ``TASK_NAME``'s regex; the
        service adds the names of its built-in tasks."""
        try:
            return handler(value)
        except ValidationError as exc:
            if not any(e["type"] == "string_pattern_mismatch" for e in exc.errors()):
                raise
            raise PydanticCustomError(
                "string_pattern_mismatch",
                "{name} is not a task name: a built-in task's name or 'package.module:attr'",
                {"name": repr(value)},
            ) from None


class EarlyStopping(StrictModel):
    patience: int = Field(..., ge=1, le=100_000)
    min_delta: float = Field(0.0, ge=0, le=MAX_ABS_BOUND)
    rule: Literal["patience", "smoothed"] = Field(
        "patience",
        description="patience: stop after `patience` epochs without a better value; smoothed "
        "(NNLO): stop when the mean of the last `patience` epochs is no better than the "
        "mean of the `patience` epochs before",
    )


class WarmStart(StrictModel):
    """Earlier studies whose finished trials seed this study's optimizer as prior observations.

    At submit each study must exist and optimise the same metric in the same direction; its
    completed, pruned and failed trials whose parameters fit this study's space are copied into
    this study (docs/api.md, "Warm start"). They are not trials of this study: they take no part
    in its budget, its trial list or its best trial.
    """

    studies: list[Annotated[int, Field(ge=1, le=MAX_INT)]] = Field(
        ...,
        min_length=1,
        max_length=MAX_WARM_START_STUDIES,
        description="Ids of earlier studies, each named once",
        json_schema_extra={"uniqueItems": True},
    )

    @field_validator("studies")
    @classmethod
    def _each_once(cls, studies: list[int]) -> list[int]:
        twice = sorted({study for study in studies if studies.count(study) > 1})
        if twice:
            raise ValueError(f"study {twice[0]} is named more than once")
        return studies


EXAMPLE_SPEC: dict[str, Any] = {
    "name": "digits-mlp-quick",
    "objective": {"metric": "val_loss", "direction": "minimize"},
    "space": {
        "lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True},
        "depth": {"type": "int", "low": 1, "high": 2},
        "width_1": {"type": "int", "low": 16, "high": 128, "log": True},
        "width_2": {"type": "int", "low": 16, "high": 128, "log": True, "when": {"depth": 2}},
        "act": {"type": "categorical", "choices": ["relu", "tanh"]},
    },
    "optimizer": {"name": "gp", "seed": 0},
    "budget": {"trials": 2},
    "parallel": {"trial_groups": 1, "folds": 2, "workers_per_fold": 1},
    "resources": {"cpus_per_worker": 0.5},
    "trainer": {"task": "digits_mlp", "epochs": 1},
}
"""A study that runs in seconds: the example the API documents (and /docs offers to send)."""


class StudySpec(StrictModel):
    """A study as a user submits it."""

    name: str = Field(..., min_length=1, max_length=MAX_TEXT_LENGTH)
    description: str | None = Field(None, max_length=2000)
    seed: Seed = Field(0, description="Seeds the fold splits and, by default, the optimizer")
    objective: Objective = Field(default_factory=Objective)
    objectives: list[Objective] | None = Field(
        None,
        min_length=2,
        max_length=MAX_OBJECTIVES,
        description="Several objectives (2 to 4) for a Pareto study, instead of objective: "
        "every one is read at the epoch the first one picks",
    )
    constraints: list[Constraint] = Field(
        default_factory=list,
        max_length=MAX_CONSTRAINTS,
        description="Limits on reported metrics a feasible trial respects",
    )
    space: dict[str, Param] = Field(
        ...,
        max_length=MAX_PARAMS,
        json_schema_extra={
            "minProperties": 1,
            "propertyNames": {"pattern": IDENTIFIER, "maxLength": MAX_NAME_LENGTH},
        },
    )
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    budget: Budget
    parallel: Parallel = Field(default_factory=Parallel)
    resources: Resources = Field(default_factory=Resources)
    priority: float = Field(
        1.0,
        gt=0,
        le=1000,
        description="The study's weight when running studies share a full cluster: one of "
        "priority 2 gets twice the fold runs of one of priority 1",
    )
    trainer: TrainerSpec
    early_stopping: EarlyStopping | None = None
    racing: Racing = Field(default_factory=Racing)
    pruning: Pruning = Field(default_factory=Pruning)
    warm_start: WarmStart | None = Field(
        None, description="Earlier studies whose finished trials seed the optimizer"
    )
    cv: CrossValidation = Field(default_factory=CrossValidation)
    holdout: HoldoutSpec | None = Field(
        None, description="Score the best trial on the task's test data when the study ends"
    )

    @property
    def all_objectives(self) -> list[Objective]:
        """Every objective, in order: ``objectives``, or the one ``objective``."""
        return list(self.objectives) if self.objectives else [self.objective]

    @property
    def scored_metrics(self) -> list[str]:
        """The metrics a fold run's result holds beyond its value, when the study has several
        objectives or any constraint (empty otherwise): each objective's, then each
        constraint's, once."""
        if not self.objectives and not self.constraints:
            return []
        names = [o.metric for o in self.all_objectives] + [c.metric for c in self.constraints]
        return list(dict.fromkeys(names))

    @property
    def fold_count(self) -> int:
        """The fold runs of one trial: ``parallel.folds`` of each of ``cv.repeats``."""
        return self.parallel.folds * self.cv.repeats

    @model_validator(mode="before")
    @classmethod
    def _only_plain_values(cls, data: Any) -> Any:
        """No NaN, infinity, control character, surrogate, huge integer or deep nesting
        anywhere in the document, each named where it is."""
        problems = list(itertools.islice(find_unsafe(data), 20))
        if problems:
            raise ValidationError.from_exception_data(
                "StudySpec",
                [
                    {"type": PydanticCustomError(p.kind, p.message), "loc": p.loc, "input": None}
                    for p in problems
                ],
            )
        return data

    @field_validator("space")
    @classmethod
    def _check_space(cls, space: dict[str, Param], info: ValidationInfo) -> dict[str, Param]:
        if not space:
            raise ValueError("the search space needs at least one parameter")
        for name in space:
            if not re.fullmatch(IDENTIFIER.strip("^$"), name) or len(name) > MAX_NAME_LENGTH:
                message = (
                    f"a parameter name must be a Python identifier (ASCII letters, digits and "
                    f"_) of at most {MAX_NAME_LENGTH} characters"
                )
                raise _space_error((name[:MAX_NAME_LENGTH],), message)
        try:
            condition_order(space)
            if not (info.context or {}).get(STORED):
                check_conditions_can_hold(space)
        except ConditionError as exc:
            raise _space_error(exc.loc, exc.reason) from exc
        return space

    @model_validator(mode="after")
    def _resolve_defaults(self) -> StudySpec:
        if self.optimizer.seed is None:
            self.optimizer.seed = self.seed
        return self

    @model_validator(mode="after")
    def _several_objectives_fit(self, info: ValidationInfo) -> StudySpec:
        """``objectives`` replaces ``objective`` (which becomes the first of them); their
        metrics differ; only the first picks the epoch. A study scored on several metrics
        races by dominance (``pruners.dominance``) but prunes inside a fold
        by no curve: pruning is refused, as are a hold-out score and a warm start, which need
        a single best trial."""
        objectives = self.objectives
        if objectives:
            stored = (info.context or {}).get(STORED)
            if "objective" in self.model_fields_set and not stored:
                if self.objective != objectives[0]:
                    message = "give objective (one) or objectives (several), not both"
                    raise _spec_error(("objective",), message)
            metrics = [o.metric for o in objectives]
            twice = sorted({m for m in metrics if metrics.count(m) > 1})
            if twice:
                message = f"objective metric {twice[0]!r} is named more than once"
                raise _spec_error(("objectives",), message, twice[0])
            for i, later in enumerate(objectives[1:], start=1):
                if "use" in later.model_fields_set and later.use != objectives[0].use:
                    message = (
                        "every objective is read at the epoch objectives[0] picks: set use there"
                    )
                    raise _spec_error(("objectives", i, "use"), message, later.use)
            self.objective = objectives[0]
        if not (info.context or {}).get(STORED):
            if (conflict := constraints_conflict(self.constraints)) is not None:
                where, message = conflict
                raise _spec_error(("constraints", *where), message)
        if not self.scored_metrics:
            return self
        what = "several objectives" if objectives else "constraints"
        if self.pruning.rule != "off":
            message = f"pruning follows one objective's curve; a study with {what} cannot prune"
            raise _spec_error(("pruning", "rule"), message, self.pruning.rule)
        if self.holdout is not None:
            message = f"a hold-out score needs one best trial; a study with {what} has a front"
            raise _spec_error(("holdout",), message)
        if self.warm_start is not None:
            message = f"a warm start copies one objective's values; not for a study with {what}"
            raise _spec_error(("warm_start",), message)
        return self

    @model_validator(mode="after")
    def _whole_gpus_for_ddp(self) -> StudySpec:
        gpus = self.resources.gpus_per_worker
        if 0 < gpus < 1 and self.parallel.workers_per_fold > 1:
            message = (
                "NCCL needs a whole GPU per rank: use a whole number of GPUs with more than one "
                "worker per fold"
            )
            raise _spec_error(("resources", "gpus_per_worker"), message, gpus)
        return self

    @model_validator(mode="after")
    def _fp16_needs_a_gpu(self) -> StudySpec:
        if self.trainer.precision == "fp16" and self.resources.gpus_per_worker == 0:
            message = "fp16 needs a GPU (resources.gpus_per_worker > 0): use bf16 on CPUs, or 32"
            raise _spec_error(("trainer", "precision"), message, "fp16")
        return self

    @model_validator(mode="after")
    def _searched_settings_fit(self) -> StudySpec:
        """A trainer setting searched in ``space`` takes whole values in its range."""
        for name, (low, high) in SEARCHED_SETTINGS.items():
            param = self.space.get(name)
            if param is None:
                continue
            if isinstance(param, CategoricalParam):
                values = param.choices
            elif isinstance(param, IntParam):
                values = [param.low, param.high]
            else:
                values = [None]
            if not all(
                isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in values
            ):
                message = (
                    f"{name} here sets trainer.{name} for each trial: it must be an int "
                    f"parameter (or choices of whole numbers) within [{low}, {high}]"
                )
                raise _spec_error(("space", name), message)
        return self

    @model_validator(mode="after")
    def _cv_fits(self) -> StudySpec:
        cv = self.cv
        if cv.gap and cv.scheme is not CVScheme.TIME_SERIES:
            message = "gap leaves samples out between a training window and its validation "
            message += "block: it applies to cv.scheme time_series only"
            raise _spec_error(("cv", "gap"), message, cv.gap)
        if cv.repeats > 1 and cv.scheme is not None and cv.scheme not in REPEATABLE_SCHEMES:
            message = f"cv.scheme {cv.scheme} splits the same way every time: repeats must be 1"
            raise _spec_error(("cv", "repeats"), message, cv.repeats)
        if self.fold_count > MAX_FOLD_RUNS:
            message = (
                f"parallel.folds x cv.repeats is {self.fold_count} fold runs a trial; at most "
                f"{MAX_FOLD_RUNS}"
            )
            raise _spec_error(("cv", "repeats"), message, cv.repeats)
        return self

    @model_validator(mode="after")
    def _racing_fits_the_folds(self) -> StudySpec:
        racing, folds = self.racing, self.fold_count
        if racing.min_folds is None:
            racing.min_folds = 2 if racing.rule in ("ttest", "posterior") else 1
        if racing.stepwise is None:
            racing.stepwise = racing.rule == "model"
        if racing.rule == "off":
            racing.stepwise = False
            return self
        if racing.min_folds >= folds:
            message = (
                f"racing needs min_folds below {self._folds_named()} ({folds}): with "
                f"{racing.min_folds} every fold runs before a trial could be pruned"
            )
            raise _spec_error(("racing", "min_folds"), message, racing.min_folds)
        if racing.rule == "model" and self.scored_metrics:
            message = (
                "the model rule races one objective: a study scored on several metrics races "
                "by dominance with the forgiving, ttest or posterior rule"
            )
            raise _spec_error(("racing", "rule"), message, racing.rule)
        if racing.stepwise and self.scored_metrics:
            message = (
                "racing.stepwise races one objective: a study scored on several metrics runs "
                "a trial's other folds at once"
            )
            raise _spec_error(("racing", "stepwise"), message, racing.stepwise)
        if racing.rule in ("ttest", "posterior") and racing.min_folds < 2:
            test = "the paired t-test" if racing.rule == "ttest" else "the posterior rule"
            message = (
                f"{test} needs min_folds >= 2 (and so parallel.folds >= 3): one fold has no "
                "spread to judge by; use the forgiving rule with fewer folds"
            )
            raise _spec_error(("racing", "min_folds"), message, racing.min_folds)
        return self

    def _folds_named(self) -> str:
        return "parallel.folds" if self.cv.repeats == 1 else "parallel.folds x cv.repeats"

    def resolved(self) -> dict[str, Any]:
        """The spec as stored and returned by the API: every default filled in."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=False)


def constraints_conflict(
    constraints: Sequence[Constraint],
) -> tuple[tuple[int | str, ...], str] | None:
    """Where and why ``constraints`` cannot all be asked for, or None: a limit given twice, or
    a metric bounded so that no value meets all its limits (no trial could be feasible). The
    place is the later constraint's, as a ``loc`` inside ``constraints``."""
    for j, later in enumerate(constraints):
        for earlier in constraints[:j]:
            if earlier.metric != later.metric:
                continue
            if earlier.op == later.op and earlier.value == later.value:
                return (j,), f"{later.metric} {later.op} {later.value:.15g} is given twice"
            if earlier.op == later.op:
                continue
            at_most, at_least = (earlier, later) if earlier.op == "<=" else (later, earlier)
            if at_most.value < at_least.value:
                return (j, "value"), (
                    f"{later.metric} <= {at_most.value:.15g} and >= {at_least.value:.15g} "
                    "cannot both hold: no trial could be feasible"
                )
    return None


def _spec_error(loc: tuple[str | int, ...], message: str, value: Any = None) -> ValidationError:
    """A validation error at ``loc`` (inside the field being validated, if any) saying
    ``message``, so the API names the offending field."""
    error = PydanticCustomError("value_error", "{reason}", {"reason": message})
    return ValidationError.from_exception_data(
        "StudySpec", [{"type": error, "loc": loc, "input": value}]
    )


def _space_error(loc: tuple[str, ...], message: str) -> ValidationError:
    """An error located inside ``space`` (pydantic prefixes ``space``), so the API names the
    offending parameter, e.g. ``space.width_2.when.depth``, instead of the whole space."""
    return _spec_error(loc, message)
