"""Exports and warm starts in a real service: a study's trials as CSV over HTTP, through the
SDK's DataFrame and the CLI, and a GP study warm-started from it that starts where it did well."""

from __future__ import annotations

import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from foldwise.client import Client, Study
from foldwise.schemas import StudyStatus, TrialStatus
from tests.live_service import FOLDWISE_BIN, ROOT, LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow

MODES = ["ok", "flat"]  # flat: a model that predicts nothing, clearly worse on every fold


def _spec(modes: list[str], **overrides) -> dict:
    spec = tiny_task_spec(
        modes,
        parallel={"trial_groups": 2, "folds": 2, "workers_per_fold": 1},
        racing={"rule": "off"},
        **overrides,
    )
    spec["space"]["lr"] = {"type": "float", "low": 0.03, "high": 0.3, "log": True}
    spec["trainer"]["epochs"] = 4
    return spec


@pytest.fixture(scope="module")
def service(shared_service: LiveService) -> LiveService:
    return shared_service


@pytest.fixture(scope="module")
def client(service: LiveService) -> Iterator[Client]:
    with service.sdk() as sdk:
        yield sdk


@pytest.fixture(scope="module")
def sources(client: Client) -> list[Study]:
    """Two finished random-search studies: one whose trials all learn, one whose trials all
    predict nothing."""
    studies = [
        client.create_study(_spec([mode], budget={"trials": 3})).wait(timeout=600, poll=1)
        for mode in MODES
    ]
    assert all(s.status is StudyStatus.COMPLETED for s in studies), [s.data for s in studies]
    return studies


def _cli(service: LiveService, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(FOLDWISE_BIN), "--url", service.url, *args],
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        env=service.cli_env,
    )


def test_csv_dataframe_and_cli_agree(
    service: LiveService, client: Client, sources: list[Study], tmp_path: Path
) -> None:
    source = sources[0]
    with service.http() as http:
        response = http.get(f"/studies/{source.id}/trials.csv", params={"sort": "best"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    frame = client.get_study(source.id).to_dataframe(sort="best")
    trials = {t.number: t for t in source.trials()}
    assert list(frame["number"]) == [t.number for t in source.trials(sort="best")]
    assert list(frame.columns) == response.text.splitlines()[0].replace('"', "").split(",")
    assert {"params_mode", "params_lr", "fold_0", "fold_1", "duration_s"} <= set(frame.columns)
    for row in frame.itertuples():
        trial = trials[row.number]
        assert row.status == "completed" and row.value == pytest.approx(trial.value)
        assert statistics.fmean([row.fold_0, row.fold_1]) == pytest.approx(trial.value)
        assert (row.params_mode, row.params_lr) == (trial.params["mode"], trial.params["lr"])
        assert row.started_at == trial.started_at and row.duration_s > 0
    assert str(frame["started_at"].dt.tz) == "UTC"

    shown = _cli(service, "trials", str(source.id), "--csv", "--sort", "best")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == response.content
    path = tmp_path / "source.csv"
    saved = _cli(service, "trials", str(source.id), "--csv", "--sort", "best", "-o", str(path))
    assert saved.returncode == 0 and path.read_bytes() == response.content
    missing = _cli(service, "trials", "999", "--csv")
    assert missing.returncode == 1 and missing.stderr.decode().strip() == (
        "error: study 999 not found"
    )


def test_a_gp_warm_started_from_both_starts_where_they_did_well(
    service: LiveService, client: Client, sources: list[Study]
) -> None:
    earlier = [trial for source in sources for trial in source.trials()]
    named = [source.id for source in reversed(sources)]
    spec = _spec(
        MODES,
        optimizer={"name": "gp", "seed": 0, "options": {"n_initial": 2}},
        budget={"trials": 2},
        warm_start={"studies": named},
    )
    spec["parallel"]["trial_groups"] = 1
    study = client.create_study(spec)
    summary = study.data.warm_start
    assert summary is not None and summary.studies == named
    assert (summary.observations, summary.skipped) == (len(earlier), 0) == (6, 0)
    study.wait(timeout=600, poll=1)
    trials = study.trials()
    frame = study.to_dataframe()
    assert study.status is StudyStatus.COMPLETED, study.data.error
    assert study.data.progress.budget == 2 and study.data.progress.finished == 2
    assert [t.number for t in trials] == [0, 1] and list(frame["number"]) == [0, 1]
    assert all(t.status is TrialStatus.COMPLETED for t in trials)
    # The GP has seen flat fail to learn: its first, model-based, suggestion learns.
    first = trials[0].params
    assert first["mode"] == "ok", (first, [(t.params, t.value) for t in earlier])
    assert not any(t.params == first for t in earlier)
    with httpx.Client(base_url=service.url, headers=service.headers) as http:
        listed = http.get(f"/studies/{study.id}/trials").json()
    assert listed["count"] == 2
