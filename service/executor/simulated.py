"""A simulated cluster behind the ``Executor`` protocol, for tests and benchmarks only.

Its fold runs hold simulated CPUs on simulated nodes, sleep through their epochs and report a
synthetic objective: the scheduler, store, lease and database run as they do on Ray, so a test
or ``benchmarks/scheduler_scale.py`` can drive 1,000 fold slots on two cores. It is chosen by
``FOLDWISE_EXECUTOR=simulated`` with the cluster's shape in ``FOLDWISE_SIMULATED_CLUSTER``
(``SimulatedCluster``), which the settings allow only on a loopback host, and the service's
health says ``simulated`` where Ray's would be.

With ``trace`` set, every fold run writes one JSON line when it is placed, after each epoch it
reports and when it ends (wall-clock times), so a benchmark can measure from outside what the
cluster trained.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from foldwise.service.admission.cluster_fit import NodeCapacity
from foldwise.service.executor.contract import FoldFailed, FoldRunStats
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import ArtifactKind, EpochReport, FoldEvent, SavedArtifact
from foldwise.trainers.task import TaskProfile


class SimulatedCluster(BaseModel):
    """The simulated cluster's nodes and how its fold runs behave."""

    model_config = ConfigDict(extra="forbid")

    nodes: int = Field(100, ge=1, le=100_000)
    cpus_per_node: float = Field(16.0, gt=0)
    gpus_per_node: float = Field(0.0, ge=0)
    epoch_seconds: tuple[float, float] = Field(
        (1.0, 1.0),
        description="Each trial's epoch time (the same in every fold), drawn uniformly from "
        "[low, high]",
    )
    noise: float = Field(0.02, ge=0, description="Spread of the objective around its value")
    worker_death_rate: float = Field(
        0.0, ge=0, le=1, description="Chance a fold run's workers die in an epoch (retryable)"
    )
    error_rate: float = Field(
        0.0, ge=0, le=1, description="Chance a fold run's user code raises (not retryable)"
    )
    checkpoints: bool = Field(True, description="A checkpoint after each epoch (kept artifacts)")
    models: bool = Field(True, description="The fold's model at its end (kept artifacts)")
    placement_seconds: float = Field(0.0, ge=0, description="How long placing workers takes")
    trace: str | None = Field(None, description="A JSON-lines file of every run's timeline")
    seed: int = 0


class SimulatedExecutor:
    """Runs fold runs on a ``SimulatedCluster``: placed first-fit on its nodes' CPUs (and
    GPUs), waiting while none has room, then an epoch of sleep per report."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self.cluster = cluster
        self._free = [[cluster.cpus_per_node, cluster.gpus_per_node] for _ in range(cluster.nodes)]
        self._room = asyncio.Condition()
        self._checkpoints: dict[str, int] = {}
        """The last checkpointed epoch of each artifact key (a retried attempt resumes there)."""
        self._trace: IO[str] | None = None

    async def start(self) -> None:
        if self.cluster.trace:
            self._trace = Path(self.cluster.trace).open("a", buffering=1 << 16)  # noqa: SIM115

    async def shutdown(self) -> None:
        if self._trace is not None:
            self._trace.close()
            self._trace = None

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
        """Place the run, then sleep through its epochs, reporting each (rank 0's stream)."""
        stats = stats or FoldRunStats(world_size=job.world_size)
        started = time.perf_counter()
        need = (job.world_size * cpus_per_worker, job.world_size * gpus_per_worker)
        stats.placing_since = time.monotonic()
        node = await self._place(need)
        try:
            if self.cluster.placement_seconds:
                await asyncio.sleep(self.cluster.placement_seconds)
            stats.placing_since = None
            stats.placement = [
                {"rank": r, "node_id": f"sim-{node}", "node_ip": "127.0.0.1", "gpu_ids": []}
                for r in range(job.world_size)
            ]
            stats.set_training(True)
            self._write_trace(job, "placed")
            async for event in self._epochs(job, stats, timeout, stop):
                yield event
        finally:
            stats.set_training(False)
            stats.wall_seconds = time.perf_counter() - started
            self._write_trace(job, "ended")
            await self._release(node, need)

    async def _epochs(
        self,
        job: FoldJob,
        stats: FoldRunStats,
        timeout: float | None,
        stop: asyncio.Event | None,
    ) -> AsyncIterator[FoldEvent]:
        rng = random.Random(_seed(self.cluster.seed, job.trial_key, job.fold, job.attempt))
        low, high = self.cluster.epoch_seconds  # a configuration's cost: the same in each fold
        seconds = random.Random(_seed(self.cluster.seed, job.trial_key)).uniform(low, high)
        base = _base_value(job.params)
        deadline = time.monotonic() + (timeout or job.trainer.fold_timeout)
        first = 1
        if job.resume and job.artifact_key in self._checkpoints:
            for epoch in range(1, self._checkpoints[job.artifact_key] + 1):
                yield self._report(job, epoch, base, rng, 0.0, restored=True)
                first = epoch + 1
        for epoch in range(first, job.trainer.epochs + 1):
            if stop is not None and stop.is_set():
                return
            began = time.time()
            await asyncio.sleep(seconds)
            if time.monotonic() > deadline:
                raise FoldFailed(f"the fold run took more than {job.trainer.fold_timeout:g} s")
            if rng.random() < self.cluster.worker_death_rate:
                raise FoldFailed("a simulated worker died", retryable=True)
            if rng.random() < self.cluster.error_rate:
                raise FoldFailed("ValueError: a simulated error in the task's code")
            stopped = stop is not None and stop.is_set()
            report = self._report(job, epoch, base, rng, seconds, stopped=stopped, began=began)
            stats.epochs += 1
            stats.train_seconds += seconds
            self._write_trace(job, "epoch", epoch=epoch, seconds=seconds)
            yield report
            if stopped:
                return
            if job.artifact_key and self.cluster.checkpoints:
                self._checkpoints[job.artifact_key] = epoch
                yield SavedArtifact(ArtifactKind.CHECKPOINT, epoch, b"")
        if job.artifact_key and self.cluster.models:
            yield SavedArtifact(ArtifactKind.MODEL, job.trainer.epochs, b"")

    def _report(
        self,
        job: FoldJob,
        epoch: int,
        base: float,
        rng: random.Random,
        seconds: float,
        *,
        restored: bool = False,
        stopped: bool = False,
        began: float | None = None,
    ) -> EpochReport:
        """The objective rises towards the configuration's value as the epochs go."""
        value = base * (1 - 0.5**epoch) + rng.gauss(0, self.cluster.noise)
        metrics = {job.objective.metric: value, "epoch_seconds": seconds}
        if began is not None:
            metrics["epoch_start"] = began
        return EpochReport(epoch, metrics, restored=restored, stopped=stopped)

    async def _place(self, need: tuple[float, float]) -> int:
        async with self._room:
            while True:
                for index, (cpus, gpus) in enumerate(self._free):
                    if cpus + 1e-9 >= need[0] and gpus + 1e-9 >= need[1]:
                        self._free[index] = [cpus - need[0], gpus - need[1]]
                        return index
                await self._room.wait()

    async def _release(self, node: int, need: tuple[float, float]) -> None:
        async with self._room:
            self._free[node][0] += need[0]
            self._free[node][1] += need[1]
            self._room.notify_all()

    def _write_trace(self, job: FoldJob, event: str, **fields: Any) -> None:
        if self._trace is None:
            return
        line = {"t": time.time(), "event": event, "trial": job.trial_key, "fold": job.fold}
        line.update(attempt=job.attempt, refit=job.refit, **fields)
        self._trace.write(json.dumps(line) + "\n")

    async def score_models(
        self, job: FoldJob, models: list[bytes], *, cpus: float, gpus: float = 0.0
    ) -> dict[str, Any]:
        """A synthetic hold-out score of each model and of their ensemble."""
        value = {job.objective.metric: _base_value(job.params)}
        return {"ensemble": value, "members": [dict(value) for _ in models]}

    def describe_task(
        self, name: str, code: Path | None = None, options: dict[str, Any] | None = None
    ) -> TaskProfile:
        """A user task's profile, read as a service without a scheduler reads it."""
        from foldwise.service.admission.task_policy import describe_in_subprocess

        return describe_in_subprocess(name, code=code, options=options or {})

    async def describe_capacity(self, *, gpus: bool = False) -> str:
        free = sum(cpus for cpus, _gpus in self._free)
        return f"the simulated cluster has {free:g} CPUs free on {len(self._free)} nodes"

    def node_capacities(self) -> list[NodeCapacity]:
        return [
            NodeCapacity(self.cluster.cpus_per_node, self.cluster.gpus_per_node)
            for _ in range(self.cluster.nodes)
        ]

    def health(self) -> dict[str, Any]:
        return {"ok": True, "simulated": True, "nodes": self.cluster.nodes}


def _seed(*parts: Any) -> int:
    digest = hashlib.blake2b(json.dumps(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _base_value(params: dict[str, Any]) -> float:
    """Each configuration's own value in [0, 1), the same in every fold and run."""
    return random.Random(_seed(sorted(params.items(), key=str))).random()
