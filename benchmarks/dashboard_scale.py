"""The dashboard at scale: a study of 10,000 trials × 5 folds × 20 epochs, timed in Chromium.

Fills a fresh database with bulk inserts, serves it with the real app (scheduler off), then times
the JSON endpoints the pages read and the pages themselves in headless Chromium, until every plot
has drawn. Run as a module, so that `benchmarks/optimizers.py` cannot shadow the `optimizers`
package: `.venv/bin/python -m benchmarks.dashboard_scale [--trials 10000] [--database-url URL]`
(default: a SQLite file in a temporary folder; an empty PostgreSQL database works too).
"""

from __future__ import annotations

import argparse
import math
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import Connection, Engine, insert, select

from foldwise.schemas import FoldStatus, Role, StudyStatus, TrialStatus
from foldwise.spec import StudySpec
from service.api.auth import CSRF_COOKIE, TOKEN_COOKIE
from service.app import create_app
from service.config import Settings
from service.db import studies as study_repo
from service.db.engine import make_engine, make_session_factory
from service.db.models import EpochMetricRow, FoldRunRow, TrialRow
from service.db.schema import upgrade_database
from service.token_admin import create_token

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def wait_until(page: Any, expression: str, timeout: float = 15_000) -> None:
    """Wait until ``expression`` is true in ``page``, polled from here every 10 ms: Playwright's
    ``wait_for_function`` compiles it inside the page, which the dashboard's
    Content-Security-Policy refuses (no string is evaluated as script there)."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        try:
            if page.evaluate(expression):
                return
            why = "false"
        except Exception as exc:  # what it reads is not on the page yet
            why = str(exc).splitlines()[0]
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout / 1000:g} s ({why}): {expression}")
        time.sleep(0.01)


FAILURE = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
PRUNED_REASON = (
    "after 1 of {folds} folds: 0.4121 vs incumbent (trial 3) 0.1052 on the same folds, worse by "
    "0.31, more than the incumbent's worst fold lies from its mean (0.013; forgiving rule)"
)
TRACEBACK = """Traceback (most recent call last):
  File "trainers/fold_runner.py", line 88, in run_fold
    loss = step(model, batch)
  File "trainers/fold_runner.py", line 131, in step
    output = model(inputs)
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"""
SPACE = {
    "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
    "depth": {"type": "int", "low": 1, "high": 3},
    "width_1": {"type": "int", "low": 16, "high": 256, "log": True},
    "width_2": {"type": "int", "low": 16, "high": 256, "log": True, "when": {"depth": {"gte": 2}}},
    "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
    "dropout": {"type": "float", "low": 0.0, "high": 0.5},
}


def scale_spec(trials: int, folds: int, epochs: int, groups: int) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": f"scale-{trials}x{folds}x{epochs}",
            "objective": {"metric": "val_loss", "direction": "minimize"},
            "space": SPACE,
            "optimizer": {"name": "random", "seed": 0},
            "budget": {"trials": trials},
            "parallel": {"trial_groups": groups, "folds": folds, "workers_per_fold": 1},
            "trainer": {"task": "digits_mlp", "epochs": epochs},
        }
    )


def fill_study(
    engine: Engine,
    *,
    trials: int,
    folds: int,
    epochs: int,
    running: int = 4,
    failure_rate: float = 0.03,
    pruned_rate: float = 0.0,
    seed: int = 0,
) -> int:
    """Create one running study whose last ``running`` trials are mid-training; return its id.
    A ``pruned_rate`` share of the finished trials were raced away after their first fold.

    Rows go in as executemany ``INSERT``s on the connection and ids are read back with one
    ``SELECT`` per table, so 1M epoch rows take seconds and PostgreSQL's sequences stay right.
    """
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(seconds=30 * trials + 600)
    with make_session_factory(engine).begin() as session:
        study = study_repo.create_study(session, scale_spec(trials, folds, epochs, running))
        study_repo.mark_study(session, study, StudyStatus.RUNNING)
        study.started_at = study.created_at = start
        session.flush()
        db = session.connection()
        trial_rows = [
            _trial(
                rng, study.id, n, trials - n <= running, start, folds, failure_rate, pruned_rate
            )
            for n in range(trials)
        ]
        db.execute(insert(TrialRow.__table__), [row for row, _ in trial_rows])
        ids = dict(
            db.execute(
                select(TrialRow.number, TrialRow.id).where(TrialRow.study_id == study.id)
            ).all()
        )
        runs = [
            run
            for row, values in trial_rows
            for run in _fold_runs(rng, ids[row["number"]], row, values, epochs)
        ]
        db.execute(insert(FoldRunRow.__table__), [row for row, _, _ in runs])
        _insert_epochs(db, rng, runs, _fold_run_ids(db, study.id))
        return study.id


def _insert_epochs(
    db: Connection,
    rng: random.Random,
    runs: list[tuple[dict[str, Any], float, int]],
    run_ids: dict[tuple[int, int, int], int],
) -> None:
    """Epoch rows in batches of 50,000, so memory stays flat at a million rows."""
    batch: list[dict[str, Any]] = []
    for row, target, done in runs:
        run_id = run_ids[row["trial_id"], row["fold"], row["attempt"]]
        batch.extend(_epochs(rng, run_id, target, done))
        if len(batch) >= 50_000:
            db.execute(insert(EpochMetricRow.__table__), batch)
            batch = []
    if batch:
        db.execute(insert(EpochMetricRow.__table__), batch)


def _fold_run_ids(db: Connection, study_id: int) -> dict[tuple[int, int, int], int]:
    query = (
        select(FoldRunRow.trial_id, FoldRunRow.fold, FoldRunRow.attempt, FoldRunRow.id)
        .join(TrialRow, FoldRunRow.trial_id == TrialRow.id)
        .where(TrialRow.study_id == study_id)
    )
    return {(t, f, a): i for t, f, a, i in db.execute(query)}


def _trial(
    rng: random.Random,
    study_id: int,
    number: int,
    running: bool,
    start: datetime,
    folds: int,
    failure_rate: float,
    pruned_rate: float = 0.0,
) -> tuple[dict[str, Any], list[float]]:
    """A trial row and the values its folds will have (mean and s.e. filled in when finished;
    a pruned trial's value is its first fold's)."""
    params = _params(rng)
    began = start + timedelta(seconds=30 * number)
    values = [_objective(params) + rng.gauss(0, 0.02) for _ in range(folds)]
    failed = not running and rng.random() < failure_rate
    pruned = not (running or failed) and pruned_rate > 0 and rng.random() < pruned_rate
    status = TrialStatus.COMPLETED
    if running or failed:
        status = TrialStatus.RUNNING if running else TrialStatus.FAILED
    elif pruned:
        status, values = TrialStatus.PRUNED, values[:1]
    done = status is TrialStatus.COMPLETED
    row = {
        "study_id": study_id,
        "number": number,
        "status": status,
        "params": params,
        "value": statistics.fmean(values) if done or pruned else None,
        "std_error": statistics.stdev(values) / math.sqrt(folds) if done and folds > 1 else None,
        "value_folds": len(values) if done or pruned else None,
        "pruned_reason": PRUNED_REASON.format(folds=folds) if pruned else None,
        "error": f"fold {folds - 1}: {FAILURE}" if failed else None,
        "created_at": began,
        "started_at": began,
        "finished_at": None if running else began + timedelta(seconds=rng.uniform(20, 90)),
    }
    return row, values


def _params(rng: random.Random) -> dict[str, Any]:
    depth = rng.randint(1, 3)
    params: dict[str, Any] = {
        "lr": math.exp(rng.uniform(math.log(1e-4), math.log(0.3))),
        "depth": depth,
        "width_1": int(math.exp(rng.uniform(math.log(16), math.log(256)))),
        "act": rng.choice(["relu", "tanh", "gelu"]),
        "dropout": rng.uniform(0, 0.5),
    }
    if depth >= 2:
        params["width_2"] = int(math.exp(rng.uniform(math.log(16), math.log(256))))
    return params


def _fold_runs(
    rng: random.Random, trial_id: int, trial: dict[str, Any], values: list[float], epochs: int
) -> Iterator[tuple[dict[str, Any], float, int]]:
    """Fold attempts as (row, target value, epochs done): some retried, the last of a failure."""
    for fold, value in enumerate(values):
        began = trial["started_at"]
        if trial["status"] is TrialStatus.RUNNING:
            yield (
                _run(trial_id, fold, 0, FoldStatus.RUNNING, began),
                value,
                rng.randint(1, epochs - 1),
            )
            continue
        attempt = 0
        if rng.random() < 0.05:
            lost = _run(trial_id, fold, 0, FoldStatus.LOST, began, error="the service stopped")
            yield lost, value, rng.randint(1, epochs - 1)
            attempt = 1
        ended = trial["finished_at"]
        if trial["status"] is TrialStatus.FAILED and fold == len(values) - 1:
            failed = _run(trial_id, fold, attempt, FoldStatus.FAILED, began, ended, error=FAILURE)
            yield {**failed, "traceback": TRACEBACK}, value, 1
            continue
        run = _run(trial_id, fold, attempt, FoldStatus.COMPLETED, began, ended, value=value)
        yield run, value, epochs


def _run(
    trial_id: int,
    fold: int,
    attempt: int,
    status: FoldStatus,
    began: datetime,
    ended: datetime | None = None,
    *,
    value: float | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    seconds = None if ended is None else (ended - began).total_seconds() * 0.9
    return {
        "trial_id": trial_id,
        "fold": fold,
        "attempt": attempt,
        "status": status,
        "value": value,
        "error": error,
        "traceback": None,
        "started_at": began,
        "finished_at": ended if status is not FoldStatus.LOST else began,
        "train_seconds": seconds,
    }


def _epochs(rng: random.Random, run_id: int, target: float, done: int) -> Iterator[dict[str, Any]]:
    """Per-epoch metrics whose validation loss decays towards the fold's value."""
    for epoch in range(1, done + 1):
        val_loss = target + (1.2 - target) * math.exp(-epoch / 4) + rng.gauss(0, 0.005)
        seconds = rng.uniform(1.0, 1.4)
        metrics = {
            "train_loss": val_loss * 0.9,
            "val_loss": val_loss,
            "val_accuracy": max(0.0, min(1.0, 1.0 - val_loss / 1.5)),
            "lr": 0.01,
            "epoch_seconds": seconds,
            "samples_per_second": 1437 / seconds,
        }
        yield {"fold_run_id": run_id, "epoch": epoch, "metrics": metrics}


def _objective(params: dict[str, Any]) -> float:
    """A smooth landscape with its optimum near lr = 0.01 and wide first layers."""
    lr_term = (math.log10(params["lr"]) + 2) ** 2 * 0.08
    width_term = 0.15 / math.log2(params["width_1"])
    act_term = {"relu": 0.0, "gelu": 0.01, "tanh": 0.04}[params["act"]]
    return 0.08 + lr_term + width_term + act_term + 0.1 * params["dropout"] ** 2


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yield its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


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


def signed_in_context(browser: Any, base: str, token: str, **options: Any) -> Any:
    """A browser context with the cookies the dashboard's sign-in page gives (the token, a CSRF
    token)."""
    context = browser.new_context(base_url=base, **options)
    context.add_cookies(
        [
            {"name": TOKEN_COOKIE, "value": token, "url": base, "httpOnly": True},
            {"name": CSRF_COOKIE, "value": "benchmark-csrf-token", "url": base},
        ]
    )
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
            page = signed_in_context(browser, base, token, viewport=VIEWPORT).new_page()
            launched.append(_load(page, pages["study page"]))
            browser.close()
        rows.append(
            ("study page, first page of a just-started browser", statistics.median(launched))
        )
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = signed_in_context(browser, base, token, viewport=VIEWPORT).new_page()
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
        context = signed_in_context(browser, base, token, viewport=VIEWPORT)
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
