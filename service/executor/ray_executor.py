"""RayExecutor: runs fold runs as DDP jobs on Ray core and streams their epoch metrics (DESIGN §7).

One fold run = one warm worker group from the pool; each rank's `run` is a Ray streaming generator,
and rank 0's epochs reach the caller as they arrive. Failures become `FoldFailed`, which says
whether relaunching the fold could help (workers died) or not (the user's code raised).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import ray

from foldwise.service.admission.cluster_fit import NodeCapacity
from foldwise.service.admission.task_policy import DESCRIBE_TIMEOUT_S
from foldwise.service.artifact_store import ArtifactStore
from foldwise.service.executor.cluster_view import ClusterView
from foldwise.service.executor.code_shipping import task_module_paths
from foldwise.service.executor.contract import FoldRunStats
from foldwise.service.executor.failures import (
    FoldFailed,
    fold_failure,
    is_root_cause,
    raised_by_every_rank,
)
from foldwise.service.executor.holdout_scoring import score_in_worker
from foldwise.service.executor.pool import TaskCode, WorkerGroup, WorkerPool
from foldwise.service.executor.ray_init import init_ray
from foldwise.service.executor.ray_reaper import RayReaper, local_raylet_pid, start_ray_reaper
from foldwise.service.executor.task_probe import describe_remotely
from foldwise.service.metrics import FOLD_QUEUE_WAIT
from foldwise.service.task_code import CodeCache, TaskCodeError, zip_snapshot
from foldwise.trainers.job import FoldJob, trained_seconds
from foldwise.trainers.report import EpochReport, FoldEvent, SavedArtifact
from foldwise.trainers.task import TaskProfile

log = logging.getLogger(__name__)

__all__ = ["FoldFailed", "FoldRunStats", "RayExecutor", "fold_failure"]

FAILURE_GRACE_S = 10.0
"""After one rank fails, how long to wait for the others to report why (the root cause)."""
ROOT_CAUSE_GRACE_S = 1.0
"""The same, when the first error is already the task's own (nothing can outrank it) and not
one every rank raises: a moment for ranks that failed together, not the stuck peers of one
that failed alone."""
FINISH_GRACE_S = 60.0
"""After one rank finishes cleanly, how long the others may take to finish too: every rank
trains the same epochs, so all that is left to them is leaving the process group."""
CONNECT_TIMEOUT_S = 120.0
LOCAL_RAY_CONFIG = {"prestart_worker_first_driver": False}
"""A local Ray starts no idle workers for the service's own job: folds run in actors with their
task code's environment, which those workers lack, so they were never used (one Python process
per CPU, about a second of CPU and 70 MB each, per start)."""
STATUS_TIMEOUT_S = 5.0
"""How long the ranks of a run that timed out have to say where they were."""
_RUN_KEYS = itertools.count(1)
"""Numbers that make each fold run's key unique, so a late stop never hits the next run."""


class RayExecutor:
    """Runs fold runs on a local Ray or a cluster (`address="host:6379"`), reusing warm workers.

    A job with a `code_hash` runs that snapshot of its task's package: read from `artifacts`
    into `code_cache` and shipped to its workers through Ray's runtime environment
    (`py_modules`), so no node needs it on disk. `task_modules` are the packages user tasks may
    come from: as they are at start, they are the job's `py_modules`, for a study stored
    without a snapshot. With `artifacts`, fold runs whose job has an `artifact_key` keep their
    checkpoints and models there, sent from rank 0 through Ray (no storage shared with the
    workers).
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        num_cpus: float | None = None,
        max_idle_groups: int = 8,
        worker_pythonpath: list[str] | None = None,
        task_modules: list[str] | None = None,
        artifacts: ArtifactStore | None = None,
        code_cache: CodeCache | None = None,
    ) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.worker_pythonpath = list(worker_pythonpath or [])
        self.task_modules = list(task_modules or [])
        self.artifacts = artifacts
        self.code_cache = code_cache
        self.pool = WorkerPool(max_idle_groups=max_idle_groups)
        self._archives: dict[str, list[Any]] = {}
        """Each snapshot's zip in Ray's object store, by hash (``_archive``)."""
        self.cluster = ClusterView(self.pool)
        self.last_run_stats: FoldRunStats | None = None
        self._owns_ray = False
        self._reaper: RayReaper | None = None
        """Takes a local Ray's agents with the service if the service is killed."""

    async def start(self) -> None:
        """Start a local Ray (or join `address`) whose workers get the task modules' code."""
        if ray.is_initialized():
            log.info("Ray is already initialised in this process; using it as it is")
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": True,
            "logging_level": logging.WARNING,
            "runtime_env": self.runtime_env(),
        }
        if self.address:
            kwargs["address"] = self.address
        else:  # "local" always starts a new Ray, never attaching to one found on the machine
            kwargs.update(address="local", num_cpus=self.num_cpus, _system_config=LOCAL_RAY_CONFIG)
        try:
            # An empty working_dir: without one, Ray puts this process's working directory
            # first on every worker's sys.path, where a task package edited since a study's
            # submit would shadow the study's own copy. Ray packs it during ray.init.
            with tempfile.TemporaryDirectory(prefix="foldwise-job-") as empty:
                kwargs["runtime_env"] = {**kwargs["runtime_env"], "working_dir": empty}
                await asyncio.wait_for(asyncio.to_thread(init_ray, **kwargs), CONNECT_TIMEOUT_S)
        except TimeoutError as err:
            raise RuntimeError(
                f"could not start or join Ray at {self.address or 'local'} "
                f"within {CONNECT_TIMEOUT_S:.0f} s (wrong auth token?)"
            ) from err
        self._owns_ray = True
        if not self.address and (raylet := local_raylet_pid()) is not None:
            try:
                self._reaper = start_ray_reaper(raylet)
            except OSError as exc:  # the raylet is gone already: Ray says why on its first use
                log.warning("no watchdog for the local Ray: %s", exc)

    async def run_fold(
        self,
        job: FoldJob,
        *,
        cpus_per_worker: float,
        gpus_per_worker: float,
        timeout: float | None = None,
        stats: FoldRunStats | None = None,
        stop: asyncio.Event | None = None,
    ) -> AsyncIterator[FoldEvent]:
        """Run `job` on `job.world_size` workers; yield rank 0's reports and saved files (a
        ``SavedArtifact`` is yielded once it is in the artifact store).

        Raises FoldFailed on failure, and when the run takes more than `timeout` seconds
        (default: the job's ``trainer.fold_timeout``) from the moment its workers are ready
        (time queued for resources does not count); on that,
        on cancellation, or when the caller stops iterating, the worker group is killed.
        Setting `stop` ends the run cleanly instead: every rank finishes the epoch it is in
        (reported as ``stopped``) and the group goes back to the pool, warm.
        `stats`, if given, is filled in; `last_run_stats` always is.
        """
        started = time.perf_counter()
        stats = stats or FoldRunStats(world_size=job.world_size)
        self.last_run_stats = stats
        job = _with_backend(job, gpus_per_worker)
        group = await self._acquire(job, cpus_per_worker, gpus_per_worker, stats)
        stats.acquire_seconds = time.perf_counter() - started
        FOLD_QUEUE_WAIT.observe(stats.acquire_seconds)
        stats.placement = group.placement
        if stop is not None and stop.is_set():  # stopped while it waited for its workers
            self.pool.release(group)
            return
        reusable = False
        stats.set_training(True)
        try:
            async for event in self._train(group, job, stats, started, timeout, stop):
                yield event
            reusable = True
        except _StuckRanks as stuck:  # the fold's results are all in; its workers are not sound
            log.warning(
                "%s: rank(s) %s did not finish within %.0f s of the others; "
                "replacing its worker group",
                job.describe(),
                ", ".join(map(str, stuck.ranks)),
                FINISH_GRACE_S,
            )
        except FoldFailed as failure:
            reusable = failure.workers_intact
            stats.wall_seconds = time.perf_counter() - started
            raise
        finally:
            stats.set_training(False)
            if reusable:
                self.pool.release(group)
            else:  # failed, cancelled, or abandoned by the caller
                self.pool.discard(group)

    async def _train(
        self,
        group: WorkerGroup,
        job: FoldJob,
        stats: FoldRunStats,
        started: float,
        timeout: float | None,
        stop: asyncio.Event | None,
    ) -> AsyncIterator[FoldEvent]:
        """Stream ``job``'s run on ``group`` (from its checkpoint, for a retried attempt):
        rank 0's reports, counted in ``stats``, and its files, once stored."""
        if timeout is None:
            timeout = job.trainer.fold_timeout
        deadline = time.monotonic() + timeout
        restore = await self._restore_for(job)
        async for event in self._stream(group, job, deadline, timeout, stop, restore):
            if isinstance(event, SavedArtifact):
                await self._keep(job, event)
            elif isinstance(event, EpochReport):
                stats.epochs += 1
                stats.train_seconds += trained_seconds([event])
                stats.wall_seconds = time.perf_counter() - started
            yield event

    async def _acquire(
        self, job: FoldJob, cpus: float, gpus: float, stats: FoldRunStats
    ) -> WorkerGroup:
        """A worker group for `job` that runs its task code, noting in `stats` while Ray
        places it."""
        code = await self._task_code(job)
        stats.placing_since = time.monotonic()

        def placed() -> None:  # its workers start next: slow (torch) but not Ray's placing
            stats.placing_since = None

        try:
            group, stats.cold = await self.pool.acquire(
                (job.world_size, float(cpus), float(gpus)), placed, code=code
            )
        except ray.exceptions.RayError as err:  # e.g. its placement group went with a node
            raise FoldFailed(
                f"Ray could not start the fold's workers: {type(err).__name__}: {err}",
                # the same runtime environment would fail to set up again
                retryable=not isinstance(err, ray.exceptions.RuntimeEnvSetupError),
            ) from err
        finally:
            placed()
        return group

    async def _task_code(self, job: FoldJob) -> TaskCode | None:
        """The job's snapshot of task code, unpacked here for Ray to ship; None for a job
        without one. A snapshot that is missing or damaged fails the fold for good; a store
        that does not answer fails this attempt only."""
        if job.code_hash is None:
            return None
        if self.code_cache is None or self.artifacts is None:
            raise FoldFailed(
                f"task code {job.code_hash[:12]}: this executor has no artifact store and "
                "code cache to fetch it from",
                retryable=False,
            )
        try:
            path = await asyncio.to_thread(self.code_cache.fetch, self.artifacts, job.code_hash)
            archive = await asyncio.to_thread(self._archive, job.code_hash)
        except TaskCodeError as exc:
            raise FoldFailed(str(exc), retryable=False) from exc
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            message = f"task code {job.code_hash[:12]} could not be fetched: {why}"
            raise FoldFailed(message, retryable=True) from exc
        return TaskCode(job.code_hash, str(path), archive)

    def _archive(self, hash_: str) -> list[Any]:
        """Snapshot ``hash_`` as a zip in Ray's object store, once, in a list (Ray hands a
        worker the reference, not the bytes): what a worker whose unpacked copy was changed
        puts back (``DDPWorker``). Blocking."""
        if hash_ not in self._archives:
            assert self.code_cache is not None
            snapshot = self.code_cache.snapshot(hash_)
            if snapshot is None:
                raise TaskCodeError(f"task code {hash_[:12]} is not in the code cache")
            self._archives[hash_] = [ray.put(zip_snapshot(snapshot))]
        return self._archives[hash_]

    async def _restore_for(self, job: FoldJob) -> Any:
        """For a job that keeps artifacts in the store: the checkpoint a retried attempt resumes
        from (put in Ray's object store for rank 0), or None; a first attempt clears what an
        earlier run of the fold left. A store that fails costs the resume, not the fold."""
        if self.artifacts is None or not job.artifact_key:
            return None
        try:
            if not job.resume:
                await asyncio.to_thread(self.artifacts.delete, job.artifact_key)
                return None
            data = await asyncio.to_thread(self.artifacts.checkpoint, job.artifact_key)
        except Exception as exc:
            log.warning("%s: artifact store unreadable, starting afresh: %s", job.describe(), exc)
            return None
        return None if data is None else ray.put(data)

    async def _keep(self, job: FoldJob, artifact: SavedArtifact) -> None:
        """Store what rank 0 saved; a store that fails costs the file, not the fold."""
        if self.artifacts is None or not job.artifact_key:
            return
        files = [(artifact.file_name, artifact.data)]
        try:
            await asyncio.to_thread(self.artifacts.keep_fold_files, job.artifact_key, files)
        except Exception as exc:
            log.warning("%s: could not store %s: %s", job.describe(), artifact.file_name, exc)

    async def _stream(
        self,
        group: WorkerGroup,
        job: FoldJob,
        deadline: float | None,
        timeout: float | None,
        stop: asyncio.Event | None,
        restore: Any = None,
    ) -> AsyncIterator[FoldEvent]:
        """Launch every rank; pass rank 0's events on; turn the first failure into FoldFailed,
        and `deadline` (monotonic) passing into a FoldFailed that names `timeout` and where each
        rank was; once `stop` is set, ask every rank to end after its epoch."""
        queue: asyncio.Queue[tuple[str, int, Any]] = asyncio.Queue()
        addr, port = group.master
        run_key = f"{job.describe()} #{next(_RUN_KEYS)}"
        local_ranks = _local_ranks(group.placement, job.world_size)
        tasks = [
            asyncio.create_task(
                _consume(
                    rank,
                    actor.run.options(num_returns="streaming").remote(
                        job,
                        rank,
                        addr,
                        port,
                        run_key,
                        restore if rank == 0 else None,
                        local_ranks[rank],
                        self._archives.get(job.code_hash) if job.code_hash else None,
                    ),
                    queue,
                )
            )
            for rank, actor in enumerate(group.actors)
        ]
        watcher = None
        if stop is not None:
            watcher = asyncio.create_task(_stop_when_set(stop, group, run_key))
        try:
            errors: dict[int, BaseException] = {}
            finished: set[int] = set()
            for _ in range(len(tasks)):
                while (item := await _next(queue, finished, len(tasks), deadline))[0] == "event":
                    yield item[2]
                if item[2] is not None:
                    errors[item[1]] = item[2]
                    break
                finished.add(item[1])
            if errors:
                (first,) = errors.values()
                grace = _failure_grace(first)
                errors |= await _collect_errors(tasks, queue, grace)
                raise fold_failure(errors, job.describe(), len(tasks))
        except _DeadlinePassed:
            where = await _rank_statuses(group, run_key, finished)
            raise FoldFailed(
                f"timed out: the fold run took longer than trainer.fold_timeout ({timeout:g} s); "
                + where
            ) from None
        finally:
            for task in [*tasks, watcher]:
                if task is not None:
                    task.cancel()

    def health(self) -> dict[str, Any]:
        """Whether Ray answers, with its alive nodes, resources and the pool's size."""
        return self.cluster.health()

    async def score_models(
        self, job: FoldJob, models: list[bytes], *, cpus: float, gpus: float = 0.0
    ) -> dict[str, Any]:
        """The hold-out score of ``models`` (saved ``model.pt`` files of ``job``'s task) on the
        task's test data, in a worker with the job's task code (``holdout_scoring``)."""
        code = await self._task_code(job)
        return await score_in_worker(self.pool, job, models, code=code, cpus=cpus, gpus=gpus)

    async def describe_capacity(self, *, gpus: bool = False) -> str:
        """What Ray says it can place, in words (``ClusterView.describe_capacity``)."""
        return await self.cluster.describe_capacity(gpus=gpus)

    def describe_task(
        self, name: str, code: Path | None = None, options: dict[str, Any] | None = None
    ) -> TaskProfile:
        """A user task's profile, loaded in a worker from ``code`` (the unpacked snapshot of
        its package) when given, with the study's ``trainer.options`` (blocking); see
        ``service.admission.task_policy``."""
        return describe_remotely(name, DESCRIBE_TIMEOUT_S, code, options)

    def node_capacities(self) -> list[NodeCapacity]:
        """CPUs and GPUs of each alive node, in all (blocking: a call to Ray's GCS)."""
        return self.cluster.node_capacities()

    async def shutdown(self) -> None:
        """Kill pooled workers; shut Ray down only if `start` started or joined it."""
        if ray.is_initialized():
            self.pool.shutdown()
        if self._owns_ray:
            await asyncio.to_thread(ray.shutdown)
            self._owns_ray = False
        if self._reaper is not None:
            await asyncio.to_thread(self._reaper.release)
            self._reaper = None

    def runtime_env(self) -> dict[str, Any]:
        """The job's runtime environment: the task modules' code as `py_modules` (a group
        with a snapshot of its own replaces them: see ``TaskCode``); on a local Ray (this
        machine) also the project's source tree, for a checkout that is not installed, and the
        service's own PYTHONPATH and working directory (where ``describe_in_subprocess`` finds
        a task too)."""
        env: dict[str, Any] = {}
        cache = self.code_cache or CodeCache(Path(tempfile.gettempdir()) / "foldwise-code")
        search = [*self.worker_pythonpath, os.getcwd()]
        modules = task_module_paths(self.task_modules, search, cache=cache)
        if modules:
            env["py_modules"] = modules
        if not self.address:
            inherited = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
            paths = [*self.worker_pythonpath, os.getcwd(), *inherited]
            env["env_vars"] = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
        return env


def _with_backend(job: FoldJob, gpus_per_worker: float) -> FoldJob:
    """``job`` on NCCL when its ranks have GPUs; ranks that would share a GPU fail it."""
    if 0 < gpus_per_worker < 1 and job.world_size > 1:
        raise FoldFailed(
            "nccl needs a whole GPU per rank: use gpus_per_worker >= 1 with "
            "more than one worker per fold",
            retryable=False,
        )
    if gpus_per_worker > 0 and job.backend != "nccl":
        return dataclasses.replace(job, backend="nccl")
    return job


async def _stop_when_set(stop: asyncio.Event, group: WorkerGroup, run_key: str) -> None:
    """Once `stop` is set, ask each rank of `group` to end the run `run_key` after its epoch."""
    await stop.wait()
    for actor in group.actors:
        actor.stop.remote(run_key)


async def _consume(rank: int, generator: Any, queue: asyncio.Queue) -> None:
    """Drain one rank's streaming generator; rank 0's events go to `queue`, then ("end", error)."""
    error: BaseException | None = None
    try:
        async for ref in generator:
            event = await ref
            if rank == 0:
                queue.put_nowait(("event", rank, event))
    except asyncio.CancelledError:
        raise
    except Exception as err:
        error = err
    queue.put_nowait(("end", rank, error))


def _local_ranks(placement: list[dict[str, Any]], world_size: int) -> list[int]:
    """Each rank's index among the ranks on its node (its ``local_rank``)."""
    seen: dict[Any, int] = {}
    out = []
    for rank in range(world_size):
        node = placement[rank].get("node_id") if rank < len(placement) else None
        out.append(seen.get(node, 0))
        seen[node] = out[-1] + 1
    return out


async def _rank_statuses(group: WorkerGroup, run_key: str, finished: set[int]) -> str:
    """Where each rank of a run that timed out was, in words (asked of its actor's second
    thread, which answers while the first is stuck)."""
    refs = [actor.status.remote(run_key) for actor in group.actors]
    try:
        said = await asyncio.wait_for(asyncio.gather(*refs), STATUS_TIMEOUT_S)
    except Exception:  # a rank that does not answer at all: its process is stuck too
        said = ["did not answer"] * len(refs)
    ranks = [
        f"rank {rank} {'had finished' if rank in finished else text}"
        for rank, text in enumerate(said)
    ]
    return "; ".join(ranks)


class _StuckRanks(Exception):
    """Some ranks finished cleanly and the others did not finish within FINISH_GRACE_S."""

    def __init__(self, ranks: list[int]) -> None:
        super().__init__(ranks)
        self.ranks = ranks


class _DeadlinePassed(Exception):
    """The fold run's time (trainer.fold_timeout) ran out."""


async def _next(
    queue: asyncio.Queue, finished: set[int], world_size: int, deadline: float | None
) -> tuple[str, int, Any]:
    """The next item from the ranks before `deadline`; once one rank has finished, the rest
    get FINISH_GRACE_S."""
    grace = FINISH_GRACE_S if finished else None
    left = None if deadline is None else deadline - time.monotonic()
    wait = min((t for t in (grace, left) if t is not None), default=None)
    if wait is None:
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), max(wait, 0.0))
    except TimeoutError:
        if left is not None and (grace is None or left <= grace):
            raise _DeadlinePassed from None
        raise _StuckRanks(sorted(set(range(world_size)) - finished)) from None


def _failure_grace(first: BaseException) -> float:
    """How long the other ranks get to fail too once ``first`` came in. Every rank raises a
    contract error at the same report, so theirs are on their way (on a loaded machine later
    than ROOT_CAUSE_GRACE_S) and waiting for them costs nothing; another error of the task's
    own may have left its peers stuck, so they get a moment only."""
    if raised_by_every_rank(first) or not is_root_cause(first):
        return FAILURE_GRACE_S
    return ROOT_CAUSE_GRACE_S


async def _collect_errors(
    tasks: list[asyncio.Task], queue: asyncio.Queue, grace: float
) -> dict[int, Any]:
    """Give the other ranks ``grace`` seconds to fail too, so the root cause is among the
    errors (and ranks that all stopped at the same report are seen to)."""
    pending = [t for t in tasks if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=grace)
    errors: dict[int, Any] = {}
    while not queue.empty():
        kind, rank, payload = queue.get_nowait()
        if kind == "end" and payload is not None:
            errors[rank] = payload
    return errors
