"""The service's one driver: finds studies to run and runs each in a ``StudyRunner`` task.

It lives in the service process and is the only writer of study, trial and fold state, while
this instance holds the scheduler's lease (``service.scheduler.lease``): every instance on a
database runs one, and only the lease holder schedules. It polls the database, so a study
created through another instance, or while it was down, is picked up within a poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from pathlib import Path
from typing import Any

from foldwise.service.admission.cluster_fit import NodeCapacity
from foldwise.service.artifact_store import artifact_store, delete_study_artifacts
from foldwise.service.db import refits as refit_repo
from foldwise.service.executor.contract import Executor
from foldwise.service.scheduler.cluster_share import ClusterShare
from foldwise.service.scheduler.holdout_runner import HoldoutRunner
from foldwise.service.scheduler.lease import LeaseLost, SchedulerLease
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.scheduler.study_runner import StudyRunner
from foldwise.trainers.task import TaskProfile

log = logging.getLogger(__name__)

CAPACITY_SECONDS = 5.0
"""How often the scheduler reads the cluster's alive nodes for the share."""


class Scheduler:
    def __init__(
        self,
        store: SchedulerStore,
        executor: Executor,
        lease: SchedulerLease,
        *,
        poll_seconds: float = 1.0,
    ) -> None:
        self.store = store
        self.executor = executor
        self.lease = lease
        self.poll_seconds = poll_seconds
        self._runners: dict[int, tuple[StudyRunner, asyncio.Task[None]]] = {}
        self._holdouts: dict[int, asyncio.Task[None]] = {}
        """Ended studies' refits and hold-out scores being run, by study."""
        self.share = ClusterShare()
        """The cluster's CPUs and GPUs, shared among the running studies."""
        self._capacity_read_at = -math.inf
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop(), name="scheduler")

    async def close(self) -> None:
        """Cancel every study task (their running trials resume on the next scheduler) and
        give the lease up, so another instance takes over at once."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        await self._drop_runners()
        with contextlib.suppress(Exception):  # the database may be gone: the lease expires
            await self.store.reports.close()  # what the fold runs reported before they stopped
            await self.lease.release()

    async def _drop_runners(self) -> None:
        """Cancel every study task without recording anything: the trials stay as they are,
        for whichever scheduler runs the studies next."""
        tasks = [task for _runner, task in self._runners.values()]
        tasks += list(self._holdouts.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runners.clear()
        self._holdouts.clear()

    def wake(self) -> None:
        """Look for new studies and for stop and delete requests now, not at the next poll."""
        self.store.stop_flags.forget()
        self._wake.set()
        for runner, _task in self._runners.values():
            runner.wake()

    def cluster_nodes(self) -> list[NodeCapacity]:
        """What each node of the cluster offers (blocking); empty when Ray does not answer."""
        return self._node_capacities() or []

    def _node_capacities(self) -> list[NodeCapacity] | None:
        """The executor's nodes (blocking): empty when Ray does not answer, None when the
        executor cannot tell."""
        try:
            return self.executor.node_capacities()
        except Exception as exc:  # a submit check must not fail because Ray is slow to answer
            log.warning("could not read the cluster's nodes: %s", exc)
            return []

    def describe_task(
        self, name: str, code: Path | None = None, options: dict[str, Any] | None = None
    ) -> TaskProfile:
        """A user task's profile, loaded in a worker from ``code`` (the unpacked snapshot of
        its package) when given, with the study's ``trainer.options`` (blocking); see
        ``service.admission.task_policy``."""
        return self.executor.describe_task(name, code, options)

    async def lease_status(self) -> dict[str, Any]:
        try:
            return await self.lease.describe()
        except Exception as exc:  # health must answer even when the database does not
            return {"leader": self.lease.epoch is not None, "detail": str(exc)}

    def executor_health(self) -> dict[str, Any]:
        try:
            return self.executor.health()
        except Exception as exc:  # health must answer even when Ray does not
            return {"ok": False, "detail": str(exc)}

    async def _loop(self) -> None:
        while True:
            try:
                if await self.lease.hold():
                    await self._read_capacity()
                    await self._start_new_studies()
                    await self._start_holdouts()
                    await self._carry_out_deletions()
                elif self._runners or self._holdouts:  # another instance schedules now
                    await self._drop_runners()
            except LeaseLost:
                await self._drop_runners()
            except Exception:
                log.exception("scheduler could not read the studies to run")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)

    async def _read_capacity(self) -> None:
        """Keep the share to the cluster's alive nodes (nodes join and leave), read every
        CAPACITY_SECONDS."""
        now = time.monotonic()
        if now - self._capacity_read_at < CAPACITY_SECONDS:
            return
        self._capacity_read_at = now
        nodes = await asyncio.to_thread(self._node_capacities)
        if nodes is not None:  # None: an executor that cannot tell, no limit
            self.share.set_capacity(nodes)

    async def _carry_out_deletions(self) -> None:
        """Delete the studies whose deletion was asked for, once their runners have stopped
        (a running one is woken to notice its stop request)."""
        for study_id in await self.store.deletion_requests():
            entry = self._runners.get(study_id)
            if entry is not None:
                self.store.stop_flags.forget()
                entry[0].wake()
                continue
            holdout = self._holdouts.get(study_id)
            if holdout is not None:  # a refit may train for long: it ends with its study
                holdout.cancel()
                continue
            await self.store.delete_study(study_id)
            if self.store.artifact_dir is not None:
                store = artifact_store(self.store.artifact_dir)
                await asyncio.to_thread(delete_study_artifacts, store, study_id)
            log.info("deleted study %s", study_id)

    async def _start_holdouts(self) -> None:
        """Run the refits and hold-out scores asked of ended studies, a task a study."""
        for study_id in await self.store.read(refit_repo.studies_with_open_jobs):
            if study_id in self._holdouts or study_id in self._runners:
                continue
            runner = HoldoutRunner(study_id, self.store, self.executor)
            task = asyncio.create_task(runner.run(), name=f"holdout-{study_id}")
            task.add_done_callback(lambda _t, sid=study_id: self._holdouts.pop(sid, None))
            self._holdouts[study_id] = task

    async def _start_new_studies(self) -> None:
        for study_id in await self.store.active_study_ids():
            if study_id in self._runners:
                continue
            runner = StudyRunner(
                study_id, self.store, self.executor, self.poll_seconds, share=self.share
            )
            task = asyncio.create_task(runner.run(), name=f"study-{study_id}")
            task.add_done_callback(lambda _t, sid=study_id: self._runners.pop(sid, None))
            self._runners[study_id] = (runner, task)
            log.info("running study %s", study_id)
