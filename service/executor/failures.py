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
from foldwise.service.executor.contract import FoldFailed
from foldwise.trainers.fold_errors import FoldContractError, PeerFailed, RankError, SplitError

log = logging.getLogger(__name__)


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
RAY_OOM_TEXT = "running low on memory"
"""What the raylet says of a worker its memory monitor killed."""


def fold_failure(errors: dict[int, BaseException], label: str, ranks: int) -> FoldFailed:
    """One FoldFailed from the errors of the `ranks` ranks, naming the root cause and its rank.

    A user error wins (its peers' broken connections are its symptoms) and is not retryable; then
    a dead worker process; then a broken process group. The last two are retryable. An error
    every rank raised at the same report (``FoldContractError``) leaves the workers intact.
    """
    rank, err = min(errors.items(), key=lambda item: (_severity(item[1]), _echo(item[1]), item[0]))
    cause = _cause(err)
    message = _describe(cause)
    where = f"rank {rank}: " if ranks > 1 else ""
    intact = len(errors) == ranks and all(map(raised_by_every_rank, errors.values()))
    if _severity(err) == 0:
        log.info("%s failed on rank %d: %s", label, rank, message)
        if isinstance(cause, RankError):  # it names the rank at fault itself
            where = ""
        if isinstance(cause, SplitError):  # the same data on every rank: no rank to name
            where, message = "", str(cause)
        return FoldFailed(
            f"{where}{message}",
            _traceback_text(err),
            retryable=False,
            workers_intact=intact,
            fatal=isinstance(cause, SplitError),
        )
    log.warning("%s lost its workers (rank %d): %s", label, rank, message)
    return FoldFailed(
        f"workers lost (rank {rank}): {message}", _traceback_text(err), retryable=True
    )


def is_root_cause(err: BaseException) -> bool:
    """Whether ``err`` is an error of the task's own (not a lost worker, a broken process
    group, or a rank echoing another's failure): no other rank's error could explain it."""
    return _severity(err) == 0 and not _echo(err)


def raised_by_every_rank(err: BaseException) -> bool:
    """Whether ``err`` is one every rank raises at the same report (``FoldContractError``):
    the other ranks' errors are on their way (unless the task's code caught it on one rank)."""
    return isinstance(_cause(err), FoldContractError)


def _echo(err: BaseException) -> bool:
    """Whether ``err`` only says that another rank failed (that rank's error says why)."""
    return isinstance(_cause(err), PeerFailed)


def _describe(cause: BaseException) -> str:
    """``Type: first line``; for running out of memory, what ran out when the error says
    nothing (a bare ``MemoryError()`` has no text)."""
    first_line = (strip_ansi(str(cause)).strip().splitlines() or [""])[0][:500]
    name = type(cause).__name__
    if isinstance(cause, ray.exceptions.ActorDiedError):
        first_line = _death_detail(cause) or first_line
    if isinstance(cause, ray.exceptions.OutOfMemoryError) or RAY_OOM_TEXT in first_line:
        return (
            "OutOfMemoryError: Ray's memory monitor killed the worker: the node ran out of "
            "host memory (RAM)"
        )
    if name == "OutOfMemoryError" and not first_line:  # torch.cuda.OutOfMemoryError
        return "OutOfMemoryError: the GPU ran out of memory"
    if isinstance(cause, MemoryError) and not first_line:
        return "MemoryError: the worker ran out of host memory (RAM)"
    return f"{name}: {first_line}" if first_line else name


def _death_detail(err: ray.exceptions.ActorDiedError) -> str:
    """Why Ray says an actor died, past its stock first line and the actor's ids (the raylet's
    words: the memory monitor killed it, its process exited, ...), or ""."""
    lines = strip_ansi(str(err)).splitlines()
    detail = [
        line.strip()
        for line in lines[1:]
        if line.strip() and not line.startswith("\t") and "never ran" not in line
    ]
    return " ".join(detail)[:500]


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
