"""The scheduler's seam to whatever runs fold runs: the ``Executor`` protocol and the types that
cross it (``FoldRunStats``, ``FoldFailed``).

It imports neither Ray nor torch, so the scheduler and an API instance that does not schedule
load neither; ``RayExecutor`` (``service.executor.ray_executor``) is the one implementation,
imported only when a scheduler starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from foldwise.service.admission.cluster_fit import NodeCapacity
    from foldwise.trainers.job import FoldJob
    from foldwise.trainers.report import FoldEvent
    from foldwise.trainers.task import TaskProfile


class FoldFailed(Exception):
    """A fold run failed.

    `retryable` is True when relaunching may succeed (workers died, the process group broke) and
    False when the user's code raised; then `message` and `traceback` are the original exception's.
    `workers_intact`: every rank stopped cleanly (the same error at the same report), so the
    workers went back to the pool. `fatal`: every fold of every trial would fail the same way
    (the data cannot be split as the study asks), so the study ends at once.
    """

    def __init__(
        self,
        message: str,
        traceback: str = "",
        retryable: bool = False,
        *,
        workers_intact: bool = False,
        fatal: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.traceback = traceback
        self.retryable = retryable
        self.workers_intact = workers_intact
        self.fatal = fatal


@dataclasses.dataclass
class FoldRunStats:
    """Timings of one fold run: `overhead_seconds` is what the executor adds around training;
    `placement` is where its ranks ran ({rank, node_id, node_ip, gpu_ids}), once placed.
    `on_training` is told when the run starts to train (it holds its workers) and when it
    stops (``set_training``): what a study's ``slots busy`` counts."""

    world_size: int
    placement: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    cold: bool = False
    epochs: int = 0
    acquire_seconds: float = 0.0
    placing_since: float | None = None
    """``time.monotonic()`` when the run began to wait for its workers; None once it has them."""
    wall_seconds: float = 0.0
    train_seconds: float = 0.0
    training: bool = False
    on_training: Callable[[bool], None] | None = dataclasses.field(default=None, repr=False)

    def set_training(self, training: bool) -> None:
        """The executor says the run holds its workers and trains (True), or no longer does."""
        if training != self.training:
            self.training = training
            if self.on_training is not None:
                self.on_training(training)

    @property
    def overhead_seconds(self) -> float:
        return self.wall_seconds - self.train_seconds


class Executor(Protocol):
    """Runs fold runs and what else needs the study's task code on the cluster."""

    async def start(self) -> None:
        """Start or join the cluster."""

    async def shutdown(self) -> None:
        """Release the workers, and the cluster if ``start`` started it."""

    def run_fold(
        self,
        job: FoldJob,
        *,
        cpus_per_worker: float,
        gpus_per_worker: float,
        timeout: float | None = None,
        stats: FoldRunStats | None = None,
        stop: asyncio.Event | None = None,
    ) -> AsyncIterator[FoldEvent]:
        """Rank 0's reports and saved files as they come; ``FoldFailed`` on failure."""
        ...

    async def score_models(
        self, job: FoldJob, models: list[bytes], *, cpus: float, gpus: float = 0.0
    ) -> dict[str, Any]:
        """The hold-out score of saved ``models`` of ``job``'s task on its test data."""
        ...

    def describe_task(
        self, name: str, code: Path | None = None, options: dict[str, Any] | None = None
    ) -> TaskProfile:
        """A task's profile, loaded where its folds would run (blocking)."""
        ...

    async def describe_capacity(self, *, gpus: bool = False) -> str:
        """What the cluster can place now, in words (for a study's ``waiting``)."""
        ...

    def node_capacities(self) -> list[NodeCapacity] | None:
        """Each alive node's CPUs and GPUs in all (blocking); None when it cannot tell."""
        ...

    def health(self) -> dict[str, Any]:
        """Whether the cluster answers (``ok``), with what it holds."""
        ...
