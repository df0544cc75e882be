"""The study page's plots in real Chromium: colours that put the best trials forward, colour bars
that say what a colour means, a value axis that one diverged trial cannot squash, a log switch
that refuses values <= 0, and a learning-curves panel that agrees with itself."""

from __future__ import annotations

import math
from typing import Any

import pytest

from foldwise.service.db import fold_runs as fold_repo
from foldwise.service.db import studies as study_repo
from foldwise.service.db import trials as trial_repo
from foldwise.trainers.report import EpochReport
from tests.browser import wait_until
from tests.service.dashboard.conftest import Dashboard, open_ready
from tests.service.dashboard.studies import DIVERGED, DIVERGED_AT, GOOD, WITH_DIVERGED, add_study


def _plot(page, plot_id: str) -> dict[str, Any]:
    return page.evaluate(
        f"(() => {{ const n = document.getElementById('{plot_id}');"
        " return {data: n.data, layout: n.layout}; })()"
    )


def _luminance(hex_colour: str) -> float:
    """Relative luminance (WCAG) of ``#rrggbb``: 0 black, 1 white."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _line_of(traces: list[dict[str, Any]], number: int) -> tuple[int, dict[str, Any]]:
    """The parallel-coordinates band (index, trace) that holds trial ``number``'s polyline."""
    for index, trace in enumerate(traces):
        if trace.get("mode") == "lines" and number in trace["customdata"]:
            return index, trace
    raise AssertionError(f"no line for trial {number}")


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_parallel_coordinates_draw_the_best_trials_darkest_and_on_top(
    page, dashboard: Dashboard, direction: str
) -> None:
    values = GOOD if direction == "minimize" else [1 - v for v in GOOD]
    study_id = add_study(dashboard, values, direction=direction)
    open_ready(page, f"/dashboard/studies/{study_id}")
    traces = _plot(page, "plot-parcoords")["data"]
    ranked = sorted(range(len(values)), key=lambda n: values[n], reverse=direction == "maximize")
    best, worst = ranked[0], ranked[-1]
    best_at, best_line = _line_of(traces, best)
    worst_at, worst_line = _line_of(traces, worst)
    assert _luminance(best_line["line"]["color"]) < 0.05  # dark on white
    assert _luminance(best_line["line"]["color"]) < _luminance(worst_line["line"]["color"])
    lines = [t for t in traces if t.get("mode") == "lines"]
    darkness = [_luminance(t["line"]["color"]) for t in lines]
    assert darkness == sorted(darkness, reverse=True)  # drawn from the palest to the darkest
    assert best_at > worst_at and best_line["line"]["width"] > worst_line["line"]["width"]
    [bar] = [t for t in traces if t.get("marker", {}).get("showscale")]
    colorbar = bar["marker"]["colorbar"]
    assert colorbar["title"]["text"] == "val_loss: darker is better"
    ends = colorbar["ticktext"][0], colorbar["ticktext"][-1]
    if direction == "minimize":
        assert ends == ("0.105 best", "0.31 worst")
    else:
        assert ends == ("0.69 worst", "0.895 best")
    assert page.locator("#plot-parcoords .colorbar").count() == 1
    assert "the darker, the better" in page.inner_text("#parcoords-note")


def test_a_diverged_trial_neither_squashes_the_colours_nor_the_value_axis(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, WITH_DIVERGED)
    open_ready(page, f"/dashboard/studies/{study_id}")
    traces = _plot(page, "plot-parcoords")["data"]
    [bar] = [t for t in traces if t.get("marker", {}).get("showscale")]
    assert bar["marker"]["cmax"] == max(GOOD)  # the colours span the good trials
    assert bar["marker"]["colorbar"]["ticktext"][-1] == "≥ 0.31 worst"
    _, diverged = _line_of(traces, DIVERGED_AT)
    _, second_worst = _line_of(traces, GOOD.index(max(GOOD)))
    assert diverged["line"]["color"] == second_worst["line"]["color"]  # the worst band
    used = [t for t in traces if t.get("mode") == "lines" and t["customdata"]]
    assert len(used) >= 5  # the good trials spread over the bands, not crammed into one or two
    assert "1 value far above the rest sits at the top" in page.inner_text("#parcoords-note")


def test_slices_have_a_colour_bar_for_the_trial_number(page, dashboard: Dashboard) -> None:
    study_id = add_study(dashboard, GOOD)
    open_ready(page, f"/dashboard/studies/{study_id}")
    traces = _plot(page, "plot-slices")["data"]
    assert [t["marker"]["showscale"] for t in traces] == [True, False, False]  # one bar
    bar = traces[0]["marker"]
    assert bar["colorbar"]["title"]["text"] == "trial number (darker = later)"
    assert bar["color"] == list(range(len(GOOD)))
    assert (bar["cmin"], bar["cmax"]) == (0, len(GOOD) - 1)
    assert all(t["marker"]["colorscale"] == bar["colorscale"] for t in traces)
    assert all(_luminance(colour) < 0.6 for _, colour in bar["colorscale"])  # no white dots
    assert page.locator("#plot-slices .colorbar").count() == 1
    assert "trial number" in page.text_content("#plot-slices .colorbar .cbtitle")


def test_history_leaves_a_diverged_trial_on_the_edge_until_asked(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, WITH_DIVERGED)
    open_ready(page, f"/dashboard/studies/{study_id}")
    plot = _plot(page, "plot-history")
    low, high = plot["layout"]["yaxis"]["range"]
    assert low < min(GOOD) and max(GOOD) < high < 0.5  # the good trials fill the plot
    trials = plot["data"][0]
    at = trials["x"].index(DIVERGED_AT)
    assert low < trials["y"][at] < high and trials["marker"]["symbol"][at] == "triangle-up"
    assert trials["text"][at] == "1.88 ± 0.01 (off the scale)"
    assert trials["marker"]["symbol"].count("circle") == len(GOOD)
    clip = page.locator("#history-clip")
    assert clip.is_visible()
    assert clip.inner_text().startswith("1 value above 0.31 (the worst 1.88) lies far from")
    drawn = int(page.get_attribute("#plot-history", "data-drawn"))
    page.check("#history-all")
    wait_until(page, f"document.getElementById('plot-history').dataset.drawn > {drawn}")
    plot = _plot(page, "plot-history")
    assert plot["layout"]["yaxis"]["range"][1] > DIVERGED
    assert plot["data"][0]["y"][at] == DIVERGED and clip.is_hidden()
    page.check("#history-log")
    wait_until(page, "document.getElementById('plot-history').layout.yaxis.type === 'log'")
    assert _plot(page, "plot-history")["data"][0]["y"][at] == DIVERGED
    # the slices take the same default: the diverged trial on the top edge, a note saying so
    slices = _plot(page, "plot-slices")
    assert slices["layout"]["yaxis"]["range"][1] < 0.5
    assert "triangle-up" in slices["data"][0]["marker"]["symbol"]
    assert page.locator("#slices-clip").is_visible()


def test_the_log_switch_refuses_values_at_or_below_zero(page, dashboard: Dashboard) -> None:
    values = [v - 0.2 for v in GOOD]  # some negative: say a loss with a baseline subtracted
    study_id = add_study(dashboard, values)
    open_ready(page, f"/dashboard/studies/{study_id}")
    switch = page.locator("#history-log")
    assert switch.is_disabled()
    title = page.get_attribute("label[for='history-log']", "title")
    assert title == "A log scale needs every value above 0; the lowest here is -0.095."
    assert _plot(page, "plot-history")["layout"]["yaxis"]["type"] == "linear"
    assert page.locator("#slices-log").is_disabled()
    assert page.locator("#history-all").is_hidden()  # nothing is far off
    assert page.locator("#history-clip").is_hidden()


def test_the_log_switch_puts_the_history_and_the_curves_on_a_log_axis(
    page, dashboard: Dashboard
) -> None:
    open_ready(page, f"/dashboard/studies/{dashboard.study_id}")
    assert page.get_attribute("label[for='history-log']", "title") == (
        "Show the values on a log scale"
    )
    for plot in ("history", "curves"):
        page.check(f"#{plot}-log")
        wait_until(page, f"document.getElementById('plot-{plot}').layout.yaxis.type === 'log'")
        page.uncheck(f"#{plot}-log")
        wait_until(page, f"document.getElementById('plot-{plot}').layout.yaxis.type === 'linear'")


def test_running_trials_without_an_epoch_are_said_to_be_waiting(
    page, dashboard: Dashboard
) -> None:
    study_id = add_study(dashboard, GOOD[:3], running=2)
    open_ready(page, f"/dashboard/studies/{study_id}")
    assert page.inner_text("#plot-curves .empty") == (
        "2 running trials, waiting for their first epoch."
    )
    note = page.inner_text("#curves-note")
    assert note.startswith("2 running trials, waiting for their first epoch; metric val_loss")
    with dashboard.app.state.sessions.begin() as session:  # one of them reports its epoch 1
        run = trial_repo.get_trial(session, study_id, 3).fold_runs[0]
        fold_repo.record_epoch(session, run.id, EpochReport(1, {"val_loss": 0.9}))
        study_repo.touch_study(session, study_id, trials=False)
    wait_until(page, "document.getElementById('plot-curves').data?.length === 1")
    assert page.locator("#plot-curves .empty").count() == 0
    assert page.inner_text("#curves-note").startswith(
        "2 running trials (1 waiting for its first epoch); metric val_loss"
    )


MARKUP = [
    '<b style="font-size:90px">big</b>',
    '<a href="https://evil.example/">phish</a>',
    "a & b",
]


def test_text_users_wrote_is_drawn_as_text_and_any_name_is_a_parameter(
    page, dashboard: Dashboard
) -> None:
    # Plotly reads <a href>, <b> and styles in labels as markup: a member's categorical choice
    # was a live link (and a 90 px label) on an admin's study page; a parameter named
    # __proto__ set the point's prototype in the page instead of a value
    space = {
        "pick": {"type": "categorical", "choices": MARKUP},
        "__proto__": {"type": "float", "low": 0.0, "high": 1.0},
    }
    study_id = add_study(dashboard, GOOD[:6], space=space)
    open_ready(page, f"/dashboard/studies/{study_id}")
    for plot in ("plot-parcoords", "plot-slices"):
        assert page.locator(f"#{plot} a").count() == 0, plot
        assert page.locator(f"#{plot} [style*='90px']").count() == 0, plot
    labels = page.locator("#plot-parcoords .annotation-text").all_text_contents()
    assert set(MARKUP) <= set(labels)
    ticks = page.locator("#plot-slices .xtick text").all_text_contents()
    assert set(MARKUP) <= set(ticks)
    slices = _plot(page, "plot-slices")["data"]
    assert [len(trace["x"]) for trace in slices] == [6, 6]  # each parameter, every trial
    assert all(isinstance(x, int | float) and 0 <= x <= 1 for x in slices[1]["x"]), slices[1]["x"]
    lines = [t for t in _plot(page, "plot-parcoords")["data"] if t.get("mode") == "lines"]
    reached = [y for t in lines for y in t["y"] if isinstance(y, float | int) and math.isfinite(y)]
    assert len(reached) == 6 * (len(space) + 1)  # every trial's line reaches every axis
