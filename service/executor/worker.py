"""DDPWorker: a Ray actor that runs fold after fold as one rank of a DDP process group.

Actors are kept warm by the pool, so torch is imported and a task's data is loaded once per actor,
not once per fold run. Each run starts from the study's code as submitted: the package this
worker imports is checked against the snapshot's hash (and put back from the snapshot when a
run changed it), and imported afresh; each run ends with every process it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import traceback
from collections.abc import Iterator
from typing import Any

import psutil
import ray

from foldwise.service.executor.code_restore import run_as_submitted
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import FoldEvent

DATA_CACHE_SIZE = 2
"""Data sets a warm worker keeps loaded (most recently used first to stay)."""


@ray.remote(max_restarts=0, max_concurrency=2)
class DDPWorker:
    """One rank; `run` is a streaming generator (call it with `num_returns="streaming"`).

    Two threads: while `run` trains, `stop` can still be called to end the run after its current
    epoch, with the process group left cleanly and the actor kept for the next fold run, and
    `status` says where the run is.
    """

    def __init__(self) -> None:
        from foldwise.trainers import (  # torch loads here, at start
            ddp,
            fold_data,
            fold_runner,
            task,
        )

        self._ddp, self._fold_runner, self._fold_data, self._task = (
            ddp,
            fold_runner,
            fold_data,
            task,
        )
        self._data: dict[tuple[str, str], Any] = {}
        self._stops: set[str] = set()
        self._runs: dict[str, Any] = {}
        self._master: Any = None  # rank 0's rendezvous store for its next run

    def stop(self, run_key: str) -> None:
        """Ask the run `run_key` (running, or about to start here) to end after its epoch."""
        self._stops.add(run_key)

    def status(self, run_key: str) -> str:
        """Where the run `run_key` is on this rank (for a run that timed out)."""
        runner = self._runs.get(run_key)
        return "not running here" if runner is None else runner.status()

    def placement(self, listen: bool = False) -> dict[str, Any]:
        """Where this rank runs (node id and IP, its GPU ids). With `listen` (rank 0), also
        the port of a fresh rendezvous store this actor now listens with, kept for its next
        run: the port cannot be taken by anyone else before that run starts."""
        node_ip = ray.util.get_node_ip_address()
        where = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": node_ip,
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        }
        if listen:
            self._master = self._ddp.master_store(node_ip)  # an unused one is dropped
            where["port"] = self._master.port
        return where

    def info(self) -> dict[str, Any]:
        """Identity of this worker process (the pool's tests check reuse with it)."""
        context = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "actor_id": context.get_actor_id(),
            "node_id": context.get_node_id(),
        }

    def run(
        self,
        job: FoldJob,
        rank: int,
        master_addr: str,
        master_port: int,
        run_key: str = "",
        restore: bytes | None = None,
        local_rank: int | None = None,
        archive: list[Any] | None = None,
    ) -> Iterator[FoldEvent]:
        """Train `job` as `rank`; yield what rank 0 reports (``trainers.report``).
        `stop(run_key)` ends it after the epoch in progress; a resumed job (rank 0) continues
        from `restore`, the checkpoint's bytes. `archive`: the job's snapshot as a zip in
        Ray's object store (a reference in a list), to put its code back from."""
        started = _children()
        run_as_submitted(job.task, job.code_hash, archive)
        store = None
        if rank == 0:  # a store serves one run: see trainers.ddp.master_store
            store, self._master = self._master, None
        runner = self._fold_runner.FoldRunner(
            job,
            rank=rank,
            master_addr=master_addr,
            master_port=master_port,
            store=store,
            device=self._device(job),
            local_rank=local_rank,
            data=self._load(job),
            num_threads=self._threads(),
            stop_requested=lambda: run_key in self._stops,
            restore=restore if rank == 0 else None,
        )
        self._runs[run_key] = runner
        try:
            yield from runner.events()
        finally:
            self._stops.discard(run_key)
            self._runs.pop(run_key, None)
            end_processes(_children() - started)

    def score(
        self, job: FoldJob, models: list[bytes], archive: list[Any] | None = None
    ) -> tuple[str, str]:
        """("scores", the hold-out score of ``models`` on ``job``'s task's test data as JSON,
        ``trainers.holdout``) or ("error", why in one line, then the traceback): only plain
        values go back, never an exception of the user's own class."""
        from foldwise.trainers.holdout import score_saved_models

        started = _children()
        try:
            run_as_submitted(job.task, job.code_hash, archive)
            scores = score_saved_models(
                job.task,
                job.trainer.options,
                models,
                batch_size=job.trainer.val_batch_size,
                device=self._device(job),
            )
            return "scores", json.dumps(scores)
        except BaseException as exc:  # the user's code: its reason, as text
            try:
                line = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
            except BaseException:
                line = type(exc).__name__
            return "error", f"{line}\n{traceback.format_exc()}"
        finally:
            end_processes(_children() - started)

    def _load(self, job: FoldJob) -> Any:
        """The task's data, cached per (task, options); only the latest few stay in memory."""
        options = job.trainer.options
        key = (job.task, json.dumps(options, sort_keys=True, default=str))
        data = self._data.pop(key, None)
        if data is None:
            data = self._fold_data.load_task_data(self._task.resolve_task(job.task), options)
        self._data[key] = data
        while len(self._data) > DATA_CACHE_SIZE:
            self._data.pop(next(iter(self._data)))
        return data

    @staticmethod
    def _threads() -> int:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
        return max(1, int(cpus))

    @staticmethod
    def _device(job: FoldJob) -> str:
        """cuda:<index of our first assigned GPU among the visible ones> for nccl, else cpu."""
        if job.backend != "nccl":
            return "cpu"
        gpu_ids = [str(g) for g in ray.get_gpu_ids()]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
        if not gpu_ids:
            raise RuntimeError("backend nccl needs a GPU, but this worker was assigned none")
        return f"cuda:{visible.index(gpu_ids[0]) if gpu_ids[0] in visible else 0}"


END_GRACE_S = 3.0
"""How long a process a run started has to end once asked, before it is killed."""


def _children() -> set[psutil.Process]:
    try:
        return set(psutil.Process().children(recursive=True))
    except psutil.Error:
        return set()


def end_processes(processes: set[psutil.Process]) -> None:
    """Ask ``processes`` (what a run started and left: DataLoader workers, a subprocess of
    the task's) to end, and kill those still there ``END_GRACE_S`` later."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _gone, alive = psutil.wait_procs(list(processes), timeout=END_GRACE_S)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
