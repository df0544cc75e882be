"""What HTTP says beyond the routes: a true ``Allow`` on every 405, HEAD wherever GET is, no
routing through an encoded slash, and a 415 for a body in a content coding."""

from __future__ import annotations

import asyncio
import gzip
import json
import re

import pytest
from fastapi.testclient import TestClient

from foldwise.service.hardening.http_rules import ErrorsAsJson, HeadAsGet
from tests.service.study_specs import study_spec

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/studies", "GET, HEAD, POST"),
        ("PATCH", "/studies/{id}", "DELETE, GET, HEAD"),
        ("GET", "/studies/{id}/stop", "POST"),
        ("DELETE", "/studies/{id}/trials", "GET, HEAD"),
        ("PUT", "/dashboard/session", "DELETE, POST"),
        ("POST", "/dashboard/static/common.js", "GET, HEAD"),
        ("POST", "/health", "GET, HEAD"),
    ],
)
def test_every_405_lists_the_methods_the_path_answers(
    api: TestClient, method: str, path: str, allowed: str
) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    response = api.request(method, path.format(id=study_id))
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allowed
    for other in allowed.split(", "):  # each one named is answered (not a 405)
        assert api.request(other, path.format(id=study_id)).status_code != 405, other


@pytest.mark.parametrize(
    "path",
    ["/studies", "/studies/{id}", "/studies/{id}/trials", "/studies/{id}/trials.csv", "/health"],
)
def test_head_answers_what_get_does_without_the_body(api: TestClient, path: str) -> None:
    url = path.format(id=api.post("/studies", json=study_spec()).json()["id"])
    got, head = api.get(url), api.head(url)
    assert got.status_code == head.status_code == 200
    assert head.content == b"" and got.content
    for name in ("content-type", "etag", "content-length"):
        assert head.headers.get(name) == got.headers.get(name)
    if "etag" in got.headers:  # a poller may ask with HEAD too
        again = api.head(url, headers={"If-None-Match": got.headers["etag"]})
        assert again.status_code == 304


def test_head_of_the_dashboard_and_its_files_and_without_a_token(api: TestClient) -> None:
    assert api.head("/dashboard/static/common.js").status_code == 200
    assert api.head("/dashboard/sign-in").status_code == 200
    del api.headers["Authorization"]
    anonymous = api.head("/studies")
    assert anonymous.status_code == 401 and anonymous.content == b""


def test_an_encoded_slash_does_not_route_to_another_path(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    assert api.get(f"/studies/{study_id}/trials").status_code == 200
    for encoded in ("%2F", "%2f"):
        response = api.get(f"/studies/{study_id}{encoded}trials")
        assert response.status_code == 404 and "encoded slash" in response.json()["detail"]


def test_a_body_in_a_content_coding_is_415_and_stores_nothing(api: TestClient) -> None:
    body = gzip.compress(json.dumps(study_spec()).encode())
    for coding in ("gzip", "br", "deflate, gzip"):
        headers = {**JSON, "Content-Encoding": coding}
        response = api.post("/studies", content=body, headers=headers)
        assert response.status_code == 415 and coding in response.json()["detail"]
        assert response.headers["accept-encoding"] == "identity"
    plain = {**JSON, "Content-Encoding": "identity"}
    assert api.post("/studies", json=study_spec(), headers=plain).status_code == 201
    assert api.get("/studies").json()["count"] == 1


def test_every_answer_carries_the_security_headers(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    for url in (
        f"/studies/{study_id}",
        f"/studies/{study_id}/trials.csv",
        "/studies/4242",
        "/dashboard/static/common.js",
        "/dashboard/sign-in",
        "/health",
    ):
        headers = api.get(url).headers
        assert headers["x-content-type-options"] == "nosniff", url
        assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "same-origin"


def test_dashboard_pages_run_only_their_own_scripts(api: TestClient) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    nonces = []
    for url in ("/dashboard", f"/dashboard/studies/{study_id}", "/dashboard/sign-in"):
        page = api.get(url)
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert page.headers["cache-control"] == "no-store"
        nonce = re.search(r"'nonce-([^']+)'", policy)
        assert nonce is not None
        nonces.append(nonce.group(1))
        inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", page.text)
        assert all(f'nonce="{nonce.group(1)}"' in attrs for attrs in inline), inline
    assert len(set(nonces)) == len(nonces)  # a new one for every answer


def test_a_body_past_the_limit_is_a_json_413_naming_it(api: TestClient) -> None:
    # with a Content-Length the limiter answered text/plain "Content Too Large"
    spec = json.dumps(study_spec(name="x" * 1_100_000)).encode()
    declared = api.post("/studies", content=spec, headers=JSON)
    chunked = api.post("/studies", content=iter([spec[:500_000], spec[500_000:]]), headers=JSON)
    flood = api.post("/dashboard/spec", content="a: " + "x" * 300_000)
    for response, limit in ((declared, 1_048_576), (chunked, 1_048_576), (flood, 262_144)):
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/json"
        assert str(limit) in response.json()["detail"]
        assert response.headers["x-content-type-options"] == "nosniff"
    assert api.get("/studies").json()["count"] == 0


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_a_json_body_sent_as_another_media_type_is_415(api: TestClient, content_type: str) -> None:
    # FastAPI gave the model the raw bytes: a valid spec was a 422 saying it "is a bytes"
    body = json.dumps(study_spec()).encode()
    declared = {"content-type": content_type} if content_type else {}
    response = api.post("/studies", content=body, headers=declared)
    assert response.status_code == 415 and "application/json" in response.json()["detail"]
    session = api.post("/dashboard/session", content=b'{"token": "x"}', headers=declared)
    assert session.status_code == 415
    anonymous = TestClient(api.app).post("/studies", content=body, headers=declared)
    assert anonymous.status_code == 401  # the token is checked first
    assert api.get("/studies").json()["count"] == 0
    for accepted in ("application/json; charset=utf-8", "application/merged+json"):
        headers = {"content-type": accepted}
        assert api.post("/studies", content=body, headers=headers).status_code == 201
    spec_form = api.post(
        "/dashboard/spec", content="name: x", headers={"content-type": "text/plain"}
    )
    assert spec_form.status_code == 200  # the spec form takes text


@pytest.mark.parametrize("name", ["Host", "Authorization", "Content-Type"])
def test_a_header_given_twice_that_must_be_once_is_400(api: TestClient, name: str) -> None:
    # the first copy won: a proxy in front may have read the other one
    values = {
        "Host": ["testserver", "evil.example"],
        "Authorization": [api.headers["Authorization"], "Bearer fw_bad"],
        "Content-Type": ["application/json", "text/plain"],
    }[name]
    others = [(k, v) for k, v in api.headers.items() if k.lower() != name.lower()]
    headers = [*others, *((name, value) for value in values)]
    response = api.post("/studies", content=json.dumps(study_spec()).encode(), headers=headers)
    assert response.status_code == 400 and name in response.json()["detail"]
    assert api.get("/studies").json()["count"] == 0


def test_a_host_the_service_does_not_answer_is_a_json_400(api: TestClient) -> None:
    # the host check answered text/plain "Invalid host header"
    response = api.get("/studies", headers={"Host": "attacker.example"})
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": "Bad Request: Invalid host header"}


def test_a_text_error_whose_app_raises_before_its_end_still_goes_out_as_json() -> None:
    async def broken(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        headers = [(b"content-type", b"text/plain"), (b"x-kept", b"1")]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": b"Half of", "more_body": True})
        raise RuntimeError("the app broke")

    sent: list[dict] = []

    async def collect(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    with pytest.raises(RuntimeError, match="the app broke"):
        asyncio.run(ErrorsAsJson(broken)(scope, None, collect))
    start, body = sent
    assert start["status"] == 400 and (b"x-kept", b"1") in start["headers"]
    assert json.loads(body["body"]) == {"detail": "Bad Request: Half of"}


def test_head_stops_the_app_at_the_first_chunk_of_its_body() -> None:
    # a HEAD of a model file or a CSV export made and threw away the whole body
    made: list[int] = []

    async def streaming(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        assert scope["method"] == "GET"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for chunk in range(100):
            made.append(chunk)
            await send({"type": "http.response.body", "body": b"x" * 10, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    sent: list[dict] = []

    async def collect(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "HEAD", "path": "/", "headers": []}
    asyncio.run(HeadAsGet(streaming)(scope, None, collect))
    assert made == [0]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[1]["body"] == b"" and not sent[1].get("more_body")


def test_head_of_a_csv_export_and_a_model_answers_and_the_service_goes_on(
    api: TestClient,
) -> None:
    study_id = api.post("/studies", json=study_spec()).json()["id"]
    for _ in range(3):
        head = api.head(f"/studies/{study_id}/trials.csv")
        assert (head.status_code, head.content) == (200, b"")
        assert head.headers["content-type"].startswith("text/csv")
    assert api.get(f"/studies/{study_id}/trials.csv").text.startswith('"number",')
