"""The scheduler at scale: 10 to 1,000 fold slots of a simulated cluster, measured from outside.

Starts `foldwise serve` with FOLDWISE_EXECUTOR=simulated (100 simulated nodes; the real service,
scheduler, store, lease and database), submits studies of 5 trial groups x 2 folds (10 fold
slots each, random search, 2 epochs a fold run) until they fill `--slots`, and measures a
window of `--seconds` once every slot has had time to fill:

- utilisation: time the simulated runs spent in their epochs / (slots x window); a trial's two
  folds share its epoch time (a configuration's cost), so a study that refills at once is ~1.
- refill: a trial's last fold ends -> the trial that takes its place starts its first fold.
- report lag: a fold run reports an epoch (the simulator's trace) -> its row is in the database
  (read every 0.1 s by this script).
- service CPU (cores) and CPU per fold event (epoch reports and fold ends in the window), with
  the GET clients below and, in a quiet window of half the length that follows with the GET
  clients stopped, without them (the write path's own cost).
- commits/s (write transactions: the service's ``foldwise_db_commits_total``) and, on
  PostgreSQL, rows written/s (``pg_stat_database``); event-loop lag p99 (the service's
  ``foldwise_event_loop_lag_seconds``).
- ``GET /studies/{id}``: 20 clients, each every 0.5 s; latency p99 and data age p99 (how long
  before the answer the first trial it does not count as finished had finished).

`--burst N` instead runs N one-second folds (one epoch each) on `--burst-slots` slots and prints
the wall time against the ideal (N / slots seconds, plus one epoch).

`--history 1000,100000` instead times the refill of a study with that many finished trials
already stored (the verdict, the next suggestion and the next fold's start must not grow with
the history).

`--ref REV` also runs every cell against the service as it was at git revision REV (a
temporary work tree, with `--ref-patch` applied: the simulated executor for a revision from
before it, benchmarks/refs/), alternating with this one:

    .venv/bin/python -m benchmarks.scheduler_scale --backends postgresql --slots 1000 \\
        --epochs mixed --racing off --ref 9975bb8 \\
        --ref-patch benchmarks/refs/simulated_executor_9975bb8.patch
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from tests.live_service import ROOT, LiveService, backend_database
from tests.service.study_specs import study_spec

MAX_BUDGET = 100_000
EPOCHS = {"1": (1.0, 1.0), "5": (5.0, 5.0), "mixed": (1.0, 10.0)}
GROUPS, FOLDS, EPOCHS_PER_RUN = 5, 2, 2
GET_CLIENTS, GET_INTERVAL = 20, 0.5


@dataclass(frozen=True)
class Cell:
    backend: str
    slots: int
    epochs: str
    racing: str

    def label(self) -> str:
        return f"{self.backend} | {self.slots} | {self.epochs} | {self.racing}"


@dataclass
class Probe:
    """What the script reads while the window runs: stored epochs, GET answers."""

    stored: dict[tuple[str, int, int, int], float] = field(default_factory=dict)
    answers: list[tuple[float, int, int, float]] = field(default_factory=list)
    """(time asked, study, trials finished it says, latency)"""
    stop: threading.Event = field(default_factory=threading.Event)
    readers_stop: threading.Event = field(default_factory=threading.Event)
    """Set when the GET clients stop (the quiet window that follows the measured one)."""


def study_document(cell: Cell, budget: int, epochs: int = EPOCHS_PER_RUN) -> dict[str, Any]:
    racing = {"rule": "off"} if cell.racing == "off" else {"rule": "forgiving", "min_folds": 1}
    return study_spec(
        name="scale",
        space={"x": {"type": "float", "low": 0.0, "high": 1.0}},
        budget={"trials": budget, "max_consecutive_failures": 1000},
        parallel={"trial_groups": GROUPS, "folds": FOLDS, "workers_per_fold": 1},
        resources={"cpus_per_worker": 1},
        trainer={"task": "digits_mlp", "epochs": epochs, "batch_size": 64},
        racing=racing,
        optimizer={"name": "random", "seed": random.randrange(10**6)},
    )


def cluster_env(slots: int, seconds: tuple[float, float], trace: Path) -> dict[str, str]:
    nodes = min(100, slots)
    cluster = {
        "nodes": nodes,
        "cpus_per_node": slots / nodes,
        "epoch_seconds": list(seconds),
        "trace": str(trace),
    }
    return {
        "FOLDWISE_EXECUTOR": "simulated",
        "FOLDWISE_SIMULATED_CLUSTER": json.dumps(cluster),
        "FOLDWISE_AUTH": "false",
        "FOLDWISE_POLL_SECONDS": "1.0",
        "FOLDWISE_API_DB_CONNECTIONS": "16",
    }


def poll_database(url: str, probe: Probe) -> None:
    """Note when each epoch row appears (every 0.1 s)."""
    engine = create_engine(url)
    last = 0
    query = text(
        "SELECT e.id, t.study_id, t.number, f.fold, f.attempt, e.epoch FROM epoch_metrics e "
        "JOIN fold_runs f ON f.id = e.fold_run_id JOIN trials t ON t.id = f.trial_id "
        "WHERE e.id > :last ORDER BY e.id"
    )
    while not probe.stop.is_set():
        with contextlib.suppress(Exception), engine.connect() as connection:
            rows = connection.execute(query, {"last": last}).all()
            now = time.time()
            for row_id, study, number, fold, attempt, epoch in rows:
                probe.stored.setdefault((f"study{study}-trial{number}", fold, attempt, epoch), now)
                last = max(last, row_id)
        probe.stop.wait(0.1)
    engine.dispose()


async def poll_api(url: str, studies: list[int], probe: Probe) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:

        async def one_client() -> None:
            while not probe.stop.is_set() and not probe.readers_stop.is_set():
                study = random.choice(studies)
                asked = time.time()
                started = time.perf_counter()
                with contextlib.suppress(httpx.HTTPError):
                    answer = await client.get(f"/studies/{study}")
                    latency = time.perf_counter() - started
                    if answer.status_code == 200:
                        finished = answer.json()["progress"]["finished"]
                        probe.answers.append((asked, study, finished, latency))
                await asyncio.sleep(GET_INTERVAL)

        await asyncio.gather(*(one_client() for _ in range(GET_CLIENTS)))


def scrape(url: str) -> dict[str, Any]:
    """The service's commits and event-loop lag buckets (absent on an older service)."""
    found: dict[str, Any] = {"commits": None, "lag": {}}
    with contextlib.suppress(httpx.HTTPError):
        body = httpx.get(f"{url}/metrics", timeout=30).text
        for family in text_string_to_metric_families(body):
            if family.name == "foldwise_db_commits":
                found["commits"] = sum(
                    s.value for s in family.samples if s.name.endswith("_total")
                )
            if family.name == "foldwise_event_loop_lag_seconds":
                found["lag"] = {
                    float(s.labels["le"]): s.value
                    for s in family.samples
                    if s.name.endswith("_bucket")
                }
    return found


def pg_stats(url: str) -> tuple[int, int] | None:
    """(commits, rows written) of the database so far; None on SQLite."""
    if not url.startswith("postgresql"):
        return None
    engine = create_engine(url)
    with engine.connect() as connection:
        row = connection.execute(
            text(
                "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted "
                "FROM pg_stat_database WHERE datname = current_database()"
            )
        ).one()
    engine.dispose()
    return int(row[0]), int(row[1])


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    if not after:
        return float("nan")
    counts = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    total = counts[-1][1]
    if total <= 0:
        return float("nan")
    return next(le for le, n in counts if n >= q * total)


def read_trace(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def count_events(trace: list[dict[str, Any]], start: float, end: float) -> int:
    """The epoch reports and fold ends between ``start`` and ``end``."""
    return sum(line["event"] in ("epoch", "ended") and start <= line["t"] <= end for line in trace)


def measure(
    trace: list[dict[str, Any]], probe: Probe, start: float, end: float, slots: int
) -> dict[str, Any]:
    """The window's figures from the simulator's trace and what the probes saw."""
    trained = 0.0
    placed: dict[str, float] = {}
    ended: dict[str, list[float]] = defaultdict(list)
    lags = []
    for line in trace:
        t, key = line["t"], line["trial"]
        if line["event"] == "epoch":
            trained += max(0.0, min(t, end) - max(t - line["seconds"], start))
            stored = probe.stored.get((key, line["fold"], line["attempt"], line["epoch"]))
            if stored is not None and start <= t <= end:
                lags.append(stored - t)
        elif line["event"] == "placed":
            placed[key] = min(placed.get(key, t), t)
        elif line["event"] == "ended":
            ended[key].append(t)
    done = {k: max(v) for k, v in ended.items() if len(v) >= FOLDS}
    refills, finished_at = [], defaultdict(list)
    by_study: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key in placed:
        study, number = key.split("-trial")
        by_study[study].append((int(number), key))
    for study, trials in by_study.items():
        trials.sort()
        ends = sorted(done[k] for _, k in trials if k in done)
        finished_at[int(study.removeprefix("study"))] = ends
        for number, key in trials:
            if number >= GROUPS and number - GROUPS < len(ends):
                freed = ends[number - GROUPS]
                if start <= freed <= end:
                    refills.append(max(0.0, placed[key] - freed))
    ages, latencies = [], []
    for asked, study, finished, latency in probe.answers:
        if not start <= asked <= end:
            continue
        latencies.append(latency)
        ends = finished_at.get(study, [])
        missing = ends[finished] if finished < len(ends) else None
        ages.append(max(0.0, asked - missing) if missing is not None else 0.0)
    return {
        "utilisation": trained / (slots * (end - start)),
        "refill": (quantile(refills, 0.5), quantile(refills, 0.99)),
        "lag": (quantile(lags, 0.5), quantile(lags, 0.99)),
        "events": count_events(trace, start, end),
        "get": (quantile(latencies, 0.99), quantile(ages, 0.99)),
    }


def run_cell(cell: Cell, root: Path, seconds: float) -> dict[str, Any]:
    low, high = EPOCHS[cell.epochs]
    warmup = EPOCHS_PER_RUN * high * 1.5 + 5
    quiet = seconds / 2
    turns = (warmup + seconds + quiet + 30) / (EPOCHS_PER_RUN * low)
    budget = int(GROUPS * turns * 1.5) + 20
    with (
        tempfile.TemporaryDirectory() as scratch,
        backend_database(cell.backend, Path(scratch)) as url,
    ):
        folder = Path(scratch)
        trace = folder / "trace.jsonl"
        env = cluster_env(cell.slots, (low, high), trace)
        service = LiveService(url, folder / "service.log", root=root, env=env, admin_token=False)
        service.start()
        probe = Probe()
        try:
            with httpx.Client(base_url=service.url, timeout=60) as client:
                studies = [
                    client.post("/studies", json=study_document(cell, budget)).json()["id"]
                    for _ in range(max(1, cell.slots // (GROUPS * FOLDS)))
                ]
            poller = threading.Thread(target=poll_database, args=(url, probe), daemon=True)
            poller.start()
            api = threading.Thread(
                target=asyncio.run, args=(poll_api(service.url, studies, probe),), daemon=True
            )
            api.start()
            time.sleep(warmup)
            process = psutil.Process(service.process.pid)
            cpu0, scraped0, pg0 = sum(process.cpu_times()[:2]), scrape(service.url), pg_stats(url)
            start = time.time()
            time.sleep(seconds)
            end = time.time()
            cpu1, scraped1, pg1 = sum(process.cpu_times()[:2]), scrape(service.url), pg_stats(url)
            probe.readers_stop.set()  # then a quiet window: the write path's CPU alone
            time.sleep(2)
            quiet_cpu0, quiet_start = sum(process.cpu_times()[:2]), time.time()
            time.sleep(quiet)
            quiet_cpu1, quiet_end = sum(process.cpu_times()[:2]), time.time()
            time.sleep(3)  # the window's last reports reach the database
        finally:
            probe.stop.set()
            service.stop()
        lines = read_trace(trace)
        figures = measure(lines, probe, start, end, cell.slots)
        window = end - start
        figures["cpu"] = (cpu1 - cpu0) / window
        figures["cpu_per_event_ms"] = 1000 * (cpu1 - cpu0) / max(figures["events"], 1)
        quiet_events = count_events(lines, quiet_start, quiet_end)
        figures["quiet_cpu_per_event_ms"] = 1000 * (quiet_cpu1 - quiet_cpu0) / max(quiet_events, 1)
        commits = None
        if scraped0["commits"] is not None and scraped1["commits"] is not None:
            commits = (scraped1["commits"] - scraped0["commits"]) / window
        elif pg0 is not None and pg1 is not None:
            commits = (pg1[0] - pg0[0]) / window
        figures["commits"] = commits
        figures["rows"] = None if pg0 is None or pg1 is None else (pg1[1] - pg0[1]) / window
        figures["loop_lag"] = bucket_quantile(scraped0["lag"], scraped1["lag"], 0.99)
        return figures


def run_burst(backend: str, folds: int, slots: int, root: Path) -> dict[str, Any]:
    """``folds`` one-second folds on ``slots`` slots: wall time against the ideal."""
    cell = Cell(backend, slots, "1", "off")
    studies = max(1, slots // (GROUPS * FOLDS))
    budget = folds // (studies * FOLDS)
    with tempfile.TemporaryDirectory() as scratch, backend_database(backend, Path(scratch)) as url:
        folder = Path(scratch)
        trace = folder / "trace.jsonl"
        env = cluster_env(slots, (1.0, 1.0), trace)
        service = LiveService(url, folder / "service.log", root=root, env=env, admin_token=False)
        service.start()
        try:
            with httpx.Client(base_url=service.url, timeout=60) as client:
                ids = [
                    client.post("/studies", json=study_document(cell, budget, 1)).json()["id"]
                    for _ in range(studies)
                ]
                while True:
                    states = [client.get(f"/studies/{i}").json()["status"] for i in ids]
                    if all(s in ("completed", "failed", "stopped") for s in states):
                        break
                    time.sleep(1)
        finally:
            service.stop()
        lines = read_trace(trace)
    first = min(line["t"] for line in lines if line["event"] == "placed")
    last = max(line["t"] for line in lines if line["event"] == "ended")
    runs = sum(line["event"] == "ended" for line in lines)
    ideal = runs / slots
    return {"runs": runs, "wall": last - first, "ideal": ideal, "ratio": (last - first) / ideal}


def seed_history(url: str, cell: Cell, stored: int, more: int) -> None:
    """A queued study with ``stored`` finished trials already in the database (as a study that
    ran for long has), and room for ``more``."""
    from datetime import UTC, datetime, timedelta

    from foldwise.schemas import TrialStatus
    from foldwise.service.db import studies as study_repo
    from foldwise.service.db.models import TrialRow
    from foldwise.service.db.schema import upgrade_database
    from foldwise.spec import StudySpec

    upgrade_database(url)
    engine = create_engine(url)
    spec = StudySpec.model_validate(study_document(cell, stored + more, epochs=1))
    rng, start = random.Random(0), datetime.now(UTC) - timedelta(days=1)
    with engine.begin() as connection:
        from sqlalchemy.orm import Session

        with Session(bind=connection) as session:
            study_id = study_repo.create_study(session, spec).id
            session.flush()
        rows = [
            {
                "study_id": study_id,
                "number": n,
                "status": TrialStatus.COMPLETED,
                "params": {"x": x},
                "value": x * x + rng.gauss(0, 0.01),
                "std_error": 0.01,
                "value_folds": FOLDS,
                "created_at": start + timedelta(seconds=n),
                "finished_at": start + timedelta(seconds=n + 1),
            }
            for n in range(stored)
            for x in [rng.random()]
        ]
        for chunk in range(0, len(rows), 10_000):
            connection.execute(TrialRow.__table__.insert(), rows[chunk : chunk + 10_000])
    engine.dispose()


def run_history(backend: str, stored: int, root: Path, more: int = 120) -> dict[str, Any]:
    """Refill (a trial's last fold ends -> the next trial's first fold starts: the verdict,
    the suggestion and the fold's start) of a study that has ``stored`` trials behind it."""
    cell = Cell(backend, GROUPS * FOLDS, "1", "off")
    stored = min(stored, MAX_BUDGET - more)  # the largest budget a study may have in all
    with tempfile.TemporaryDirectory() as scratch, backend_database(backend, Path(scratch)) as url:
        folder = Path(scratch)
        seed_history(url, cell, stored, more)
        trace = folder / "trace.jsonl"
        env = cluster_env(GROUPS * FOLDS, (0.5, 0.5), trace)
        service = LiveService(url, folder / "service.log", root=root, env=env, admin_token=False)
        service.start()
        try:
            with httpx.Client(base_url=service.url, timeout=60) as client:
                while client.get("/studies/1").json()["status"] not in ("completed", "failed"):
                    time.sleep(0.5)
        finally:
            service.stop()
        lines = read_trace(trace)
    shifted = [dict(line, trial=_renumber(line["trial"], stored)) for line in lines]
    figures = measure(shifted, Probe(), 0.0, float("inf"), GROUPS * FOLDS)
    trials = len({line["trial"] for line in lines})
    wall = max(line["t"] for line in lines) - min(line["t"] for line in lines)
    return {"refill": figures["refill"], "trials": trials, "stored": stored, "wall": wall}


def _renumber(key: str, stored: int) -> str:
    """A trial key counted from the first trial this run made (``measure`` pairs each new
    trial with the end that freed its group)."""
    study, number = key.split("-trial")
    return f"{study}-trial{int(number) - stored}"


def worktree(rev: str, patch: str | None = None) -> Path:
    """A temporary work tree at ``rev``, with ``patch`` applied (what an older revision needs to
    run on the simulated cluster)."""
    folder = Path(tempfile.mkdtemp(prefix="scale-ref-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), rev], cwd=ROOT, check=True)
    if patch:
        subprocess.run(["git", "apply", str(Path(patch).resolve())], cwd=folder, check=True)
    return folder


def fmt(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    if value is None or value != value:
        return "-"
    return f"{value * scale:.{digits}f}"


def row(name: str, cell: Cell, f: dict[str, Any]) -> str:
    return (
        f"| {name} | {cell.label()} | {fmt(f['utilisation'])} | "
        f"{fmt(f['refill'][0], 1000, 0)} / {fmt(f['refill'][1], 1000, 0)} | "
        f"{fmt(f['lag'][0], 1000, 0)} / {fmt(f['lag'][1], 1000, 0)} | {fmt(f['cpu'])} | "
        f"{fmt(f['cpu_per_event_ms'])} / {fmt(f['quiet_cpu_per_event_ms'])} | "
        f"{fmt(f['commits'], digits=0)} | "
        f"{fmt(f['rows'], digits=0)} | {fmt(f['loop_lag'], 1000, 0)} | "
        f"{fmt(f['get'][0], 1000, 0)} | {fmt(f['get'][1], 1000, 0)} |"
    )


HEADER = (
    "| service | backend | slots | epoch s | racing | utilisation | refill p50 / p99 ms | "
    "report lag p50 / p99 ms | CPU cores | CPU ms / fold event, with / without GETs | "
    "commits/s | rows/s | "
    "loop lag p99 ms | GET p99 ms | GET data age p99 ms |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--slots", default="10,100,1000")
    parser.add_argument("--epochs", default="1,5,mixed")
    parser.add_argument("--racing", default="off,on")
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--ref", help="also run the service at this git revision")
    parser.add_argument("--ref-patch", help="a patch applied to --ref (benchmarks/refs/)")
    parser.add_argument("--burst", type=int, default=0, help="N one-second folds instead")
    parser.add_argument("--burst-slots", type=int, default=100)
    parser.add_argument(
        "--history", default="", help="stored trials, e.g. 1000,100000: refill against them"
    )
    args = parser.parse_args()
    services = [("now", ROOT)]
    if args.ref:
        services.append((args.ref, worktree(args.ref, args.ref_patch)))
    try:
        run_tables(args, services)
    finally:
        for _name, root in services[1:]:  # the work tree and its linked imports go
            subprocess.run(["git", "worktree", "remove", "--force", str(root)], cwd=ROOT)
            shutil.rmtree(root.parent / f"{root.name}-imports", ignore_errors=True)


def run_tables(args: argparse.Namespace, services: list[tuple[str, Path]]) -> None:
    """Print the table the arguments ask for, for each service."""
    backends = args.backends.split(",")
    if args.history:
        print(
            "| service | backend | trials stored | trials run | wall s | refill p50 ms "
            "| refill p99 ms |"
        )
        print("|---|---|---|---|---|---|---|")
        for backend in backends:
            for stored in map(int, args.history.split(",")):
                for name, root in services:
                    f = run_history(backend, stored, root)
                    print(
                        f"| {name} | {backend} | {f['stored']} | {f['trials']} | "
                        f"{f['wall']:.1f} | "
                        f"{fmt(f['refill'][0], 1000, 0)} | {fmt(f['refill'][1], 1000, 0)} |",
                        flush=True,
                    )
        return
    if args.burst:
        print("| service | backend | slots | fold runs | wall s | ideal s | wall / ideal |")
        print("|---|---|---|---|---|---|---|")
        for backend in backends:
            for name, root in services:
                f = run_burst(backend, args.burst, args.burst_slots, root)
                print(
                    f"| {name} | {backend} | {args.burst_slots} | {f['runs']} | "
                    f"{f['wall']:.1f} | {f['ideal']:.1f} | {f['ratio']:.3f} |",
                    flush=True,
                )
        return
    print(HEADER, flush=True)
    for backend in backends:
        for slots in map(int, args.slots.split(",")):
            for epochs in args.epochs.split(","):
                for racing in args.racing.split(","):
                    cell = Cell(backend, slots, epochs, racing)
                    for name, root in services:
                        print(row(name, cell, run_cell(cell, root, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
