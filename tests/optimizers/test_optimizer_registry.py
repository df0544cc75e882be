"""The registry: names match the study spec, unknown names fail clearly, imports stay lazy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from foldwise.optimizers import BaseOptimizer, create_optimizer, optimizer_names
from foldwise.optimizers.registry import optimizer_class
from foldwise.space import FloatParam
from foldwise.spec import OPTIMIZER_NAMES, Direction
from tests.optimizers.problems import PLANE


def test_names_match_the_study_spec() -> None:
    assert optimizer_names() == OPTIMIZER_NAMES


@pytest.mark.parametrize("name", OPTIMIZER_NAMES)
def test_every_name_builds_an_optimizer(name: str) -> None:
    optimizer = create_optimizer(name, PLANE, direction=Direction.MAXIMIZE, seed=4)
    assert isinstance(optimizer, BaseOptimizer)
    assert isinstance(optimizer, optimizer_class(name))
    assert (optimizer.direction, optimizer.seed) == (Direction.MAXIMIZE, 4)


@pytest.mark.parametrize("name", ["", "GP", "tpe", "nas-evolution"])
def test_unknown_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="unknown optimizer"):
        create_optimizer(name, PLANE)


@pytest.mark.parametrize("options", [[("n_initial", 3)], "n_initial=3", {1: 2}])
def test_options_must_be_a_mapping_of_names(options: object) -> None:
    with pytest.raises(ValueError):
        create_optimizer("gp", PLANE, options=options)  # type: ignore[arg-type]


def test_an_empty_space_is_refused() -> None:
    with pytest.raises(ValueError):
        create_optimizer("random", {})


def test_skopt_is_imported_only_when_gp_is_used() -> None:
    script = (
        "import sys\n"
        "from optimizers import create_optimizer\n"
        "from tests.optimizers.problems import PLANE\n"
        "for name in ('random', 'evolution', 'nas_evolution'):\n"
        "    create_optimizer(name, PLANE).suggest(2)\n"
        "assert 'skopt' not in sys.modules and 'sklearn' not in sys.modules\n"
        "create_optimizer('gp', PLANE)\n"
        "assert 'skopt' in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", script], check=True, cwd=root)


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget"):
        create_optimizer("evolution", {"x": FloatParam(type="float", low=0, high=1)}, budget=0)
