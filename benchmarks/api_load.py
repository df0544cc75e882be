"""The API under a team's polling load: 100 concurrent clients against a real service.

Starts `foldwise serve` (a local Ray, SQLite or PostgreSQL) with a small study running, then
drives `--clients` concurrent pollers for `--seconds`: each client takes one of the endpoints a
poller reads (the study, its trial list, the dashboard study page, the page's live curves), asks
for it, waits `--interval` seconds after the answer (the dashboard and `Study.wait` poll every
2 s) and asks again. The clients start together, as pollers do when a team's dashboards reconnect
or scripts start on the same schedule, so `--clients` requests arrive at once, again and again.
`--interval 0` is a closed loop: every client asks again as soon as it has an answer, which
measures capacity (and starves everything else on the machine) rather than a team's load.

Prints, per endpoint, requests, throughput, p50/p99/max latency and errors (time-outs after
`--timeout` s, connection errors and every status >= 400), the log lines a healthy service never
prints under load (`QueuePool limit`, `database is locked`, tracebacks), and the study's progress
in the quiet window before the load and under it (trials finished per minute).

`--ref REV` also runs the same load against the service as it was at git revision REV (checked out
into a temporary work tree), in the same run, so before and after are compared on equal terms:

    .venv/bin/python -m benchmarks.api_load --backends sqlite,postgresql --ref c5b19a4
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx

from tests.live_service import ROOT, LiveService, backend_database

LOG_ALARMS = ("QueuePool limit", "database is locked", "Traceback (most recent call last)")
LOAD_SPEC = {
    "name": "api-load",
    "objective": {"metric": "val_loss", "direction": "minimize"},
    "space": {
        "lr": {"type": "float", "low": 1e-3, "high": 0.1, "log": True},
        "width": {"type": "int", "low": 16, "high": 64},
        "act": {"type": "categorical", "choices": ["relu", "tanh"]},
    },
    "optimizer": {"name": "random", "seed": 0},
    "budget": {"trials": 10_000},
    "parallel": {"trial_groups": 2, "folds": 3, "workers_per_fold": 1},
    "resources": {"cpus_per_worker": 0.5},
    "trainer": {"task": "digits_mlp", "epochs": 4, "batch_size": 64},
}


@dataclass
class EndpointStats:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    not_modified: int = 0

    @property
    def requests(self) -> int:
        return len(self.latencies) + sum(self.errors.values())


@dataclass
class LoadResult:
    label: str
    seconds: float
    endpoints: dict[str, EndpointStats]
    alarms: dict[str, int]
    trials_per_minute_quiet: float
    trials_per_minute_loaded: float | None


def endpoints(study_id: int) -> dict[str, str]:
    """What a team's pollers read: the study, its trials, the dashboard page and its curves."""
    return {
        "study": f"/studies/{study_id}",
        "trials": f"/studies/{study_id}/trials?limit=100",
        "dashboard": f"/dashboard/studies/{study_id}",
        "curves": f"/studies/{study_id}/insights/curves",
    }


async def poll(
    session: aiohttp.ClientSession,
    url: str,
    stats: EndpointStats,
    *,
    until: float,
    interval: float,
    conditional: bool,
) -> None:
    """One client: ask, wait `interval` after the answer, ask again, until `until`."""
    etag: str | None = None
    while time.monotonic() < until:
        headers = {"If-None-Match": etag} if conditional and etag else {}
        started = time.perf_counter()
        try:
            async with session.get(url, headers=headers) as response:
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            stats.errors[type(exc).__name__] += 1
        else:
            if response.status >= 400:
                stats.errors[f"HTTP {response.status}"] += 1
            else:
                stats.latencies.append(time.perf_counter() - started)
                stats.not_modified += response.status == 304
                etag = response.headers.get("etag", etag)
        if interval:
            await asyncio.sleep(interval)


async def drive(
    url: str,
    paths: dict[str, str],
    *,
    clients: int,
    seconds: float,
    interval: float,
    timeout: float,
    conditional: bool,
    headers: dict[str, str] | None = None,
) -> dict[str, EndpointStats]:
    """`clients` pollers spread evenly over `paths` for `seconds`, each on its own connection.

    aiohttp rather than httpx: its C parser keeps the load generator from being the bottleneck
    on a small machine (httpx took a whole core for 250 requests a second here)."""
    stats = {name: EndpointStats() for name in paths}
    connector = aiohttp.TCPConnector(limit=clients)
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(
        connector=connector, timeout=client_timeout, headers=headers
    ) as session:
        until = time.monotonic() + seconds
        names = list(paths)
        await asyncio.gather(
            *(
                poll(
                    session,
                    url + paths[names[i % len(names)]],
                    stats[names[i % len(names)]],
                    until=until,
                    interval=interval,
                    conditional=conditional,
                )
                for i in range(clients)
            )
        )
    return stats


def finished_trials(client: httpx.Client, study_id: int, patience: float = 60) -> int | None:
    """Trials the study has finished so far: its progress; None when the service does not
    answer for `patience` seconds (a wedged service)."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            return client.get(f"/studies/{study_id}", timeout=10).json()["progress"]["finished"]
    return None


def wait_running(
    client: httpx.Client, study_id: int, trials: int = 3, timeout: float = 180
) -> None:
    """Until the study has finished ``trials`` trials: warm workers, a study in full flight."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (finished_trials(client, study_id) or 0) >= trials:
            return
        time.sleep(0.5)
    raise TimeoutError(f"study {study_id} finished no trial within {timeout} s")


def run_load(args: argparse.Namespace, label: str, root: Path, backend: str) -> LoadResult:
    """Serve `root` on `backend`, start the load study, measure quiet then loaded."""
    with (
        tempfile.TemporaryDirectory(prefix="api-load-") as tmp,
        backend_database(backend, Path(tmp)) as url,
    ):
        service = LiveService(
            url,
            Path(tmp) / "service.log",
            ray_num_cpus=args.ray_cpus,
            root=root,
        ).start()
        try:
            with service.http(timeout=30) as client:
                study_id = client.post("/studies", json=LOAD_SPEC).raise_for_status().json()["id"]
                wait_running(client, study_id, args.warm_trials)
                before = finished_trials(client, study_id) or 0
                time.sleep(args.quiet)
                start_load = finished_trials(client, study_id) or 0
                log_before = service.log(tail=10**9)
                stats = asyncio.run(
                    drive(
                        service.url,
                        endpoints(study_id),
                        clients=args.clients,
                        seconds=args.seconds,
                        interval=args.interval,
                        timeout=args.timeout,
                        conditional=args.conditional,
                        headers=service.headers,
                    )
                )
                after = finished_trials(client, study_id)
                with contextlib.suppress(httpx.HTTPError):
                    client.post(f"/studies/{study_id}/stop", timeout=10)
            log = service.log(tail=10**9)[len(log_before) :]
        finally:
            service.stop()
    seconds = args.seconds
    return LoadResult(
        label=f"{label} {backend}",
        seconds=args.seconds,
        endpoints=stats,
        alarms={alarm: log.count(alarm) for alarm in LOG_ALARMS},
        trials_per_minute_quiet=60 * (start_load - before) / args.quiet,
        trials_per_minute_loaded=None if after is None else 60 * (after - start_load) / seconds,
    )


@contextlib.contextmanager
def checkout(ref: str) -> Iterator[Path]:
    """A temporary work tree of this repository at `ref`."""
    with tempfile.TemporaryDirectory(prefix="foldwise-ref-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), ref],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False
            )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def report(results: list[LoadResult], args: argparse.Namespace) -> None:
    mode = f"every ~{args.interval:g} s" if args.interval else "closed loop"
    print(
        f"\n{args.clients} clients for {args.seconds:g} s, {mode}, time-out {args.timeout:g} s"
        f"{', If-None-Match' if args.conditional else ''}\n"
    )
    print("| service | endpoint | requests | req/s | p50 ms | p99 ms | max ms | 304s | errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for result in results:
        for name, stats in result.endpoints.items():
            lat = sorted(stats.latencies)
            p50 = _ms(statistics.median(lat)) if lat else "-"
            p99 = _ms(lat[min(len(lat) - 1, int(0.99 * len(lat)))]) if lat else "-"
            top = _ms(lat[-1]) if lat else "-"
            errors = ", ".join(f"{k} {v}" for k, v in stats.errors.items()) or "0"
            print(
                f"| {result.label} | {name} | {stats.requests} | "
                f"{stats.requests / result.seconds:.1f} | {p50} | {p99} | {top} | "
                f"{stats.not_modified} | {errors} |"
            )
    print("\n| service | log alarms under load | trials/min quiet | under load |")
    print("|---|---|---:|---:|")
    for result in results:
        alarms = ", ".join(f"{k}: {v}" for k, v in result.alarms.items() if v) or "none"
        loaded = result.trials_per_minute_loaded
        print(
            f"| {result.label} | {alarms} | {result.trials_per_minute_quiet:.1f} | "
            f"{'no answer' if loaded is None else f'{loaded:.1f}'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--interval", type=float, default=1.0, help="0: closed loop")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--quiet", type=float, default=20.0, help="seconds without load first")
    parser.add_argument(
        "--warm-trials", type=int, default=3, help="trials the study finishes before timing"
    )
    parser.add_argument("--ray-cpus", type=float, default=2)
    parser.add_argument("--conditional", action="store_true", help="send If-None-Match")
    parser.add_argument("--ref", help="also measure the service at this git revision")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    results: list[LoadResult] = []
    with contextlib.ExitStack() as stack:
        trees = [("now", ROOT)]
        if args.ref:
            trees.insert(0, (args.ref, stack.enter_context(checkout(args.ref))))
        for backend in backends:
            for label, root in trees:
                results.append(run_load(args, label, root, backend))
    report(results, args)


if __name__ == "__main__":
    main()
