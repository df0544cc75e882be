"""The SDK over real HTTP: requests it sends, answers it parses, errors it raises."""

from __future__ import annotations

import importlib.util
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

import foldwise
from foldwise import Client, InvalidSpec, NotFound, ServiceUnavailable, schemas
from foldwise.client import load_spec
from foldwise.errors import ApiError, FoldwiseError
from foldwise.schemas import StudyStatus


def test_package_exports_the_sdk_without_pandas():
    assert foldwise.__version__ == "0.1.0"
    for name in (
        "Client",
        "Study",
        "StudySpec",
        "FoldwiseError",
        "ServiceUnavailable",
        "NotFound",
        "InvalidSpec",
        "ApiError",
    ):
        assert hasattr(foldwise, name)
    assert issubclass(ServiceUnavailable, FoldwiseError)
    assert issubclass(InvalidSpec, FoldwiseError)


def test_url_comes_from_argument_then_env_then_default(monkeypatch):
    monkeypatch.delenv("FOLDWISE_URL", raising=False)
    assert Client().url == "http://127.0.0.1:8000"
    monkeypatch.setenv("FOLDWISE_URL", "http://example.org:9000/")
    assert Client().url == "http://example.org:9000"
    assert Client("localhost:8001").url == "http://localhost:8001"


def test_service_down_raises_service_unavailable_naming_the_url(dead_url):
    with Client(dead_url) as client, pytest.raises(ServiceUnavailable) as info:
        client.get_study(1)
    assert str(info.value).startswith(f"cannot reach the foldwise service at {dead_url}: ")


def test_timeout_raises_service_unavailable(stub, make_study):
    def slow(request):
        time.sleep(1.0)
        return 200, make_study()

    stub.handle = slow
    with Client(stub.url, timeout=0.2) as client, pytest.raises(ServiceUnavailable, match="timed"):
        client.get_study(7)


def test_a_submit_waits_past_the_clients_timeout_for_the_task_to_load(stub, make_study, spec_dict):
    """The service loads a user task on the cluster before it answers a submit (up to
    TASK_DESCRIBE_TIMEOUT_S): a short client timeout must not fail a submit that takes longer."""

    def slow(request):
        time.sleep(0.6)
        return 201, make_study()

    stub.handle = slow
    with Client(stub.url, timeout=0.2) as client:
        assert client.create_study(spec_dict).id == 7
        with pytest.raises(ServiceUnavailable, match="timed"):  # other calls keep its timeout
            client.get_study(7)


def test_local_validation_error_is_invalid_spec_and_sends_nothing(stub, spec_dict):
    spec_dict["parallel"]["folds"] = 1
    spec_dict["space"]["lr"]["low"] = 1.0
    with Client(stub.url) as client, pytest.raises(InvalidSpec) as info:
        client.create_study(spec_dict)
    assert stub.requests == []
    message = str(info.value)
    assert message.startswith("invalid study spec (2 errors):")
    assert "\n  space.lr: low (1.0) must be below high (0.3)" in message
    assert "\n  parallel.folds: Input should be greater than or equal to 2" in message


def test_create_study_from_a_yaml_file_posts_the_document(stub, spec_dict, make_study, tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec_dict))
    stub.handle = lambda request: (201, make_study(status="queued", finished=0))
    with Client(stub.url) as client:
        study = client.create_study(path)
    assert (study.id, study.name, study.status) == (7, "digits-mlp", StudyStatus.QUEUED)
    [request] = stub.requests
    assert (request.method, request.path) == ("POST", "/studies")
    assert request.body["parallel"] == spec_dict["parallel"]
    assert request.body["space"]["lr"] == {"type": "float", "low": 1e-4, "high": 0.3, "log": True}
    assert "resources" not in request.body  # defaults are the service's to fill in


def test_a_422_from_the_service_is_invalid_spec_with_dotted_paths(stub, spec_dict):
    detail = [
        {"loc": ["body", "trainer", "task"], "msg": "unknown task 'nope'", "type": "value_error"},
        {"loc": ["body", "space", "lr", "float", "high"], "msg": "Field required", "type": "x"},
    ]
    stub.handle = lambda request: (422, {"detail": detail})
    with Client(stub.url) as client, pytest.raises(InvalidSpec) as info:
        client.create_study(spec_dict)
    assert info.value.problems == [
        "trainer.task: unknown task 'nope'",
        "space.lr.high: Field required",
    ]


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ("name: [unclosed", "cannot parse"),
        ("- just\n- a list\n", "must hold a mapping"),
    ],
)
def test_unusable_spec_files_are_invalid_spec(tmp_path, document, fragment):
    path = tmp_path / "spec.yaml"
    path.write_text(document)
    with pytest.raises(InvalidSpec, match=fragment):
        load_spec(path)
    with pytest.raises(InvalidSpec, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")


BROKEN_SPEC_FILES = [
    pytest.param(
        b"name: x\nspace: [a, b\nbudget: 3\n", "not valid YAML or JSON at line 3", id="syntax"
    ),
    pytest.param(
        b"name: x\x01\n", "line 1, column 8: unacceptable character #x0001", id="control"
    ),
    pytest.param(b"name: caf\xe9\n", "not UTF-8 text (byte 0xe9 at offset 9)", id="latin-1"),
]


@pytest.mark.parametrize(("content", "fragment"), BROKEN_SPEC_FILES)
def test_a_broken_spec_file_is_named_in_the_error_and_nothing_is_sent(
    stub, tmp_path, content, fragment
):
    path = tmp_path / "my-study.yaml"
    path.write_bytes(content)
    with Client(stub.url) as client, pytest.raises(InvalidSpec) as info:
        client.create_study(path)
    assert stub.requests == []
    message = str(info.value)
    assert f" {path}: " in message and fragment in message, message
    assert "<unicode string>" not in message


def test_json_spec_files_load(tmp_path, spec_dict):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec_dict))
    assert load_spec(str(path)).parallel.folds == 5


def test_404_is_not_found_naming_the_study_or_trial(stub):
    with Client(stub.url) as client:
        with pytest.raises(NotFound, match="^study 42 not found$"):
            client.get_study(42)
        with pytest.raises(NotFound, match="^trial 3 of study 42 not found$"):
            client.fetch_trial(42, 3)


def test_other_statuses_are_api_errors_with_the_detail(stub):
    stub.handle = lambda request: (409, {"detail": "study 7 is still running"})
    with Client(stub.url) as client, pytest.raises(ApiError) as info:
        client.delete_study(7)
    assert info.value.status_code == 409
    assert str(info.value) == "DELETE /studies/7 failed with HTTP 409: study 7 is still running"


def test_gateway_errors_mean_the_service_is_unavailable(stub):
    stub.handle = lambda request: (503, b"<html>down</html>")
    with Client(stub.url) as client, pytest.raises(ServiceUnavailable, match="HTTP 503"):
        client.get_study(7)


def test_answers_of_the_wrong_shape_are_foldwise_errors(stub):
    stub.handle = lambda request: (200, b"not json")
    with Client(stub.url) as client:
        with pytest.raises(ApiError, match="non-JSON"):
            client.get_study(7)
        stub.handle = lambda request: (200, {"id": 7})
        with pytest.raises(FoldwiseError, match="unexpected answer"):
            client.get_study(7)


def test_trials_are_read_page_by_page(stub, make_study, make_trial):
    total = 2500

    def handle(request):
        if request.path == "/studies/7":
            return 200, make_study()
        offset, limit = int(request.query["offset"]), int(request.query["limit"])
        rows = [make_trial(n) for n in range(offset, min(offset + limit, total))]
        return 200, {"data": rows, "count": total}

    stub.handle = handle
    with Client(stub.url) as client:
        trials = client.get_study(7).trials(status="completed", sort="best")
    assert [t.number for t in trials] == list(range(total))
    pages = [r.query for r in stub.requests if r.path.endswith("/trials")]
    assert [p["offset"] for p in pages] == ["0", "1000", "2000"]
    assert all(p["status"] == "completed" and p["sort"] == "best" for p in pages)


def test_list_studies_filters_by_status(stub, make_study):
    stub.handle = lambda request: (200, {"data": [make_study(1), make_study(2)], "count": 2})
    with Client(stub.url) as client:
        studies = client.list_studies(StudyStatus.RUNNING)
    assert [s.id for s in studies] == [1, 2]
    assert stub.requests[0].query["status"] == "running"


def test_wait_polls_until_the_study_ends(stub, make_study):
    states = iter(["queued", "running", "running", "completed"])
    stub.handle = lambda request: (200, make_study(status=next(states)))
    seen = []
    with Client(stub.url) as client:
        study = foldwise.Study(client, client.fetch_study(7))
        result = study.wait(poll=0.01, on_update=lambda s: seen.append(s.status.value))
    assert result is study
    assert seen == ["running", "running", "completed"]
    assert study.status is StudyStatus.COMPLETED


def test_wait_raises_timeout_error(stub, make_study):
    stub.handle = lambda request: (200, make_study(status="running"))
    with Client(stub.url) as client:
        study = client.get_study(7)
        with pytest.raises(TimeoutError, match="study 7 is still running after 0.05 s"):
            study.wait(timeout=0.05, poll=0.01)


@pytest.mark.parametrize(
    ("arguments", "what"),
    [
        ({"poll": math.inf}, "poll"),
        ({"poll": 1e10}, "poll"),
        ({"poll": math.nan}, "poll"),
        ({"poll": -1.0}, "poll"),
        ({"timeout": math.nan}, "timeout"),
        ({"timeout": -1.0}, "timeout"),
        ({"outage": math.nan}, "outage"),  # it never raised ServiceUnavailable
    ],
)
def test_wait_refuses_a_poll_or_timeout_that_is_not_seconds(stub, make_study, arguments, what):
    # time.sleep raised OverflowError or ValueError after the first poll
    stub.handle = lambda request: (200, make_study(status="running"))
    with Client(stub.url) as client:
        study = client.get_study(7)
        polls = len(stub.requests)
        with pytest.raises(ValueError, match=f"^{what} must be seconds"):
            study.wait(**arguments)
    assert len(stub.requests) == polls


def test_stop_with_a_timeout_that_is_not_seconds_sends_no_stop(stub, make_study):
    stub.handle = lambda request: (200, make_study(status="running"))
    with Client(stub.url) as client:
        study = client.get_study(7)
        with pytest.raises(ValueError, match="^timeout must be seconds"):
            study.stop(timeout=math.nan)
    assert [request.method for request in stub.requests] == ["GET"]


def test_wait_rides_out_a_service_restart(dead_url, make_study):
    """Nothing listens at first (the service is restarting); then it answers again."""
    port = int(dead_url.rsplit(":", 1)[1])
    body = json.dumps(make_study(status="completed")).encode()

    class Restarted(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    servers = []

    def come_back() -> None:
        servers.append(ThreadingHTTPServer(("127.0.0.1", port), Restarted))
        servers[0].serve_forever(0.02)

    with Client(dead_url) as client:
        study = foldwise.Study(client, schemas.Study.model_validate(make_study()))
        threading.Timer(0.5, come_back).start()
        try:
            assert study.wait(poll=0.05, outage=30).status is StudyStatus.COMPLETED
        finally:
            while not servers:
                time.sleep(0.05)
            servers[0].shutdown()
            servers[0].server_close()


def test_wait_gives_up_after_the_outage(stub, make_study):
    answers = iter([(200, make_study(status="running"))])
    stub.handle = lambda request: next(answers, (503, {"detail": "restarting"}))
    with Client(stub.url) as client:
        study = client.get_study(7)
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable, match="HTTP 503"):
            study.wait(poll=0.02, outage=0.3)
    assert time.monotonic() - started >= 0.3
    assert len(stub.requests) > 3  # it kept asking through the outage


def test_best_trial_stop_and_trial_read_fresh(stub, make_study, make_trial):
    answers = {
        ("GET", "/studies/7"): make_study(finished=4),
        ("POST", "/studies/7/stop"): make_study(status="stopped"),
        ("GET", "/studies/7/trials/2"): {**make_trial(2), "folds": []},
    }
    stub.handle = lambda request: (200, answers[(request.method, request.path)])
    with Client(stub.url) as client:
        study = client.get_study(7)
        assert study.best_trial.number == 2
        assert study.trial(2).folds == []
        assert study.stop().status is StudyStatus.STOPPED
    assert [r.path for r in stub.requests].count("/studies/7") == 2


@pytest.mark.skipif(importlib.util.find_spec("pandas") is not None, reason="pandas installed")
def test_to_dataframe_without_pandas_says_what_to_install(stub, make_study):
    stub.handle = lambda request: (200, make_study())
    with (
        Client(stub.url) as client,
        pytest.raises(ImportError, match=r"pip install 'foldwise\[pandas\]'"),
    ):
        client.get_study(7).to_dataframe()


def test_models_of_the_best_trial_of_a_study_with_no_single_best_say_why(
    stub, make_study, tmp_path
):
    spec = make_study()["spec"]
    pareto = {**spec, "objectives": [spec["objective"], {"metric": "n_params"}]}
    cases = [
        (make_study(finished=0, spec=pareto), "several objectives and so no single best trial"),
        (make_study(finished=0), r"no completed \(and feasible\) trial"),
    ]
    with Client(stub.url) as client:
        for answer, words in cases:
            stub.handle = lambda request, answer=answer: (200, answer)
            study = foldwise.Study(client, client.fetch_study(7))
            with pytest.raises(FoldwiseError, match=words):
                study.download_models(tmp_path)
    assert not list(tmp_path.iterdir())
