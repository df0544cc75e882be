"""The peers of the multi-objective benchmark, each with its defaults for several objectives
and for constraints, one trial at a time, told the values only (no noise, no reference point):
Optuna's NSGA-II and GP samplers (``constraints_func``) and Ax's ``Client`` (its default
generation strategy: Sobol, then BoTorch with qLogNEHVI for several objectives, qLogNEI with
outcome constraints for one). Installed by ``make bench-peers``, never by the package.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import logging
import warnings
from importlib.metadata import PackageNotFoundError
from pathlib import Path
from typing import Any

from benchmarks.multi_objective_problems import Problem, Values
from benchmarks.optimizer_peers import ax_parameters, optuna_config, peer_version

PEERS = ("optuna-nsga2", "optuna-gp", "ax")
RUNNER_FILES = ("multi_objective_peers.py", "optimizer_peers.py")
"""The code between a peer and the problems; its hash is part of a stored run's version."""


def library(name: str) -> str:
    """The library behind a peer (a name not in ``PEERS`` is refused)."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; peers: {', '.join(PEERS)}")
    return name.split("-")[0]


def available(name: str) -> bool:
    """Whether the library behind a peer is installed."""
    try:
        peer_version(library(name))
    except PackageNotFoundError:
        return False
    return True


@functools.cache
def version(name: str) -> str:
    """What a stored run of the peer must match: its library's version and the runners' code."""
    digest = hashlib.sha256()
    for file in RUNNER_FILES:
        digest.update((Path(__file__).parent / file).read_bytes())
    return f"{peer_version(library(name))}|runner-{digest.hexdigest()[:12]}"


def prepare(name: str) -> None:
    """Import the peer's library, so that a timed run does not time the import."""
    importlib.import_module(library(name))


def run_peer(name: str, problem: Problem, budget: int, seed: int) -> list[Values]:
    """One sequential run of ``budget`` evaluations: each evaluation's values and gap."""
    import torch

    torch.set_num_threads(1)  # one core per run, as foldwise's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature and convergence warnings
        if name == "ax":
            return run_ax(problem, budget, seed)
        return run_optuna(name, problem, budget, seed)


def run_optuna(sampler_name: str, problem: Problem, budget: int, seed: int) -> list[Values]:
    """Optuna's NSGA-II or GP sampler, minimising every objective, the gap as its constraint."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out: list[Values] = []
    constrained = problem.reference is None

    def constraints(trial: Any) -> list[float]:
        return [trial.user_attrs["gap"]]

    options = {"seed": seed, **({"constraints_func": constraints} if constrained else {})}
    samplers = {
        "optuna-nsga2": optuna.samplers.NSGAIISampler,
        "optuna-gp": optuna.samplers.GPSampler,
    }
    sampler = samplers[sampler_name](**options)
    study = optuna.create_study(directions=["minimize"] * problem.objectives, sampler=sampler)

    def objective(trial: Any) -> Any:
        values, gap = problem.evaluate(optuna_config(trial, problem.space))
        trial.set_user_attr("gap", gap)
        out.append((values, gap))
        return values if problem.objectives > 1 else values[0]

    study.optimize(objective, budget)
    return out


def run_ax(problem: Problem, budget: int, seed: int) -> list[Values]:
    """Ax's ``Client``: objectives ``-f0, -f1, ...`` (minimised; Ax infers the hypervolume's
    reference point itself), the constraint as the outcome constraint ``gap <= 0``."""
    from ax import Client

    logging.disable(logging.INFO)  # Ax logs every trial at INFO
    client = Client(random_seed=seed)
    client.configure_experiment(parameters=ax_parameters(problem.space))
    metrics = [f"f{i}" for i in range(problem.objectives)]
    constrained = problem.reference is None
    client.configure_optimization(
        objective=", ".join(f"-{m}" for m in metrics),
        outcome_constraints=["gap <= 0"] if constrained else None,
    )
    out: list[Values] = []
    for _ in range(budget):
        [(index, params)] = client.get_next_trials(max_trials=1).items()
        values, gap = problem.evaluate(dict(params))
        data = dict(zip(metrics, values, strict=True)) | ({"gap": gap} if constrained else {})
        client.complete_trial(trial_index=index, raw_data=data)
        out.append((values, gap))
    return out
