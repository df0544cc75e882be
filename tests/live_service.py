"""A real foldwise service in a subprocess (uvicorn, a database, a local Ray) for tests and
benchmarks, and throw-away PostgreSQL databases for it to use."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent
FOLDWISE_BIN = Path(sys.executable).parent / "foldwise"
POSTGRES_ADMIN_URL = os.environ.get(
    "FOLDWISE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


PORT_TRIES = 3
"""Ports a LiveService tries: one picked free can be taken before the service binds it."""


class PortTaken(RuntimeError):
    """The service's port was taken between being picked and being bound."""


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server answers at ``POSTGRES_ADMIN_URL``."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_connect(url: str = POSTGRES_ADMIN_URL) -> psycopg.Connection:
    """An autocommit connection to the PostgreSQL database at ``url`` (a plain
    ``postgresql://`` URL; the server's admin database by default); ``PostgresUnavailable``
    when no server answers."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(f"no PostgreSQL at {url}: {exc}") from exc


def postgres_url(name: str, driver: str = "postgresql+psycopg") -> str:
    """The URL of database ``name`` on the test server, for ``driver``."""
    return (
        f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0].replace('postgresql://', f'{driver}://')}/{name}"
    )


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new empty PostgreSQL database as a SQLAlchemy URL, dropped afterwards."""
    name = f"foldwise_test_{uuid.uuid4().hex[:12]}"
    with postgres_connect() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield postgres_url(name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def backend_database(backend: str, folder: Path) -> Iterator[str]:
    """An empty database on ``backend`` (``sqlite``: a file in ``folder``; ``postgresql``: one
    of the test server's, dropped after) as a SQLAlchemy URL."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'foldwise.db'}"
    else:
        with postgres_database() as url:
            yield url


class LiveService:
    """Starts ``foldwise serve`` on 127.0.0.1; only the process it started is ever signalled.

    ``root`` is the source tree to serve (another checkout of foldwise, for before-and-after
    benchmarks); ``env`` adds or overrides ``FOLDWISE_*`` settings. Before it starts, the
    database is brought to ``root``'s schema and given an admin token (``token``) by ``root``'s
    own code, which ``headers``, ``sdk()`` and ``cli_env`` carry (none for a revision from
    before tokens); ``admin_token=False`` skips both. ``cwd`` is where it runs (``root`` by
    default).
    """

    def __init__(
        self,
        database_url: str,
        log_path: Path,
        *,
        ray_num_cpus: float = 4,
        root: Path = ROOT,
        env: dict[str, str] | None = None,
        admin_token: bool = True,
        cwd: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.root = root
        imports = import_path(root)
        # `python -c` puts its working directory first on sys.path: another checkout's runs
        # where its imports are linked, so its own foldwise folder does not hide them
        self.cwd = cwd or Path(imports.split(os.pathsep)[0])
        self.env = {
            **os.environ,
            "FOLDWISE_DATABASE_URL": database_url,
            "FOLDWISE_UPGRADE_DB": "true",
            "FOLDWISE_RAY_NUM_CPUS": str(ray_num_cpus),
            "FOLDWISE_POLL_SECONDS": "0.5",
            "FOLDWISE_ARTIFACT_DIR": str(log_path.parent / "artifacts"),
            "FOLDWISE_CODE_CACHE_DIR": str(log_path.parent / "code"),
            "FOLDWISE_TASK_MODULES": "tests.user_tasks",
            "PYTHONPATH": imports,
            **(env or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None
        name = f"admin-{self.port}"
        self.token = _admin_token(database_url, name, root, self.env) if admin_token else ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    @property
    def cli_env(self) -> dict[str, str]:
        """The environment for ``foldwise`` commands run against this service."""
        return {**os.environ, "FOLDWISE_TOKEN": self.token}

    def sdk(self) -> Any:
        """A ``foldwise.Client`` for this service, with its admin token."""
        from foldwise import Client

        return Client(self.url, token=self.token)

    def http(self, timeout: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout)

    def start(self, timeout: float = 120, *, new_session: bool = False) -> LiveService:
        """Start it and wait until it answers with Ray up; ``new_session`` makes it the leader
        of a session and process group of its own (as a shell starts a job), so that group
        can be signalled without signalling the caller. A port some other process took since
        it was picked is given up for another one."""
        for _ in range(PORT_TRIES - 1):
            try:
                return self._start(timeout, new_session)
            except PortTaken:
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}"
        return self._start(timeout, new_session)

    def _start(self, timeout: float, new_session: bool) -> LiveService:
        command = [sys.executable, "-c", "from foldwise.cli import app; app()"]
        command += ["serve", "--port", str(self.port)]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command,
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=log,
            start_new_session=new_session,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if f"cannot listen on 127.0.0.1:{self.port}" in self.log():
                    raise PortTaken(self.port)
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

    def log(self, tail: int = 8000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:]


def import_path(root: Path) -> str:
    """PYTHONPATH that makes ``import foldwise`` load ``root``'s code: this checkout is
    installed (editable), but another checkout's ``foldwise.service``, ``foldwise.trainers``,
    ... live in top-level folders that only its own install maps into the package, so they
    are linked into a ``foldwise`` folder beside it (else its SDK would be served with this
    checkout's service)."""
    if root == ROOT:
        return str(root)
    project = tomllib.loads((root / "pyproject.toml").read_text())
    mapped = project.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    subpackages = {
        name.split(".", 1)[1]: folder for name, folder in mapped.items() if name.count(".") == 1
    }
    if not subpackages:  # a layout from before the mapping: its folders import as they are
        return str(root)
    linked = root.parent / f"{root.name}-imports" / "foldwise"
    linked.mkdir(parents=True, exist_ok=True)
    for entry in (root / "foldwise").iterdir():
        (linked / entry.name).unlink(missing_ok=True)
        (linked / entry.name).symlink_to(entry)
    for name, folder in subpackages.items():
        (linked / name).unlink(missing_ok=True)
        (linked / name).symlink_to(root / folder)
    return os.pathsep.join([str(linked.parent), str(root)])


def _admin_token(database_url: str, name: str, root: Path, env: dict[str, str]) -> str:
    """An admin token in a database brought to ``root``'s schema first, made by ``root``'s code
    (another checkout's schema and token table may differ from this one's); "" for a revision
    from before tokens."""
    if root == ROOT:
        from foldwise.schemas import Role
        from foldwise.service.token_admin import create_token
        from tests.databases import bring_to_head

        bring_to_head(database_url)
        return create_token(database_url, name, Role.ADMIN)
    script = (
        "import sys\n"
        "try:\n"
        "    from service.token_admin import create_token\n"
        "except ImportError:\n"
        "    sys.exit(0)\n"
        "from foldwise.schemas import Role\n"
        "from service.db.schema import upgrade_database\n"
        "upgrade_database(sys.argv[1])\n"
        "print(create_token(sys.argv[1], sys.argv[2], Role.ADMIN))\n"
    )
    made = subprocess.run(
        [sys.executable, "-c", script, database_url, name],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return made.stdout.strip()
