"""docker-compose.yml and the Dockerfile, read as data (Docker does not run here): every part is
there and they agree with each other and with the service's settings, and no secret is written
in them. docs/deploy.md explains the deployment."""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from foldwise.service.config import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
RAY_NODES = ("ray-head", "ray-worker", "service")  # every process of the Ray cluster
DOT_ENV = {"POSTGRES_PASSWORD": "pw-from-env", "RAY_AUTH_TOKEN": "token-from-env"}
"""What an operator puts in .env; everything else takes the file's defaults."""

INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
SECRET_NAME = re.compile(r"PASSWORD|TOKEN|SECRET", re.IGNORECASE)
REQUIRED_VARIABLE = re.compile(r"\$\{\w+:\?[^}]+\}")
PASSWORD_IN_URL = re.compile(r"://[^:/@\s]+:(?P<password>[^@]+)@")


def interpolate(text: str, env: dict[str, str] = DOT_ENV) -> str:
    """``text`` as Compose fills it in from ``env``: ``${X}``, ``${X:-default}``, ``${X:?err}``."""

    def value(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        if name in env and (env[name] or not (op or "").startswith(":")):
            return env[name]
        if op and op.endswith("?"):
            raise KeyError(f"{name}: {arg}")
        return arg if op else ""

    return INTERPOLATION.sub(value, text)


def environment(service: str) -> dict[str, str]:
    env = SERVICES[service].get("environment") or {}
    assert isinstance(env, dict), f"{service}: write environment as a mapping"
    return {key: str(value) for key, value in env.items()}


def command(service: str) -> list[str]:
    raw = SERVICES[service]["command"]
    return shlex.split(interpolate(raw)) if isinstance(raw, str) else list(raw)


def option(args: list[str], name: str) -> str:
    """The value of ``--name=value`` or ``--name value`` in ``args``."""
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} missing from {args}")


def mounts(service: str) -> dict[str, str]:
    """Target path -> source of each volume of ``service`` (short syntax)."""
    found = {}
    for volume in SERVICES[service].get("volumes", []):
        source, target = volume.split(":")[:2]
        found[target] = source
    return found


def head_address() -> str:
    return f"ray-head:{option(command('ray-head'), '--port')}"


def test_every_part_is_there() -> None:
    assert {"db", "ray-head", "ray-worker", "service"} <= set(SERVICES)
    assert "--head" in command("ray-head")
    assert command("service")[:2] == ["foldwise", "serve"]
    artifacts = environment("service")["FOLDWISE_ARTIFACT_DIR"]
    if "://" not in artifacts:  # else an fsspec URL (s3://...): no volume
        assert mounts("service").get(artifacts) in COMPOSE["volumes"], artifacts


def test_the_service_sets_only_settings_that_exist() -> None:
    known = {name.upper() for name in Settings.model_fields}
    unknown = [
        key
        for key in environment("service")
        if key.startswith("FOLDWISE_") and key.removeprefix("FOLDWISE_") not in known
    ]
    assert not unknown, f"not settings of service.config.Settings: {unknown}"


def test_the_service_settings_are_valid_as_filled_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings the service would read, with its command's --host (auth on 0.0.0.0)."""
    for key in [key for key in os.environ if key.startswith("FOLDWISE_")]:
        monkeypatch.delenv(key)
    for key, value in environment("service").items():
        monkeypatch.setenv(key, interpolate(value))
    monkeypatch.setenv("FOLDWISE_HOST", option(command("service"), "--host"))
    monkeypatch.setenv("FOLDWISE_PORT", option(command("service"), "--port"))
    settings = Settings(_env_file=None)
    assert settings.auth and settings.ray_address == head_address()
    assert "127.0.0.1" in settings.allowed_hosts  # the healthcheck's Host header
    assert settings.task_modules, "the mounted task package is not allowed in trainer.task"


def test_the_database_url_points_at_the_db_service() -> None:
    url = make_url(interpolate(environment("service")["FOLDWISE_DATABASE_URL"]))
    db = {key: interpolate(value) for key, value in environment("db").items()}
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.port or 5432) == ("db", 5432)
    assert url.username == db["POSTGRES_USER"] and url.database == db["POSTGRES_DB"]
    assert url.password == db["POSTGRES_PASSWORD"] == DOT_ENV["POSTGRES_PASSWORD"]


def test_the_service_and_the_workers_join_the_head() -> None:
    assert environment("service")["FOLDWISE_RAY_ADDRESS"] == head_address()
    assert option(command("ray-worker"), "--address") == head_address()


def test_every_ray_process_runs_one_image_with_one_auth_token() -> None:
    """Ray needs the same Ray and Python everywhere, and a token-auth cluster refuses a
    process without the cluster's token."""
    images = {
        json.dumps([SERVICES[name].get("build"), SERVICES[name].get("image")], sort_keys=True)
        for name in RAY_NODES
    }
    assert len(images) == 1 and SERVICES["service"].get("build"), images
    for name in RAY_NODES:
        env = environment(name)
        assert env.get("RAY_AUTH_MODE") == "token", name
        assert interpolate(env.get("RAY_AUTH_TOKEN", "")) == DOT_ENV["RAY_AUTH_TOKEN"], name


def test_dependencies_and_volumes_are_declared() -> None:
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        depends = service.get("depends_on") or []
        assert set(depends) <= set(SERVICES), f"{name} depends on {set(depends) - set(SERVICES)}"
        for target, source in mounts(name).items():
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"{name} mounts undeclared volume {source} on {target}"
    waits = SERVICES["service"]["depends_on"]
    assert waits["db"]["condition"] == "service_healthy" and "healthcheck" in SERVICES["db"]


def test_no_secret_is_written_in_the_file() -> None:
    """Passwords and tokens come from the operator's environment, and Compose refuses to start
    without them (``${VAR:?message}``) instead of falling back to a default."""
    for name in SERVICES:
        for key, value in environment(name).items():
            if SECRET_NAME.search(key):
                assert REQUIRED_VARIABLE.fullmatch(value), f"{name}: {key} is written in the file"
            for url in PASSWORD_IN_URL.finditer(value):
                assert REQUIRED_VARIABLE.fullmatch(url["password"]), f"{name}: {key} password"
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        interpolate(environment("service")["FOLDWISE_DATABASE_URL"], env={})


def test_the_task_package_is_mounted_where_the_service_imports_from() -> None:
    env = environment("service")
    paths = interpolate(env.get("PYTHONPATH", "")).split(":")
    targets = mounts("service")
    for module in interpolate(env["FOLDWISE_TASK_MODULES"]).split(","):
        package = module.strip().split(".")[0]
        assert any(f"{path}/{package}" in targets for path in paths), (module, paths, targets)


def test_the_service_healthcheck_asks_its_own_health_route() -> None:
    test = SERVICES["service"]["healthcheck"]["test"]
    port = option(command("service"), "--port")
    assert f"http://127.0.0.1:{port}/health" in " ".join(test)
    assert f"{port}" in {str(p).split(":")[-1] for p in SERVICES["service"]["ports"]}


def test_the_dockerfile_installs_the_server_and_every_package() -> None:
    installs = [line for line in _dockerfile_runs() if re.search(r"\bpip3? install\b", line)]
    assert any(re.search(r"""['"]?\.\[(?:[\w,]*,)?server\b""", line) for line in installs), (
        installs
    )
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = set(pyproject["tool"]["setuptools"]["package-dir"].values())
    copied = set(re.findall(r"^COPY (?:--\S+ )*(\w+) ", DOCKERFILE, re.MULTILINE))
    assert folders >= {"foldwise", "service", "trainers", "optimizers", "migrations"}
    for folder in folders:
        assert folder in copied, f"the Dockerfile does not copy {folder}/"


def test_the_image_makes_the_artifact_directory_for_its_volume() -> None:
    """A new named volume takes the owner of the directory the image has there; without it the
    volume is root's and the service (user ray) cannot write its artifacts."""
    target = environment("service")["FOLDWISE_ARTIFACT_DIR"]
    assert any(target in line and "install -d" in line for line in _dockerfile_runs())


def _dockerfile_runs() -> list[str]:
    """RUN instructions, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [line for line in joined.splitlines() if line.startswith("RUN ")]
