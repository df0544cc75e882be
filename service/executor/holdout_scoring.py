"""Scoring saved models on a task's test data in a worker of the pool (``trainers.holdout``):
placed as a one-rank fold run is (warm workers reused, idle ones evicted when they hold the
room), the service never imports the task's code, and only plain values come back (metrics as
JSON, or an error as text)."""

from __future__ import annotations

import json
from typing import Any

import ray

from foldwise.service.executor.contract import FoldFailed
from foldwise.service.executor.pool import TaskCode, WorkerPool
from foldwise.trainers.job import FoldJob


async def score_in_worker(
    pool: WorkerPool,
    job: FoldJob,
    models: list[bytes],
    *,
    code: TaskCode | None,
    cpus: float,
    gpus: float = 0.0,
) -> dict[str, Any]:
    """``{"ensemble": metrics, "members": [...]}`` of ``models`` (saved ``model.pt`` files of
    ``job``'s task) on its test data, from a one-rank worker group of ``cpus`` and ``gpus``
    that imports ``code``. ``FoldFailed`` says why it could not be scored (retryable when the
    worker was lost)."""
    try:
        group, _new = await pool.acquire((1, float(cpus), float(gpus)), code=code)
    except ray.exceptions.RayError as exc:
        raise FoldFailed(
            f"Ray could not start a worker to score the models: {type(exc).__name__}",
            retryable=not isinstance(exc, ray.exceptions.RuntimeEnvSetupError),
        ) from exc
    reusable = False
    try:
        archive = None if code is None else code.archive
        outcome, text = await group.actors[0].score.remote(job, models, archive)
        reusable = True
    except ray.exceptions.RayError as exc:
        raise FoldFailed(
            f"the worker scoring the models was lost: {type(exc).__name__}", retryable=True
        ) from exc
    finally:  # cancelled too: the group goes, with whatever it was doing
        if reusable:
            pool.release(group)
        else:
            pool.discard(group)
    if outcome != "scores":
        line, _, trace = text.partition("\n")
        raise FoldFailed(line, trace)
    return json.loads(text)
