"""The study page of a Pareto study on the live service: its Pareto plot appears while the study
runs and, once it has ended, shows every completed trial, the front in red exactly as the API
gives it, and the infeasible trials as crosses; a trial's page shows its other objective, its
constraint and whether it is feasible; a single-objective study's page has no such panel."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser import sign_in, wait_until
from tests.live_service import LiveService
from tests.service.study_specs import tiny_task_spec

pytestmark = pytest.mark.slow

OBJECTIVES = [
    {"metric": "val_loss", "direction": "minimize"},
    {"metric": "n_params", "direction": "minimize"},
]


def _spec(**sections: Any) -> dict[str, Any]:
    defaults = {
        "budget": {"trials": 6},
        "parallel": {"trial_groups": 2, "folds": 2, "workers_per_fold": 1},
    }
    spec = tiny_task_spec(["ok"], **{**defaults, **sections})
    spec["space"]["width"] = {"type": "int", "low": 2, "high": 40}
    return spec


def _traces(page: Any) -> dict[str, int]:
    return page.evaluate(
        "Object.fromEntries((document.getElementById('plot-pareto').data ?? [])"
        ".filter((t) => t.mode === 'markers').map((t) => [t.name, t.x.length]))"
    )


def test_a_pareto_study_page_draws_its_front_live(browser, shared_service: LiveService) -> None:
    api = httpx.Client(base_url=shared_service.url, headers=shared_service.headers, timeout=30)
    pareto = api.post(
        "/studies",
        json=_spec(
            objectives=OBJECTIVES, constraints=[{"metric": "n_params", "op": "<=", "value": 250}]
        ),
    ).json()
    single = api.post("/studies", json=_spec(budget={"trials": 1})).json()
    context = browser.new_context(base_url=shared_service.url)
    sign_in(context, shared_service.url, shared_service.token)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.goto(f"/dashboard/studies/{pareto['id']}")
    page.wait_for_selector("body[data-ready=true]")
    assert page.is_visible("#pareto-panel")
    wait_until(page, "document.querySelector('#study-status .badge.completed') !== null", 300_000)
    wait_until(page, "(document.getElementById('plot-pareto').data ?? []).length > 0", 30_000)
    front = api.get(f"/studies/{pareto['id']}/pareto").json()
    trials = api.get(f"/studies/{pareto['id']}/trials").json()["data"]
    infeasible = sum(t["feasible"] is False for t in trials)
    wait_until(
        page,
        f"document.getElementById('pareto-note').textContent.includes('{len(trials)} completed')",
    )
    shown = _traces(page)
    assert shown.get("Pareto front") == front["count"] >= 1
    assert shown.get("infeasible (breaks a constraint)", 0) == infeasible
    assert sum(shown.values()) == len(trials)
    first = trials[0]  # its page shows the second objective, the constraint and feasibility
    page.goto(f"/dashboard/studies/{pareto['id']}/trials/{first['number']}")
    page.wait_for_selector("body[data-ready=true]")
    size = first["objective_values"][1][0]
    assert f"{size:g}" in page.inner_text("#card-objective-1")
    assert "n_params <= 250" in page.inner_text("#card-constraint-0")
    feasible = "yes" if first["feasible"] else "no: breaks a constraint"
    assert feasible in page.inner_text("#card-feasible")
    page.goto(f"/dashboard/studies/{single['id']}")
    page.wait_for_selector("body[data-ready=true]")
    assert not page.is_visible("#pareto-panel")
    context.close()
    api.close()
    assert errors == [], errors
