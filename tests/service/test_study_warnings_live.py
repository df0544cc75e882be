"""A study says what its fold runs knew was suspect, once per warning with the trials it
concerns, where users look: the API, ``foldwise status``, the SDK and the dashboard."""

from __future__ import annotations

import subprocess

import pytest

from foldwise.schemas import StudyStatus
from tests.live_service import FOLDWISE_BIN, LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def study(shared_service: LiveService) -> dict:
    spec = tiny_task_spec(["ok"], budget={"trials": 2})
    spec["trainer"] = {"task": "tests.user_tasks.suspect", "epochs": 2, "batch_size": 8}
    spec["objective"] = {"metric": "val_score", "direction": "maximize"}
    spec["space"] = {"x": {"type": "float", "low": 0.0, "high": 1.0}}
    spec["parallel"] = {"trial_groups": 1, "folds": 2, "workers_per_fold": 2}
    spec["resources"] = {"cpus_per_worker": 0.5}
    spec["racing"] = {"rule": "off"}
    with shared_service.sdk() as client:
        done = client.create_study(spec).wait(timeout=600, poll=1)
        assert done.status is StudyStatus.COMPLETED, done.data.error
    return shared_service.http().get(f"/studies/{done.id}").json()


def test_the_api_gives_each_warning_once_with_the_trials_it_concerns(study) -> None:
    by_kind = {w["kind"]: w for w in study["warnings"]}
    assert set(by_kind) == {"augmented_validation", "partial_metric", "task"}
    for warning in by_kind.values():
        assert warning["trials"] == [0, 1] and warning["runs"] == 4  # 2 trials x 2 folds
    assert by_kind["task"]["message"] == "the probe's score is made up"
    assert by_kind["partial_metric"]["message"].startswith(
        "the objective val_score differs from rank to rank in the same epoch"
    )
    assert "has no load_eval_data" in by_kind["augmented_validation"]["message"]


def test_status_and_the_sdk_say_them(study, shared_service: LiveService) -> None:
    shown = subprocess.run(
        [FOLDWISE_BIN, "status", str(study["id"]), "--url", shared_service.url],
        capture_output=True,
        text=True,
        env=shared_service.cli_env,
        check=True,
    ).stdout
    assert shown.count("warning") == 3 and "made up (trials 0, 1)" in shown
    with shared_service.sdk() as client:
        warnings = client.get_study(study["id"]).warnings
    assert sorted(w.kind for w in warnings) == ["augmented_validation", "partial_metric", "task"]
