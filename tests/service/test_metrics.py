"""``GET /metrics``: Prometheus text that a scraper parses, with the database's state in it."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from foldwise.schemas import Role
from foldwise.service.metrics import FOLD_QUEUE_WAIT, SUGGESTION_SECONDS, TRIALS_ENDED
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec


def _samples(api: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_metrics_report_studies_by_status_and_work_in_flight(api: TestClient) -> None:
    before = _samples(api)
    assert before[("foldwise_studies", (("status", "queued"),))] == 0
    assert before[("foldwise_trials_running", ())] == 0
    assert before[("foldwise_fold_runs_running", ())] == 0
    assert ("foldwise_scheduler_leader", ()) not in before  # this app runs no scheduler
    for _ in range(2):
        assert api.post("/studies", json=study_spec()).status_code == 201

    after = _samples(api)
    assert after[("foldwise_studies", (("status", "queued"),))] == 2
    assert after[("foldwise_studies", (("status", "completed"),))] == 0
    assert ("process_resident_memory_bytes", ()) in after


def test_metrics_carry_the_schedulers_counters_and_histograms(api: TestClient) -> None:
    TRIALS_ENDED.labels("failed").inc()
    FOLD_QUEUE_WAIT.observe(0.2)
    SUGGESTION_SECONDS.labels("gp").observe(0.03)
    samples = _samples(api)
    assert samples[("foldwise_trials_ended_total", (("status", "failed"),))] >= 1
    assert samples[("foldwise_fold_queue_wait_seconds_count", ())] >= 1
    assert samples[("foldwise_fold_queue_wait_seconds_bucket", (("le", "0.5"),))] >= 1
    assert samples[("foldwise_suggestion_seconds_count", (("optimizer", "gp"),))] >= 1


def test_a_viewer_may_scrape_metrics(database_url: str) -> None:
    with signed_in_client(database_url, Role.VIEWER) as viewer:
        assert viewer.get("/metrics").status_code == 200
