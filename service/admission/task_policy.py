"""Which tasks a study may name, and what kind of task it is, without running its code here.

``trainer.task`` names code, so the API process decides from the name alone: a built-in task,
or a module under the packages the operator listed in ``FOLDWISE_TASK_MODULES``. Anything else
is refused before anything is imported. A permitted task's kind (what metrics it reports) is
then found out where task code may run: a Ray worker (``RayExecutor.describe_task``), or with no
scheduler a short-lived subprocess without the service's settings in its environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from foldwise.limits import TASK_DESCRIBE_TIMEOUT_S
from foldwise.service.admission.task_profiles import DESCRIBED
from foldwise.trainers.task import BUILTIN_TASKS, TaskNotFound, TaskProfile, resolve_task

DESCRIBE_TIMEOUT_S = TASK_DESCRIBE_TIMEOUT_S
_DESCRIBE = (
    "import json, sys; from foldwise.trainers.task import resolve_task; "
    "print(resolve_task(sys.argv[1]).profile(json.loads(sys.argv[2])).to_json())"
)


def task_name_problem(name: str, allowed: Sequence[str]) -> str | None:
    """Why ``name`` may not be a study's task, or None when it may. Imports nothing."""
    if name in BUILTIN_TASKS:
        return None
    module = name.partition(":")[0]
    if any(module == prefix or module.startswith(prefix + ".") for prefix in allowed):
        return None
    return f"task {name!r} is not one this service runs: {task_choices(allowed)}"


def task_choices(allowed: Sequence[str]) -> str:
    """What a study may name as its task on this service: the registry's built-in tasks, and
    the packages (``FOLDWISE_TASK_MODULES``) whose modules may be tasks."""
    builtins = ", ".join(BUILTIN_TASKS)
    if allowed:
        custom = f"'package.module:attr' under {', '.join(allowed)} (FOLDWISE_TASK_MODULES)"
    else:
        custom = "not enabled (FOLDWISE_TASK_MODULES is empty)"
    return f"the built-in tasks are {builtins}, and custom tasks are {custom}"


Describe = Callable[[str, Path | None, dict[str, Any]], TaskProfile]
"""A user task's profile from its name, its code (a snapshot's unpacked package, or None) and
the study's ``trainer.options``."""


def task_profile(
    name: str,
    remote: Describe | None,
    code: Path | None = None,
    options: dict[str, Any] | None = None,
) -> TaskProfile:
    """What task ``name`` (permitted) is, with ``options`` (``trainer.options``): its kind,
    loop, metrics and what it gives. A built-in is ours, read here; a user's is described from
    ``code`` (its package's snapshot, when it has one) by ``remote`` (in a Ray worker), else in
    a subprocess, once per snapshot and options (``task_profiles``). ``TaskNotFound`` if it
    cannot be loaded."""
    options = options or {}
    if name in BUILTIN_TASKS:
        return resolve_task(name).profile(options)
    key = None if code is None else DESCRIBED.key(name, code, options)
    known = None if key is None else DESCRIBED.get(key)
    if known is not None:
        return known
    if remote is not None:
        profile = remote(name, code, options)
    else:
        profile = describe_in_subprocess(name, code=code, options=options)
    if key is not None:
        DESCRIBED.put(key, profile)
    return profile


def scrubbed_environment() -> dict[str, str]:
    """This process's environment without the service's settings (the database URL among
    them): what task code may see."""
    return {k: v for k, v in os.environ.items() if not k.startswith("FOLDWISE_")}


def describe_in_subprocess(
    name: str,
    timeout: float = DESCRIBE_TIMEOUT_S,
    *,
    code: Path | None = None,
    options: dict[str, Any] | None = None,
) -> TaskProfile:
    """The task's profile, found by importing it in a new Python process (from ``code``, the
    unpacked snapshot of its package, when given); ``TaskNotFound`` with the reason it gave
    when it cannot be loaded."""
    env = scrubbed_environment()
    first = None if code is None else str(code.parent)
    paths = (first, os.getcwd(), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the snapshot's folder stays as it was unpacked
    try:
        done = subprocess.run(  # -P: not the working directory first, ahead of the snapshot
            [sys.executable, "-P", "-c", _DESCRIBE, name, json.dumps(options or {})],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise TaskNotFound(f"task {name!r}: loading it took more than {timeout:g} s") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["it could not be loaded"]
        raise TaskNotFound(lines[-1].removeprefix("foldwise.trainers.task.TaskNotFound: "))
    said = done.stdout.strip().splitlines()
    try:  # its code may have printed too, or ended the process before the answer
        return TaskProfile.from_json(said[-1])
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        raise TaskNotFound(
            f"task {name!r}: loading it ended the process without an answer"
        ) from exc
