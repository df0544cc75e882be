"""Reads for pollers: ETags follow the study's revision, 304s, and no stale cached answer."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from foldwise.schemas import StudyStatus, TrialStatus
from foldwise.service.api.read_cache import ENTRY_OVERHEAD, ReadCache, etag_matches, names_any
from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.trainers.report import EpochReport
from tests.service.study_specs import study_spec


def _add_trial(api: TestClient, study_id: int, number: int, value: float) -> None:
    """What the scheduler does, straight into the database: a finished trial, study touched."""
    with api.app.state.sessions.begin() as session:
        trial = trial_repo.create_trial(session, study_id, {"lr": 0.01}, number=number)
        trial_repo.finish_trial(session, trial, TrialStatus.COMPLETED, value=value, std_error=0)
        study_repo.touch_study(session, study_id)


@pytest.mark.parametrize(
    "path",
    [
        "/studies/{id}",
        "/studies/{id}/trials?sort=best",
        "/studies/{id}/trials.csv?sort=best",
        "/studies/{id}/trials/0",
        "/studies/{id}/insights/history",
        "/studies/{id}/insights/folds",
        "/studies/{id}/insights/curves",
        "/studies",
    ],
)
def test_a_poller_gets_304_until_the_study_changes(api: TestClient, path: str) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    url = path.format(id=study_id)
    first = api.get(url)
    etag = first.headers["etag"]
    assert first.status_code == 200 and first.headers["cache-control"] == "no-cache"
    again = api.get(url, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.headers["etag"] == etag and not again.content
    assert api.get(url).content == first.content  # the cached bytes, unchanged
    _add_trial(api, study_id, 1, 0.1)
    changed = api.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag


def test_epochs_change_a_trial_and_the_curves_but_not_the_study_summary(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    urls = [f"/studies/{study_id}{path}" for path in ("", "/trials", "/trials/0")]
    urls.append(f"/studies/{study_id}/insights/curves")
    before = {url: api.get(url).headers["etag"] for url in urls}
    with api.app.state.sessions.begin() as session:  # what the scheduler does for an epoch
        trial = trial_repo.get_trial(session, study_id, 0)
        run = fold_repo.start_fold_run(session, trial.id, 0)
        fold_repo.record_epoch(session, run.id, EpochReport(1, {"val_loss": 0.3}))
        study_repo.touch_study(session, study_id, trials=False)
    after = {url: api.get(url, headers={"If-None-Match": before[url]}) for url in urls}
    assert [after[url].status_code for url in urls] == [304, 304, 200, 200]
    assert after[urls[2]].json()["folds"][0]["epochs"][0]["metrics"]["val_loss"] == 0.3


def test_what_the_scheduler_says_in_waiting_reaches_a_cached_study(api: TestClient) -> None:
    """``waiting`` is the study's own field: the scheduler's word changes the study's answer
    (a study that lost its last node said nothing for minutes while its answer was cached)."""
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    url = f"/studies/{study_id}"
    assert api.get(url).json()["waiting"] is None  # cached at this revision
    with api.app.state.sessions.begin() as session:  # running, as a scheduler begins it
        study_repo.get_study(session, study_id).status = StudyStatus.RUNNING
        study_repo.touch_study(session, study_id)
    etag = api.get(url).headers["etag"]
    store = SchedulerStore(api.app.state.db)
    asyncio.run(store.set_waiting(study_id, "no alive node can run its folds"))
    answer = api.get(url, headers={"If-None-Match": etag})
    assert answer.status_code == 200 and answer.json()["waiting"] == (
        "no alive node can run its folds"
    )


def test_cached_answers_are_never_stale(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    assert api.get(f"/studies/{study_id}").json()["best_trial"]["number"] == 0
    _add_trial(api, study_id, 1, 0.1)
    assert api.get(f"/studies/{study_id}").json()["best_trial"]["number"] == 1
    page = api.get(f"/studies/{study_id}/trials").json()
    assert [t["number"] for t in page["data"]] == [0, 1]
    assert api.post(f"/studies/{study_id}/stop").json()["stop_requested"]
    assert api.get(f"/studies/{study_id}").json()["stop_requested"]


def test_the_study_list_changes_with_creates_and_deletes(api: TestClient) -> None:
    first = api.post("/studies", json=study_spec(name="a")).json()["id"]
    etag = api.get("/studies").headers["etag"]
    second = api.post("/studies", json=study_spec(name="b")).json()["id"]
    after_create = api.get("/studies", headers={"If-None-Match": etag})
    assert after_create.status_code == 200 and after_create.json()["count"] == 2
    api.delete(f"/studies/{first}")
    after_delete = api.get("/studies", headers={"If-None-Match": after_create.headers["etag"]})
    assert after_delete.status_code == 200
    assert [s["id"] for s in after_delete.json()["data"]] == [second]


def test_unknown_studies_are_404_not_304(api: TestClient) -> None:
    response = api.get("/studies/4242", headers={"If-None-Match": "*"})
    assert response.status_code == 404 and "4242" in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/studies/{id}/trials/7", 404),
        ("/studies/{id}/trials?sort=params.zzz", 422),
        ("/studies/{id}/trials.csv?sort=params.zzz", 422),
        ("/studies/{id}/trials?sort=-params.zzz&limit=5", 422),
    ],
)
def test_a_304_never_stands_for_an_answer_that_is_an_error(
    api: TestClient, path: str, code: int
) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    url = path.format(id=study_id)
    assert api.get(url).status_code == code
    study_etag = api.get(f"/studies/{study_id}").headers["etag"]
    trials_etag = api.get(f"/studies/{study_id}/trials").headers["etag"]
    for held in ("*", study_etag, trials_etag, f'W/"x", {trials_etag}'):
        assert api.get(url, headers={"If-None-Match": held}).status_code == code, held


def test_if_none_match_star_is_a_304_once_the_answer_exists(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    for url in (f"/studies/{study_id}/trials/0", "/studies", f"/studies/{study_id}/trials.csv"):
        response = api.get(url, headers={"If-None-Match": "*"})
        assert response.status_code == 304 and response.headers["etag"], url


def test_each_url_has_its_own_etag(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    _add_trial(api, study_id, 0, 0.5)
    first = api.get(f"/studies/{study_id}/trials?limit=1")
    other = f"/studies/{study_id}/trials?limit=2"
    assert first.headers["etag"] != api.get(other).headers["etag"]
    response = api.get(other, headers={"If-None-Match": first.headers["etag"]})
    assert response.status_code == 200 and response.json()["count"] == 1


def test_the_read_cache_counts_its_keys() -> None:
    cache = ReadCache(max_bytes=100_000)
    long_url = "/studies/1?junk=" + "x" * 60_000
    cache.put((long_url, 'W/"e"'), b"{}")
    assert cache.get((long_url, 'W/"e"')) == b"{}"
    assert cache.bytes_held == len(long_url) + len('W/"e"') + 2 + ENTRY_OVERHEAD
    cache.put((long_url + "y", 'W/"e"'), b"{}")  # a second long key evicts the first
    assert cache.get((long_url, 'W/"e"')) is None and cache.bytes_held < 100_000
    too_long = "/studies/1?junk=" + "x" * 100_000
    cache.put((too_long, 'W/"e"'), b"{}")  # past the whole budget: not kept
    assert cache.get((too_long, 'W/"e"')) is None


def test_if_none_match_lists_and_weak_comparison() -> None:
    etag = 'W/"b00t-s1.7"'
    assert etag_matches('"b00t-s1.7"', etag)
    assert etag_matches('W/"x", W/"b00t-s1.7"', etag)
    assert not etag_matches("*", etag)  # only once the answer is read: names_any
    assert names_any("*") and names_any('W/"x", *') and not names_any('W/"*"')
    assert not etag_matches('W/"b00t-s1.8"', etag)
    assert not etag_matches(None, etag)
    assert not names_any(None)
