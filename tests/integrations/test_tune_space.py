"""The Ray Tune searcher's space: Tune domains as foldwise parameters, with Tune's meaning kept."""

from __future__ import annotations

import numpy as np
import pytest
from ray import tune

from foldwise.integrations.tune_space import (
    Placement,
    SearchSpace,
    read_space,
    space_from_foldwise,
    space_from_tune,
)
from foldwise.space import CategoricalParam, FloatParam, IntParam


def dump(space: SearchSpace, name: str) -> dict:
    return space.params[name].model_dump(exclude_none=True)


def decoded_values(space: SearchSpace, name: str) -> set:
    """Every value the optimizer can give ``name``, as it lands in a trial's config."""
    param = space.params[name]
    assert isinstance(param, IntParam)
    place = space.placements[name]
    return {round(place.decode(k), 9) for k in range(param.low, param.high + 1)}


@pytest.mark.parametrize(
    "domain",
    [
        pytest.param(tune.randint(1, 4), id="randint(1, 4)"),
        pytest.param(tune.randint(-3, 2), id="randint(-3, 2)"),
        pytest.param(tune.lograndint(1, 20), id="lograndint(1, 20)"),
        pytest.param(tune.qrandint(0, 10, 2), id="qrandint(0, 10, 2)"),
        pytest.param(tune.qrandint(1, 5, 1), id="qrandint(1, 5, 1)"),
        pytest.param(tune.qrandint(3, 17, 5), id="qrandint(3, 17, 5)"),
        pytest.param(tune.qlograndint(2, 50, 4), id="qlograndint(2, 50, 4)"),
        pytest.param(tune.quniform(0.0, 1.0, 0.25), id="quniform(0.0, 1.0, 0.25)"),
        pytest.param(tune.quniform(-0.3, 0.3, 0.1), id="quniform(-0.3, 0.3, 0.1)"),
        pytest.param(tune.qloguniform(0.1, 1.0, 0.1), id="qloguniform(0.1, 1.0, 0.1)"),
    ],
)
def test_integer_and_grid_domains_offer_exactly_what_tune_samples(domain) -> None:
    """Tune's randint excludes its upper bound, foldwise's int includes it; a quantized domain
    is its grid of multiples of q. Checked against Tune's own sampler, not against our reading
    of its docs."""
    space = space_from_tune({"x": domain})
    sampled = domain.sample(size=4000, random_state=np.random.default_rng(0))
    assert decoded_values(space, "x") == {round(v, 9) for v in sampled}


def test_bounds_of_the_converted_params() -> None:
    space = space_from_tune(
        {
            "lr": tune.loguniform(1e-4, 1e-1),
            "dropout": tune.uniform(0.0, 0.5),
            "layers": tune.randint(1, 4),
            "width": tune.lograndint(16, 257),
            "batch": tune.qrandint(32, 256, 32),
            "act": tune.choice(["relu", "tanh"]),
        }
    )
    assert dump(space, "lr") == {"type": "float", "low": 1e-4, "high": 0.1, "log": True}
    assert dump(space, "dropout") == {"type": "float", "low": 0.0, "high": 0.5, "log": False}
    assert dump(space, "layers") == {"type": "int", "low": 1, "high": 3, "log": False}
    assert dump(space, "width") == {"type": "int", "low": 16, "high": 256, "log": True}
    assert dump(space, "batch") == {"type": "int", "low": 1, "high": 8, "log": False}
    assert space.placements["batch"] == Placement(("batch",), step=32)
    assert dump(space, "act") == {"type": "categorical", "choices": ["relu", "tanh"]}
    config = space.to_config({"layers": 3, "batch": 8, "act": "tanh"})
    assert config == {"layers": 3, "batch": 256, "act": "tanh"}
    assert isinstance(config["batch"], int)


def test_float_grid_values_are_the_grid_points() -> None:
    place = space_from_tune({"f": tune.quniform(0.0, 1.0, 0.1)}).placements["f"]
    assert [place.decode(k) for k in (0, 3, 7, 10)] == [0.0, 0.3, 0.7, 1.0]
    assert place.encode(0.3) == 3
    with pytest.raises(ValueError, match="multiple"):
        place.encode(0.35)


def test_choices_that_are_not_plain_scalars_are_coded_by_index() -> None:
    layers = [[64, 64], [128], None, {"kind": "wide"}]
    space = space_from_tune({"layers": tune.choice(layers), "n": tune.choice([1, 1])})
    assert dump(space, "layers")["choices"] == [0, 1, 2, 3]
    assert [space.to_config({"layers": i})["layers"] for i in range(4)] == layers
    assert space.from_config({"layers": [128], "n": 1}) == {"layers": 1, "n": 0}
    assert dump(space, "n")["choices"] == [0, 1]  # repeated choices are allowed by Tune


def test_nested_param_space_keeps_its_nesting_and_leaves_constants_to_tune() -> None:
    space = space_from_tune(
        {"model": {"lr": tune.uniform(0.1, 0.2), "act": "relu"}, "epochs": 3, "seed": 0}
    )
    assert list(space.params) == ["model/lr"]
    assert space.to_config({"model/lr": 0.15}) == {"model": {"lr": 0.15}}
    assert space.from_config({"model": {"lr": 0.15, "act": "relu"}, "epochs": 3}) == {
        "model/lr": 0.15
    }


@pytest.mark.parametrize(
    ("param_space", "message"),
    [
        ({"opt": tune.grid_search(["adam", "sgd"])}, "'opt': grid_search is not supported"),
        ({"w": tune.sample_from(lambda _: 1)}, "'w': tune.sample_from is not supported"),
        ({"noise": tune.randn(0.0, 1.0)}, "'noise': tune.randn / qrandn are not supported"),
        ({"layers": [tune.randint(1, 3)]}, "'layers/0': search domains inside lists"),
        ({"k": tune.randint(3, 4)}, "'k': the domain holds fewer than two values"),
        ({"q": tune.qrandint(4, 7, 4)}, "'q': the domain holds fewer than two values"),
        ({"big": tune.uniform(0.0, 1e20)}, "'big': high: Input should be less than or equal"),
        ({"c": tune.choice(list(range(300)))}, "'c': choices: List should have at most 256"),
        ({"epochs": 3}, "holds no Tune search domain"),
    ],
)
def test_unsupported_tune_domains_name_the_parameter(param_space, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        space_from_tune(param_space)


def test_foldwise_space_dicts_keep_their_conditions() -> None:
    space = read_space(
        {
            "depth": {"type": "int", "low": 1, "high": 3},
            "width_2": {"type": "int", "low": 8, "high": 64, "when": {"depth": {"gte": 2}}},
            "act": CategoricalParam(type="categorical", choices=["relu", "gelu"]),
        }
    )
    assert isinstance(space.params["act"], CategoricalParam)
    assert space.params["width_2"].when is not None
    assert space.to_config({"depth": 1, "act": "relu"}) == {"depth": 1, "act": "relu"}
    # an inactive parameter in a config is dropped, a missing active one is refused
    assert space.from_config({"depth": 1, "width_2": 9, "act": "relu"}) == {
        "depth": 1,
        "act": "relu",
    }
    with pytest.raises(ValueError, match="does not lie in the search space"):
        space.from_config({"depth": 2, "act": "relu"})
    with pytest.raises(ValueError, match="does not lie in the search space"):
        space.from_config({"depth": 7, "act": "relu"})


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"lr": {"type": "float", "low": 1.0, "high": 0.1}}, "lr.float: Value error, low"),
        ({"lr": {"type": "float", "low": 0, "high": 1, "step": 2}}, "lr.float.step: Extra"),
        ({"w": {"type": "int", "low": 1, "high": 3, "when": {"d": 1}}}, "w: condition refers"),
        ({}, "at least one parameter"),
    ],
)
def test_bad_foldwise_spaces_name_the_field(space, message) -> None:
    with pytest.raises(ValueError, match=message):
        space_from_foldwise(space)


def test_json_round_trip_of_a_space() -> None:
    space = read_space(
        {
            "lr": tune.loguniform(1e-4, 1e-1),
            "net": {"layers": tune.choice([[64], [64, 64]]), "act": tune.choice(["relu", 3])},
            "f": tune.quniform(0.0, 1.0, 0.5),
            "n": tune.qrandint(0, 10, 5),
        }
    )
    again = SearchSpace.from_json(space.to_json())
    assert again == space
    assert isinstance(again.placements["f"].step, float)
    assert isinstance(again.placements["n"].step, int)
    conditional = space_from_foldwise(
        {
            "d": {"type": "int", "low": 1, "high": 2},
            "w": {"type": "float", "low": 0, "high": 1, "when": {"d": {"in": [2]}}},
        }
    )
    assert SearchSpace.from_json(conditional.to_json()) == conditional
    assert isinstance(conditional.params["w"], FloatParam)


def test_choices_json_cannot_hold_are_not_saved() -> None:
    space = space_from_tune({"opt": tune.choice([object, type])})
    record = space.to_json()
    assert record["opt"]["unsaved_choices"] == 2
    with pytest.raises(ValueError, match="'opt': its choices are not JSON"):
        SearchSpace.from_json(record)
