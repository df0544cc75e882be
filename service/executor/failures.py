"""Why a fold run failed: the root cause among its ranks' errors, and whether a retry can help.

A user error (the task's code raised) is not retryable: the same code would fail again. A dead
worker process or a broken process group is retryable; a retried fold resumes from its last
checkpoint.
"""

from __future__ import annotations

import logging
import traceback

import ray

from foldwise.ansi import strip_ansi
from trainers.fold_runner import TrainingDiverged

log = logging.getLogger(__name__)


class FoldFailed(Exception):
    """A fold run failed.

    `retryable` is True when relaunching may succeed (workers died, the process group broke) and
    False when the user's code raised; then `message` and `traceback` are the original exception's.
    `workers_intact`: every rank stopped cleanly (a synchronised TrainingDiverged), so the workers
    went back to the pool.
    """

    def __init__(
        self,
        message: str,
        traceback: str = "",
        retryable: bool = False,
        *,
        workers_intact: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.traceback = traceback
        self.retryable = retryable
        self.workers_intact = workers_intact


PROCESS_ERRORS = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OutOfMemoryError,
    ray.exceptions.RaySystemError,
    ray.exceptions.TaskCancelledError,
    ray.exceptions.ActorUnavailableError,
)
"""A worker process or its node went away: retryable, and the root cause among ranks' errors."""
DISTRIBUTED_ERROR_CLASSES = {"DistError", "DistBackendError", "DistNetworkError", "DistStoreError"}
DISTRIBUTED_TEXT = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "gloo/transport",
    "NCCL error",
    "Socket Timeout",
)
"""A rank's process group broke, usually because a peer died: retryable, but only a symptom."""


def fold_failure(errors: dict[int, BaseException], label: str, ranks: int) -> FoldFailed:
    """One FoldFailed from the errors of the `ranks` ranks, naming the root cause.

    A user error wins (its peers' broken connections are its symptoms) and is not retryable; then
    a dead worker process; then a broken process group. The last two are retryable.
    """
    rank, err = min(errors.items(), key=lambda item: (_severity(item[1]), item[0]))
    cause = _cause(err)
    first_line = (strip_ansi(str(cause)).strip().splitlines() or [""])[0][:500]
    message = f"{type(cause).__name__}: {first_line}"
    intact = len(errors) == ranks and all(
        isinstance(_cause(e), TrainingDiverged) for e in errors.values()
    )
    if _severity(err) == 0:
        log.info("%s failed on rank %d: %s", label, rank, message)
        return FoldFailed(message, _traceback_text(err), retryable=False, workers_intact=intact)
    log.warning("%s lost its workers (rank %d): %s", label, rank, message)
    return FoldFailed(
        f"workers lost (rank {rank}): {message}", _traceback_text(err), retryable=True
    )


def _severity(err: BaseException) -> int:
    """0: the user's code raised; 1: a worker process died; 2: a process group broke."""
    if isinstance(err, PROCESS_ERRORS):
        return 1
    cause = _cause(err)
    names = {cls.__name__ for cls in type(cause).__mro__}
    if names & DISTRIBUTED_ERROR_CLASSES or any(s in str(cause) for s in DISTRIBUTED_TEXT):
        return 2
    return 0


def _cause(err: BaseException) -> BaseException:
    """The exception the worker raised, unwrapped from Ray's task error."""
    cause = getattr(err, "cause", None) if isinstance(err, ray.exceptions.RayTaskError) else None
    return cause if isinstance(cause, BaseException) else err


def _traceback_text(err: BaseException) -> str:
    """The remote traceback Ray formats into a task error's text, else the local one, without
    the terminal colours Ray puts in its header (the text is stored and read on web pages)."""
    if isinstance(err, ray.exceptions.RayTaskError):
        return strip_ansi(str(err))
    return strip_ansi("".join(traceback.format_exception(err)))
