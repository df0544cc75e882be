"""A real foldwise service in a subprocess (uvicorn, a SQLite file, a local Ray) for tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
FOLDWISE_BIN = Path(sys.executable).parent / "foldwise"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveService:
    """Starts ``foldwise serve`` on 127.0.0.1; only the process it started is ever signalled."""

    def __init__(self, database_url: str, log_path: Path, *, ray_num_cpus: float = 4) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "FOLDWISE_DATABASE_URL": database_url,
            "FOLDWISE_UPGRADE_DB": "true",
            "FOLDWISE_RAY_NUM_CPUS": str(ray_num_cpus),
            "FOLDWISE_POLL_SECONDS": "0.5",
            "PYTHONPATH": str(ROOT),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> LiveService:
        command = [str(FOLDWISE_BIN), "serve", "--port", str(self.port)]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"service exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).json()["ray"]["ok"]:
                    return self
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"service not ready after {timeout} s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when a machine loses power."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-8000:]
