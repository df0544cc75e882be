"""Several objectives and constraints: foldwise's optimizers next to Optuna's, same budgets,
same information (every optimizer is told the values only, no noise).

Problems (all in minimisation form, BoTorch's definitions and reference points): ZDT1 and ZDT2
(6 dimensions, reference point (11, 11)), DTLZ2 (3 objectives, 6 dimensions, (1.1, 1.1, 1.1)),
BraninCurrin (2 dimensions, (18, 6)); and two constrained single-objective problems scored by
the feasible regret (best feasible value minus the constrained optimum): Branin under
``(x1 - 2.5)^2 + (x2 - 7.5)^2 <= 50`` (Gardner et al. 2014's disc; optimum 0.397887, inside
the disc) and Hartmann6 under ``||x||_2 <= 1.25`` (Ax's tutorial; optimum -3.32237, inside).
``gp-penalty`` is the GP with option ``constraints: penalty`` (infeasible trials told as bad
losses) instead of its models of the constraints, ``gp-parego`` and ``gp-ehvi`` the GP with
option ``multi_objective: parego`` (one random scalarisation per suggestion) or ``ehvi``
(expected hypervolume improvement) whatever the number of objectives (``gp`` takes EHVI for
two, ParEGO for three). Each run is sequential (one trial at a time)
and measured after 50 and ``--budget`` evaluations: the hypervolume of its feasible points
from the reference point (higher is better) or the feasible regret (lower is better). Tables:
mean ± standard error over seeds, the median, and each method's mean rank per problem (1 best).
Optuna comes from ``make bench-peers``; without it only foldwise's methods run.

    .venv/bin/python -m benchmarks.multi_objective --seeds 20 --budget 100
    .venv/bin/python -m benchmarks.multi_objective --seeds 2 --budget 12 --checkpoint 6  # smoke
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import TypeAdapter  # noqa: E402

from benchmarks.problems import branin, hartmann6  # noqa: E402
from foldwise.optimizers import create_optimizer  # noqa: E402
from foldwise.optimizers.base import Observation  # noqa: E402
from foldwise.optimizers.pareto import hypervolume  # noqa: E402
from foldwise.space import Param  # noqa: E402
from foldwise.spec import Direction  # noqa: E402

Values = tuple[list[float], float]
"""A configuration's objectives (minimisation form) and its constraint's signed gap to the
limit (positive: broken by that much; zero or negative: feasible)."""

BRANIN_OPTIMUM = 0.397887
HARTMANN6_OPTIMUM = -3.32237


@dataclass(frozen=True)
class Problem:
    name: str
    space: dict[str, dict[str, Any]]
    evaluate: Callable[[dict[str, Any]], Values]
    reference: list[float] | None
    """The hypervolume's reference point; None for a constrained single-objective problem."""
    optimum: float = 0.0
    """A constrained single-objective problem's feasible optimum."""

    @property
    def objectives(self) -> int:
        return 1 if self.reference is None else len(self.reference)


def _unit(dims: int) -> dict[str, dict[str, Any]]:
    return {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(dims)}


def _vector(config: dict[str, Any]) -> np.ndarray:
    return np.array([config[f"x{i}"] for i in range(len(config))])


def zdt(x: np.ndarray, concave: bool) -> list[float]:
    """ZDT1 (convex front) or ZDT2 (concave front): f1 = x0, f2 = g (1 - h(f1 / g))."""
    g = 1 + 9 * float(np.mean(x[1:]))
    ratio = x[0] / g
    return [float(x[0]), g * (1 - (ratio**2 if concave else math.sqrt(ratio)))]


def dtlz2(x: np.ndarray, objectives: int = 3) -> list[float]:
    g = float(np.sum((x[objectives - 1 :] - 0.5) ** 2))
    angles = x[: objectives - 1] * math.pi / 2
    out = []
    for i in range(objectives):
        value = 1 + g
        value *= float(np.prod(np.cos(angles[: objectives - 1 - i])))
        if i > 0:
            value *= math.sin(angles[objectives - 1 - i])
        out.append(value)
    return out


def branin_currin(x: np.ndarray) -> list[float]:
    x0, x1 = float(x[0]), float(x[1])
    b = branin({"x1": 15 * x0 - 5, "x2": 15 * x1})
    factor = 1 - math.exp(-1 / (2 * x1)) if x1 > 0 else 1.0
    currin = factor * (2300 * x0**3 + 1900 * x0**2 + 2092 * x0 + 60)
    currin /= 100 * x0**3 + 500 * x0**2 + 4 * x0 + 20
    return [b, currin]


def constrained_branin(config: dict[str, Any]) -> Values:
    x1, x2 = config["x1"], config["x2"]
    return [branin(config)], ((x1 - 2.5) ** 2 + (x2 - 7.5) ** 2 - 50.0) / 50.0


def constrained_hartmann6(config: dict[str, Any]) -> Values:
    x = _vector(config)
    return [hartmann6(x)], (float(np.linalg.norm(x)) - 1.25) / 1.25


def problems() -> dict[str, Problem]:
    return {
        "ZDT1": Problem("ZDT1", _unit(6), lambda c: (zdt(_vector(c), False), 0.0), [11.0, 11.0]),
        "ZDT2": Problem("ZDT2", _unit(6), lambda c: (zdt(_vector(c), True), 0.0), [11.0, 11.0]),
        "DTLZ2": Problem("DTLZ2", _unit(6), lambda c: (dtlz2(_vector(c)), 0.0), [1.1] * 3),
        "BraninCurrin": Problem(
            "BraninCurrin", _unit(2), lambda c: (branin_currin(_vector(c)), 0.0), [18.0, 6.0]
        ),
        "Branin+disc": Problem(
            "Branin+disc",
            {
                "x1": {"type": "float", "low": -5.0, "high": 10.0},
                "x2": {"type": "float", "low": 0.0, "high": 15.0},
            },
            constrained_branin,
            None,
            BRANIN_OPTIMUM,
        ),
        "Hartmann6+ball": Problem(
            "Hartmann6+ball", _unit(6), constrained_hartmann6, None, HARTMANN6_OPTIMUM
        ),
    }


def run_foldwise(name: str, problem: Problem, budget: int, seed: int) -> list[Values]:
    space = TypeAdapter(dict[str, Param]).validate_python(problem.space)
    directions = [Direction.MINIMIZE] * problem.objectives
    optimizer = create_optimizer(
        "gp" if name in GP_VARIANTS else name,
        space,
        directions=directions if problem.objectives > 1 else None,
        seed=seed,
        budget=budget,
        options=GP_VARIANTS.get(name, {}),
    )
    history: list[Observation] = []
    out: list[Values] = []
    for _ in range(budget):
        optimizer.update(history, [])
        [config] = optimizer.suggest(1)
        values, gap = problem.evaluate(config)
        out.append((values, gap))
        several = tuple(values) if problem.objectives > 1 else None
        gaps = (gap,) if problem.reference is None else ()
        history.append(Observation(config, values[0], values=several, constraint_gaps=gaps))
    return out


def run_optuna(sampler_name: str, problem: Problem, budget: int, seed: int) -> list[Values]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out: list[Values] = []
    constrained = problem.reference is None

    def constraints(trial: Any) -> list[float]:
        return [trial.user_attrs["gap"]]

    options = {"seed": seed, **({"constraints_func": constraints} if constrained else {})}
    if sampler_name == "optuna-nsga2":
        sampler = optuna.samplers.NSGAIISampler(**options)
    else:
        sampler = optuna.samplers.GPSampler(**options)
    study = optuna.create_study(directions=["minimize"] * problem.objectives, sampler=sampler)

    def objective(trial: Any) -> Any:
        config = {k: trial.suggest_float(k, p["low"], p["high"]) for k, p in problem.space.items()}
        values, gap = problem.evaluate(config)
        trial.set_user_attr("gap", gap)
        out.append((values, gap))
        return values if problem.objectives > 1 else values[0]

    study.optimize(objective, budget)
    return out


GP_VARIANTS = {
    "gp-penalty": {"constraints": "penalty"},
    "gp-parego": {"multi_objective": "parego"},
    "gp-ehvi": {"multi_objective": "ehvi"},
}
"""The GP with options other than its defaults, by method name."""
FOLDWISE = ("gp", *GP_VARIANTS, "evolution", "random")
PEERS = ("optuna-nsga2", "optuna-gp")


def score(problem: Problem, runs: list[Values]) -> float:
    """Hypervolume of the feasible points (several objectives) or feasible regret (one)."""
    feasible = [values for values, gap in runs if gap <= 0]
    if problem.reference is None:
        best = min((v[0] for v in feasible), default=math.inf)
        return best - problem.optimum
    if not feasible:
        return 0.0
    return hypervolume(np.array(feasible), np.array(problem.reference))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--checkpoint", type=int, default=50, help="also scored after this many")
    parser.add_argument("--problems", default=",".join(problems()))
    parser.add_argument("--methods", default=",".join(FOLDWISE + PEERS))
    args = parser.parse_args(argv)
    chosen = [problems()[name] for name in args.problems.split(",")]
    methods = [m for m in args.methods.split(",") if m in FOLDWISE or _has_optuna()]
    skipped = [m for m in args.methods.split(",") if m not in methods]
    points = sorted({min(args.checkpoint, args.budget), args.budget})
    scores: dict[tuple[str, str, int], list[float]] = {}
    seconds: dict[str, list[float]] = {m: [] for m in methods}
    for problem in chosen:
        for seed in range(args.seeds):
            for method in methods:
                started = time.perf_counter()
                run = (run_foldwise if method in FOLDWISE else run_optuna)(
                    method, problem, args.budget, seed
                )
                seconds[method].append((time.perf_counter() - started) / args.budget)
                for n in points:
                    scores.setdefault((problem.name, method, n), []).append(
                        score(problem, run[:n])
                    )
            print(f"  {problem.name} seed {seed}: done", file=sys.stderr)
    print_tables(chosen, methods, points, scores, seconds, args.seeds, skipped)


def _has_optuna() -> bool:
    try:
        import optuna  # noqa: F401
    except ImportError:
        return False
    return True


def print_tables(chosen, methods, points, scores, seconds, seeds, skipped) -> None:
    print(
        f"{seeds} seeds, sequential, every optimizer told the values only. Hypervolume of the "
        "feasible points from the reference point (higher is better); constrained problems: "
        "feasible regret (lower is better). mean ± s.e. (median)."
    )
    if skipped:
        print(f"Not run (install with make bench-peers): {', '.join(skipped)}.")
    for n in points:
        print(f"\n### After {n} evaluations\n")
        print("| problem | reference | " + " | ".join(methods) + " |")
        print("|---|---|" + "---:|" * len(methods))
        ranks: dict[str, list[float]] = {m: [] for m in methods}
        for problem in chosen:
            higher = problem.reference is not None
            means = {m: statistics.fmean(scores[(problem.name, m, n)]) for m in methods}
            for m in methods:  # ties share the mean of the ranks they span
                better = sum(
                    (means[o] > means[m]) if higher else (means[o] < means[m]) for o in methods
                )
                tied = sum(means[o] == means[m] for o in methods)
                ranks[m].append(better + (tied + 1) / 2)
            cells = [score_cell(scores[(problem.name, m, n)]) for m in methods]
            ref = (
                "regret"
                if not higher
                else "(" + ", ".join(f"{r:g}" for r in problem.reference) + ")"
            )
            print(f"| {problem.name} | {ref} | " + " | ".join(cells) + " |")
        print(
            "| mean rank | | "
            + " | ".join(f"{statistics.fmean(ranks[m]):.2f}" for m in methods)
            + " |"
        )
    print("\n| method | seconds per suggestion (mean over every run) |\n|---|---:|")
    for m in methods:
        print(f"| {m} | {statistics.fmean(seconds[m]):.4f} |")


def score_cell(values: list[float]) -> str:
    """``mean ± s.e. (median)``; a regret is infinite in a run with no feasible point yet,
    which the cell says (the mean is then infinite too, and ranks last)."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < len(values):
        return f"inf ({len(values) - len(finite)} of {len(values)} runs found none feasible)"
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0
    return f"{statistics.fmean(values):.4g} ± {se:.2g} ({statistics.median(values):.4g})"


if __name__ == "__main__":
    main()
