"""Loading a user's task in a Ray worker to learn what it is: never in the service's process."""

from __future__ import annotations

import ray

from trainers.task import TaskNotFound


@ray.remote(num_cpus=0, max_retries=0)
def describe_task(name: str) -> str:
    """The kind of task ``name`` (imports and, for a class, constructs the user's code)."""
    from trainers.task import resolve_task

    return resolve_task(name).kind


def describe_remotely(name: str, timeout: float) -> str:
    """``describe_task`` on a worker, waited for at most ``timeout`` seconds; ``TaskNotFound``
    with the worker's reason when the task cannot be loaded there."""
    try:
        return ray.get(describe_task.remote(name), timeout=timeout)
    except ray.exceptions.GetTimeoutError as exc:
        raise TaskNotFound(f"task {name!r}: loading it took more than {timeout:g} s") from exc
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        raise TaskNotFound(str(cause).strip().splitlines()[-1]) from exc
