"""A watchdog that takes a local Ray's leftovers with the service when the service is killed.

The kernel kills a local Ray's GCS and raylet with the service (``PR_SET_PDEATHSIG``), but not
the agents the raylet starts (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``, in the raylet's
process group): they see their raylet gone, then wait a minute for the dead GCS before they exit,
and a service started again meanwhile runs beside them. The watchdog is a small process of its
own session (a signal to the service's process group does not reach it) holding the read end of
a pipe whose write end only the service holds. When the pipe ends without a word, the service
died: the watchdog kills the raylet's process group, agents included, and exits. A service that
shuts Ray down itself says ``done`` first, and the watchdog exits without touching anything.

``start_ray_reaper`` runs this file as a script (``python -I ray_reaper.py PGID``): it imports
the standard library alone, not the ``service`` packages (Ray, torch), so it starts at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import IO

DONE = b"done\n"


@dataclass
class RayReaper:
    """The service's end of the watchdog: ``release`` when Ray was shut down cleanly."""

    process: subprocess.Popen[bytes]

    def release(self) -> None:
        """Tell the watchdog that Ray is gone by the service's own hand, and let it exit."""
        stdin: IO[bytes] | None = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(OSError):  # it died already: nothing left to tell
                stdin.write(DONE)
                stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def start_ray_reaper(raylet_pid: int) -> RayReaper:
    """Start the watchdog for the local Ray whose raylet is ``raylet_pid`` (it leads the process
    group its agents join)."""
    process = subprocess.Popen(
        [sys.executable, "-I", os.path.abspath(__file__), str(os.getpgid(raylet_pid))],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return RayReaper(process)


def local_raylet_pid() -> int | None:
    """The pid of the raylet this process's ``ray.init`` started, or None (it joined a cluster,
    or Ray keeps no such record)."""
    try:
        from ray._private import ray_constants, worker

        node = worker._global_node
        infos = node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET) if node else None
        return infos[0].process.pid if infos else None
    except (AttributeError, ImportError, IndexError):
        return None


def watch(pgid: int, pipe: IO[bytes]) -> None:
    """Wait for the pipe to end; unless it said ``done``, kill process group ``pgid``."""
    said = pipe.read()
    if said.startswith(DONE):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only the pipe tells it when to act
    watch(int(sys.argv[1]), sys.stdin.buffer)
