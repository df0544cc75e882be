"""/docs works offline: Swagger UI comes from the service, never from a CDN."""

from __future__ import annotations

from urllib.parse import urlparse

from tests.service.dashboard.conftest import Dashboard


def test_api_docs_render_with_no_network(browser, dashboard: Dashboard) -> None:
    context = browser.new_context(base_url=dashboard.url)
    here = urlparse(dashboard.url).netloc
    elsewhere: list[str] = []

    def offline(route) -> None:  # as on a machine without internet: only the service answers
        if urlparse(route.request.url).netloc == here:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", offline)
    page = context.new_page()
    try:
        page.goto("/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=20_000)
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert "/studies/{study_id}/trials" in [p.replace("\u200b", "") for p in paths]
    finally:
        context.close()
    assert elsewhere == []
