import pytest

from benchmarks.optimizers import method_options, parse_space, problems
from optimizers import create_optimizer


def test_a_method_name_carries_optimizer_options_after_colons():
    assert method_options("gp") == ("gp", {})
    assert method_options("gp:warp=none:n_initial=6:xi=0.0") == (
        "gp",
        {"warp": "none", "n_initial": 6, "xi": 0.0},
    )


def test_the_options_reach_the_optimizer_and_bad_ones_are_refused():
    space = parse_space(problems(epochs=1)["branin"].space)
    name, options = method_options("gp:warp=none:n_initial=6")
    optimizer = create_optimizer(name, space, options=options)
    assert (optimizer.warp, optimizer.n_initial) == ("none", 6)
    name, options = method_options("gp:warp=log")
    with pytest.raises(ValueError, match="warp"):
        create_optimizer(name, space, options=options)
