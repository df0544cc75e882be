"""The README's Python runs as written, against a live service: its quick start, then its SDK
tour on the quick start's study (the README's "study 1"), then its Ray Tune example; the
listing of the task interface is valid Python. Only the service's address and the study's id
are put in for the README's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.live_service import ROOT, LiveService
from tests.test_readme import README, fences

pytestmark = pytest.mark.slow

README_URL = "http://127.0.0.1:8000"


def _blocks() -> list[str]:
    return fences(README.read_text(), {"python"})


def _block(starting: str) -> str:
    (block,) = [b for b in _blocks() if b.lstrip().startswith(starting)]
    return block


def _run(source: str, service: LiveService, cwd: Path, monkeypatch) -> dict[str, Any]:
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("FOLDWISE_TOKEN", service.token)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    exec(compile(source.replace(README_URL, service.url), "README.md", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def quick_start(shared_service: LiveService) -> dict[str, Any]:
    """The quick start's namespace, once: it submits examples/digits.yaml and waits."""
    monkeypatch = pytest.MonkeyPatch()
    try:
        return _run(_block("from foldwise import Client"), shared_service, ROOT, monkeypatch)
    finally:
        monkeypatch.undo()


def test_the_quick_start_runs_the_example_study(quick_start) -> None:
    study = quick_start["study"]  # as last read: its client closed with the block
    assert study.status.value == "completed" and study.data.best_trial is not None


def test_the_sdk_tour_runs_on_the_quick_starts_study(
    quick_start, shared_service: LiveService, tmp_path: Path, monkeypatch
) -> None:
    source = _block("import foldwise\n").replace("fetch_study(1)", "fetch_study(STUDY_1)")
    source = f"STUDY_1 = {quick_start['study'].id}\n{source}"
    tour = _run(source, shared_service, tmp_path, monkeypatch)
    copy = tour["study"]
    assert copy.name == "digits-again" and copy.data.spec.trainer.options["test_fraction"] == 0.25
    assert tour["score"].objective is not None  # the hold-out score the tour asked for
    assert list((tmp_path / "models").glob("*.pt"))


def test_the_ray_tune_example_runs(tmp_path: Path) -> None:
    """In a process of its own: Tune starts a local Ray of its own."""
    source = _block("import math\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOLDWISE_")}
    done = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**env, "RAY_DEDUP_LOGS": "0"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'C':" in done.stdout.splitlines()[-1]  # the best config


def test_the_task_interface_listing_is_python() -> None:
    (listing,) = [b for b in _blocks() if b.startswith("def load_data(options)")]
    namespace: dict[str, Any] = {}
    exec(compile("from __future__ import annotations\n" + listing, "README.md", "exec"), namespace)
    assert callable(namespace["train_fold"]) and namespace["metrics"] == ["val_f1", "val_loss"]


def test_every_python_block_is_run_by_a_test_here() -> None:
    starts = ("from foldwise import Client", "import foldwise\n", "import math\n", "def load_data")
    assert all(block.lstrip().startswith(starts) for block in _blocks()), [
        block.splitlines()[0] for block in _blocks()
    ]
