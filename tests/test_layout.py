"""Project-wide contracts: import boundaries between packages and the compose file's shape."""

from __future__ import annotations

import ast
import subprocess
import sys
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
# ``foldwise task check`` runs the user's task here, with the trainers of the [server] extra,
# and ``foldwise.load_model`` rebuilds a saved model with torch, inside the call.
LAZY_ALLOWED = {("foldwise", "service"), ("foldwise", "trainers"), ("foldwise", "torch")}
# foldwise/integrations/ puts the optimizers into other tools' search loops (Ray Tune's Searcher),
# so it is the one place that bridges foldwise, the optimizers and Ray. It ships in the foldwise
# namespace for users to import (``foldwise.integrations.tune``), but nothing else in foldwise
# imports it: the SDK and CLI stay free of both (test_import_foldwise_stays_light).
BRIDGES = {("foldwise", "integrations"): {"optimizers", "ray"}}


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


def _bridged(relative: Path) -> set[str]:
    """Modules that the file at ``relative`` may import although its package must not."""
    return BRIDGES.get(relative.parts[:2], set())


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_boundaries(package: str) -> None:
    offences = []
    for path in sorted((ROOT / package).rglob("*.py")):
        relative = path.relative_to(ROOT)
        for name, module_level in _imports(path):
            if name not in FORBIDDEN[package] or name in _bridged(relative):
                continue
            if (package, name) in LAZY_ALLOWED and not module_level:
                continue
            offences.append(f"{relative} imports {name}")
    assert not offences, "\n".join(offences)


def test_only_foldwise_integrations_bridges() -> None:
    assert _bridged(Path("foldwise/integrations/tune.py")) == {"optimizers", "ray"}
    for elsewhere in ("foldwise/client.py", "foldwise/integrations.py", "optimizers/gp.py"):
        assert not _bridged(Path(elsewhere)), elsewhere


def test_import_foldwise_stays_light() -> None:
    """``import foldwise`` (the SDK and CLI) loads neither Ray, torch nor the optimizers."""
    code = (
        "import sys, foldwise, foldwise.integrations\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'torch', 'optimizers'})\n"
        "print(','.join(heavy))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == ""


def test_docker_compose_runs_database_ray_and_service() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"db", "ray-head", "ray-worker", "service"} <= set(services)
    service = services["service"]
    assert service["environment"]["FOLDWISE_RAY_ADDRESS"] == "ray-head:6379"
    assert service["environment"]["FOLDWISE_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "--address=ray-head:6379" in services["ray-worker"]["command"]
    assert "--head" in services["ray-head"]["command"]
