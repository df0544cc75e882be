"""Wide tables in real Chromium: ten parameters and long errors scroll inside the table's frame,
never off the page, with the first column and the header kept in sight."""

from __future__ import annotations

from typing import Any

from tests.service.dashboard.conftest import Dashboard, open_ready
from tests.service.dashboard.studies import GOOD, add_failed_trial, add_study

WIDE_SPACE = {
    f"encoder_block_{i}_learning_rate_multiplier": {
        "type": "float",
        "low": 1e-5,
        "high": 10.0,
        "log": True,
    }
    for i in range(10)
}
LONG_ERROR = "RuntimeError: " + "the batch did not fit: a long explanation follows. " * 30
LONG_TRACEBACK = "\n".join(
    f'  File "/very/long/path/to/the/user/package/module_{i}.py", line {i}, in f{i}' + " x" * 120
    for i in range(40)
)


def _frame(page, table: str) -> dict[str, Any]:
    """Sizes of ``table``'s scrolling frame and of the page, after scrolling the frame right."""
    return page.evaluate(
        f"""(() => {{
        const wrap = document.querySelector('{table}').closest('.table-wrap');
        wrap.scrollLeft = wrap.scrollWidth;
        const box = wrap.getBoundingClientRect();
        const first = document.querySelector('{table} tbody tr td').getBoundingClientRect();
        const last = document.querySelector('{table} thead th:last-child').getBoundingClientRect();
        return {{scrollWidth: wrap.scrollWidth, clientWidth: wrap.clientWidth,
          scrollLeft: wrap.scrollLeft, left: box.left, right: box.right, height: box.height,
          firstLeft: first.left, lastRight: last.right,
          pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
          viewportHeight: window.innerHeight}};
        }})()"""
    )


def test_a_study_with_ten_parameters_scrolls_its_table_inside_the_frame(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, GOOD, space=WIDE_SPACE)
    page.set_viewport_size({"width": 1100, "height": 800})
    open_ready(page, f"/dashboard/studies/{study_id}")
    frame = _frame(page, "#trials")
    assert frame["pageWidth"] <= frame["viewport"]  # the page itself never scrolls sideways
    assert frame["scrollWidth"] > frame["clientWidth"] and frame["scrollLeft"] > 0
    assert frame["lastRight"] <= frame["right"] + 1  # the last column scrolled into the frame
    assert abs(frame["firstLeft"] - frame["left"]) <= 2  # "#" stays at the left edge
    assert frame["height"] <= 0.85 * frame["viewportHeight"] + 1  # its scroll bar in sight
    header = page.locator(
        "#trials th[data-sort='params.encoder_block_9_learning_rate_multiplier']"
    )
    assert header.is_visible()


def test_long_errors_wrap_and_tracebacks_scroll_inside_the_folds_table(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, GOOD[:3], space=WIDE_SPACE)
    add_failed_trial(dashboard, study_id, 3, error=LONG_ERROR, traceback=LONG_TRACEBACK)
    page.set_viewport_size({"width": 1100, "height": 800})
    open_ready(page, f"/dashboard/studies/{study_id}/trials/3")
    page.click("#folds details summary")
    frame = _frame(page, "#folds")
    assert frame["pageWidth"] <= frame["viewport"]
    assert frame["lastRight"] <= frame["right"] + 1
    text = page.locator("#folds .error-text")
    assert text.get_attribute("title") == LONG_ERROR  # the whole text, on hover
    assert text.inner_text() == LONG_ERROR
    clamped = "(n => [n.clientHeight, n.scrollHeight, n.getBoundingClientRect().width])"
    height, full, width = text.evaluate(clamped)
    assert height < full and width <= 36 * 16  # three lines of a bounded cell
    text.click()  # opens it in place
    height, full, _ = text.evaluate(clamped)
    assert height == full
    trace = page.locator("#folds pre.trace")
    width, scroll = trace.evaluate("n => [n.clientWidth, n.scrollWidth]")
    assert width <= 36 * 16 and scroll > width  # scrolls in its own box
    assert page.inner_text("#trial-error").startswith("fold 0: RuntimeError: the batch")
    callout = page.locator("#trial-error .callout").evaluate("n => n.scrollWidth <= n.clientWidth")
    assert callout
