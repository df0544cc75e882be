"""User task code reaches Ray's workers through Ray: what the service hands to it."""

from __future__ import annotations

import os
from pathlib import Path

from foldwise.service.executor.code_shipping import task_module_paths
from foldwise.service.executor.ray_executor import RayExecutor


def test_task_packages_are_found_without_importing_them(tmp_path: Path) -> None:
    """What the workers get through Ray: the package's folder or the module's file, found on
    the service's machine; ours, Python's own and unknown names are not shipped."""
    (tmp_path / "labpkg").mkdir()
    (tmp_path / "labpkg" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (tmp_path / "single_task.py").write_text("raise SystemExit('imported!')\n")
    prefixes = ["labpkg.tasks", "labpkg", "single_task", "foldwise", "json", "no_such_pkg"]
    paths = task_module_paths(prefixes, [str(tmp_path)])
    assert paths == [str(tmp_path / "labpkg"), str(tmp_path / "single_task.py")]


def test_a_cluster_job_ships_task_packages_and_sets_no_path(tmp_path: Path, monkeypatch) -> None:
    """Joining a cluster, nothing of this machine's paths is handed to the workers: the task
    package goes as `py_modules`; a local Ray (this machine) also gets the working directory."""
    (tmp_path / "labpkg").mkdir()
    (tmp_path / "labpkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    cluster = RayExecutor(address="10.0.0.1:6379", task_modules=["labpkg.tasks"])
    assert cluster.runtime_env() == {"py_modules": [str(tmp_path / "labpkg")]}
    local = RayExecutor(task_modules=["labpkg.tasks"]).runtime_env()
    assert local["py_modules"] == [str(tmp_path / "labpkg")]
    assert str(tmp_path) in local["env_vars"]["PYTHONPATH"].split(os.pathsep)
