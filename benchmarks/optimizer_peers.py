"""The peer libraries of the optimizer benchmark, each run with its defaults, one trial at a time
(Ax also with trials in flight: ``ax@4``).

Every runner takes a search space in the study-spec form, an objective and a seed, and spends
the whole budget; the benchmark times it minus the objective. Peers are installed from
``benchmarks/requirements-peers.txt`` (see there for HEBO), never by the package.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

Space = dict[str, dict[str, Any]]
Objective = Callable[[dict[str, Any]], float]


def run_peer(
    name: str, space: Space, objective: Objective, budget: int, seed: int, in_flight: int = 1
) -> None:
    """Minimise ``objective`` over ``space`` with the peer ``name`` for ``budget`` trials,
    ``in_flight`` of them running at once (only Ax takes more than one; see :func:`run_ax`)."""
    if in_flight > 1 and name not in IN_FLIGHT_PEERS:
        raise ValueError(f"{name} runs one trial at a time here; in flight: {IN_FLIGHT_PEERS}")
    runners = {
        "skopt_gp_minimize": run_skopt,
        "optuna_tpe": run_optuna_tpe,
        "optuna_gp": run_optuna_gp,
        "ax": run_ax,
        "hebo": run_hebo,
    }
    import torch

    torch.set_num_threads(1)  # one core per run, as the benchmark's BLAS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature and convergence warnings
        if name in IN_FLIGHT_PEERS:
            runners[name](space, objective, budget, seed, in_flight)
        else:
            runners[name](space, objective, budget, seed)


PEERS = ("skopt_gp_minimize", "optuna_tpe", "optuna_gp", "ax", "hebo")
IN_FLIGHT_PEERS = ("ax",)
"""Peers that take pending trials into account, so ``name@k`` can compare them in flight."""


def peer_version(name: str) -> str:
    """The installed version of the library behind a peer, which keys its stored results."""
    from importlib.metadata import version

    package = {"skopt": "scikit-optimize", "optuna": "optuna", "ax": "ax-platform"}
    return version(package.get(name.split("_")[0], name))


def plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def skopt_dimensions(space: Space) -> list:
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


def run_skopt(space: Space, objective: Objective, budget: int, seed: int) -> None:
    from skopt import gp_minimize

    names = list(space)
    gp_minimize(
        lambda x: objective(dict(zip(names, map(plain, x), strict=True))),
        skopt_dimensions(space),
        n_calls=budget,
        random_state=seed,
    )


def optuna_config(trial: Any, space: Space) -> dict[str, Any]:
    config = {}
    for name, p in space.items():
        if p["type"] == "categorical":
            config[name] = trial.suggest_categorical(name, p["choices"])
        elif p["type"] == "int":
            config[name] = trial.suggest_int(name, p["low"], p["high"], log=p.get("log", False))
        else:
            config[name] = trial.suggest_float(name, p["low"], p["high"], log=p.get("log", False))
    return config


def run_optuna(sampler: Any, space: Space, objective: Objective, budget: int) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: objective(optuna_config(t, space)), budget)


def run_optuna_tpe(space: Space, objective: Objective, budget: int, seed: int) -> None:
    import optuna

    run_optuna(optuna.samplers.TPESampler(seed=seed), space, objective, budget)


def run_optuna_gp(space: Space, objective: Objective, budget: int, seed: int) -> None:
    import optuna

    run_optuna(optuna.samplers.GPSampler(seed=seed), space, objective, budget)


def ax_parameters(space: Space) -> list:
    from ax import ChoiceParameterConfig, RangeParameterConfig

    parameters = []
    for name, p in space.items():
        if p["type"] == "categorical":
            kinds = {type(choice) for choice in p["choices"]}
            if len(kinds) > 1:
                raise ValueError(f"{name}: Ax takes choices of one type, got {kinds}")
            kind = {bool: "bool", int: "int", float: "float"}.get(kinds.pop(), "str")
            parameters.append(
                ChoiceParameterConfig(
                    name=name, parameter_type=kind, values=p["choices"], is_ordered=False
                )
            )
            continue
        parameters.append(
            RangeParameterConfig(
                name=name,
                parameter_type=p["type"],
                bounds=(p["low"], p["high"]),
                scaling="log" if p.get("log") else "linear",
            )
        )
    return parameters


def run_ax(space: Space, objective: Objective, budget: int, seed: int, in_flight: int = 1) -> None:
    """Ax's ``Client`` with its default generation strategy (Sobol, then BoTorch with qLogNEI).

    With ``in_flight`` above one it keeps that many trials running, as foldwise's ``gp@k`` in
    the benchmark: the first ``k`` are one request, then whenever a running trial (a random one,
    seeded the same way) completes, Ax is asked for one more with the others pending, which
    its acquisition conditions on."""
    from ax import Client

    logging.disable(logging.INFO)  # Ax logs every trial at INFO
    client = Client(random_seed=seed)
    client.configure_experiment(parameters=ax_parameters(space))
    client.configure_optimization(objective="-loss")
    finish_order = np.random.default_rng(10_000 + seed)
    running: list[tuple[int, dict[str, Any]]] = []
    done = 0
    while done < budget:
        wanted = min(in_flight - len(running), budget - done - len(running))
        if wanted > 0:
            running += client.get_next_trials(max_trials=wanted).items()
        index, params = running.pop(int(finish_order.integers(len(running))))
        client.complete_trial(trial_index=index, raw_data={"loss": objective(dict(params))})
        done += 1


def hebo_space(space: Space) -> Any:
    from hebo.design_space.design_space import DesignSpace

    kinds = {("float", False): "num", ("float", True): "pow", ("int", False): "int"}
    kinds["int", True] = "pow_int"
    items = []
    for name, p in space.items():
        if p["type"] == "categorical":
            items.append({"name": name, "type": "cat", "categories": p["choices"]})
        else:
            kind = kinds[p["type"], bool(p.get("log"))]
            items.append({"name": name, "type": kind, "lb": p["low"], "ub": p["high"]})
    return DesignSpace().parse(items)


def run_hebo(space: Space, objective: Objective, budget: int, seed: int) -> None:
    """HEBO with its defaults (GP with input warping, MACE acquisition ensemble, NSGA-II)."""
    import torch
    from hebo.optimizers.hebo import HEBO

    speed_up_pymoo_duplicate_check()
    np.random.seed(seed)  # HEBO draws from the global generators
    torch.manual_seed(seed)
    optimizer = HEBO(hebo_space(space), scramble_seed=seed)
    for _ in range(budget):
        suggestion = optimizer.suggest(n_suggestions=1)
        row = suggestion.iloc[0]
        config = {
            name: int(row[name]) if p["type"] == "int" else plain(row[name])
            for name, p in space.items()
        }
        optimizer.observe(suggestion, np.array([[objective(config)]]))


def speed_up_pymoo_duplicate_check() -> None:
    """Replace pymoo's pairwise duplicate check for mixed variables by an equal hash-based one.

    HEBO's NSGA-II compares every pair of individuals in Python each generation (1.5 million
    calls and 60% of a suggestion's time); keys of the same values give the same answer.
    """
    from pymoo.core.mixed import MixedVariableDuplicateElimination

    def find_duplicates(self: Any, pop: Any, other: Any, is_duplicate: np.ndarray) -> np.ndarray:
        keys = [tuple(sorted(individual.X.items())) for individual in pop]
        if other is None:  # a duplicate of a later individual of the same population
            later: set[tuple] = set()
            for i in range(len(keys) - 1, -1, -1):
                is_duplicate[i] |= keys[i] in later
                later.add(keys[i])
        else:
            others = {tuple(sorted(individual.X.items())) for individual in other}
            for i, key in enumerate(keys):
                is_duplicate[i] |= key in others
        return is_duplicate

    MixedVariableDuplicateElimination._do = find_duplicates
