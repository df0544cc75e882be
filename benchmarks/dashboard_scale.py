"""The dashboard at scale: a study of 10,000 trials × 5 folds × 20 epochs, timed in Chromium.

Fills a fresh database with bulk inserts, serves it with the real app (scheduler off), then times
the JSON endpoints the pages read and the pages themselves in headless Chromium, until every plot
has drawn. Run as a module, so that `benchmarks/optimizers.py` cannot shadow the `optimizers`
package: `.venv/bin/python -m benchmarks.dashboard_scale [--trials 10000] [--database-url URL]`
(default: a SQLite file in a temporary folder; an empty PostgreSQL database works too). The
study it fills (``tests.large_study``), the browser and the server it uses are the dashboard
tests' own, so the benchmark times what the tests check.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from foldwise.schemas import Role
from foldwise.service.app import create_app
from foldwise.service.config import Settings
from foldwise.service.db.engine import make_engine
from foldwise.service.db.schema import upgrade_database
from foldwise.service.token_admin import create_token
from tests.browser import CHROMIUM, CHROMIUM_ARGS, sign_in, wait_until
from tests.large_study import fill_study
from tests.served_app import serve


def time_api(base: str, study_id: int, repeats: int, token: str) -> list[tuple[str, float, int]]:
    """Median wall time and response size of each request the dashboard makes."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        history = client.get(f"/studies/{study_id}/insights/history").json()
        curves = client.get(f"/studies/{study_id}/insights/curves").json()
        best = client.get(f"/studies/{study_id}").json()["best_trial"]["number"]
        paths = [
            "/dashboard",
            "/studies?limit=200",
            f"/dashboard/studies/{study_id}",
            f"/studies/{study_id}",
            f"/studies/{study_id}/insights/history",
            f"/studies/{study_id}/insights/history?since={history['cursor']}",
            f"/studies/{study_id}/insights/folds",
            f"/studies/{study_id}/insights/curves",
            f"/studies/{study_id}/insights/curves?after={curves['cursor']}",
            f"/studies/{study_id}/trials?sort=number&limit=50",
            f"/studies/{study_id}/trials?sort=value&limit=50&offset=5000",
            f"/studies/{study_id}/trials?status=failed&limit=50",
            f"/studies/{study_id}/trials/{best}",
        ]
        return [_time_get(client, path, repeats) for path in paths]


def _time_get(client: httpx.Client, path: str, repeats: int) -> tuple[str, float, int]:
    times, size = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - started)
        response.raise_for_status()
        size = len(response.content)
    return path, statistics.median(times), size


VIEWPORT = {"width": 1400, "height": 900}


def _signed_in(browser: Any, base: str, token: str) -> Any:
    """A browser context signed in with ``token``, as a user's is once."""
    context = browser.new_context(viewport=VIEWPORT, base_url=base)
    sign_in(context, base, token)
    return context


def time_pages(base: str, study_id: int, repeats: int, token: str) -> list[tuple[str, float]]:
    """Chromium: from navigation until every plot has drawn (``body[data-ready]``)."""
    from playwright.sync_api import sync_playwright

    rows: list[tuple[str, float]] = []
    with sync_playwright() as playwright:
        study = httpx.get(
            f"{base}/studies/{study_id}", headers={"Authorization": f"Bearer {token}"}
        )
        best = study.raise_for_status().json()["best_trial"]["number"]
        pages = {
            "studies page": "/dashboard",
            "study page": f"/dashboard/studies/{study_id}",
            "trial page": f"/dashboard/studies/{study_id}/trials/{best}",
        }
        launched = []
        for _ in range(3):  # the first page a just-started browser opens: its own start-up too
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = _signed_in(browser, base, token).new_page()
            launched.append(_load(page, pages["study page"]))
            browser.close()
        rows.append(
            ("study page, first page of a just-started browser", statistics.median(launched))
        )
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = _signed_in(browser, base, token).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _load(page, pages["studies page"])  # the browser itself warm, as a user's is
        rows.append(
            (
                "study page, first visit (empty cache)",
                _first_visit(browser, base, token, pages["study page"], repeats),
            )
        )
        for name, path in pages.items():
            rows.append((name, statistics.median(_load(page, path) for _ in range(repeats))))
        history = [
            _load(page, pages["study page"], "#plot-history[data-drawn]") for _ in range(repeats)
        ]
        rows.append(("study page: first plot (history) drawn", statistics.median(history)))
        rows.append(("sort trial table by value", _sort_table(page, pages["study page"])))
        browser.close()
    if errors:
        raise RuntimeError(f"page errors: {errors}")
    return rows


def _first_visit(browser: Any, base: str, token: str, path: str, repeats: int) -> float:
    """Median study-page load in fresh contexts (empty HTTP cache, nothing compiled)."""
    times = []
    for _ in range(repeats):
        context = _signed_in(browser, base, token)
        times.append(_load(context.new_page(), path))
        context.close()
    return statistics.median(times)


def _load(page: Any, path: str, ready: str = "body[data-ready=true]") -> float:
    started = time.perf_counter()
    page.goto(path)
    page.wait_for_selector(ready, state="attached", timeout=60_000)
    return time.perf_counter() - started


def _sort_table(page: Any, path: str) -> float:
    _load(page, path)
    first = page.locator("#trials tbody tr").first.get_attribute("data-trial")
    started = time.perf_counter()
    page.click("#trials th[data-sort='value']")
    wait_until(
        page,
        f"document.querySelector('#trials tbody tr').dataset.trial !== '{first}'",
        timeout=60_000,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description="Dashboard timings on a large study.")
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument(
        "--pruned-rate", type=float, default=0.4, help="share of trials raced away after 1 fold"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--database-url", help="an empty database; default: a temporary SQLite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'scale.db'}"
        upgrade_database(url)
        token = create_token(url, "dashboard-scale", Role.ADMIN, replace=True)
        engine = make_engine(url)
        started = time.perf_counter()
        study_id = fill_study(
            engine,
            trials=args.trials,
            folds=args.folds,
            epochs=args.epochs,
            pruned_rate=args.pruned_rate,
        )
        filled = time.perf_counter() - started
        engine.dispose()
        app = create_app(Settings(database_url=url, scheduler_enabled=False))
        with serve(app) as base:
            api_rows = time_api(base, study_id, args.repeats, token)
            page_rows = time_pages(base, study_id, args.repeats, token)
    _report(args, url, filled, api_rows, page_rows)


def _report(args: argparse.Namespace, url: str, filled: float, api_rows, page_rows) -> None:
    backend = url.split(":", 1)[0]
    epochs = args.trials * args.folds * args.epochs
    print(f"\n{args.trials:,} trials × {args.folds} folds × {args.epochs} epochs ", end="")
    print(f"(~{epochs:,} epoch rows) on {backend}, filled in {filled:.1f} s\n")
    print("| request | median ms | bytes |\n|---|---:|---:|")
    for path, seconds, size in api_rows:
        print(f"| `GET {path}` | {seconds * 1000:.0f} | {size:,} |")
    print("\n| Chromium (until every plot has drawn) | median s |\n|---|---:|")
    for name, seconds in page_rows:
        print(f"| {name} | {seconds:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
