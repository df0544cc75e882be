"""Loading a user's task in a Ray worker to learn what it is: never in the service's process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ray

from foldwise.service.executor.code_restore import run_as_submitted
from foldwise.service.executor.code_shipping import code_runtime_env
from foldwise.service.task_code import unpacked_snapshot, zip_snapshot
from foldwise.trainers.task import TaskNotFound, TaskProfile


@ray.remote(num_cpus=0, max_retries=0)
def describe_task(
    name: str,
    options: str = "{}",
    code_hash: str | None = None,
    archive: list[Any] | None = None,
) -> tuple[str, str]:
    """("profile", the task's profile as JSON) of task ``name``, or ("error", why it cannot be
    loaded); imports and, for a class, constructs the user's code, from snapshot
    ``code_hash`` as submitted (``code_restore``). Only plain strings go back: an exception of
    the user's own class would be unpickled, its module imported, in the service's process."""
    from foldwise.trainers.task import resolve_task

    try:
        run_as_submitted(name, code_hash, archive)
        return "profile", resolve_task(name).profile(json.loads(options)).to_json()
    except BaseException as exc:  # any failure of the user's code: its reason, as text
        try:
            lines = str(exc).strip().splitlines()
        except BaseException:  # its __str__ failed too
            lines = []
        return "error", lines[-1] if lines else f"task {name!r} could not be loaded"


def describe_remotely(
    name: str,
    timeout: float,
    code: Path | None = None,
    options: dict[str, Any] | None = None,
) -> TaskProfile:
    """``describe_task`` on a worker, waited for at most ``timeout`` seconds; ``TaskNotFound``
    with the worker's reason when the task cannot be loaded there. With ``code`` (a snapshot's
    unpacked package), the worker imports the task from that snapshot; ``options`` are the
    study's ``trainer.options`` (what test data the task gives may depend on them)."""
    try:
        task, hash_, archive = describe_task, None, None
        if code is not None:
            task = describe_task.options(runtime_env=code_runtime_env(str(code)))
            snapshot = unpacked_snapshot(code)
            hash_, archive = snapshot.hash, [ray.put(zip_snapshot(snapshot))]
        said = task.remote(name, json.dumps(options or {}), hash_, archive)
        outcome, text = ray.get(said, timeout=timeout)
    except ray.exceptions.GetTimeoutError as exc:
        raise TaskNotFound(f"task {name!r}: loading it took more than {timeout:g} s") from exc
    except ray.exceptions.RayError as exc:  # the worker died (the task's code exited, say)
        why = type(exc).__name__
        raise TaskNotFound(f"task {name!r}: the worker loading it failed ({why})") from exc
    if outcome != "profile":
        raise TaskNotFound(text)
    return TaskProfile.from_json(text)
