"""The service's one driver: finds studies to run and runs each in a ``StudyRunner`` task.

It lives in the service process (one per deployment) and is the only writer of trial and fold
state. It polls the database, so a study created while it was down is picked up when it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from service.cluster_fit import NodeCapacity
from service.scheduler.store import SchedulerStore
from service.scheduler.study_runner import StudyRunner
from service.scheduler.trial_runner import FoldExecutor

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(
        self, store: SchedulerStore, executor: FoldExecutor, *, poll_seconds: float = 1.0
    ) -> None:
        self.store = store
        self.executor = executor
        self.poll_seconds = poll_seconds
        self._runners: dict[int, tuple[StudyRunner, asyncio.Task[None]]] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop(), name="scheduler")

    async def close(self) -> None:
        """Cancel every study task; their running trials resume when the service starts again."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = [task for _runner, task in self._runners.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runners.clear()

    def wake(self) -> None:
        """Look for new studies now instead of at the next poll."""
        self._wake.set()

    def is_running(self, study_id: int) -> bool:
        return study_id in self._runners

    async def stop_study(self, study_id: int) -> None:
        """Make the study's runner notice its stop flag now, and wait until it has stopped."""
        entry = self._runners.get(study_id)
        if entry is None:
            return
        runner, task = entry
        runner.wake()
        await asyncio.wait({task})

    def cluster_nodes(self) -> list[NodeCapacity]:
        """What each node of the cluster offers (blocking); empty when Ray does not answer."""
        try:
            return self.executor.node_capacities()  # type: ignore[attr-defined]
        except Exception as exc:  # a submit check must not fail because Ray is slow to answer
            log.warning("could not read the cluster's nodes: %s", exc)
            return []

    def executor_health(self) -> dict[str, Any]:
        try:
            return self.executor.health()  # type: ignore[attr-defined]
        except Exception as exc:  # health must answer even when Ray does not
            return {"ok": False, "detail": str(exc)}

    async def _loop(self) -> None:
        while True:
            try:
                await self._start_new_studies()
            except Exception:
                log.exception("scheduler could not read the studies to run")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll_seconds)

    async def _start_new_studies(self) -> None:
        for study_id in await self.store.active_study_ids():
            if study_id in self._runners:
                continue
            runner = StudyRunner(study_id, self.store, self.executor, self.poll_seconds)
            task = asyncio.create_task(runner.run(), name=f"study-{study_id}")
            task.add_done_callback(lambda _t, sid=study_id: self._runners.pop(sid, None))
            self._runners[study_id] = (runner, task)
            log.info("running study %s", study_id)
