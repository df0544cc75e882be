"""FoldwiseSearch driven as Tune drives a Searcher: history, pending trials, failures, restore.

Tune's loop is played by hand here (suggest, on_trial_complete, save/restore); the real Tune
experiments are in test_tune_experiments.py.
"""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest
from ray import tune
from ray.tune.search import Searcher

from foldwise.integrations.tune import FoldwiseSearch
from foldwise.optimizers import Observation, create_optimizer
from foldwise.space import contains

SPACE = {"x": tune.uniform(-2.0, 2.0), "n": tune.randint(1, 5), "act": tune.choice(["a", "b"])}
CONDITIONAL = {
    "depth": {"type": "int", "low": 1, "high": 3},
    "width_1": {"type": "int", "low": 4, "high": 64, "log": True},
    "width_2": {"type": "int", "low": 4, "high": 64, "log": True, "when": {"depth": {"gte": 2}}},
    "width_3": {"type": "int", "low": 4, "high": 64, "log": True, "when": {"depth": {"gte": 3}}},
    "act": {"type": "categorical", "choices": ["relu", "tanh"]},
}


def loss(config: dict[str, Any]) -> float:
    return (config["x"] - 0.5) ** 2 + 0.1 * config["n"] + (config["act"] == "b")


def searcher(**kwargs: Any) -> FoldwiseSearch:
    settings = {"optimizer": "gp", "space": SPACE, "metric": "loss", "mode": "min"}
    return FoldwiseSearch(**{**settings, "options": {"n_initial": 3}, **kwargs})


def play(search: FoldwiseSearch, steps: int, start: int = 0) -> list[dict[str, Any]]:
    """Tune's loop with two trials in flight: suggest, then finish the older one."""
    configs, live = [], []
    for i in range(start, start + steps):
        trial_id = f"t{i}"
        config = search.suggest(trial_id)
        configs.append(config)
        live.append((trial_id, config))
        if len(live) == 2:
            done_id, done = live.pop(0)
            result = {"loss": loss(done), "loss_std_error": 0.01 * (i % 3)}
            search.on_trial_complete(done_id, result)
    return configs


def test_each_suggestion_is_the_optimizers_given_history_and_pending_trials() -> None:
    """The searcher tells the optimizer what finished (with its standard error) and what is
    in flight before every suggestion: a bare optimizer told the same suggests the same."""
    search = searcher()
    space = search.search_space
    assert space is not None
    bare = create_optimizer("gp", space.params, seed=0, options={"n_initial": 3})
    completed: list[Observation] = []
    pending: dict[str, dict] = {}
    for i in range(7):
        bare.update(completed, list(pending.values()))
        expected = bare.suggest(1)[0]
        assert search.suggest(f"t{i}") == space.to_config(expected)
        pending[f"t{i}"] = expected
        if i % 2:  # finish the oldest trial: one stays in flight
            trial_id = next(iter(pending))
            params = pending.pop(trial_id)
            value = loss(space.to_config(params))
            search.on_trial_complete(trial_id, {"loss": value, "loss_std_error": 0.2})
            completed.append(Observation(params, value, std_error=0.2))
    assert search.pending == pending
    assert [o.std_error for o in search.observations] == [0.2, 0.2, 0.2]


def test_std_errors_and_failures_reach_the_optimizer() -> None:
    search = searcher(std_error_metric="sem")
    for i in range(6):
        search.suggest(f"t{i}")
    search.on_trial_complete("t0", {"loss": 1.5, "sem": 0.3, "loss_std_error": 9.0})
    search.on_trial_complete("t1", None, error=True)
    search.on_trial_complete("t2", {"loss": 2.0, "sem": 0.1}, error=True)
    search.on_trial_complete("t3", {"other": 1.0})  # ended without the metric
    search.on_trial_complete("t4", {"loss": float("nan"), "sem": 0.1})  # diverged
    search.on_trial_complete("t5", {"loss": 0.5, "sem": -1.0})  # nonsense standard error
    search.on_trial_complete("unknown", {"loss": 0.0})  # not suggested here: ignored
    told = search.optimizer.completed
    assert [(o.value, o.std_error, o.failed) for o in told] == [
        (1.5, 0.3, False),
        (None, None, True),
        (None, None, True),
        (None, None, True),
        (None, None, True),
        (0.5, None, False),
    ]
    assert [o.extra["trial_id"] for o in told] == [f"t{i}" for i in range(6)]
    assert search.optimizer.pending == []


def test_a_failed_trial_run_again_is_told_anew() -> None:
    """Tune's resume_errored / restart_errored run an errored trial again under its id."""
    search = searcher()
    first, second = search.suggest("t0"), search.suggest("t1")
    search.on_trial_complete("t0", None, error=True)
    search.on_trial_complete("t1", {"loss": 2.0})
    search.on_trial_complete("t0", {"loss": 1.0, "loss_std_error": 0.1})
    search.on_trial_complete("t1", {"loss": 0.0})  # told already: ignored
    told = [(o.extra["trial_id"], o.value, o.std_error) for o in search.observations]
    assert told == [("t1", 2.0, None), ("t0", 1.0, 0.1)]
    assert search.search_space.to_config(search.observations[1].params) == first != second


def test_failures_steer_the_gp_away_from_their_region() -> None:
    """A failed region, told as failures rather than dropped, is left by the GP. (How close
    it then comes to the best value at the region's edge depends on the initial design: with
    four random trials of which one succeeds, some seeds stay by that one trial; the default
    Sobol design spreads them; see "Failures" in docs/optimizers.md.)"""
    space = {"x": tune.uniform(0.0, 1.0)}
    search = FoldwiseSearch("gp", space, "loss", "min", options={"n_initial": 4})
    for i in range(14):
        x = search.suggest(f"t{i}")["x"]
        failed = x > 0.5  # everything right of 0.5 crashes; the best value is at its edge
        search.on_trial_complete(f"t{i}", None if failed else {"loss": 1.0 - x}, error=failed)
    late = search.observations[6:]
    assert sum(o.failed for o in late) <= 3


def test_a_restored_searcher_continues_identically(tmp_path) -> None:
    live = searcher()
    play(live, 8)
    path = tmp_path / "searcher-state.json"
    live.save(str(path))
    state = json.loads(path.read_text())  # plain JSON: history and settings, no pickle
    assert len(state["completed"]) == 7 and len(state["pending"]) == 1
    assert state["space"]["n"]["param"] == {"type": "int", "low": 1, "high": 4, "log": False}

    given_space = searcher()  # built with the same arguments, as Tune's restore does
    given_space.restore(str(path))
    spaceless = FoldwiseSearch()  # settings, space and history all from the file
    spaceless.restore(str(path))
    assert spaceless.metric == "loss" and spaceless.mode == "min"
    expected = play(live, 6, start=8)
    assert play(given_space, 6, start=8) == expected
    assert play(spaceless, 6, start=8) == expected


def test_a_history_from_another_space_is_refused(tmp_path) -> None:
    path = tmp_path / "state.json"
    live = searcher()
    play(live, 3)
    live.save(str(path))
    other = searcher(space={**SPACE, "n": tune.randint(1, 6)})
    with pytest.raises(ValueError, match="another search space"):
        other.restore(str(path))
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a foldwise.integrations.tune.FoldwiseSearch"):
        searcher().restore(str(path))


def test_pickling_leaves_the_optimizer_out() -> None:
    """Tune pickles the searcher with its Tuner: the optimizer is rebuilt, never pickled."""
    search = searcher()
    play(search, 5)
    assert b"GPOptimizer" not in pickle.dumps(search)
    copy = pickle.loads(pickle.dumps(search))
    assert play(copy, 4, start=5) == play(search, 4, start=5)


def test_tune_gives_space_metric_mode_and_budget() -> None:
    search = FoldwiseSearch("evolution", seed=3)
    with pytest.raises(ValueError, match="no search space"):
        search.suggest("t0")
    assert search.set_search_properties("acc", "max", SPACE, num_samples=3)
    assert search.optimizer.direction == "maximize"
    assert search.optimizer.budget == 3
    assert [search.suggest(f"t{i}") is not None for i in range(3)] == [True] * 3
    assert search.suggest("t3") == Searcher.FINISHED
    # a second param_space with domains clashes with the space the searcher has
    assert not search.set_search_properties(None, None, {"y": tune.uniform(0, 1)})
    # constants only: metric and mode are taken, the space is kept
    assert search.set_search_properties("loss", "min", {"epochs": 3})
    assert search.mode == "min" and list(search.optimizer.space) == ["x", "n", "act"]


def test_the_searcher_keeps_tunes_concurrency_limit() -> None:
    search = searcher()
    assert search.set_max_concurrency(2)  # Tune's ConcurrencyLimiter then lets all through
    assert search.suggest("t0") is not None and search.suggest("t1") is not None
    assert search.suggest("t2") is None
    search.on_trial_complete("t0", {"loss": 1.0})
    assert search.suggest("t2") is not None


def test_metric_and_mode_are_needed() -> None:
    search = FoldwiseSearch("gp", SPACE)
    with pytest.raises(ValueError, match="needs a metric and a mode"):
        search.suggest("t0")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"optimizer": "tpe"}, "unknown optimizer 'tpe'"),
        ({"mode": "maximize"}, "mode must be 'min' or 'max'"),
        ({"options": {"n_initial": 0}}, r"option n_initial must lie in \[1, 10000\], got 0"),
        ({"options": {"population": 5}}, "unknown options for GPOptimizer"),
        ({"space": {"lr": {"type": "float", "low": 1, "high": 0}}}, "lr.float"),
    ],
)
def test_bad_settings_fail_at_once(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        searcher(**kwargs)


def test_nas_evolution_keeps_conditions() -> None:
    search = FoldwiseSearch(
        "nas_evolution", CONDITIONAL, "loss", "min", options={"population": 4, "sample_size": 2}
    )
    space = search.search_space
    assert space is not None
    for i in range(16):
        config = search.suggest(f"t{i}")
        assert contains(space.params, config)
        loss_value = abs(config["depth"] - 2) + math.log(config["width_1"])
        search.on_trial_complete(f"t{i}", {"loss": loss_value})
    assert {o.params["depth"] for o in search.observations} == {1, 2, 3}


def test_points_evaluated_elsewhere_join_the_history() -> None:
    search = searcher()
    search.add_evaluated_point({"x": 0.5, "n": 1, "act": "a"}, 0.1, std_error=0.05)
    search.add_evaluated_point({"x": -1.0, "n": 4, "act": "b"}, 0.0, error=True)
    told = search.optimizer.completed
    assert told[0] == Observation({"x": 0.5, "n": 1, "act": "a"}, 0.1, 0.05, extra=told[0].extra)
    assert told[1].failed and told[1].value is None
    with pytest.raises(ValueError, match="does not lie in the search space"):
        search.add_evaluated_point({"x": 0.5, "n": 5, "act": "a"}, 0.1)  # randint(1, 5) ends at 4


@pytest.mark.parametrize("name", ["gp", "evolution", "random"])
def test_points_evaluated_elsewhere_do_not_use_up_the_budget(name: str) -> None:
    """num_samples=10 after 5 points told: 10 suggestions, and the optimizer plans by 15 (as a
    warm-started study's optimizer plans by its budget plus its prior observations)."""
    search = FoldwiseSearch(name, seed=1)
    assert search.set_search_properties("loss", "min", SPACE, num_samples=10)
    for x in (-1.5, -0.5, 0.0, 0.5, 1.5):
        point = {"x": x, "n": 2, "act": "a"}
        search.add_evaluated_point(point, loss(point))
    suggested = []
    while (config := search.suggest(f"t{len(suggested)}")) != Searcher.FINISHED:
        suggested.append(config)
        search.on_trial_complete(f"t{len(suggested) - 1}", {"loss": loss(config)})
    assert len(suggested) == 10
    assert len(search.observations) == 15 and search.optimizer.budget == 15
    restored = FoldwiseSearch()
    restored.set_state(search.get_state())
    assert restored.suggest("t10") == Searcher.FINISHED and restored.optimizer.budget == 15
