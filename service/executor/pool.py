"""A warm pool of DDP worker groups, keyed by shape and task code (DESIGN §7, research/ray.md
design (c)).

A group is one placement group plus one DDPWorker actor per rank. A new actor pays a Python + torch
start (seconds); a reused one starts the next fold in well under a second. Idle groups hold their
resources, so when a new placement group cannot be placed the oldest idle groups are evicted,
none that a waiting run would take: a group of a waiting run's own shape and code that comes
free meanwhile is taken instead, as soon as it is released (the release wakes the waiting runs).
A group's workers import one snapshot of task code (``TaskCode``) for their whole life, so a
group only runs folds of studies with that snapshot.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from foldwise.service.executor.code_shipping import code_runtime_env
from foldwise.service.executor.worker import DDPWorker

log = logging.getLogger(__name__)

Shape = tuple[int, float, float]
"""(world_size, cpus_per_worker, gpus_per_worker)"""
Kind = tuple[Shape, str | None]
"""What a run needs of a group to use it: its shape and the hash of its task code."""

EVICT_AFTER_S = 1.0
"""How long a new placement group may stay pending before an idle group is evicted for it (and
between evictions while it stays pending)."""


@dataclass(frozen=True)
class TaskCode:
    """A snapshot of task code (``service.task_code``) by its hash, and its unpacked package on
    this machine: what a group's workers get as their ``py_modules``."""

    hash: str
    path: str
    archive: Any = field(default=None, compare=False)
    """The snapshot's zip in Ray's object store (a reference in a list), for a worker to put
    its copy back from when it finds it changed."""


@dataclass
class WorkerGroup:
    """N_W actors in one placement group; `master` is rank 0's (ip, port) for the next run;
    `placement` says where each rank runs ({rank, node_id, node_ip, gpu_ids})."""

    id: int
    shape: Shape
    pg: PlacementGroup
    actors: list[Any]
    code_hash: str | None = None
    master: tuple[str, int] = ("", 0)
    placement: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 0
    idle_since: float = field(default_factory=time.monotonic)

    @property
    def kind(self) -> Kind:
        """What a run needs of a group to use it: its shape and its task code."""
        return self.shape, self.code_hash


class WorkerPool:
    """Hands out worker groups by shape and task code, reusing idle ones; failed groups are
    killed."""

    def __init__(self, *, max_idle_groups: int = 8) -> None:
        self.max_idle_groups = max_idle_groups
        self._idle: list[WorkerGroup] = []  # oldest first
        self._busy: dict[int, WorkerGroup] = {}
        self._ids = itertools.count(1)
        self._waiting: Counter[Kind] = Counter()
        """The kinds of the runs making a new group, until Ray has placed it."""
        self._released: set[asyncio.Future[None]] = set()
        """One per run waiting for placement: done when a group is released."""

    @property
    def idle_groups(self) -> list[WorkerGroup]:
        """Groups waiting for a run, oldest first."""
        return list(self._idle)

    @property
    def busy_groups(self) -> list[WorkerGroup]:
        """Groups starting or running a fold."""
        return list(self._busy.values())

    async def acquire(
        self,
        shape: Shape,
        on_placed: Callable[[], None] | None = None,
        *,
        code: TaskCode | None = None,
    ) -> tuple[WorkerGroup, bool]:
        """A live group of `shape` whose workers run `code` (None: the job's own environment),
        with a fresh rendezvous address, and whether it was new. `on_placed` is called once Ray
        has placed a new group, before its workers start."""
        kind: Kind = (shape, None if code is None else code.hash)
        while True:
            while (group := self._take_idle(kind)) is not None:
                try:
                    await self._refresh_master(group)
                except ray.exceptions.RayError as err:  # died while idle: try another or new
                    log.warning("discarding dead idle worker group %d: %s", group.id, err)
                    self.discard(group)
                    continue
                except BaseException:
                    self.discard(group)
                    raise
                return group, False
            if (group := await self._create(kind, code, on_placed)) is not None:
                return group, True
            # a group that fits came free while the new one waited to be placed: take it

    def release(self, group: WorkerGroup) -> None:
        """Take back a group whose run succeeded; idle groups past the bound die, oldest first."""
        self._busy.pop(group.id, None)
        group.runs += 1
        group.idle_since = time.monotonic()
        self._idle.append(group)
        while len(self._idle) > self.max_idle_groups:
            self._kill(self._idle.pop(0))
        for waiter in self._released:  # runs waiting for room look for a group of their kind
            if not waiter.done():
                waiter.set_result(None)

    def discard(self, group: WorkerGroup) -> None:
        """Kill a group whose run failed or was cancelled."""
        self._busy.pop(group.id, None)
        if group in self._idle:
            self._idle.remove(group)
        self._kill(group)

    def clear_idle(self) -> None:
        """Kill every idle group (the next run of any shape starts cold)."""
        while self._idle:
            self._kill(self._idle.pop(0))

    def shutdown(self) -> None:
        """Kill every group, idle or busy; busy runs then fail as retryable."""
        self.clear_idle()
        for group in list(self._busy.values()):
            self.discard(group)

    def _has_idle(self, kind: Kind) -> bool:
        return any(g.kind == kind for g in self._idle)

    def _take_idle(self, kind: Kind) -> WorkerGroup | None:
        for group in reversed(self._idle):  # most recently used first: its caches are warmest
            if group.kind == kind:
                self._idle.remove(group)
                self._busy[group.id] = group
                return group
        return None

    async def _create(
        self, kind: Kind, code: TaskCode | None, on_placed: Callable[[], None] | None
    ) -> WorkerGroup | None:
        """A new group of `kind` running `code`, once Ray has placed it and its workers answer;
        None, and nothing placed, when an idle group of the same kind comes free first."""
        self._waiting[kind] += 1  # from here on no other run evicts an idle group of its kind
        try:
            group, code_options = await self._place(kind, code)
        finally:
            self._waiting[kind] -= 1
            if not self._waiting[kind]:
                del self._waiting[kind]
        if group is None:
            return None
        world_size, cpus, gpus = kind[0]
        try:
            if on_placed is not None:
                on_placed()
            group.actors = [
                DDPWorker.options(
                    num_cpus=cpus,
                    num_gpus=gpus,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        group.pg, placement_group_bundle_index=rank
                    ),
                    **code_options,
                ).remote()
                for rank in range(world_size)
            ]
            await self._refresh_master(group)
        except BaseException:
            self.discard(group)
            raise
        return group

    async def _place(
        self, kind: Kind, code: TaskCode | None
    ) -> tuple[WorkerGroup | None, dict[str, Any]]:
        """A new group of `kind` without workers yet, once Ray has placed its bundles, and the
        options its workers start with; no group, and nothing placed, when an idle group of
        the same shape and code is there to take first (looked for again once the code's
        environment is ready, which can take seconds, and at each release while it waits)."""
        shape = kind[0]
        world_size, cpus, gpus = shape
        code_options: dict[str, Any] = {}
        if code is not None:
            code_options["runtime_env"] = await asyncio.to_thread(code_runtime_env, code.path)
        if self._has_idle(kind):
            return None, code_options
        bundle = {"CPU": cpus, **({"GPU": gpus} if gpus > 0 else {})}
        pg = placement_group(
            [dict(bundle) for _ in range(world_size)],
            strategy="STRICT_PACK" if gpus > 0 else "PACK",
        )
        group = WorkerGroup(id=next(self._ids), shape=shape, pg=pg, actors=[], code_hash=kind[1])
        self._busy[group.id] = group
        try:
            placed = await self._wait_placed(pg, kind)
        except BaseException:
            self.discard(group)
            raise
        if not placed:
            self.discard(group)
            return None, code_options
        return group, code_options

    async def _wait_placed(self, pg: PlacementGroup, kind: Kind) -> bool:
        """Wait quietly for the cluster to place `pg`, evicting every ``EVICT_AFTER_S`` the
        oldest idle group that no waiting run would take (:meth:`_evictable`); False as soon
        as an idle group of `kind` is there to take instead (a run of the same kind has just
        ended: its warm workers serve, where evicting them would make room for cold ones).
        Each release wakes the wait to look."""
        loop = asyncio.get_running_loop()
        ready = asyncio.ensure_future(pg.ready())
        evict_at = loop.time() + EVICT_AFTER_S
        try:
            while not ready.done():
                released = loop.create_future()
                self._released.add(released)
                try:
                    await asyncio.wait(
                        {ready, released},
                        timeout=max(0.0, evict_at - loop.time()),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    self._released.discard(released)
                    released.cancel()
                if ready.done():
                    break
                if self._has_idle(kind):
                    return False
                if loop.time() < evict_at:
                    continue
                if (victim := self._evictable()) is not None:
                    self._idle.remove(victim)
                    self._kill(victim)
                evict_at = loop.time() + EVICT_AFTER_S
            ready.result()
            return True
        finally:
            ready.cancel()

    def _evictable(self) -> WorkerGroup | None:
        """The oldest idle group that no run making a new group would take (its next look
        takes one of its own shape and code)."""
        return next((g for g in self._idle if g.kind not in self._waiting), None)

    async def _refresh_master(self, group: WorkerGroup) -> None:
        """Check every actor answers (new ones finish starting), see where each runs, and have
        rank 0 listen for the next run's rendezvous."""
        ranks = await asyncio.gather(
            *(actor.placement.remote(rank == 0) for rank, actor in enumerate(group.actors))
        )
        group.master = ranks[0]["node_ip"], ranks[0]["port"]
        group.placement = [
            {"rank": rank, **{k: v for k, v in where.items() if k != "port"}}
            for rank, where in enumerate(ranks)
        ]

    @staticmethod
    def _kill(group: WorkerGroup) -> None:
        try:
            for actor in group.actors:
                ray.kill(actor, no_restart=True)
            remove_placement_group(group.pg)
        except Exception as err:  # Ray already gone (shutdown) or the group already removed
            log.debug("killing worker group %d: %s", group.id, err)
