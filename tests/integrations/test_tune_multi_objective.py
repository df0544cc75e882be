"""FoldwiseSearch with several metrics and constraints, driven as Tune drives a Searcher."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ray import tune

from foldwise.integrations.tune import FoldwiseSearch
from foldwise.spec import Direction

SPACE = {"x": tune.uniform(0.0, 1.0), "y": tune.uniform(0.0, 1.0)}
SMALL = {"metric": "size", "op": "<=", "value": 0.5}


def searcher(**kwargs: Any) -> FoldwiseSearch:
    settings = {
        "optimizer": "gp",
        "space": SPACE,
        "metric": ["loss", "accuracy"],
        "mode": ["min", "max"],
        "constraints": [SMALL],
        "options": {"n_initial": 3},
    }
    return FoldwiseSearch(**{**settings, **kwargs})


def result(config: dict[str, float]) -> dict[str, float]:
    x, y = config["x"], config["y"]
    return {"loss": x, "accuracy": 1 - (1 - x) ** 2 - y, "loss_std_error": 0.01, "size": y}


def play(search: FoldwiseSearch, steps: int, start: int = 0) -> list[dict[str, Any]]:
    configs = []
    for i in range(start, start + steps):
        config = search.suggest(f"t{i}")
        configs.append(config)
        search.on_trial_complete(f"t{i}", result(config))
    return configs


def test_each_metric_is_an_objective_and_each_constraint_a_gap() -> None:
    search = searcher()
    play(search, 6)
    optimizer = search.optimizer
    assert optimizer.directions == (Direction.MINIMIZE, Direction.MAXIMIZE)
    for told in search.observations:
        x, y = told.params["x"], told.params["y"]
        assert told.values == pytest.approx((x, 1 - (1 - x) ** 2 - y))
        assert told.std_errors == (0.01, None)
        assert told.constraint_gaps == pytest.approx(((y - 0.5) / 1.0,))
        assert told.feasible is (y <= 0.5) and not told.failed


def test_a_trial_missing_a_metric_or_a_constrained_one_is_a_failure() -> None:
    search = searcher()
    for i, drop in enumerate(["accuracy", "size"]):
        config = search.suggest(f"t{i}")
        search.on_trial_complete(f"t{i}", {k: v for k, v in result(config).items() if k != drop})
    assert [o.failed for o in search.observations] == [True, True]
    assert search.observations[0].objectives == (None, None)
    play(search, 2, start=2)  # the optimizer takes failures of a multi-objective search


def test_points_evaluated_elsewhere_carry_every_metric() -> None:
    search = searcher()
    search.add_evaluated_point({"x": 0.2, "y": 0.7}, [0.2, 0.3], constraint_values=[0.7])
    told = search.observations[0]
    assert told.values == (0.2, 0.3) and not told.feasible
    with pytest.raises(ValueError, match="a value for each of the metrics"):
        search.add_evaluated_point({"x": 0.2, "y": 0.7}, [0.2], constraint_values=[0.7])
    with pytest.raises(ValueError, match="each of the 1 constraints"):
        search.add_evaluated_point({"x": 0.2, "y": 0.7}, [0.2, 0.3])
    with pytest.raises(ValueError, match="a value for each of the metrics"):
        search.add_evaluated_point({"x": 0.2, "y": 0.7}, 0.2, constraint_values=[0.7])


def test_a_restored_multi_objective_searcher_continues_identically(tmp_path) -> None:
    live = searcher()
    play(live, 5)
    path = tmp_path / "state.json"
    live.save(str(path))
    state = json.loads(path.read_text())
    assert state["metric"] == ["loss", "accuracy"] and state["constraints"] == [SMALL]
    restored = FoldwiseSearch()
    restored.restore(str(path))
    assert restored.constraints == live.constraints
    assert play(restored, 3, start=5) == play(live, 3, start=5)


def test_a_version_1_state_keeps_the_searchers_own_constraints(tmp_path) -> None:
    single = searcher(metric="loss", mode="min", constraints=[])
    play(single, 3)
    state = single.get_state()
    state["version"] = 1
    del state["constraints"]
    for record in state["completed"]:
        for key in ("values", "std_errors", "constraint_gaps"):
            del record[key]
    constrained = searcher(metric="loss", mode="min")
    constrained.set_state(state)
    assert constrained.constraints == searcher().constraints
    assert [o.value for o in constrained.observations] == [o.value for o in single.observations]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "min"}, "a mode for each of the 2 metrics"),
        ({"metric": ["loss"], "mode": ["min"]}, "give 2 to 4 different metrics"),
        ({"metric": ["loss", "loss"]}, "give 2 to 4 different metrics"),
        ({"mode": ["min", "maximize"]}, "mode must be 'min' or 'max'"),
        ({"metric": "loss", "mode": ["min", "max"]}, "one metric takes one mode"),
        ({"constraints": [{"metric": "size", "op": "<", "value": 1}]}, "op"),
        (
            {"constraints": [SMALL, {**SMALL, "op": ">=", "value": 0.75}]},
            r"constraints\[1\]: size <= 0.5 and >= 0.75 cannot both hold",
        ),
    ],
)
def test_bad_metric_settings_fail_at_once(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        searcher(**kwargs)
