"""FoldwiseSearch in real Ray Tune experiments on a local Ray (2 CPUs, two trials in flight).

The trainables are cheap functions, so the time goes to Tune itself: a few seconds a run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray import tune

from foldwise.integrations.tune import FoldwiseSearch
from foldwise.space import contains

pytestmark = pytest.mark.slow

QUIET = {"RAY_AIR_NEW_OUTPUT": "0"}
BRANIN_MIN = 0.397887


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in QUIET}
    os.environ.update(QUIET)
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def run(trainable, search: FoldwiseSearch, tmp_path: Path, samples: int, **config: Any):
    tuner = tune.Tuner(
        trainable,
        param_space=config,
        tune_config=tune.TuneConfig(
            search_alg=search, num_samples=samples, max_concurrent_trials=2, reuse_actors=True
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    )
    return tuner.fit()


def branin(x1: float, x2: float) -> float:
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def branin_trial(config: dict[str, Any]) -> None:
    """Reports the value and a made-up fold standard error that differs between trials."""
    value = branin(config["x1"], config["x2"])
    tune.report({"value": value, "value_std_error": 0.05 + 0.01 * abs(config["x1"])})


def test_gp_on_branin(tmp_path: Path) -> None:
    search = FoldwiseSearch("gp", metric="value", mode="min", options={"n_initial": 6})
    domains = {"x1": tune.uniform(-5.0, 10.0), "x2": tune.uniform(0.0, 15.0)}
    results = run(branin_trial, search, tmp_path, 20, problem="branin", **domains)

    assert len(results) == 20 and results.num_errors == 0 and search.pending == {}
    assert search.optimizer.budget == 20  # Tune's num_samples
    space = search.search_space
    assert space is not None and list(space.params) == ["x1", "x2"]
    told = {o.extra["trial_id"]: o for o in search.optimizer.completed}
    for result in results:
        observation = told[result.metrics["trial_id"]]
        # each trial ran the configuration the searcher suggested, constants merged in by Tune
        assert result.config == {"problem": "branin", **space.to_config(observation.params)}
        assert observation.value == result.metrics["value"]
        assert observation.std_error == result.metrics["value_std_error"]

    # trials in suggestion order: the model's picks beat the initial design
    values = [told[r.metrics["trial_id"]].value for r in results]
    by_start = [v for _, v in sorted(zip(_started(results), values, strict=True))]
    assert min(by_start[6:]) < min(by_start[:6])
    assert min(values) < BRANIN_MIN + 2.0

    # Tune saved the searcher as it went: its JSON file restores the whole history
    restored = FoldwiseSearch()
    restored.restore_from_dir(results.experiment_path)
    assert [o.params for o in restored.observations] == [o.params for o in search.observations]


def _started(results) -> list[int]:
    """Each trial's position in the order Tune created it (its experiment tag starts with it)."""
    return [int(r.metrics["experiment_tag"].split("_")[0]) for r in results]


def conditional_trial(config: dict[str, Any]) -> None:
    widths = [config[f"width_{i}"] for i in range(1, config["depth"] + 1)]
    assert all(f"width_{i}" not in config for i in range(config["depth"] + 1, 4))
    tune.report({"loss": abs(config["depth"] - 2) + sum(math.log(w) for w in widths) / 10})


def test_nas_evolution_on_a_conditional_space(tmp_path: Path) -> None:
    space = {
        "depth": {"type": "int", "low": 1, "high": 3},
        "width_1": {"type": "int", "low": 4, "high": 64, "log": True},
        "width_2": {"type": "int", "low": 4, "high": 64, "log": True, "when": {"depth": [2, 3]}},
        "width_3": {"type": "int", "low": 4, "high": 64, "log": True, "when": {"depth": 3}},
        "act": {"type": "categorical", "choices": ["relu", "tanh"]},
    }
    options = {"population": 4, "sample_size": 2}
    search = FoldwiseSearch("nas_evolution", space, "loss", "min", seed=1, options=options)
    results = run(conditional_trial, search, tmp_path, 10, epochs=1)

    assert len(results) == 10 and results.num_errors == 0
    configs = [
        {k: v for k, v in r.config.items() if k != "epochs"}
        for _, r in sorted(zip(_started(results), results, strict=True), key=lambda p: p[0])
    ]
    space = search.search_space
    assert space is not None and all(contains(space.params, c) for c in configs)
    # the trainables got exactly the active parameters the searcher suggested
    told = {o.extra["trial_id"]: o.params for o in search.observations}
    assert [told[r.metrics["trial_id"]] for r in results] == [
        {k: v for k, v in r.config.items() if k != "epochs"} for r in results
    ]
    # after the random population, every trial is a one-choice mutation of an earlier one
    for i, child in enumerate(configs[4:], start=4):
        assert any(_changed(parent, child) <= 1 for parent in configs[:i]), child


def _changed(a: dict[str, Any], b: dict[str, Any]) -> int:
    """Parameters both configs hold with different values."""
    return sum(a[name] != b[name] for name in a.keys() & b.keys())


def choice_trial(config: dict[str, Any]) -> None:
    """Fails for sgd at 3 epochs, and for whichever trial starts first (so one surely fails)."""
    try:
        os.close(os.open(config["first_marker"], os.O_CREAT | os.O_EXCL))
        raise RuntimeError("the first trial fails")
    except FileExistsError:
        pass
    if config["opt"] == "sgd" and config["epochs"] == 3:
        raise RuntimeError("sgd diverges at 3 epochs")
    loss = config["epochs"] * 0.1 + len(config["layers"]) + config["batch"] / 64
    tune.report({"loss": loss})


def test_choice_and_randint_spaces_with_failures(tmp_path: Path) -> None:
    search = FoldwiseSearch("evolution", seed=2, options={"population": 4})
    tuner = tune.Tuner(
        choice_trial,
        param_space={
            "opt": tune.choice(["adam", "sgd"]),
            "layers": tune.choice([[32], [64, 64]]),
            "epochs": tune.randint(1, 4),
            "batch": tune.qrandint(16, 64, 16),
            "first_marker": str(tmp_path / "first-trial"),
        },
        tune_config=tune.TuneConfig(
            search_alg=search,
            metric="loss",
            mode="min",
            num_samples=12,
            max_concurrent_trials=2,
            reuse_actors=True,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    )
    results = tuner.fit()

    assert len(results) == 12 and search.metric == "loss" and search.mode == "min"
    configs = [r.config for r in results]
    assert {c["epochs"] for c in configs} <= {1, 2, 3}  # randint's upper bound is exclusive
    assert {c["batch"] for c in configs} <= {16, 32, 48, 64}
    assert {tuple(c["layers"]) for c in configs} <= {(32,), (64, 64)}
    failed = {o.extra["trial_id"] for o in search.observations if o.failed}
    errored = {r.metrics["trial_id"] for r in results if r.error}
    assert failed == errored and len(failed) >= 1
    assert len(search.observations) == 12


def flaky_trial(config: dict[str, Any]) -> None:
    """Fails for x > 0 until the marker file exists."""
    if config["x"] > 0 and not os.path.exists(config["marker"]):
        raise RuntimeError("not yet")
    tune.report({"loss": config["x"] ** 2})


def test_a_resumed_experiment_restores_the_searcher_and_reruns_failures(tmp_path: Path) -> None:
    """Tuner.restore: Tune unpickles the searcher (no optimizer inside), reads its JSON state
    back, and the errored trials it runs again replace their failures in the history."""
    marker = tmp_path / "fixed"
    search = FoldwiseSearch("gp", metric="loss", mode="min", options={"n_initial": 3})
    first = run(flaky_trial, search, tmp_path, 6, x=tune.uniform(-1.0, 1.0), marker=str(marker))
    failed = {o.extra["trial_id"] for o in search.observations if o.failed}
    assert failed == {r.metrics["trial_id"] for r in first if r.error} != set()

    marker.touch()
    resumed = tune.Tuner.restore(first.experiment_path, flaky_trial, resume_errored=True)
    assert resumed.fit().num_errors == 0
    saved = FoldwiseSearch()
    saved.restore_from_dir(first.experiment_path)
    assert len(saved.observations) == 6 and saved.pending == {}
    assert not any(o.failed for o in saved.observations)
    assert {o.extra["trial_id"] for o in saved.observations[-len(failed) :]} == failed
