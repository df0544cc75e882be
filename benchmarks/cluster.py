"""One local Ray against a multi-node Ray cluster on loopback, in one run, same study.

The cluster is a head with no CPUs and two worker nodes of 2 CPUs each (``tests.ray_cluster``);
the local Ray has the same 4 CPUs. Both services run the same study in turn (local, cluster,
local, ...), so the machine's noise falls on both alike. Per fold run, overhead is its wall time
(started to finished, as the API stores them) minus the time inside training epochs; study wall
time runs from the first fold run's start to the last one's end. With ``--node-loss N`` it then
kills, N times, every process of the node running a fold and times how long until that fold
trains again elsewhere (from its checkpoint).

Run: ``.venv/bin/python -m benchmarks.cluster [--reps 5] [--folds 4] [--node-loss 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.live_service import LiveService
from tests.ray_cluster import LoopbackCluster

POLL_S = 0.25


def study_document(name: str, args: argparse.Namespace, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "space": {
            "lr": {"type": "float", "low": 1e-3, "high": 0.3, "log": True},
            "width_1": {"type": "int", "low": 16, "high": 128, "log": True},
        },
        "optimizer": {"name": "random", "seed": 5},
        "budget": {"trials": args.trials},
        "parallel": {"trial_groups": 1, "folds": args.folds, "workers_per_fold": 2},
        "resources": {"cpus_per_worker": 1},
        "trainer": {"task": "digits_mlp", "epochs": args.epochs, "batch_size": 64},
        "racing": {"rule": "off"},
    }
    spec.update(overrides)
    return spec


def _time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _runs(http: httpx.Client, study_id: int) -> list[dict[str, Any]]:
    runs = []
    trials = http.get(f"/studies/{study_id}/trials", params={"limit": 500}).json()["data"]
    for trial in trials:
        runs += http.get(f"/studies/{study_id}/trials/{trial['number']}").json()["folds"]
    return runs


def _wait_end(http: httpx.Client, study_id: int, timeout: float = 900) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        study = http.get(f"/studies/{study_id}").json()
        if study["status"] in ("completed", "failed", "stopped"):
            return study
        time.sleep(POLL_S)
    raise TimeoutError(f"study {study_id} did not end in {timeout} s")


def run_study(service: LiveService, spec: dict[str, Any]) -> dict[str, float]:
    """Run one study to its end; its wall time, fold count and per-fold overheads."""
    with service.http() as http:
        study_id = http.post("/studies", json=spec).json()["id"]
        study = _wait_end(http, study_id)
        if study["status"] != "completed":
            raise RuntimeError(f"study {study_id} {study['status']}: {study['error']}")
        runs = [r for r in _runs(http, study_id) if r["status"] == "completed"]
    starts = [_time(r["started_at"]) for r in runs]
    ends = [_time(r["finished_at"]) for r in runs]
    overheads = [
        e - s - (r["train_seconds"] or 0.0) for r, s, e in zip(runs, starts, ends, strict=True)
    ]
    return {
        "wall": max(ends) - min(starts),
        "folds": len(runs),
        "overhead_median": statistics.median(overheads),
        "overhead_mean": statistics.fmean(overheads),
        "train": statistics.fmean(r["train_seconds"] or 0.0 for r in runs),
    }


def node_loss(cluster: LoopbackCluster, service: LiveService, args: argparse.Namespace, n: int):
    """Kill the node of a running fold (after its second epoch); seconds until that fold trains
    again on another node, and whether it resumed from its checkpoint."""
    cluster.add_worker(chr(ord("c") + n))  # room for the retry once a node is gone
    names = {node_id: name for name, node_id in cluster.node_ids().items()}
    spec = study_document(
        f"node-loss-{n}",
        args,
        budget={"trials": 1},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 2},
        trainer={
            "task": "digits_mlp",
            "epochs": 12,
            "batch_size": 16,
            "checkpoint_every": 1,
            "retries": 2,
        },
    )
    with service.http() as http:
        study_id = http.post("/studies", json=spec).json()["id"]
        victim = None
        while victim is None:
            runs = [r for r in _runs(http, study_id) if r["placement"] and len(r["epochs"]) >= 2]
            victim = runs[0] if runs else None
            time.sleep(POLL_S)
        lost = names[victim["placement"][0]["node_id"]]
        killed = time.monotonic()
        cluster.worker(lost).kill()
        while True:
            retry = [
                r
                for r in _runs(http, study_id)
                if r["fold"] == victim["fold"] and r["attempt"] > victim["attempt"]
            ]
            new = [r for r in retry if any(not e["restored"] for e in r["epochs"])]
            if new:
                break
            time.sleep(POLL_S)
        recovery = time.monotonic() - killed
        restored = sum(1 for e in new[0]["epochs"] if e["restored"])
        study = _wait_end(http, study_id)
    print(f"  node loss {n + 1}: {lost} lost, trained again in {recovery:.1f} s", file=sys.stderr)
    return recovery, restored, study["status"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="studies per setting (2 or more)")
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--folds", type=int, default=4, help="folds per trial, all at once")
    parser.add_argument("--node-loss", type=int, default=5, help="nodes to lose, one at a time")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="foldwise-cluster-bench-"))
    cluster = LoopbackCluster(root / "ray", workers=2, cpus=2)
    started = time.perf_counter()
    cluster.start()
    print(f"cluster up in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    services = {
        "local Ray (4 CPUs)": LiveService(
            f"sqlite:///{root / 'local.db'}", root / "local.log", ray_num_cpus=4
        ),
        "cluster (2 nodes x 2 CPUs)": LiveService(
            f"sqlite:///{root / 'cluster.db'}",
            root / "cluster.log",
            env={**cluster.env, "FOLDWISE_RAY_ADDRESS": cluster.address},
        ),
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in services}
    try:
        for service in services.values():
            service.start()
        for rep in range(args.reps):
            for name, service in services.items():
                results[name].append(run_study(service, study_document(f"rep{rep}", args)))
                print(f"  {name}, rep {rep + 1}: done", file=sys.stderr)
        losses = [
            node_loss(cluster, services["cluster (2 nodes x 2 CPUs)"], args, n)
            for n in range(args.node_loss)
        ]
    finally:
        for service in services.values():
            service.stop()
        cluster.stop()
    print_tables(results, losses, args)


def print_tables(results, losses, args) -> None:
    """The first study of each is cold (new worker actors); the others reuse warm ones."""
    local = results["local Ray (4 CPUs)"]
    print(
        f"\nSame study on each ({args.trials} trials x {args.folds} folds, 2 DDP ranks per fold, "
        f"digits_mlp, {args.epochs} epochs), {args.reps} runs each, alternating; the first run "
        "starts cold (new worker actors), the others reuse warm ones\n"
    )
    print(
        "| Ray | first study wall s | warm study wall s | vs local | overhead per fold run, "
        "warm median s | cold mean s | training per fold run s |"
    )
    print("|---|---|---|---|---|---|---|")
    base = statistics.fmean(r["wall"] for r in local[1:])
    for name, runs in results.items():
        warm = [r["wall"] for r in runs[1:]]
        print(
            f"| {name} | {runs[0]['wall']:.1f} "
            f"| {statistics.fmean(warm):.1f} ± {statistics.pstdev(warm):.1f} "
            f"| {statistics.fmean(warm) / base:.2f}x "
            f"| {statistics.median(r['overhead_median'] for r in runs[1:]):.2f} "
            f"| {runs[0]['overhead_mean']:.2f} "
            f"| {statistics.fmean(r['train'] for r in runs):.2f} |"
        )
    if losses:
        times = [t for t, _, _ in losses]
        print(
            f"\nNode loss ({len(losses)} times): the fold trained again on another node after "
            f"{statistics.median(times):.1f} s median "
            f"(min {min(times):.1f}, max {max(times):.1f}); "
            f"epochs restored from the checkpoint: {[r for _, r, _ in losses]}; "
            f"studies: {[s for _, _, s in losses]}"
        )


if __name__ == "__main__":
    main()
