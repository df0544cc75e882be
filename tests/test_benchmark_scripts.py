"""The benchmark scripts run as their docs give them, at a tiny size, so none rots unseen (one
broke when auth came on). Nothing is timed here: a run passes when it prints its tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import require_chromium

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(args: list[str], timeout: float) -> str:
    """Run ``python ARGS`` from the repository root as a user would; its output."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if not k.startswith("FOLDWISE_")},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def test_dashboard_scale_signs_in_and_times_every_page() -> None:
    require_chromium()
    out = _run(
        ["-m", "benchmarks.dashboard_scale", "--trials", "30", "--folds", "2", "--epochs", "3"]
        + ["--repeats", "1"],
        timeout=300,
    )
    assert "30 trials × 2 folds × 3 epochs" in out, out
    assert "| `GET /studies/1/trials?sort=value&limit=50&offset=5000` |" in out, out
    for page in ("studies page", "study page", "trial page", "sort trial table by value"):
        assert f"| {page} |" in out, out
