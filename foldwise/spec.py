"""The study spec: one JSON/YAML document that describes a whole study (DESIGN §3).

Validation happens here so that the API, the CLI and the SDK reject the same documents with the
same messages. The resolved spec (every default filled in) is what the service stores.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from foldwise.space import ConditionError, Param, condition_order

OPTIMIZER_NAMES = ("random", "gp", "evolution", "nas_evolution")
"""Optimizers a spec may name; the service's registry implements exactly these."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Direction(StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


class Objective(_Strict):
    metric: str = Field("val_loss", min_length=1, description="Per-epoch metric to optimise")
    direction: Direction = Direction.MINIMIZE
    use: Literal["best", "last"] = Field(
        "best", description="Take each fold's best epoch or its last one"
    )


class OptimizerSpec(_Strict):
    name: Literal["random", "gp", "evolution", "nas_evolution"] = "gp"
    seed: int | None = Field(None, description="Defaults to the study seed")
    options: dict[str, Any] = Field(default_factory=dict)


class Budget(_Strict):
    trials: int = Field(..., ge=1, le=100_000)
    max_minutes: float | None = Field(None, gt=0)


class Parallel(_Strict):
    trial_groups: int = Field(1, ge=1, le=1024, description="N_G: trials in flight at once")
    folds: int = Field(5, ge=2, le=100, description="K: cross-validation folds per trial")
    workers_per_fold: int = Field(1, ge=1, le=1024, description="N_W: DDP ranks per fold run")


class Resources(_Strict):
    cpus_per_worker: float = Field(1.0, gt=0)
    gpus_per_worker: float = Field(0.0, ge=0)


class TrainerSpec(_Strict):
    task: str = Field(..., min_length=1, description='Built-in name or "package.module:attr"')
    epochs: int = Field(10, ge=1, le=100_000)
    batch_size: int = Field(
        64, ge=1, description="Batch per DDP rank; the global batch is this times N_W"
    )
    lr_scaling: Literal["linear", "sqrt", "none"] = Field(
        "linear", description="How the learning rate grows with the number of ranks"
    )
    warmup_epochs: int = Field(1, ge=0, description="Epochs of gradual warm-up to the scaled rate")
    retries: int = Field(1, ge=0, le=10, description="Relaunches of a fold whose workers died")
    checkpoint_every: int = Field(
        1,
        ge=0,
        description="Rank 0 checkpoints every N epochs (0: never); a retried fold resumes there",
    )
    options: dict[str, Any] = Field(default_factory=dict, description="Passed to the task as-is")


class EarlyStopping(_Strict):
    patience: int = Field(..., ge=1)
    min_delta: float = Field(0.0, ge=0)
    rule: Literal["patience", "smoothed"] = Field(
        "patience",
        description="patience: stop after `patience` epochs without a better value; smoothed "
        "(NNLO): stop when the mean of the last `patience` epochs is no better than the "
        "mean of the `patience` epochs before",
    )


class StudySpec(_Strict):
    """A study as a user submits it."""

    name: str = Field(..., min_length=1, max_length=200)
    description: str | None = Field(None, max_length=2000)
    seed: int = Field(0, description="Seeds the fold splits and, by default, the optimizer")
    objective: Objective = Field(default_factory=Objective)
    space: dict[str, Param]
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec)
    budget: Budget
    parallel: Parallel = Field(default_factory=Parallel)
    resources: Resources = Field(default_factory=Resources)
    trainer: TrainerSpec
    early_stopping: EarlyStopping | None = None

    @field_validator("space")
    @classmethod
    def _check_space(cls, space: dict[str, Param]) -> dict[str, Param]:
        if not space:
            raise ValueError("the search space needs at least one parameter")
        for name in space:
            if not name.isidentifier():
                message = f"parameter name {name!r} must be a Python identifier"
                raise _space_error((name,), message, space)
        try:
            condition_order(space)
        except ConditionError as exc:
            raise _space_error(exc.loc, exc.reason, space) from exc
        return space

    @model_validator(mode="after")
    def _resolve_defaults(self) -> StudySpec:
        if self.optimizer.seed is None:
            self.optimizer.seed = self.seed
        return self

    def resolved(self) -> dict[str, Any]:
        """The spec as stored and returned by the API: every default filled in."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=False)


def _space_error(loc: tuple[str, ...], message: str, space: Any) -> ValidationError:
    """An error located inside ``space`` (pydantic prefixes ``space``), so the API names the
    offending parameter, e.g. ``space.width_2.when.depth``, instead of the whole space."""
    error = PydanticCustomError("value_error", "{reason}", {"reason": message})
    return ValidationError.from_exception_data(
        "StudySpec", [{"type": error, "loc": loc, "input": space}]
    )
