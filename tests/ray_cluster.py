"""A real multi-node Ray cluster on loopback for tests and benchmarks.

``ray start --head`` plus worker nodes from ``ray start --address``, each started from its own
empty directory, with no PYTHONPATH (the project is installed in the venv, as in the image of a
real cluster; nothing of the tests or of a user's task is importable there), token auth on, and
one custom resource per worker node (``node_a``, ``node_b``, ...) so placement can be checked.
Every node runs in its own session, so one node can be lost (SIGKILL to every process of its
session) without touching the others; only processes this class started are ever signalled.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.live_service import free_port

RAY_BIN = Path(sys.executable).parent / "ray"
HEALTH_CHECKS = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
"""A lost node is marked dead after three missed health checks a second apart (Ray's defaults:
five, three seconds apart); each check still waits Ray's 10 s for an answer, so a node of a
loaded machine is not taken for lost."""


@dataclass
class RayNode:
    name: str
    directory: Path
    process: subprocess.Popen[bytes]
    resources: dict[str, float] = field(default_factory=dict)

    def kill(self) -> None:
        """SIGKILL to every process of the node's session: its raylet and its workers (each
        worker has a process group of its own, so the group is not enough), all at once, as
        when a machine drops off the network."""
        for pid in self.session_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)

    def session_pids(self) -> list[int]:
        """The processes of the session its ``ray start`` began (only this node's)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getsid(int(entry.name)) == self.process.pid:
                        pids.append(int(entry.name))
                except (ProcessLookupError, PermissionError):
                    continue
        return pids

    def alive(self) -> bool:
        return self.process.poll() is None


class LoopbackCluster:
    """A head (no CPUs: it schedules, it does not train) and ``workers`` nodes of ``cpus``."""

    def __init__(self, root: Path, *, workers: int = 2, cpus: float = 2) -> None:
        self.root = root
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.token = secrets.token_hex(32)
        self.worker_count = workers
        self.cpus = cpus
        self.nodes: list[RayNode] = []

    @property
    def env(self) -> dict[str, str]:
        """What a driver needs to join: the auth settings (FOLDWISE_RAY_ADDRESS is separate)."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def start(self, timeout: float = 120) -> LoopbackCluster:
        """Start the head, then each worker once the one before has joined (nodes of one
        machine that start together race for the same socket names)."""
        head = ["--head", f"--port={self.port}", "--node-ip-address=127.0.0.1"]
        head += ["--num-cpus=0", "--include-dashboard=false"]
        try:
            self.nodes.append(self._start_node("head", head, {}))
            self.wait_for_nodes(1, timeout)
            for index in range(self.worker_count):
                self.add_worker(chr(ord("a") + index), timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(
        self, letter: str, timeout: float = 120, *, cpus: float | None = None
    ) -> RayNode:
        """A worker node with the custom resource ``node_<letter>``, once it has joined; of
        ``cpus`` CPUs (the cluster's per-node count by default)."""
        resources = {f"node_{letter}": 1.0}
        args = [f"--address={self.address}", "--node-ip-address=127.0.0.1"]
        args.append(f"--num-cpus={self.cpus if cpus is None else cpus:g}")
        args.append(f'--resources={{"node_{letter}": 1}}')
        node = self._start_node(f"node_{letter}", args, resources)
        self.nodes.append(node)
        self.wait_for_nodes(sum(n.alive() for n in self.nodes), timeout)
        return node

    def worker(self, name: str) -> RayNode:
        return next(n for n in self.nodes if n.name == name)

    def _start_node(self, name: str, args: list[str], resources: dict[str, float]) -> RayNode:
        directory = self.root / name
        directory.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FOLDWISE_", "RAY_"))}
        env.pop("PYTHONPATH", None)
        env |= self.env | {"RAY_USAGE_STATS_ENABLED": "0"} | HEALTH_CHECKS
        log = (directory / "ray.log").open("ab")
        process = subprocess.Popen(
            [str(RAY_BIN), "start", "--block", "--disable-usage-stats", *args],
            cwd=directory,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        return RayNode(name, directory, process, resources)

    def wait_for_nodes(self, count: int, timeout: float = 120) -> None:
        """Until ``count`` nodes are alive in the cluster, asked through the Ray CLI."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_nodes() >= count:
                return
            for node in self.nodes:
                if node.process.poll() is not None and node.name == "head":
                    raise RuntimeError(f"the Ray head exited:\n{self.log('head')}")
            time.sleep(1)
        raise TimeoutError(f"{count} Ray nodes not up after {timeout} s:\n{self.log('head')}")

    def alive_nodes(self) -> int:
        return len(self.node_ids())

    def node_ids(self) -> dict[str, str]:
        """The alive nodes' Ray ids by name (``head``, ``node_a``, ...), asked through Ray."""
        script = (
            "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR',"
            " log_to_driver=False)\n"
            "for n in ray.nodes():\n"
            "    if n['Alive']:\n"
            "        names = [r for r in n['Resources'] if r.startswith('node_')] or ['head']\n"
            "        print('node', names[0], n['NodeID'])"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOLDWISE_")} | self.env
        done = subprocess.run(
            [sys.executable, "-c", script, self.address],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            return {}
        lines = [line.split() for line in done.stdout.splitlines() if line.startswith("node ")]
        return {name: node_id for _, name, node_id in lines}

    def log(self, name: str, tail: int = 4000) -> str:
        path = self.root / name / "ray.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def stop(self, grace: float = 1) -> None:
        """SIGTERM to every node's process group, then, after ``grace`` seconds in all,
        SIGKILL to every process of every node's session (a node drains for up to 30 s
        after SIGTERM, longer than any grace a test would wait)."""
        for node in reversed(self.nodes):
            if node.alive():
                try:
                    os.killpg(node.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + grace
        for node in reversed(self.nodes):
            try:
                node.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            node.kill()  # anything of the node that outlived its `ray start`
