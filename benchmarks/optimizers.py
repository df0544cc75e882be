"""Search quality and speed of foldwise's optimizers next to random, skopt and Optuna.

Prints markdown tables: mean final regret ± standard error over seeds, mean rank, seconds per
suggestion; suggestion time against the number of observations; and the fold-noise check (the
GP told each trial's fold standard error, against the same GP told that means are exact).
Peers come from ``benchmarks/requirements-peers.txt``, never from the package:

    .venv/bin/pip install -r benchmarks/requirements-peers.txt
    .venv/bin/python benchmarks/optimizers.py --seeds 5          # full run, about 30 min
    .venv/bin/python benchmarks/optimizers.py --quick            # a smoke run, about 2 min
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import TypeAdapter
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.problems import (  # noqa: E402
    Objective,
    Problem,
    box,
    branin,
    hartmann6,
    synthetic_problems,
)
from foldwise.space import Param  # noqa: E402
from optimizers import Observation, create_optimizer  # noqa: E402

OURS = ("gp", "evolution", "nas_evolution", "random")
PEERS = ("skopt_gp_minimize", "optuna_tpe", "optuna_gp")


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
    }


class DigitsCV:
    """5-fold CV validation loss of the built-in digits MLP, trained in-process on one thread."""

    def __init__(self, epochs: int) -> None:
        self.epochs, self.data = epochs, None

    def __call__(self, config: dict[str, Any]) -> float:
        from trainers.builtin.digits_mlp import load_data
        from trainers.ddp import free_port
        from trainers.fold_runner import run_fold
        from trainers.job import FoldJob
        from trainers.objective import fold_value

        self.data = self.data or load_data()
        values = []
        for fold in range(5):
            job = FoldJob(
                task="digits_mlp", params=config, fold=fold, folds=5, epochs=self.epochs,
                world_size=1, monitor=False,
            )  # fmt: skip
            epochs = run_fold(
                job, rank=0, master_addr="127.0.0.1", master_port=free_port(),
                num_threads=1, data=self.data,
            )  # fmt: skip
            values.append(fold_value(list(epochs), "val_loss", "minimize"))
        return float(np.mean(values))


def parse_space(raw: dict[str, dict[str, Any]]) -> dict[str, Param]:
    return TypeAdapter(dict[str, Param]).validate_python(raw)


def run_ours(name: str, problem: Problem, seed: int) -> tuple[list[float], float]:
    """Values in evaluation order, and mean seconds per suggestion (one trial at a time)."""
    space = parse_space(problem.space)
    name, options = method_options(name)
    optimizer = create_optimizer(name, space, seed=seed, budget=problem.budget, options=options)
    history: list[Observation] = []
    spent = 0.0
    for _ in range(problem.budget):
        start = time.perf_counter()
        optimizer.update(history, [])
        (config,) = optimizer.suggest(1)
        spent += time.perf_counter() - start
        history.append(Observation(config, problem.objective(config), std_error=0.0))
    return [o.value for o in history], spent / problem.budget


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


def run_peer(name: str, problem: Problem, seed: int) -> tuple[list[float], float]:
    """Same as ``run_ours`` for a peer library; its time excludes the objective's."""
    values: list[float] = []
    timed = [0.0]

    def objective(config: dict[str, Any]) -> float:
        start = time.perf_counter()
        values.append(problem.objective(config))
        timed[0] += time.perf_counter() - start
        return values[-1]

    start = time.perf_counter()
    if name == "skopt_gp_minimize":
        run_skopt(problem, objective, seed)
    else:
        run_optuna(problem, objective, seed, gp=name == "optuna_gp")
    return values, (time.perf_counter() - start - timed[0]) / problem.budget


def skopt_dimensions(space: dict[str, dict[str, Any]]) -> list:
    from skopt.space import Categorical, Integer, Real

    dims = []
    for name, p in space.items():
        prior = "log-uniform" if p.get("log") else "uniform"
        if p["type"] == "categorical":
            dims.append(Categorical(p["choices"], name=name))
        elif p["type"] == "int":
            dims.append(Integer(p["low"], p["high"], prior=prior, name=name))
        else:
            dims.append(Real(p["low"], p["high"], prior=prior, name=name))
    return dims


def run_skopt(problem: Problem, objective: Objective, seed: int) -> None:
    from skopt import gp_minimize

    names = list(problem.space)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gp_minimize(
            lambda x: objective(dict(zip(names, map(plain, x), strict=True))),
            skopt_dimensions(problem.space),
            n_calls=problem.budget,
            random_state=seed,
        )


def plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def optuna_config(trial: Any, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    config = {}
    for name, p in space.items():
        if p["type"] == "categorical":
            config[name] = trial.suggest_categorical(name, p["choices"])
        elif p["type"] == "int":
            config[name] = trial.suggest_int(name, p["low"], p["high"], log=p.get("log", False))
        else:
            config[name] = trial.suggest_float(name, p["low"], p["high"], log=p.get("log", False))
    return config


def run_optuna(problem: Problem, objective: Objective, seed: int, *, gp: bool) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.GPSampler(seed=seed) if gp else optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(sampler=sampler)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature warnings
        study.optimize(lambda t: objective(optuna_config(t, problem.space)), problem.budget)


def quality(methods: list[str], chosen: list[Problem], seeds: int) -> dict:
    """results[problem][method] = (final best values per seed, seconds per suggestion)."""
    results: dict[str, dict[str, tuple[list[float], float]]] = {}
    for problem in chosen:
        results[problem.name] = {}
        for method in methods:
            runner = run_ours if method_options(method)[0] in OURS else run_peer
            bests, times = [], []
            for seed in range(seeds):
                values, per_suggestion = runner(method, problem, seed)
                bests.append(min(values))
                times.append(per_suggestion)
            results[problem.name][method] = (bests, statistics.mean(times))
            per_seed = np.round(bests, 5).tolist()
            log(f"{problem.name:16s} {method:18s} best {np.mean(bests):.5f} per seed {per_seed}")
    return results


def print_quality(results: dict, chosen: list[Problem], methods: list[str], seeds: int) -> None:
    from scipy.stats import rankdata

    names = [p.name for p in chosen]
    regret, ranks, speed = {}, {}, {}
    for problem in chosen:
        table = results[problem.name]
        optimum = problem.optimum
        if optimum is None:
            optimum = min(min(bests) for bests, _ in table.values())
        per_seed = np.array([table[m][0] for m in methods])  # methods × seeds
        seed_ranks = np.apply_along_axis(rankdata, 0, per_seed)
        for i, m in enumerate(methods):
            r = np.maximum(per_seed[i] - optimum, 0.0)
            regret[m, problem.name] = f"{r.mean():.4g} ± {r.std(ddof=1) / math.sqrt(seeds):.2g}"
            ranks[m, problem.name] = seed_ranks[i].mean()
            speed[m, problem.name] = f"{table[m][1]:.3g}"
    header = "| method | " + " | ".join(names) + " |"
    rule = "|---" * (len(names) + 1) + "|"
    print(f"\n### Mean final regret ± s.e. ({seeds} seeds)\n\n{header}\n{rule}")
    for m in methods:
        print(f"| {m} | " + " | ".join(regret[m, n] for n in names) + " |")
    print(f"\n### Mean rank (1 = best)\n\n{header[:-1]}| all |\n{rule}---|")
    for m in methods:
        cells = [f"{ranks[m, n]:.2f}" for n in names]
        print(
            f"| {m} | " + " | ".join(cells) + f" | {np.mean([ranks[m, n] for n in names]):.2f} |"
        )
    print(f"\n### Seconds per suggestion (mean over the run)\n\n{header}\n{rule}")
    for m in methods:
        print(f"| {m} | " + " | ".join(speed[m, n] for n in names) + " |")


def timing(points: list[int], repeats: int) -> None:
    """Median seconds of one suggestion on Hartmann6 with n random completed observations."""
    space = box([f"x{i}" for i in range(6)], 0.0, 1.0)
    rng = np.random.default_rng(0)
    X = rng.random((max(points), 6))
    y = np.array([hartmann6(x) for x in X])
    timers = {"gp": time_ours, "skopt.Optimizer": time_skopt, "optuna_gp": time_optuna}
    print("\n### Seconds per suggestion against observations (Hartmann6, median)\n")
    print("| optimizer | " + " | ".join(map(str, points)) + " |")
    print("|---" * (len(points) + 1) + "|")
    for name, timer in timers.items():
        cells = []
        for n in points:
            runs = 1 if name == "skopt.Optimizer" and n > 100 else repeats
            cells.append(statistics.median(timer(space, X[:n], y[:n]) for _ in range(runs)))
        print(f"| {name} | " + " | ".join(f"{c:.3g}" for c in cells) + " |")


def time_ours(space: dict, X: np.ndarray, y: np.ndarray) -> float:
    optimizer = create_optimizer("gp", parse_space(space), seed=0)
    history = [
        Observation(dict(zip(space, map(float, x), strict=False)), v, 0.0)
        for x, v in zip(X, y, strict=False)
    ]
    start = time.perf_counter()
    optimizer.update(history, [])
    optimizer.suggest(1)
    return time.perf_counter() - start


def time_skopt(space: dict, X: np.ndarray, y: np.ndarray) -> float:
    from skopt import Optimizer

    optimizer = Optimizer(skopt_dimensions(space), random_state=0)
    start = time.perf_counter()  # tell fits the model and picks the next point; ask returns it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimizer.tell(X.tolist(), y.tolist())
        optimizer.ask()
    return time.perf_counter() - start


def time_optuna(space: dict, X: np.ndarray, y: np.ndarray) -> float:
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
    parser.add_argument("--seeds", type=int, default=5)
    suite = ",".join([*synthetic_problems(), "digits_mlp"])
    parser.add_argument("--problems", default=suite, help=f"comma-separated, from {suite}")
    parser.add_argument("--methods", default=",".join(OURS + PEERS))
    parser.add_argument("--epochs", type=int, default=3, help="digits MLP epochs per fold")
    parser.add_argument("--timing-points", default="10,50,100,200,400", help="'': skip timing")
    parser.add_argument("--noise-seeds", type=int, default=20, help="0: skip the noise check")

    parser.add_argument("--quick", action="store_true", help="2 seeds, no digits, short timing")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.noise_seeds, args.epochs = 2, 2, 1
        args.problems, args.timing_points = "branin,hartmann6_mixed", "10,50,100"
    every = problems(args.epochs)
    chosen = [every[name] for name in args.problems.split(",") if name]
    methods = [m for m in args.methods.split(",") if m]
    print(f"command: {' '.join(sys.argv)}")
    with threadpool_limits(limits=1):  # one core per run, as on a shared 2-core host
        if chosen:
            print_quality(quality(methods, chosen, args.seeds), chosen, methods, args.seeds)
        if args.noise_seeds >= 2:
            print_fold_noise(args.noise_seeds, 30)
        if args.timing_points:
            timing([int(n) for n in args.timing_points.split(",")], repeats=3)


if __name__ == "__main__":
    main()
