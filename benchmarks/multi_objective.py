"""Several objectives and constraints: foldwise's optimizers next to Optuna's and Ax's, same
budgets, same information (every optimizer is told the values only: no noise, no reference
point).

The problems and their reference points are in ``benchmarks/multi_objective_problems.py``: ZDT1,
ZDT2, DTLZ2 (3 objectives), BraninCurrin, the NAS CNN on the digits (validation error against
parameter count, 3 folds, from a table), and Branin and Hartmann6 each under one inequality
constraint (scored by the feasible regret). The peers are in
``benchmarks/multi_objective_peers.py``. ``gp-penalty`` is the GP with option
``constraints: penalty`` (infeasible trials told as bad losses) instead of its models of the
constraints, ``gp-parego`` and ``gp-ehvi`` the GP with option ``multi_objective: parego`` (one
random scalarisation per suggestion) or ``ehvi`` (expected hypervolume improvement) whatever
the number of objectives (``gp`` takes EHVI for two; for three ParEGO, then EHVI over the
last quarter of a budget of 100 or more), ``gp-xi0`` the GP without EI's exploration margin
(option ``xi: 0``; it acts on one objective and on ParEGO, not on EHVI, which has no margin),
``gp-xihalf`` the GP told half the study's budget (with one or two objectives the budget sets
nothing else in the GP than the trials over which that margin anneals to 0, so this is the
margin annealed over the first half; with three, told less than 100, it also keeps ParEGO
throughout), ``gp-box`` the GP with the Sobol design and BoTorch's length-scale prior it takes
by default for one objective over a box (``initial: sobol``, ``prior: dimension-scaled``),
here for several objectives too. These variants run only when ``--methods`` names them.
Each run is sequential (one trial at a time) and measured after 50 and ``--budget``
evaluations: the hypervolume of its feasible points from the reference point (higher is
better) or the feasible regret (lower is better). Tables: mean ± standard error over seeds,
the median, and each method's mean rank per problem (1 best).

A checkpoint is a study seen part-way: foldwise's optimizers plan by the study's budget
(the GP anneals its exploration over it, evolution sizes its generations by it), so after 50
evaluations of a 100-trial study they are still exploring where a 50-trial study would have
refined. ``--studies-of N`` scores studies of N trials instead: foldwise's methods run with a
budget of N (stored apart), the peers, which take no budget (a run of theirs is the same
whatever its length), by the first N evaluations of their ``--budget`` runs.

Every run is stored (``benchmarks/results/multi_objective.jsonl``, one line per problem, budget,
method and seed), keyed as in ``benchmarks/optimizers.py`` by foldwise's optimizer code or the
peer's library (and its runner's code), and by what defines the problems (their code and the
digits table): a change to any of it reruns what it touches. A stopped run resumes, processes on
separate cores combine, and ``--report-only`` prints the tables of what is stored. The peers
come from ``make bench-peers``; without them only foldwise's methods run.

    .venv/bin/python -m benchmarks.multi_objective --seeds 20 --budget 100
    .venv/bin/python -m benchmarks.multi_objective --seeds 20 --report-only
    .venv/bin/python -m benchmarks.multi_objective --seeds 20 --studies-of 50
    .venv/bin/python -m benchmarks.multi_objective --seeds 2 --budget 12 --checkpoint 6 \\
        --results /tmp/runs.jsonl  # smoke
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import TypeAdapter  # noqa: E402

from benchmarks import multi_objective_peers as peers  # noqa: E402
from benchmarks.multi_objective_problems import Problem, Values, problems  # noqa: E402
from benchmarks.optimizer_results import (  # noqa: E402
    ROOT,
    ResultStore,
    Run,
    add_code_argument,
    check_code_argument,
    code_note,
    code_version,
)
from benchmarks.optimizer_tables import print_against_best_peer, print_ranks  # noqa: E402
from foldwise.optimizers import create_optimizer  # noqa: E402
from foldwise.optimizers.base import Observation  # noqa: E402
from foldwise.optimizers.pareto import hypervolume  # noqa: E402
from foldwise.space import Param  # noqa: E402
from foldwise.spec import Direction  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "multi_objective.jsonl"
PROBLEM_FILES = (
    "multi_objective_problems.py",
    "problems.py",
    "digits_cnn_table.py",
    "results/digits_cnn.json",
)
GP_VARIANTS = {
    "gp-penalty": {"constraints": "penalty"},
    "gp-parego": {"multi_objective": "parego"},
    "gp-ehvi": {"multi_objective": "ehvi"},
    "gp-xi0": {"xi": 0.0},
    "gp-xihalf": {},
    "gp-box": {"initial": "sobol", "prior": "dimension-scaled"},
}
"""The GP with options other than its defaults, by method name."""
TOLD_BUDGET_SHARE = {"gp-xihalf": 0.5}
"""The share of the study's budget a variant is told (1 for the others)."""
FOLDWISE = ("gp", *GP_VARIANTS, "evolution", "nas_evolution", "random")


def run_foldwise(name: str, problem: Problem, budget: int, seed: int) -> list[Values]:
    space = TypeAdapter(dict[str, Param]).validate_python(problem.space)
    directions = [Direction.MINIMIZE] * problem.objectives
    optimizer = create_optimizer(
        "gp" if name in GP_VARIANTS else name,
        space,
        directions=directions if problem.objectives > 1 else None,
        seed=seed,
        budget=max(1, round(budget * TOLD_BUDGET_SHARE.get(name, 1.0))),
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


def version_of(method: str, code: str | None = None) -> str:
    """What a stored run must match: foldwise's optimizer code (``code``, an earlier version
    named by ``--code``, or the current one) or the peer's library and runner, and the
    problems."""
    base = (code or code_version()) if method in FOLDWISE else peers.version(method)
    return f"{base}|{problems_version()}"


@functools.cache
def problems_version() -> str:
    """A short hash of what defines the problems (their code and the digits table): a change
    to any of it makes a new version, so runs of an older problem are not mixed in."""
    digest = hashlib.sha256()
    for file in PROBLEM_FILES:
        digest.update((ROOT / "benchmarks" / file).read_bytes())
    return "problems-" + digest.hexdigest()[:12]


def run_method(method: str, problem: Problem, budget: int, seed: int) -> Run:
    """Run one method's run, timing the optimizer alone (not the objective, not the peer's
    import); stored rows are each evaluation's objectives followed by its constraint gap."""
    if method not in FOLDWISE:
        peers.prepare(method)
    in_objective = [0.0]

    def evaluate(config: dict[str, Any]) -> Values:
        started = time.perf_counter()
        try:
            return problem.evaluate(config)
        finally:
            in_objective[0] += time.perf_counter() - started

    timed = replace(problem, evaluate=evaluate)
    started = time.perf_counter()
    if method in FOLDWISE:
        run = run_foldwise(method, timed, budget, seed)
    else:
        run = peers.run_peer(method, timed, budget, seed)
    seconds = (time.perf_counter() - started - in_objective[0]) / budget
    rows = [[*values, gap] for values, gap in run]
    return Run(run_key(problem, budget), method, seed, version_of(method), rows, seconds)


def run_key(problem: Problem, budget: int) -> str:
    """The name a run is stored under: runs of one budget never stand in for another's."""
    return f"{problem.name}:{budget}"


def collect(
    chosen: list[Problem],
    methods: list[str],
    seeds: int,
    budget: int,
    store: ResultStore,
    *,
    run: bool,
    code: str | None = None,
) -> dict[tuple[str, str], dict[int, Run]]:
    """runs[problem, method][seed], from the store, running (and storing) what is missing;
    foldwise's of the optimizer code ``code`` when named (nothing is run then)."""
    runs: dict[tuple[str, str], dict[int, Run]] = {}
    for problem in chosen:
        key = run_key(problem, budget)
        for seed in range(seeds):
            for method in methods:
                found = store.get(key, method, seed, version_of(method, code))
                if found is None and run:
                    found = run_method(method, problem, budget, seed)
                    store.add(found)
                    print(f"  {problem.name} {method} seed {seed}: done", file=sys.stderr)
                if found is not None:
                    runs.setdefault((problem.name, method), {})[seed] = found
    return runs


def as_values(run: Run) -> list[Values]:
    """A stored run's evaluations as (objectives, constraint gap)."""
    return [(row[:-1], row[-1]) for row in run.values]


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
    main_methods = [m for m in FOLDWISE if m not in GP_VARIANTS]
    parser.add_argument("--methods", default=",".join(main_methods + list(peers.PEERS)))
    parser.add_argument("--results", type=Path, default=RESULTS, help="stored runs (JSON lines)")
    parser.add_argument("--report-only", action="store_true", help="run nothing, print tables")
    parser.add_argument(
        "--studies-of",
        type=int,
        default=None,
        help="score studies of this many trials (foldwise's methods told that budget; "
        "no --checkpoint)",
    )
    add_code_argument(parser)
    args = parser.parse_args(argv)
    check_code_argument(parser, args)
    if args.studies_of is not None and not 1 <= args.studies_of <= args.budget:
        parser.error("--studies-of must be between 1 and --budget")
    chosen = [problems()[name] for name in args.problems.split(",")]
    asked = [m for m in args.methods.split(",") if m]
    unknown = [m for m in asked if m not in FOLDWISE + peers.PEERS]
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {', '.join(FOLDWISE + peers.PEERS)}")
    methods = [m for m in asked if m in FOLDWISE or peers.available(m)]
    skipped = [m for m in asked if m not in methods]
    points = sorted({min(args.checkpoint, args.budget), args.budget})
    store = ResultStore(args.results)
    run = not args.report_only
    with threadpool_limits(limits=1):  # one core per run, as benchmarks/optimizers.py
        if args.studies_of is None:
            runs = collect(
                chosen, methods, args.seeds, args.budget, store, run=run, code=args.code
            )
        else:  # foldwise's methods told the shorter budget; the peers' longer runs cut short
            points = [args.studies_of]
            ours = [m for m in methods if m in FOLDWISE]
            theirs = [m for m in methods if m not in FOLDWISE]
            runs = collect(
                chosen, ours, args.seeds, args.studies_of, store, run=run, code=args.code
            )
            runs |= collect(chosen, theirs, args.seeds, args.budget, store, run=run)
    print(f"command: {' '.join(sys.argv)}")
    if args.code is not None:
        print(code_note(args.code))
        if not any(method in FOLDWISE for _problem, method in runs):
            print(f"(no stored run of foldwise's methods is of {args.code})")
    print_tables(chosen, methods, points, runs, skipped)
    if args.studies_of is not None:
        print(
            f"(Seconds: foldwise's methods over studies of {args.studies_of} trials, the peers "
            f"over their runs of {args.budget}; a GP's suggestion costs more as trials grow.)"
        )


def print_tables(
    chosen: list[Problem],
    methods: list[str],
    points: list[int],
    runs: dict[tuple[str, str], dict[int, Run]],
    skipped: list[str],
) -> None:
    """Per checkpoint: the scores, the mean ranks and ``gp`` against the best peer (both over
    the seeds the compared methods share, as ``benchmarks/optimizer_tables.py`` ranks)."""
    print(
        "Sequential runs, every optimizer told the values only. Hypervolume of the feasible "
        "points from the reference point (higher is better); constrained problems: feasible "
        "regret (lower is better). mean ± s.e. (median) [seeds]. Ranks and the paired "
        "comparison use the hypervolume's shortfall from the best any shown run reached, "
        "so there gp − peer < 0 means gp is better."
    )
    if skipped:
        print(f"Not run (install with make bench-peers): {', '.join(skipped)}.")
    names = [p.name for p in chosen]
    for n in points:
        print(f"\n## After {n} evaluations\n")
        print("| problem | reference | " + " | ".join(methods) + " |")
        print("|---|---|" + "---:|" * len(methods))
        shortfalls: dict[str, dict[str, dict[int, float]]] = {}
        for problem in chosen:
            scores = {
                m: {
                    seed: score(problem, as_values(r)[:n])
                    for seed, r in runs.get((problem.name, m), {}).items()
                }
                for m in methods
            }
            shortfalls[problem.name] = as_shortfalls(problem, scores)
            ref = "regret"
            if problem.reference is not None:
                ref = "(" + ", ".join(f"{r:g}" for r in problem.reference) + ")"
            cells = [score_cell(list(scores[m].values())) for m in methods]
            print(f"| {problem.name} | {ref} | " + " | ".join(cells) + " |")
        print_ranks(shortfalls, names, methods)
        shown_peers = [m for m in methods if m in peers.PEERS]
        if "gp" in methods and shown_peers:
            print_against_best_peer(shortfalls, names, "gp", shown_peers)
    print("\n| method | seconds per suggestion (mean over every run) |\n|---|---:|")
    for m in methods:
        seconds = [
            r.seconds for (_, name), by_seed in runs.items() if name == m for r in by_seed.values()
        ]
        if seconds:
            print(f"| {m} | {statistics.fmean(seconds):.4f} |")


def as_shortfalls(
    problem: Problem, scores: dict[str, dict[int, float]]
) -> dict[str, dict[int, float]]:
    """Lower is better: the regret as it is, a hypervolume as its shortfall from the largest
    any shown run reached on the problem."""
    if problem.reference is None:
        return scores
    best = max((v for by_seed in scores.values() for v in by_seed.values()), default=0.0)
    return {m: {seed: best - v for seed, v in by_seed.items()} for m, by_seed in scores.items()}


def score_cell(values: list[float]) -> str:
    """``mean ± s.e. (median) [runs]``; a regret is infinite in a run with no feasible point
    yet, which the cell says (the mean is then infinite too, and ranks last)."""
    if not values:
        return "–"
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < len(values):
        return f"inf ({len(values) - len(finite)} of {len(values)} runs found none feasible)"
    mean, median = statistics.fmean(values), statistics.median(values)
    if len(values) == 1:
        return f"{mean:.4g} [1]"
    se = statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.4g} ± {se:.2g} ({median:.4g}) [{len(values)}]"


if __name__ == "__main__":
    main()
