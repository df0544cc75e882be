"""The local Ray's watchdog, on a stand-in process group: it kills the group when the service's
end of its pipe closes without a word, and leaves it when the service said ``done``."""

from __future__ import annotations

import subprocess
import time

from foldwise.service.executor.ray_reaper import start_ray_reaper


def _group_of_two() -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    """A leader and a member of one new process group, as the raylet and its agents are."""
    leader = subprocess.Popen(["sleep", "60"], process_group=0)
    member = subprocess.Popen(["sleep", "60"], process_group=leader.pid)
    return leader, member


def _dead_within(process: subprocess.Popen[bytes], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def test_a_service_that_dies_takes_the_group_with_it() -> None:
    leader, member = _group_of_two()
    reaper = start_ray_reaper(leader.pid)
    try:
        assert reaper.process.stdin is not None
        reaper.process.stdin.close()  # what the kernel does when the service dies
        assert _dead_within(member, 10) and _dead_within(leader, 1)
        assert reaper.process.wait(timeout=10) == 0
    finally:
        for process in (leader, member, reaper.process):
            process.kill()
            process.wait()


def test_a_service_that_shut_ray_down_leaves_everything_alone() -> None:
    leader, member = _group_of_two()
    reaper = start_ray_reaper(leader.pid)
    try:
        reaper.release()
        assert reaper.process.returncode == 0
        assert member.poll() is None and leader.poll() is None
    finally:
        for process in (leader, member, reaper.process):
            process.kill()
            process.wait()
