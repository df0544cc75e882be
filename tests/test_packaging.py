"""The distribution as setuptools builds it from pyproject.toml: its metadata, and a wheel whose
only top-level package is foldwise (the server's folders install inside it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = (
    "foldwise",
    "service",
    "trainers",
    "optimizers",
    "pruners",
    "migrations",
    "integrations",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A wheel built from a copy of the checkout's sources (nothing is written into the
    checkout), and what the build printed on stderr."""
    project = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for folder in SOURCE_FOLDERS:
        shutil.copytree(
            ROOT / folder, project / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path_factory.mktemp("dist")
    build = (
        "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", build, str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return out / done.stdout.strip().splitlines()[-1], done.stderr


def test_metadata_declares_the_licence_as_an_spdx_expression_without_warnings(wheel) -> None:
    path, stderr = wheel
    assert "license" not in stderr.lower(), stderr
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License"] is None  # the deprecated free-text field is gone


def test_the_wheel_installs_one_top_level_package_with_every_source_folder_inside(wheel) -> None:
    """A user's project with its own service, trainers, optimizers or migrations package
    installs beside foldwise without either replacing the other."""
    path, _ = wheel
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"foldwise"}
    for folder in SOURCE_FOLDERS[1:]:  # every module of every folder, under foldwise/
        sources = {
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / folder).rglob("*")
            if p.suffix in (".py", ".html", ".js", ".css", ".mako")
            and "__pycache__" not in p.parts
        }
        assert {f"foldwise/{source}" for source in sources} <= set(names), folder
