"""The distribution's metadata, as setuptools builds it from pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_metadata_declares_the_licence_as_an_spdx_expression_without_warnings(tmp_path) -> None:
    # Only the files metadata needs are copied, so the build writes nothing into the checkout.
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    out = tmp_path / "metadata"
    out.mkdir()
    build = (
        "import sys; from setuptools import build_meta; "
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", build, str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "license" not in done.stderr.lower(), done.stderr
    dist_info = done.stdout.strip().splitlines()[-1]
    metadata = Parser().parsestr((out / dist_info / "METADATA").read_text())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License"] is None  # the deprecated free-text field is gone
