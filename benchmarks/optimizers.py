"""Search quality and speed of foldwise's optimizers next to random, skopt, Optuna, Ax and HEBO.

Prints markdown tables: mean final regret ± standard error over seeds, mean rank, foldwise's
first method against the best peer on each problem (paired over seeds, and its mean and median
against that peer's spread), trials in flight
against one at a time, seconds per suggestion; suggestion time against the number of
observations with trials pending; and the fold-noise check (the GP told each trial's fold
standard error, against the same GP told that means are exact). Every run is stored in
``benchmarks/results/optimizers.jsonl`` and reused while its version holds
(:mod:`benchmarks.optimizer_results`), so a change to the GP reruns only the GP. Peers come from
``benchmarks/requirements-peers.txt``, never from the package:

    make bench-peers                                          # installs the peers
    .venv/bin/python benchmarks/optimizers.py --seeds 20      # everything missing, hours
    .venv/bin/python benchmarks/optimizers.py --quick         # a smoke run, about 2 min
    .venv/bin/python benchmarks/optimizers.py --report-only   # tables from stored runs
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import TypeAdapter
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import tabular_nas  # noqa: E402
from benchmarks.optimizer_peers import PEERS, peer_version, run_peer, skopt_dimensions  # noqa: E402
from benchmarks.optimizer_results import (  # noqa: E402
    ResultStore,
    Run,
    add_code_argument,
    check_code_argument,
    code_note,
    code_version,
)
from benchmarks.optimizer_tables import print_quality  # noqa: E402
from benchmarks.problems import Problem, box, branin, hartmann6, synthetic_problems  # noqa: E402
from foldwise.optimizers import Observation, create_optimizer  # noqa: E402
from foldwise.space import Param  # noqa: E402

OURS = ("gp", "evolution", "nas_evolution", "random")
PENDING = 4
"""Trials pending while suggestion time is measured, as with ``trial_groups: 4``."""


def problems(epochs: int) -> dict[str, Problem]:
    """The whole suite: the synthetic problems, then the 5-fold digits MLP."""
    digits = {
        "lr": {"type": "float", "low": 1e-3, "high": 0.3, "log": True},
        "width": {"type": "int", "low": 16, "high": 256, "log": True},
        "depth": {"type": "int", "low": 1, "high": 3},
        "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
        "dropout": {"type": "float", "low": 0.0, "high": 0.5},
    }
    return {
        **synthetic_problems(),
        "digits_mlp": Problem("digits_mlp", digits, DigitsCV(epochs), 20, None),
        **nas_problems(),
    }


def nas_problems() -> dict[str, Problem]:
    """Tabular NAS-Bench-201 on its three data sets, 100 evaluations (benchmarks/tabular_nas)."""
    return {
        f"nb201_{name}": Problem(
            f"nb201_{name}",
            tabular_nas.space(),
            tabular_nas.NASBench201(name),
            100,
            optimum,
            tabular_nas.argmin(name),
        )
        for name, optimum in tabular_nas.OPTIMA.items()
    }


class DigitsCV:
    """5-fold CV validation loss of the built-in digits MLP, trained in-process on one thread."""

    def __init__(self, epochs: int) -> None:
        self.epochs, self.data = epochs, None

    def __call__(self, config: dict[str, Any]) -> float:
        from foldwise.spec import TrainerSpec
        from foldwise.trainers.ddp import free_port
        from foldwise.trainers.fold_data import load_task_data
        from foldwise.trainers.fold_runner import run_fold
        from foldwise.trainers.job import FoldJob
        from foldwise.trainers.objective import fold_value
        from foldwise.trainers.report import EpochReport
        from foldwise.trainers.task import resolve_task

        self.data = self.data or load_task_data(resolve_task("digits_mlp"), {})
        values = []
        for fold in range(5):
            job = FoldJob(
                trainer=TrainerSpec(task="digits_mlp", epochs=self.epochs), params=config,
                fold=fold, folds=5, world_size=1, monitor=False,
            )  # fmt: skip
            events = run_fold(
                job, rank=0, master_addr="127.0.0.1", master_port=free_port(),
                num_threads=1, data=self.data,
            )  # fmt: skip
            epochs = [e.metrics for e in events if isinstance(e, EpochReport)]
            values.append(fold_value(epochs, "val_loss", "minimize"))
        return float(np.mean(values))


def parse_space(raw: dict[str, dict[str, Any]]) -> dict[str, Param]:
    return TypeAdapter(dict[str, Param]).validate_python(raw)


def run_ours(method: str, problem: Problem, seed: int) -> tuple[list[float], float]:
    """Values in evaluation order, and mean seconds per suggestion.

    ``gp@4`` keeps 4 trials in flight, as a study with ``trial_groups: 4``: the first 4 are one
    batch, then whenever one of them finishes (a random one, seeded) the optimizer suggests
    the next with the other 3 pending. Without ``@`` one trial runs at a time.
    """
    base, in_flight = split_flight(method)
    space = parse_space(problem.space)
    name, options = method_options(base)
    optimizer = create_optimizer(name, space, seed=seed, budget=problem.budget, options=options)
    finish_order = np.random.default_rng(10_000 + seed)
    history: list[Observation] = []
    pending: list[dict[str, Any]] = []
    spent, suggestions = 0.0, 0
    while len(history) < problem.budget:
        wanted = min(in_flight - len(pending), problem.budget - len(history) - len(pending))
        if wanted > 0:
            start = time.perf_counter()
            optimizer.update(history, pending)
            pending += optimizer.suggest(wanted)
            spent += time.perf_counter() - start
            suggestions += 1
        config = pending.pop(int(finish_order.integers(len(pending))))
        # told no standard error, as no peer is told whether the problem is noisy
        history.append(Observation(config, problem.objective(config)))
    return [o.value for o in history], spent / suggestions


def split_flight(method: str) -> tuple[str, int]:
    """``gp:xi=0@4`` → ("gp:xi=0", 4): the method and how many trials it keeps in flight."""
    base, _, flight = method.partition("@")
    return base, int(flight or 1)


def method_options(method: str) -> tuple[str, dict[str, Any]]:
    """``gp:n_initial=6:xi=0`` → ("gp", {"n_initial": 6, "xi": 0}), options as in a study spec."""
    name, *items = method.split(":")
    options: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)  # numbers, true/false, lists
        except json.JSONDecodeError:
            options[key] = value  # a bare word: a string
    return name, options


def run_method(method: str, problem: Problem, seed: int) -> tuple[list[float], float]:
    """One run of a method, foldwise's or a peer's, on ``problem`` with ``seed``."""
    peer, in_flight = split_flight(method)
    if peer not in PEERS:
        return run_ours(method, problem, seed)
    values: list[float] = []
    timed = [0.0]

    def objective(config: dict[str, Any]) -> float:
        start = time.perf_counter()
        values.append(problem.objective(config))
        timed[0] += time.perf_counter() - start
        return values[-1]

    start = time.perf_counter()
    run_peer(peer, problem.space, objective, problem.budget, seed, in_flight)
    return values, (time.perf_counter() - start - timed[0]) / problem.budget


def version_of(method: str, problem: Problem, code: str | None = None) -> str:
    """What a stored run must match: the peer's library or foldwise's optimizer code (``code``,
    an earlier version named by ``--code``, or the current one), and the digits MLP's
    epochs."""
    peer, _ = split_flight(method)
    # foldwise's runs since their observations carry no standard error ("se=none")
    version = peer_version(peer) if peer in PEERS else f"{code or code_version()}|se=none"
    epochs = getattr(problem.objective, "epochs", None)
    return version if epochs is None else f"{version}|epochs={epochs}"


def quality(
    methods: list[str],
    chosen: list[Problem],
    seeds: int,
    store: ResultStore,
    *,
    run: bool,
    code: str | None = None,
) -> dict[str, dict[str, dict[int, Run]]]:
    """runs[problem][method][seed], from the store, running (and storing) what is missing;
    foldwise's of the optimizer code ``code`` when named (nothing is run then)."""
    runs: dict[str, dict[str, dict[int, Run]]] = {}
    for problem in chosen:
        runs[problem.name] = {}
        for method in methods:
            version, found = version_of(method, problem, code), {}
            for seed in range(seeds):
                stored = store.get(problem.name, method, seed, version)
                if stored is None and run:
                    values, seconds = run_method(method, problem, seed)
                    stored = Run(problem.name, method, seed, version, values, seconds)
                    store.add(stored)
                    log(f"{problem.name:16s} {method:18s} seed {seed:2d} best {min(values):.5f}")
                if stored is not None:
                    found[seed] = stored
            runs[problem.name][method] = found
    return runs


def timing(
    points: list[int], repeats: int, pending: int = PENDING, methods: str | None = None
) -> None:
    """Median seconds of one suggestion on Hartmann6 with n random completed observations and
    ``pending`` running trials."""
    space = box([f"x{i}" for i in range(6)], 0.0, 1.0)
    rng = np.random.default_rng(0)
    X = rng.random((max(points) + pending, 6))
    y = np.array([hartmann6(x) for x in X])
    timers = {"gp": time_ours, "skopt.Optimizer": time_skopt, "optuna_gp": time_optuna}
    if methods:
        timers = {name: timers[name] for name in methods.split(",")}
    print(
        f"\n### Seconds per suggestion against observations, {pending} pending "
        "(Hartmann6, median)\n"
    )
    print("| optimizer | " + " | ".join(map(str, points)) + " |")
    print("|---" * (len(points) + 1) + "|")
    for name, timer in timers.items():
        cells = []
        for n in points:
            runs = 1 if name == "skopt.Optimizer" and n > 100 else repeats
            done, running = slice(0, n), slice(n, n + pending)
            times = (timer(space, X[done], y[done], X[running]) for _ in range(runs))
            cells.append(statistics.median(times))
        print(f"| {name} | " + " | ".join(f"{c:.3g}" for c in cells) + " |")


def time_ours(space: dict, X: np.ndarray, y: np.ndarray, running: np.ndarray) -> float:
    optimizer = create_optimizer("gp", parse_space(space), seed=0)
    configs = [dict(zip(space, map(float, x), strict=True)) for x in [*X, *running]]
    history = [Observation(c, v, 0.0) for c, v in zip(configs, y, strict=False)]
    start = time.perf_counter()
    optimizer.update(history, configs[len(history) :])
    optimizer.suggest(1)
    return time.perf_counter() - start


def time_skopt(space: dict, X: np.ndarray, y: np.ndarray, running: np.ndarray) -> float:
    """skopt's ``Optimizer`` has no pending points in ``ask(1)``: it is timed without them."""
    from skopt import Optimizer

    optimizer = Optimizer(skopt_dimensions(space), random_state=0)
    start = time.perf_counter()  # tell fits the model and picks the next point; ask returns it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimizer.tell(X.tolist(), y.tolist())
        optimizer.ask()
    return time.perf_counter() - start


def time_optuna(space: dict, X: np.ndarray, y: np.ndarray, running: np.ndarray) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=0))
    dists = {n: optuna.distributions.FloatDistribution(0.0, 1.0) for n in space}
    for x, v in zip(X, y, strict=False):
        study.add_trial(
            optuna.trial.create_trial(
                params=dict(zip(space, x, strict=False)), distributions=dists, value=v
            )
        )
    for x in running:
        params = dict(zip(space, x, strict=True))
        study.add_trial(
            optuna.trial.create_trial(
                params=params, distributions=dists, state=optuna.trial.TrialState.RUNNING
            )
        )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.ask(dists)
    return time.perf_counter() - start


def noisy_study(seed: int, budget: int, *, told: bool) -> tuple[float, float]:
    """A GP study on Branin whose 5 fold values carry noise: sd 0.5, but 30% of trials are
    unstable (fold sd 20, as when some folds diverge), so their means are far off.

    Returns the true regret of the trial with the best observed mean (what a study reports)
    and of the truly best trial evaluated (how well the search went). ``told``: the GP gets
    each trial's fold standard error; otherwise ``std_error=None`` (means treated as exact).
    """
    problem = problems(1)["branin"]
    optimizer = create_optimizer("gp", parse_space(problem.space), seed=seed, budget=budget)
    rng = np.random.default_rng(1000 + seed)
    history: list[Observation] = []
    truth: list[float] = []
    for _ in range(budget):
        optimizer.update(history, [])
        (config,) = optimizer.suggest(1)
        truth.append(branin(config))
        folds = truth[-1] + rng.normal(0.0, 20.0 if rng.random() < 0.3 else 0.5, size=5)
        se = float(folds.std(ddof=1) / math.sqrt(5))
        history.append(Observation(config, float(folds.mean()), se if told else None))
    reported = int(np.argmin([o.value for o in history]))
    return truth[reported] - problem.optimum, min(truth) - problem.optimum


def print_fold_noise(seeds: int, budget: int) -> None:
    print(f"\n### Fold noise: Branin with unstable trials ({budget} trials, {seeds} seeds)\n")
    print("| GP told | true regret of the reported best | true regret of the truly best |")
    print("|---|---|---|")
    for told, label in ((True, "fold standard errors"), (False, "means as exact")):
        runs = np.array([noisy_study(seed, budget, told=told) for seed in range(seeds)])
        cells = [f"{c.mean():.3f} ± {c.std(ddof=1) / math.sqrt(seeds):.3f}" for c in runs.T]
        print(f"| {label} | " + " | ".join(cells) + " |")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0 .. N-1")
    suite = ",".join([*synthetic_problems(), "digits_mlp", *nas_problems()])
    parser.add_argument("--problems", default=suite, help=f"comma-separated, from {suite}")
    default_methods = ",".join(("gp", "gp@4", "evolution", "nas_evolution", "random", *PEERS))
    parser.add_argument(
        "--methods",
        default=default_methods,
        help="comma-separated; foldwise's may carry options (gp:xi=0); foldwise's and ax may "
        "keep trials in flight (gp@4, ax@4)",
    )
    parser.add_argument("--epochs", type=int, default=2, help="digits MLP epochs per fold")
    parser.add_argument(
        "--budget", type=int, default=None, help="evaluations per run instead of each problem's"
    )
    parser.add_argument("--timing-points", default="10,50,100,200,400", help="'': skip timing")
    parser.add_argument(
        "--timing-pending", type=int, default=PENDING, help="trials pending while timed"
    )
    parser.add_argument(
        "--timing-methods", default=None, help="of gp,skopt.Optimizer,optuna_gp (all)"
    )
    parser.add_argument("--noise-seeds", type=int, default=20, help="0: skip the noise check")
    parser.add_argument("--results", type=Path, default=None, help="stored runs (JSON lines)")
    parser.add_argument("--report-only", action="store_true", help="run nothing, print tables")
    parser.add_argument("--quick", action="store_true", help="2 seeds, no digits, short timing")
    add_code_argument(parser)
    args = parser.parse_args()
    check_code_argument(parser, args)
    if args.quick:
        args.seeds, args.noise_seeds, args.epochs = 2, 2, 1
        args.problems, args.timing_points = "branin,hartmann6_mixed", "10,50,100"
        args.methods = "gp,gp@4,random,optuna_gp"
    every = problems(args.epochs)
    chosen = [every[name] for name in args.problems.split(",") if name]
    if args.budget:  # stored apart from the usual budget's runs: "hartmann6:100"
        chosen = [replace(p, name=f"{p.name}:{args.budget}", budget=args.budget) for p in chosen]
    methods = [m for m in args.methods.split(",") if m]
    store = ResultStore(args.results) if args.results else ResultStore()
    print(f"command: {' '.join(sys.argv)}")
    if args.code is not None:
        print(code_note(args.code))
    with threadpool_limits(limits=1):  # one core per run, as on a shared 2-core host
        if chosen:
            runs = quality(
                methods, chosen, args.seeds, store, run=not args.report_only, code=args.code
            )
            print_quality(runs, chosen, methods, PEERS)
        if args.report_only:
            return
        if args.noise_seeds >= 2:
            print_fold_noise(args.noise_seeds, 30)
        if args.timing_points:
            timing(
                [int(n) for n in args.timing_points.split(",")],
                3,
                args.timing_pending,
                args.timing_methods,
            )


if __name__ == "__main__":
    main()
