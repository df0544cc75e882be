"""Scoring saved models on a task's test data in a Ray worker (``trainers.holdout``): the
service never imports the task's code, and only plain values come back (metrics as JSON, or an
error as text)."""

from __future__ import annotations

import asyncio
import json
import traceback
from typing import Any

import ray

from service.executor.code_shipping import code_runtime_env
from service.executor.failures import FoldFailed
from service.executor.pool import TaskCode
from trainers.job import FoldJob


@ray.remote(max_retries=0)
def score_models(
    task: str, options: dict[str, Any], models: list[bytes], batch_size: int, device: str
) -> tuple[str, str]:
    """("scores", ``trainers.holdout.score_saved_models`` as JSON) or ("error", why in one
    line, then the traceback)."""
    from trainers.holdout import score_saved_models

    try:
        scores = score_saved_models(task, options, models, batch_size=batch_size, device=device)
        return "scores", json.dumps(scores)
    except BaseException as exc:  # the user's code: its reason, as text
        try:
            line = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
        except BaseException:
            line = type(exc).__name__
        return "error", f"{line}\n{traceback.format_exc()}"


async def score_remotely(
    job: FoldJob,
    models: list[bytes],
    *,
    code: TaskCode | None,
    cpus: float,
    gpus: float = 0.0,
) -> dict[str, Any]:
    """``{"ensemble": metrics, "members": [...]}`` of ``models`` (saved ``model.pt`` files of
    ``job``'s task) on its test data, from a worker holding ``cpus`` and up to one GPU that
    imports ``code``. ``FoldFailed`` says why it could not be scored (retryable when the
    worker was lost)."""
    options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": min(gpus, 1.0)}
    if code is not None:
        options["runtime_env"] = await asyncio.to_thread(code_runtime_env, code.path)
    device = "cuda" if gpus > 0 else "cpu"
    batch = job.trainer.val_batch_size
    ref = score_models.options(**options).remote(
        job.task, job.trainer.options, models, batch, device
    )
    try:
        outcome, text = await ref
    except asyncio.CancelledError:  # the study was deleted, or the service stops
        ray.cancel(ref, force=True)
        raise
    except ray.exceptions.RayError as exc:
        raise FoldFailed(
            f"the worker scoring the models was lost: {type(exc).__name__}", retryable=True
        ) from exc
    if outcome != "scores":
        line, _, trace = text.partition("\n")
        raise FoldFailed(line, trace)
    return json.loads(text)
