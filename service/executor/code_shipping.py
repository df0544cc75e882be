"""User task code reaches Ray's workers through Ray, never through a shared path (DESIGN §7).

A study runs the snapshot of its task's package taken at submit (``service.task_code``), given
to its own workers as their ``py_modules`` (``code_runtime_env``). The packages an operator
allows as task modules (``FOLDWISE_TASK_MODULES``) also go to Ray as the job's ``py_modules``,
as they are when the service starts: only a study stored without a snapshot (one submitted
before snapshots were taken) runs them. Ray keeps each package once in its own store, by
content, and unpacks it on every node that starts a worker, so a module that exists only where
the service runs imports there.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from typing import Any

from foldwise.service.task_code import (
    OWN_PACKAGES,
    CodeCache,
    TaskCodeError,
    find_package,
    snapshot_package,
)

log = logging.getLogger(__name__)

__all__ = ["OWN_PACKAGES", "code_runtime_env", "task_module_paths"]


def code_runtime_env(path: str) -> dict[str, Any]:
    """The runtime environment of a task or actor that imports the package at ``path`` (an
    unpacked snapshot): its ``py_modules`` replace the job's, and the job's ``env_vars`` stay
    (Ray merges the two key by key).

    Ray uploads a local folder only for the job's own environment (``ray.init``); a task or
    actor takes the URI of a package already in Ray's store. So the folder is put there as
    ``ray.init`` does it, under a URI named by its content, when it is not there yet: Ray drops
    a package no worker has used for a while, so this runs before each new worker group.
    Blocking (it may upload), and it needs Ray started. Ray's own helper is private API."""
    from ray._private.runtime_env.py_modules import upload_py_modules_if_needed

    env = upload_py_modules_if_needed(
        {"py_modules": [path]},
        include_gitignore=False,  # a snapshot holds no dot-files: nothing to read
        scratch_dir=tempfile.gettempdir(),
        logger=log,
    )
    return {"py_modules": list(env["py_modules"])}


def task_module_paths(
    prefixes: Sequence[str], search: Sequence[str] = (), *, cache: CodeCache
) -> list[str]:
    """The package (or module) of the top-level name of each allowed task prefix, found in
    ``search`` and then ``sys.path``, as a copy in ``cache`` of what a snapshot of it holds:
    what Ray ships whatever the folder on disk holds (a name that is not UTF-8, a symlink, a
    backslash: left out, and logged, so the service starts). Prefixes found nowhere, or past
    the snapshot limits, are left to the workers' own installation (and logged)."""
    paths: list[str] = []
    for top in dict.fromkeys(prefix.split(".")[0] for prefix in prefixes):
        location = find_package(top, search)
        if location is None:
            if top not in OWN_PACKAGES:
                log.info("task package %r is not shipped from here; workers must have it", top)
            continue
        try:
            snapshot = snapshot_package(location, skip=_left_out)
        except TaskCodeError as exc:
            log.warning(
                "task package %r is not shipped from here (%s); workers must have it", top, exc
            )
            continue
        paths.append(str(cache.unpack(snapshot)))
    return list(dict.fromkeys(paths))


def _left_out(path: str, why: str) -> None:
    log.warning("task package file %r is not shipped: it %s", path, why)
