"""Project-wide contracts: import boundaries between packages and the compose file's shape."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

SERVER_PACKAGES = {"service", "trainers", "optimizers", "pruners", "migrations", "integrations"}
"""Folders at the top of the checkout that install as ``foldwise.<name>`` (pyproject.toml)."""
OURS = {"foldwise", *SERVER_PACKAGES}

# Folder → packages it must never import, at module level or inside a function (STYLE §1).
# foldwise/ is the SDK, the CLI and the spec: it imports nothing else of ours and nothing heavy;
# the server adds its commands to the CLI through an entry point (group foldwise.cli).
FORBIDDEN = {
    "foldwise": (OURS - {"foldwise"}) | {"fastapi", "sqlalchemy", "ray", "torch"},
    "optimizers": {"service", "trainers", "pruners", "migrations", "integrations"}
    | {"fastapi", "sqlalchemy", "ray", "torch"},
    # the racing and pruning rules: pure functions of stored results, beside the optimizers
    "pruners": {"service", "trainers", "optimizers", "migrations", "integrations"}
    | {"fastapi", "sqlalchemy", "ray", "torch"},
    "trainers": {"service", "optimizers", "migrations", "integrations", "fastapi", "sqlalchemy"}
    | {"ray"},
    "integrations": {"service", "trainers", "migrations", "fastapi", "sqlalchemy", "torch"},
    "migrations": {"trainers", "optimizers", "integrations", "ray", "torch"},
}


def _package(module: str) -> str:
    """The package a dotted module name belongs to: ``foldwise.service.app`` is ``service``,
    ``foldwise.spec`` is ``foldwise``, ``torch.nn`` is ``torch``."""
    parts = module.split(".")
    if parts[0] == "foldwise" and len(parts) > 1 and parts[1] in SERVER_PACKAGES:
        return parts[1]
    return parts[0]


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Packages imported by a file, with whether the import is module-level."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        module_level = node in tree.body
        found.extend((_package(name), module_level) for name in names)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_boundaries(package: str) -> None:
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, _ in _imports(path)
        if name in FORBIDDEN[package]
    ]
    assert not offences, "\n".join(offences)


def test_migrations_and_the_schema_module_do_not_import_each_other() -> None:
    """The Alembic environment reads the models; the schema module finds the migrations'
    folder without importing it."""
    assert "migrations" not in {name for name, _ in _imports(ROOT / "service/db/schema.py")}


def test_import_foldwise_stays_light() -> None:
    """``import foldwise`` and the CLI with every command the server adds load neither Ray,
    torch, the web or database stack nor the optimizers."""
    code = (
        "import sys, foldwise, foldwise.integrations, foldwise.cli\n"
        "heavy = {'ray', 'torch', 'fastapi', 'sqlalchemy', 'foldwise.optimizers'}\n"
        "heavy = sorted(heavy & set(sys.modules))\n"
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


def _loaded_in_fresh_interpreter(code: str, modules: set[str], cwd: Path, *args: str) -> set[str]:
    """Which of ``modules`` a new Python process has loaded after running ``code``."""
    report = f"\nimport sys\nprint(','.join(sorted(set({sorted(modules)!r}) & set(sys.modules))))"
    done = subprocess.run(
        [sys.executable, "-c", code + report, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(filter(None, done.stdout.strip().split(",")))


def test_an_api_instance_that_does_not_schedule_loads_neither_ray_nor_torch(tmp_path) -> None:
    """The scheduler sees executors through ``service.executor.contract``; Ray, torch and the
    trainers' data code load only when a scheduler starts its RayExecutor."""
    code = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from foldwise.service.app import create_app\n"
        "from foldwise.service.config import Settings\n"
        "settings = Settings(database_url=sys.argv[1], scheduler_enabled=False, auth=False,\n"
        "                    upgrade_db=True, allowed_hosts=['testserver'])\n"
        "with TestClient(create_app(settings)) as client:\n"
        "    assert client.get('/health').status_code == 200"
    )
    database = f"sqlite:///{tmp_path / 'api.db'}"
    loaded = _loaded_in_fresh_interpreter(code, {"ray", "torch", "sklearn"}, tmp_path, database)
    assert loaded == set()


def test_a_scheduling_service_loads_neither_torch_nor_sklearn(tmp_path) -> None:
    """The scheduler and its RayExecutor hand folds to Ray and tell their failures apart by
    class: torch and scikit-learn load in the fold workers only."""
    code = "import foldwise.service.scheduler.scheduler, foldwise.service.executor.ray_executor"
    loaded = _loaded_in_fresh_interpreter(code, {"ray", "torch", "sklearn"}, tmp_path)
    assert loaded == {"ray"}


def test_a_fold_error_sent_back_to_the_service_loads_neither_torch_nor_sklearn(tmp_path) -> None:
    """Ray pickles what a worker raised; unpickling it in the service imports the module of its
    class, so every exception of a fold run lives in ``trainers.fold_errors`` (and each one
    unpickles: two took other arguments than their message)."""
    from foldwise.trainers import fold_channel, fold_errors, fold_runner, rank_exchange, splits

    raised = [
        fold_channel.TrainingDiverged("val_loss is nan"),
        fold_channel.RankReturnedAlone("rank 1 returned"),
        fold_channel.FoldStopped(),
        rank_exchange.PeerFailed("rank 0 raised"),
        rank_exchange.PeersLate([1], {0: {}}),
        rank_exchange.RunAbandoned(),
        fold_runner.FoldTimedOut(5.0, "epoch 2"),
        splits.SplitError("3 groups for 5 folds"),
    ]
    assert {type(e).__module__ for e in raised} == {fold_errors.__name__}
    (tmp_path / "errors.pickle").write_bytes(pickle.dumps(raised))
    code = (
        "import pickle, sys\n"
        "errors = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "assert [str(e) for e in errors] == sys.argv[2:], [str(e) for e in errors]"
    )
    loaded = _loaded_in_fresh_interpreter(
        code, {"torch", "sklearn"}, tmp_path, str(tmp_path / "errors.pickle"), *map(str, raised)
    )
    assert loaded == set()


def test_a_fold_worker_loads_no_http_client(tmp_path) -> None:
    """A fold worker imports the trainers (and so ``foldwise``), never the SDK's HTTP client:
    every worker process of every fold would pay for it."""
    code = "from foldwise.trainers import ddp, fold_data, fold_runner, task"
    loaded = _loaded_in_fresh_interpreter(code, {"httpx", "foldwise.client"}, tmp_path)
    assert loaded == set()
