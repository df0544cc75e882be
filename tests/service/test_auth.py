"""Tokens, roles, owners, cookies and CSRF, Host: the service is safe to put on a network."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from foldwise.schemas import Role
from foldwise.service.config import Settings
from foldwise.service.token_admin import TokenError, create_token, list_tokens, revoke_token
from tests.databases import bring_to_head
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec

ROUTES = [
    ("GET", "/studies"),
    ("POST", "/studies"),
    ("GET", "/studies/1"),
    ("POST", "/studies/1/stop"),
    ("DELETE", "/studies/1"),
    ("GET", "/studies/1/trials"),
    ("GET", "/studies/1/trials.csv"),
    ("GET", "/studies/1/trials/0"),
    ("GET", "/studies/1/trials/0/timeline"),
    ("GET", "/studies/1/trials/0/folds/0/model"),
    ("GET", "/studies/1/best/folds/0/model"),
    ("GET", "/studies/1/insights/history"),
    ("GET", "/studies/1/insights/folds"),
    ("GET", "/studies/1/insights/curves"),
    ("POST", "/dashboard/spec"),
    ("GET", "/metrics"),
]


@pytest.fixture
def clients(database_url: str) -> Iterator[dict[str, TestClient]]:
    """One started app, and a client for each role plus a second member and an anonymous."""
    admin = signed_in_client(database_url)
    with admin:
        others = {"admin": admin}
        for name, role in (
            ("member", Role.MEMBER),
            ("other", Role.MEMBER),
            ("viewer", Role.VIEWER),
        ):
            token = create_token(database_url, name, role, replace=True)
            others[name] = TestClient(admin.app, headers={"Authorization": f"Bearer {token}"})
        others["anonymous"] = TestClient(admin.app)
        yield others


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_needs_a_token(clients: dict[str, TestClient], method: str, path: str) -> None:
    response = clients["anonymous"].request(method, path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    detail = response.json()["detail"]
    assert "token" in detail and "\n" not in detail
    unknown = clients["anonymous"].request(method, path, headers={"Authorization": "Bearer fw_x"})
    assert unknown.status_code == 401 and "not valid" in unknown.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [b'{"name": "a", "name": "b"}', b"{bad", b'{"seed": ' + b"9" * 5000 + b"}", b"\xff\xfe"],
)
@pytest.mark.parametrize("path", ["/studies", "/dashboard/spec"])
def test_a_body_is_judged_only_after_the_token(
    clients: dict[str, TestClient], path: str, body: bytes
) -> None:
    # a body was parsed (and its 422 answered) before the token was looked at
    headers = {"content-type": "application/json"}
    for who, auth in [("anonymous", {}), ("anonymous", {"Authorization": "Bearer fw_x"})]:
        response = clients[who].post(path, content=body, headers={**headers, **auth})
        assert response.status_code == 401, response.text
    assert clients["admin"].post(path, content=body, headers=headers).status_code in (400, 422)


def test_health_docs_and_static_files_are_open(clients: dict[str, TestClient]) -> None:
    anonymous = clients["anonymous"]
    for path in ("/health", "/docs", "/openapi.json", "/dashboard/static/common.js"):
        assert anonymous.get(path).status_code == 200, path
    signed_out = anonymous.get("/dashboard/studies/1", follow_redirects=False)
    assert signed_out.status_code == 303
    assert signed_out.headers["location"] == "/dashboard/sign-in?next=/dashboard/studies/1"


def test_roles_and_owners(clients: dict[str, TestClient]) -> None:
    assert clients["viewer"].get("/studies").status_code == 200
    refused = clients["viewer"].post("/studies", json=study_spec())
    assert refused.status_code == 403 and "viewer" in refused.json()["detail"]
    mine = clients["member"].post("/studies", json=study_spec()).json()
    assert mine["owner"] == "member"
    reasons = {
        "viewer": "is a viewer: it only reads",
        "other": f"may not change study {mine['id']}: it belongs to 'member'",
    }
    for who, reason in reasons.items():
        for method, path in (("POST", "/stop"), ("DELETE", "")):
            response = clients[who].request(method, f"/studies/{mine['id']}{path}")
            assert response.status_code == 403, (who, method)
            assert reason in response.json()["detail"]
    assert clients["member"].post(f"/studies/{mine['id']}/stop").status_code == 202
    theirs = clients["other"].post("/studies", json=study_spec()).json()
    assert clients["admin"].delete(f"/studies/{theirs['id']}").status_code == 202


def test_a_revoked_token_is_refused(database_url: str) -> None:
    with signed_in_client(database_url) as admin:
        token = create_token(database_url, "short-lived", Role.VIEWER)
        revoke_token(database_url, "short-lived")
        response = admin.get("/studies", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401


def _cookie_client(clients: dict[str, TestClient], database_url: str) -> TestClient:
    """A browser-like client: the member's token in the dashboard's cookie, no header."""
    token = create_token(database_url, "browser", Role.ADMIN, replace=True)
    browser = TestClient(clients["admin"].app, base_url="http://127.0.0.1")
    browser.cookies.set("foldwise_token", token)
    browser.cookies.set("foldwise_csrf", "csrf-secret")
    return browser


def test_a_cookie_needs_the_csrf_token_and_the_services_origin_to_change_anything(
    clients: dict[str, TestClient], database_url: str
) -> None:
    study_id = clients["admin"].post("/studies", json=study_spec()).json()["id"]
    browser = _cookie_client(clients, database_url)
    assert browser.get(f"/studies/{study_id}").status_code == 200  # reading is fine
    stop = f"/studies/{study_id}/stop"
    evil = browser.post(
        stop,
        headers={
            "Origin": "http://evil.example",
            "content-type": "application/x-www-form-urlencoded",
        },
    )
    assert evil.status_code == 403 and "cross-site" in evil.json()["detail"]
    no_csrf = browser.post(stop, headers={"Origin": "http://127.0.0.1"})
    assert no_csrf.status_code == 403 and "X-CSRF-Token" in no_csrf.json()["detail"]
    wrong = browser.post(stop, headers={"Origin": "http://127.0.0.1", "X-CSRF-Token": "guess"})
    assert wrong.status_code == 403
    latin = {"Origin": "http://127.0.0.1", "X-CSRF-Token": "caf\u00e9".encode("latin-1")}
    assert browser.post(stop, headers=latin).status_code == 403  # not a 500
    assert not clients["admin"].get(f"/studies/{study_id}").json()["stop_requested"]
    same = {"Origin": "http://127.0.0.1", "X-CSRF-Token": "csrf-secret"}
    assert browser.post(stop, headers=same).status_code == 202


def test_signing_in_sets_the_cookies_only_from_the_services_own_pages(
    clients: dict[str, TestClient], database_url: str
) -> None:
    token = create_token(database_url, "signing-in", Role.VIEWER)
    browser = TestClient(clients["admin"].app, base_url="http://127.0.0.1")
    own = {"Origin": "http://127.0.0.1"}
    assert (
        browser.post("/dashboard/session", json={"token": "fw_bad"}, headers=own).status_code
        == 401
    )
    elsewhere = {"Origin": "http://evil.example"}
    assert (
        browser.post("/dashboard/session", json={"token": token}, headers=elsewhere).status_code
        == 403
    )
    signed_in = browser.post("/dashboard/session", json={"token": token}, headers=own)
    assert signed_in.status_code == 204
    cookies = signed_in.headers.get_list("set-cookie")
    token_cookie = next(c for c in cookies if c.startswith("foldwise_token="))
    assert "HttpOnly" in token_cookie and "SameSite=strict" in token_cookie
    assert any(c.startswith("foldwise_csrf=") and "HttpOnly" not in c for c in cookies)
    assert browser.get("/dashboard").status_code == 200
    assert "signing-in (viewer)" in browser.get("/dashboard").text
    for cross_site in ({"Origin": "http://evil.example"}, {}):  # signed its visitors out
        refused = browser.delete("/dashboard/session", headers=cross_site)
        assert refused.status_code == 403 and not refused.headers.get_list("set-cookie")
    assert browser.get("/dashboard").status_code == 200
    assert browser.delete("/dashboard/session", headers=own).status_code == 204
    assert browser.get("/dashboard", follow_redirects=False).status_code == 303


def test_other_host_headers_are_refused(clients: dict[str, TestClient]) -> None:
    response = clients["admin"].get("/studies", headers={"Host": "attacker.example"})
    assert response.status_code == 400


def test_auth_off_only_on_loopback(database_url: str) -> None:
    with signed_in_client(database_url, auth=False) as local:
        local.headers.pop("Authorization", None)
        assert local.post("/studies", json=study_spec()).status_code == 201
        assert local.get("/dashboard").status_code == 200
    with signed_in_client(
        database_url, auth=False, client_address=("::ffff:127.0.0.1", 1)
    ) as mapped:
        assert mapped.get("/studies").status_code == 200
    # served some other way on every interface: a request from elsewhere is refused all the same
    with signed_in_client(database_url, auth=False, client_address=("192.0.2.7", 1)) as remote:
        for response in (remote.get("/studies"), remote.post("/studies", json=study_spec())):
            assert response.status_code == 403
            assert "only this machine is answered: not 192.0.2.7" in response.json()["detail"]
        assert remote.get("/dashboard", follow_redirects=False).status_code == 403
        assert remote.get("/health").status_code == 200
        assert remote.get("/studies?limit=5").status_code == 403
    with signed_in_client(database_url, auth=False) as local:
        assert local.get("/studies").json()["count"] == 1  # the refused submit stored nothing
        relayed = local.get("/studies", headers={"X-Forwarded-For": "203.0.113.9"})
        assert relayed.status_code == 403 and "x-forwarded-for" in relayed.json()["detail"]
        assert local.get("/dashboard", headers={"Forwarded": "for=203.0.113.9"}).status_code == 403


def test_auth_off_refuses_a_request_that_reached_an_address_not_loopback(
    database_url: str,
) -> None:
    # uvicorn with --forwarded-allow-ips '*' makes "X-Forwarded-For: 127.0.0.1" the client;
    # the address the connection reached is the server's own socket, which no header rewrites
    with signed_in_client(database_url, auth=False) as local:
        app = local.app

        async def reached_from_outside(scope, receive, send):  # noqa: ANN001 - ASGI
            await app({**scope, "server": ("192.0.2.2", 8000)}, receive, send)

        outside = TestClient(reached_from_outside, client=("127.0.0.1", 1))  # app started above
        response = outside.get("/studies", headers={"Host": "127.0.0.1"})
        assert response.status_code == 403
        assert "the request reached 192.0.2.2" in response.json()["detail"]
        assert local.get("/studies").status_code == 200
    for host in ("0.0.0.0", "10.1.2.3", "foldwise.example"):
        with pytest.raises(ValidationError, match="allowed only on a loopback host"):
            Settings(database_url=database_url, auth=False, host=host)


@pytest.mark.parametrize("replace", [False, True])
def test_creates_of_one_name_at_once_leave_one_active_token(
    database_url: str, replace: bool
) -> None:
    # each create checked that the name was free, then inserted: all four passed the check
    bring_to_head(database_url)
    barrier = threading.Barrier(4)
    made: list[str] = []
    refused: list[str] = []

    def create(name: str) -> None:
        barrier.wait()
        try:
            made.append(create_token(database_url, name, Role.MEMBER, replace=replace))
        except TokenError as exc:
            refused.append(str(exc))

    for round_ in range(3):
        threads = [threading.Thread(target=create, args=(f"n{round_}",)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    active = [t for t in list_tokens(database_url) if t.name.startswith("n")]
    assert sorted(t.name for t in active) == ["n0", "n1", "n2"]
    assert len(made) + len(refused) == 12
    if not replace:
        assert len(made) == 3 and all("exists" in why for why in refused)
