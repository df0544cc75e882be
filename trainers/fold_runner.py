"""Run one fold of one trial as a DDP job: one fold function on every rank, its reports streamed.

Every way a task trains (its own ``train_fold``, the built-in loop, a Lightning module) is a
fold function on a ``FoldContext``, run here in a thread of its own while the runner streams
what rank 0 reports (``trainers.report``) to its caller: the service's Ray worker, or a local
run (``run_fold_in_directory``, ``foldwise task check``).
"""

from __future__ import annotations

import contextlib
import io
import queue
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from foldwise.trainers.context import FoldContext
from foldwise.trainers.ddp import (
    COLLECTIVE_TIMEOUT,
    broadcast_object,
    process_group,
    resolve_device,
)
from foldwise.trainers.fold_channel import FoldChannel
from foldwise.trainers.fold_data import TaskData, augmented_validation, load_task_data
from foldwise.trainers.fold_errors import (
    FoldContractError,
    FoldStopped,
    FoldTimedOut,
    PeerFailed,
    RunAbandoned,
)
from foldwise.trainers.job import FoldJob
from foldwise.trainers.monitor import ResourceMonitor
from foldwise.trainers.rank_exchange import RankExchange
from foldwise.trainers.report import CHECKPOINT_FILE, FoldEvent, SavedArtifact, WarningKind
from foldwise.trainers.task import Loop, Task, resolve_task

ABANDON_JOIN_S = 30.0
"""How long an abandoned run waits for its fold function to reach its next report."""
_DONE = object()


class FoldRunner:
    """Rank ``rank`` of ``job``: ``events()`` trains it and yields what rank 0 reports.

    Rank 0 listens for the others at ``master_port``, or with ``store`` when it brings one
    (``trainers.ddp.master_store``). ``data`` skips ``load_data`` (a warm worker passes its
    copy); ``num_threads`` sets torch's intra-op threads to this worker's CPU share.
    ``stop_requested`` is asked at each report: once it says yes on any rank, every rank's
    ``should_stop()`` says so at that epoch (marked ``stopped``) and no model is sent.
    ``restore``: the checkpoint a resumed attempt (``job.resume``) continues from.
    ``timeout``: the most seconds the run may take before ``events()`` raises ``FoldTimedOut``
    (a local run of one rank; the service times its fold runs out itself and asks each rank's
    ``status``, as ``foldwise task check`` does of its spawned ranks).
    """

    def __init__(
        self,
        job: FoldJob,
        *,
        rank: int,
        master_addr: str,
        master_port: int,
        store: dist.Store | None = None,
        device: str | torch.device | None = None,
        local_rank: int | None = None,
        data: TaskData | None = None,
        num_threads: int | None = None,
        stop_requested: Callable[[], bool] | None = None,
        restore: bytes | None = None,
        timeout: float | None = None,
    ) -> None:
        if not 0 <= rank < job.world_size:
            raise ValueError(f"rank must be in [0, {job.world_size}), got {rank}")
        self.job, self.rank = job, rank
        self.master = (master_addr, master_port, store)
        self.device, self.local_rank = device, local_rank
        self.data, self.num_threads = data, num_threads
        self.stop_requested = stop_requested
        self.restore = restore
        self.timeout = timeout
        self.channel: FoldChannel | None = None
        self.data_used: TaskData | None = None
        self._abandoned = threading.Event()
        self._error: BaseException | None = None

    def status(self) -> str:
        """Where this rank is (for a run that timed out)."""
        if self.channel is None:
            return "starting (loading the task's data, joining the process group)"
        return self.channel.status()

    def events(self) -> Iterator[FoldEvent]:
        """Train the fold; yield rank 0's reports and saved files. The process group is
        always destroyed on exit; errors of the fold function come out unchanged."""
        job = self.job
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        task = resolve_task(job.task)
        data = self.data_used = self.data or load_task_data(task, job.trainer.options)
        if self.num_threads is not None:
            torch.set_num_threads(max(1, int(self.num_threads)))
        device = resolve_device(job.backend, self.device)
        addr, port, store = self.master
        collective_timeout = max(
            COLLECTIVE_TIMEOUT, timedelta(seconds=job.trainer.fold_timeout + 60)
        )
        with (
            process_group(
                backend=job.backend,
                rank=self.rank,
                world_size=job.world_size,
                master_addr=addr,
                master_port=port,
                store=store,
                timeout=collective_timeout,
            ) as run_store,
            ResourceMonitor(device) if job.monitor else contextlib.nullcontext() as monitor,
        ):
            outbox: queue.Queue = queue.Queue()
            exchange = RankExchange(
                run_store, rank=self.rank, world_size=job.world_size, abandoned=self._abandoned
            )
            self.channel = FoldChannel(
                job,
                rank=self.rank,
                exchange=exchange,
                outbox=outbox,
                monitor=monitor,
                stop_requested=self.stop_requested,
                rates=job.rate_plan(own_loop=task.loop is Loop.OWN),
            )
            ctx = FoldContext(
                job,
                task,
                data,
                self.channel,
                rank=self.rank,
                device=device,
                local_rank=self.local_rank,
            )
            thread = threading.Thread(
                target=self._train, args=(task, ctx, outbox), name="foldwise-fold", daemon=True
            )
            thread.start()
            waited = ABANDON_JOIN_S
            try:
                while (event := self._next(outbox, deadline)) is not _DONE:
                    yield event
            except FoldTimedOut:
                waited = 0.0  # the fold function is stuck: it would not reach a report
                raise
            finally:
                self._abandoned.set()  # a no-op once the fold function has returned
                thread.join(waited)
        if self._error is not None:
            raise self._error

    def _next(self, outbox: queue.Queue, deadline: float | None) -> Any:
        """The fold thread's next event, or ``FoldTimedOut`` once the deadline has passed."""
        if deadline is None:
            return outbox.get()
        try:
            return outbox.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise FoldTimedOut(self.timeout or 0.0, self.status()) from None

    def _train(self, task: Task, ctx: FoldContext, outbox: queue.Queue) -> None:
        """The fold thread: resume, run the fold function, check every rank ended alike."""
        channel = self.channel
        assert channel is not None
        try:
            if ctx.device.type == "cuda":
                torch.cuda.set_device(ctx.device)
            ctx.resume_from(channel.restore(self._checkpoint(ctx.device)))
            if self.rank == 0 and not self.job.refit:
                note = augmented_validation(task, self.data_used)
                if note is not None:
                    channel.warn(WarningKind.AUGMENTED_VALIDATION, note)
            seed_rank(ctx.rank_seed)  # DDP gives every rank rank 0's initial weights
            channel.began()
            try:
                with channel.steps:
                    fold_function(task)(ctx)
            except FoldStopped:
                pass
            channel.finish()
        except BaseException as err:  # handed to the stream; locals freed with the DDP model
            traceback.clear_frames(err.__traceback__)
            self._error = err
            if not isinstance(err, FoldContractError | PeerFailed | RunAbandoned):
                channel.exchange.fail(err)
        finally:
            ctx.release()
            outbox.put(_DONE)

    def _checkpoint(self, device: torch.device) -> dict[str, Any] | None:
        """The checkpoint a resumed attempt continues from, on every rank (None: start clean;
        one of another job or an unreadable one is ignored)."""
        if not (self.job.resume and self.job.keeps_artifacts):
            return None
        state = None
        if self.rank == 0 and self.restore:
            state = load_state(self.restore)
            if state is not None and state.get("fingerprint") != self.job.fingerprint():
                state = None
        return broadcast_object(state, device)


def seed_rank(seed: int) -> None:
    """Give torch (every device), numpy and ``random`` this rank's own stream; DataLoader
    workers draw theirs from torch's."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def fold_function(task: Task) -> Callable[[FoldContext], None]:
    """The fold function that trains ``task``'s folds: its own, or foldwise's loop for it."""
    if task.loop is Loop.OWN:
        return task.obj.train_fold
    if task.loop is Loop.LIGHTNING:
        from foldwise.trainers.lightning_loop import train_lightning

        return lambda ctx: train_lightning(ctx, task)
    from foldwise.trainers.builtin_loop import train_builtin

    return lambda ctx: train_builtin(ctx, task)


def run_fold(job: FoldJob, **kwargs: Any) -> Iterator[FoldEvent]:
    """``FoldRunner(job, **kwargs).events()``."""
    return FoldRunner(job, **kwargs).events()


def run_fold_in_directory(
    job: FoldJob, directory: str | Path, **kwargs: Any
) -> Iterator[FoldEvent]:
    """Run ``job`` (as rank ``kwargs["rank"]``) with its files in ``directory``: rank 0 writes
    the checkpoint and model there (atomically) and a resumed job continues from the
    checkpoint found there. For local runs and tests; the service keeps files in its store."""
    directory = Path(directory)
    checkpoint = directory / CHECKPOINT_FILE
    if job.resume and checkpoint.is_file():
        kwargs.setdefault("restore", checkpoint.read_bytes())
    elif not job.resume and kwargs.get("rank") == 0 and directory.is_dir():
        for stale in directory.iterdir():
            stale.unlink()
    for event in run_fold(job, **kwargs):
        if isinstance(event, SavedArtifact):
            write_artifact(directory, event)
        yield event


def write_artifact(directory: Path, artifact: SavedArtifact) -> None:
    """Replace the file of ``artifact`` in ``directory`` atomically; a model supersedes the
    checkpoint, which goes."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / artifact.file_name
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(artifact.data)
    tmp.replace(path)
    if artifact.file_name != CHECKPOINT_FILE:
        (directory / CHECKPOINT_FILE).unlink(missing_ok=True)


def load_state(data: bytes) -> dict[str, Any] | None:
    """A saved checkpoint or model, or None when it cannot be read (a foreign or damaged file:
    the fold then trains from scratch instead)."""
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    except Exception:
        return None
    return state if isinstance(state, dict) else None
