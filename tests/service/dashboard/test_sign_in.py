"""Signing in to the dashboard in real Chromium, and what a signed-in viewer may not do."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from foldwise.schemas import Role
from foldwise.service.token_admin import create_token
from tests.browser import sign_in
from tests.service.dashboard.conftest import Dashboard, open_ready


@pytest.fixture
def fresh_page(browser, dashboard: Dashboard) -> Iterator[object]:
    """A page of a browser context with no cookies (nobody signed in)."""
    context = browser.new_context(base_url=dashboard.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


def test_sign_in_keeps_the_token_in_an_httponly_cookie_and_sign_out_drops_it(
    fresh_page, dashboard: Dashboard
) -> None:
    page = fresh_page
    page.goto(f"/dashboard/studies/{dashboard.study_id}")
    page.wait_for_url(lambda url: "/dashboard/sign-in?next=" in url)

    page.fill("#token", "fw_not-a-token")
    page.click("button[type=submit]")
    page.wait_for_selector("#sign-in-error:has-text('not valid')")

    page.fill("#token", dashboard.token)
    page.click("button[type=submit]")
    # by path: the glob "**/dashboard/studies/N" matched the sign-in page's own URL (it ends
    # ?next=/dashboard/studies/N), whose body is ready too, so sign-out could be clicked on the
    # study page before its script had taken the button
    study_page = f"/dashboard/studies/{dashboard.study_id}"
    page.wait_for_url(lambda url: urlsplit(url).path == study_page)
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("#who") == "admin (admin)"
    cookie = {c["name"]: c for c in page.context.cookies()}["foldwise_token"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie").count("foldwise_token") == 0  # scripts cannot read it

    seen: list[object] = []  # what became of sign-out's requests, should the page stay
    page.on("response", lambda r: seen.append((r.request.method, r.url, r.status)))
    page.on("requestfailed", lambda r: seen.append((r.method, r.url, r.failure)))
    page.click("#sign-out")
    try:
        page.wait_for_url("**/dashboard/sign-in")
    except PlaywrightTimeout:
        button = page.inner_text("#sign-out")
        pytest.fail(f"still at {page.url}, the button says {button!r}; requests: {seen[-8:]}")
    assert "foldwise_token" not in {c["name"] for c in page.context.cookies()}
    page.goto("/dashboard")
    page.wait_for_url(lambda url: "/dashboard/sign-in?next=" in url)


def test_a_viewer_who_presses_stop_is_told_why_and_nothing_stops(
    fresh_page, dashboard: Dashboard
) -> None:
    viewer = create_token(str(dashboard.app.state.settings.database_url), "viewer", Role.VIEWER)
    sign_in(fresh_page.context, dashboard.url, viewer)
    open_ready(fresh_page, f"/dashboard/studies/{dashboard.study_id}")
    fresh_page.click("#stop")
    fresh_page.wait_for_selector("#study-error .callout:has-text('it only reads')")
    assert fresh_page.locator("#stop").is_enabled()
    assert fresh_page.locator("#study-status .badge.running").count() == 1


def test_sign_out_asks_again_when_a_request_got_no_answer(fresh_page, dashboard) -> None:
    page, dropped = fresh_page, []
    sign_in(page.context, dashboard.url, dashboard.token)
    open_ready(page, "/dashboard")

    def drop_the_first(route) -> None:  # the connection closes before any answer
        if not dropped:
            dropped.append(route.request.method)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/dashboard/session", drop_the_first)
    page.click("#sign-out")
    page.wait_for_url("**/dashboard/sign-in")
    assert dropped == ["DELETE"]
    assert "foldwise_token" not in {c["name"] for c in page.context.cookies()}


def test_sign_out_that_never_gets_an_answer_says_so_and_stays(fresh_page, dashboard) -> None:
    page = fresh_page
    sign_in(page.context, dashboard.url, dashboard.token)
    open_ready(page, "/dashboard")
    page.route("**/dashboard/session", lambda route: route.abort("connectionreset"))
    page.click("#sign-out")
    page.wait_for_selector("#sign-out:has-text('did not answer')")
    assert page.url.endswith("/dashboard")  # not the sign-in page: the session is still open
    assert "foldwise_token" in {c["name"] for c in page.context.cookies()}


def test_sign_out_the_service_refuses_says_why_and_stays(fresh_page, dashboard) -> None:
    page = fresh_page
    sign_in(page.context, dashboard.url, dashboard.token)
    open_ready(page, "/dashboard")

    # the service's answer to an Origin not its own (behind a proxy that changes the scheme,
    # say); Chromium keeps the Origin it sends, so the answer is given here
    detail = "refused a cross-site request (Origin 'https://127.0.0.1')"
    answer = {"status": 403, "json": {"detail": detail}}
    page.route("**/dashboard/session", lambda route: route.fulfill(**answer))
    page.click("#sign-out")
    page.wait_for_selector("#sign-out:has-text('refused: refused a cross-site request')")
    assert page.url.endswith("/dashboard")  # not the sign-in page: the session is still open
    assert "foldwise_token" in {c["name"] for c in page.context.cookies()}
