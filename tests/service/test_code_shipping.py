"""User task code reaches Ray's workers through Ray: what the service hands to it."""

from __future__ import annotations

import os
from pathlib import Path

from ray._private.runtime_env.packaging import get_uri_for_directory

from foldwise.service.executor.code_shipping import task_module_paths
from foldwise.service.executor.ray_executor import RayExecutor
from foldwise.service.task_code import CodeCache


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_task_packages_are_found_without_importing_them(tmp_path: Path) -> None:
    """What the workers get through Ray: a copy of the package's folder or the module's file,
    found on the service's machine; ours, Python's own and unknown names are not shipped."""
    (tmp_path / "labpkg").mkdir()
    (tmp_path / "labpkg" / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (tmp_path / "single_task.py").write_text("raise SystemExit('imported!')\n")
    prefixes = ["labpkg.tasks", "labpkg", "single_task", "foldwise", "json", "no_such_pkg"]
    paths = task_module_paths(prefixes, [str(tmp_path)], cache=CodeCache(tmp_path / "cache"))
    assert [Path(p).name for p in paths] == ["labpkg", "single_task.py"]
    assert all(Path(p).is_relative_to(tmp_path / "cache") for p in paths)
    assert _files(Path(paths[0])) == ["__init__.py"]


def test_the_service_ships_an_allowed_package_whatever_its_folder_holds(tmp_path: Path) -> None:
    """A file name that is not UTF-8 once stopped the service's start (Ray's hashing of the
    folder raised); a symlink shipped what it pointed to. Both are left out of what Ray gets."""
    (tmp_path / "labpkg").mkdir()
    (tmp_path / "labpkg" / "__init__.py").write_text("")
    (tmp_path / os.fsdecode(b"labpkg/caf\xe9.py")).write_text("")
    (tmp_path / "secret.txt").write_text("FOLDWISE_DATABASE_URL=postgresql://...")
    (tmp_path / "labpkg" / "environ").symlink_to(tmp_path / "secret.txt")
    (path,) = task_module_paths(["labpkg"], [str(tmp_path)], cache=CodeCache(tmp_path / "c"))
    assert _files(Path(path)) == ["__init__.py"]
    assert get_uri_for_directory(path, include_gitignore=False).startswith("gcs://_ray_pkg_")


def test_a_cluster_job_ships_task_packages_and_sets_no_path(tmp_path: Path, monkeypatch) -> None:
    """Joining a cluster, nothing of this machine's paths is handed to the workers: the task
    package goes as `py_modules`; a local Ray (this machine) also gets the working directory."""
    (tmp_path / "labpkg").mkdir()
    (tmp_path / "labpkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    cache = CodeCache(tmp_path / "cache")
    cluster = RayExecutor(address="10.0.0.1:6379", task_modules=["labpkg.tasks"], code_cache=cache)
    (shipped,) = cluster.runtime_env()["py_modules"]
    assert Path(shipped).name == "labpkg" and Path(shipped).is_relative_to(tmp_path / "cache")
    assert set(cluster.runtime_env()) == {"py_modules"}
    local = RayExecutor(task_modules=["labpkg.tasks"], code_cache=cache).runtime_env()
    assert local["py_modules"] == [shipped]
    assert str(tmp_path) in local["env_vars"]["PYTHONPATH"].split(os.pathsep)
