"""Project-wide contracts: import boundaries between packages and the compose file's shape."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

# Package → top-level modules it must never import (STYLE §1).
FORBIDDEN = {
    "foldwise": {"service", "optimizers", "trainers", "fastapi", "sqlalchemy", "ray", "torch"},
    "optimizers": {"service", "trainers", "fastapi", "sqlalchemy", "ray", "torch"},
    "trainers": {"service", "optimizers", "fastapi", "sqlalchemy", "ray"},
}
# foldwise's CLI may start the service, but only from inside a command, never at import time.
LAZY_ALLOWED = {("foldwise", "service")}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Top-level module names imported by a file, with whether the import is module-level."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        module_level = node in tree.body
        found.extend((name.split(".")[0], module_level) for name in names)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_boundaries(package: str) -> None:
    offences = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name, module_level in _imports(path):
            if name not in FORBIDDEN[package]:
                continue
            if (package, name) in LAZY_ALLOWED and not module_level:
                continue
            offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offences, "\n".join(offences)


def test_docker_compose_runs_database_ray_and_service() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"db", "ray-head", "ray-worker", "service"} <= set(services)
    service = services["service"]
    assert service["environment"]["FOLDWISE_RAY_ADDRESS"] == "ray-head:6379"
    assert service["environment"]["FOLDWISE_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "--address=ray-head:6379" in services["ray-worker"]["command"]
    assert "--head" in services["ray-head"]["command"]
