"""What the Ray a service runs on holds: alive nodes, their CPUs and GPUs, what is free, and the
worker pool's share of it. ``RayExecutor`` answers ``health``, ``describe_capacity`` and
``node_capacities`` from here; every call asks Ray's GCS, so the words a waiting study shows are
read at most every ``CAPACITY_TTL_S``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import ray

from foldwise.service.admission.cluster_fit import NodeCapacity
from foldwise.service.executor.pool import WorkerPool

CAPACITY_TTL_S = 10.0
"""How long ``describe_capacity`` reuses Ray's answer."""
CAPACITY_TIMEOUT_S = 5.0
"""How long ``describe_capacity`` waits for Ray's answer."""


class ClusterView:
    """Ray's nodes and resources as the service reports them, with ``pool``'s workers."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self._capacity: tuple[float, dict[str, Any]] | None = None

    def health(self) -> dict[str, Any]:
        """Whether Ray answers, with its alive nodes, resources and the pool's size."""
        if not ray.is_initialized():
            return {"ok": False, "error": "Ray is not started"}
        try:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            total, free = ray.cluster_resources(), ray.available_resources()
        except Exception as err:
            return {"ok": False, "error": f"{type(err).__name__}: {err}"}
        return {
            "ok": bool(nodes),
            "nodes": len(nodes),
            "cpus": total.get("CPU", 0.0),
            "gpus": total.get("GPU", 0.0),
            "cpus_free": free.get("CPU", 0.0),
            "gpus_free": free.get("GPU", 0.0),
            "idle_groups": len(self.pool.idle_groups),
            "idle_cpus": sum(g.shape[0] * g.shape[1] for g in self.pool.idle_groups),
            "busy_groups": len(self.pool.busy_groups),
        }

    async def describe_capacity(self, *, gpus: bool = False) -> str:
        """What Ray says it can place, in words: free CPUs (and GPUs, when the cluster has some
        or ``gpus``) on its alive nodes, or that it has no alive node or does not answer.

        Asked of Ray at most every ``CAPACITY_TTL_S`` however many studies wait, and for at
        most ``CAPACITY_TIMEOUT_S``: the answer is only words for a study's ``waiting``."""
        now = time.monotonic()
        if self._capacity is None or now - self._capacity[0] >= CAPACITY_TTL_S:
            try:
                health = await asyncio.wait_for(
                    asyncio.to_thread(self.health), timeout=CAPACITY_TIMEOUT_S
                )
            except TimeoutError:
                health = {"ok": False, "error": f"Ray did not answer in {CAPACITY_TIMEOUT_S:g} s"}
            self._capacity = now, health
        health = self._capacity[1]
        if not health["ok"]:
            why = health.get("error") or "Ray reports no alive node"
            return f"{why} (see GET /health)"
        free = f"{health['cpus_free']:g} of {health['cpus']:g} CPUs"
        if health["gpus"] or gpus:
            free += f" and {health['gpus_free']:g} of {health['gpus']:g} GPUs"
        nodes = health["nodes"]
        return f"Ray has {free} free on {nodes} alive node{'s' if nodes != 1 else ''}"

    def node_capacities(self) -> list[NodeCapacity]:
        """CPUs and GPUs of each alive node, in all (blocking: a call to Ray's GCS)."""
        if not ray.is_initialized():
            return []
        return [
            NodeCapacity(cpus=n["Resources"].get("CPU", 0.0), gpus=n["Resources"].get("GPU", 0.0))
            for n in ray.nodes()
            if n.get("Alive")
        ]
