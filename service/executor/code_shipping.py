"""User task code reaches Ray's workers through Ray, never through a shared path (DESIGN §7).

The packages an operator allows as task modules (``FOLDWISE_TASK_MODULES``) are found on the
service's machine, without importing them (user code never runs in the API process), and handed
to Ray as the job's ``py_modules``: Ray uploads each once to the cluster and unpacks it on every
node that starts a worker, so a module that exists only where the service runs imports there.
"""

from __future__ import annotations

import importlib.machinery
import logging
import sys
import sysconfig
from collections.abc import Sequence

log = logging.getLogger(__name__)

OWN_PACKAGES = frozenset({"foldwise", "optimizers", "trainers", "service", "migrations"})
"""Ours: installed on every node (the image), never shipped."""


def task_module_paths(prefixes: Sequence[str], search: Sequence[str] = ()) -> list[str]:
    """The directory (a package) or file (a module) of the top-level package of each allowed
    task prefix, found in ``search`` and then ``sys.path``; prefixes found nowhere are left to
    the workers' own installation (and logged)."""
    paths: list[str] = []
    path = [*search, *sys.path]
    for top in dict.fromkeys(prefix.split(".")[0] for prefix in prefixes):
        if top in OWN_PACKAGES:
            continue
        spec = importlib.machinery.PathFinder.find_spec(top, path)
        if spec is None:
            log.info("task package %r is not on this machine; workers must have it", top)
            continue
        if spec.submodule_search_locations:
            location = list(spec.submodule_search_locations)[0]
        elif spec.origin and spec.origin.endswith(".py"):
            location = spec.origin
        else:  # a compiled extension or a namespace without files: cannot be shipped
            log.info("task package %r cannot be shipped from %s", top, spec.origin)
            continue
        if location.startswith(sysconfig.get_paths()["stdlib"]):
            continue  # Python's own: every worker has it
        paths.append(location)
    return list(dict.fromkeys(paths))
