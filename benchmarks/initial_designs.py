"""Whose first trials decide a constrained Hartmann6 run: foldwise's GP and Optuna's GPSampler,
each started from its own first 10 trials and from the other's.

On ``Hartmann6+ball`` (``benchmarks/multi_objective.py``) a run either finds Hartmann6's global
basin or ends on the ball's edge near its local one (feasible regret 0.136). Each optimizer
draws its 10 initial trials with its own generator (foldwise's GP, with one objective over a
box, from a scrambled Sobol sequence of its seed; Optuna at random), so two optimizers with
the same seed start from different points. This swaps them: every seed runs each optimizer from
foldwise's first 10 trials and from Optuna's (replayed to foldwise as history, enqueued to
Optuna), then 90 more of its own. foldwise's random draws are seeded by its seed and the
history, so a swapped design also changes its later draws; a control row runs foldwise from its
own design with another seed (``seed + 1000``), which changes the later draws and keeps the
design. Where the control ends in the same basin as the run it controls, the design decided.

    make bench-peers
    .venv/bin/python -m benchmarks.initial_designs --seeds 20     # about 40 CPU-minutes
    .venv/bin/python -m benchmarks.initial_designs --optimizers foldwise   # no peer needed
    .venv/bin/python -m benchmarks.initial_designs --seeds 20 --first-seed 20   # seeds 20-39

Prints the mean and median feasible regret after 100 evaluations and the runs left above
0.05 (in the local basin), per optimizer and design, then which seeds each of them left there.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.multi_objective import score  # noqa: E402
from benchmarks.multi_objective_problems import Problem, problems  # noqa: E402
from benchmarks.optimizer_peers import optuna_config  # noqa: E402
from foldwise.optimizers import Observation, create_optimizer  # noqa: E402
from foldwise.space import Param  # noqa: E402

PROBLEM = "Hartmann6+ball"
INITIAL = 10
STUCK = 0.05
"""Feasible regret above which a run counts as left in a local basin."""
CONTROL_SEED = 1000
"""Added to the seed of the control row: other later draws, the same first trials."""

Design = list[dict[str, Any]]


def observe(problem: Problem, config: dict[str, Any]) -> Observation:
    values, gap = problem.evaluate(config)
    return Observation(config, values[0], constraint_gaps=(gap,))


def foldwise_run(
    problem: Problem, seed: int, design: Design | None, budget: int
) -> list[Observation]:
    """foldwise's GP, one trial at a time, from ``design`` (None: its own initial design)."""
    space = TypeAdapter(dict[str, Param]).validate_python(problem.space)
    optimizer = create_optimizer("gp", space, seed=seed, budget=budget)
    history = [observe(problem, config) for config in design or []]
    while len(history) < budget:
        optimizer.update(history, [])
        [config] = optimizer.suggest(1)
        history.append(observe(problem, config))
    return history


def optuna_run(
    problem: Problem, seed: int, design: Design | None, budget: int
) -> list[Observation]:
    """Optuna's GPSampler with the gap as its constraint, from ``design`` (enqueued) or its
    own random trials."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    history: list[Observation] = []

    def constraints(trial: Any) -> list[float]:
        return [trial.user_attrs["gap"]]

    sampler = optuna.samplers.GPSampler(seed=seed, constraints_func=constraints)
    study = optuna.create_study(sampler=sampler)
    for config in design or []:
        study.enqueue_trial(config)

    def objective(trial: Any) -> float:
        observation = observe(problem, optuna_config(trial, problem.space))
        trial.set_user_attr("gap", observation.constraint_gaps[0])
        history.append(observation)
        return observation.value

    study.optimize(objective, budget)
    return history


def regret(problem: Problem, history: list[Observation]) -> float:
    """Feasible regret, as ``benchmarks/multi_objective.py`` scores the problem."""
    return score(problem, [([o.value], o.constraint_gaps[0]) for o in history])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one on")
    parser.add_argument("--budget", type=int, default=100, help="evaluations per run")
    parser.add_argument(
        "--optimizers", default=",".join(RUNNERS), help=f"comma-separated, from {set(RUNNERS)}"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        parser.error("--seeds must be at least 1 and --first-seed at least 0")
    chosen = args.optimizers.split(",")
    if not chosen or not set(chosen) <= set(RUNNERS):
        parser.error(f"--optimizers: choose from {', '.join(RUNNERS)}")
    problem, budget = problems()[PROBLEM], args.budget
    runners = dict(RUNNERS[key] for key in chosen)
    regrets: dict[tuple[str, str], list[float]] = {}
    with threadpool_limits(limits=1):
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        for seed in seeds:
            own = {name: run(problem, seed, None, budget) for name, run in runners.items()}
            designs = {name: [o.params for o in h[:INITIAL]] for name, h in own.items()}
            for name, run in runners.items():
                for source, design in designs.items():
                    if source == name:
                        history = own[name]
                    else:
                        history = run(problem, seed, design, budget)
                    regrets.setdefault((name, f"{source}'s"), []).append(regret(problem, history))
            if "foldwise gp" in designs:
                design = designs["foldwise gp"]
                control = foldwise_run(problem, seed + CONTROL_SEED, design, budget)
                row = ("foldwise gp", f"foldwise gp's, seed + {CONTROL_SEED}")
                regrets.setdefault(row, []).append(regret(problem, control))
            print(f"  seed {seed}: done", file=sys.stderr)
    print(
        f"{PROBLEM}, {budget} evaluations, seeds {seeds.start} to {seeds.stop - 1}; "
        f"first {INITIAL} trials from:\n"
    )
    print("| optimizer | design | mean regret | median | runs above 0.05 | their seeds |")
    print("|---|---|---:|---:|---:|---|")
    for (name, source), values in regrets.items():
        stuck = [seed for seed, v in zip(seeds, values, strict=True) if v > STUCK]
        print(
            f"| {name} | {source} | {statistics.fmean(values):.4g} | "
            f"{statistics.median(values):.3g} | {len(stuck)} of {len(values)} | "
            f"{' '.join(map(str, stuck)) or '-'} |"
        )


RUNNERS = {
    "foldwise": ("foldwise gp", foldwise_run),
    "optuna": ("Optuna GPSampler", optuna_run),
}
"""The optimizers by their ``--optimizers`` key: their name in the table and their runner."""


if __name__ == "__main__":
    main()
