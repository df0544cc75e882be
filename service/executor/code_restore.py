"""A worker runs a study's task code as it was submitted, whatever an earlier run did to it.

Ray unpacks a snapshot once per node and its workers live on from run to run, so a run can
change what a later run of the same snapshot imports: the unpacked files, or the modules in a
warm worker's memory. Before each run (a fold, a hold-out score, a description), the worker
checks the package it imports against the snapshot's hash, puts it back from the snapshot's
zip when it differs, and forgets the modules imported from it, so they are imported afresh.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from typing import Any

import ray

from foldwise.service.task_code import (
    find_package,
    package_matches,
    task_top,
    unzip_snapshot,
    write_files,
)


def run_as_submitted(task: str, code_hash: str | None, archive: list[Any] | None) -> None:
    """Make the package of ``task`` that this process imports snapshot ``code_hash`` again:
    put back from ``archive`` (the snapshot's zip in Ray's object store, a reference in a
    list) when its files are not the snapshot's, and forget its imported modules. Nothing for
    a task without a snapshot; ``RuntimeError`` when the files differ and no archive came."""
    top = None if code_hash is None else task_top(task)
    if code_hash is None or top is None:
        return
    location = find_package(top)
    if location is not None and not package_matches(location, code_hash):
        if not archive:
            raise RuntimeError(
                f"task code {code_hash[:12]} on this node was changed after it was unpacked "
                f"({location}), and no snapshot came to put it back from"
            )
        snapshot = unzip_snapshot(ray.get(archive[0]), code_hash)
        if location.is_dir():
            shutil.rmtree(location)
        else:
            location.unlink()
        write_files(location.parent, snapshot)
        importlib.invalidate_caches()
    for name in [m for m in sys.modules if m == top or m.startswith(f"{top}.")]:
        del sys.modules[name]
