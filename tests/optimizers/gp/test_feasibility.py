"""The GP's constraint models: probability of feasibility, its gradient, and what the GP does
with them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from foldwise.optimizers import create_optimizer
from foldwise.optimizers.base import Observation
from foldwise.optimizers.gp.feasibility import Feasibility, squash
from tests.optimizers.problems import PLANE


def disc_gaps(X: np.ndarray) -> np.ndarray:
    """Feasible inside the disc of radius 0.3 around (0.5, 0.5): one constraint."""
    return (((X - 0.5) ** 2).sum(axis=1) - 0.09)[:, None] / 0.09


def test_the_probability_of_feasibility_follows_the_constraint() -> None:
    X = np.random.default_rng(0).uniform(size=(40, 2))
    model = Feasibility.fit(X, disc_gaps(X), None, "optuna")
    inside, near, outside = model.probability(np.array([[0.5, 0.5], [0.7, 0.5], [0.02, 0.98]]))
    assert inside > 0.95 and near > 0.8 and outside < 0.05
    ray = model.probability(np.column_stack([np.linspace(0.5, 1.0, 11), np.full(11, 0.5)]))
    assert (ray[:6] > 0.99).all() and (ray[7:] < 0.01).all()  # the edge is at x = 0.8


def test_the_log_probability_gradient_matches_finite_differences() -> None:
    X = np.random.default_rng(1).uniform(size=(30, 2))
    model = Feasibility.fit(X, disc_gaps(X), None, "optuna")
    points = np.array([[0.3, 0.6], [0.9, 0.1], [0.55, 0.45]])
    value, gradient = model.log_probability_gradient(points)
    assert np.allclose(value, model.log_probability(points))
    step = 1e-6
    for column in range(2):
        moved = points.copy()
        moved[:, column] += step
        numeric = (model.log_probability(moved) - value) / step
        assert np.allclose(gradient[:, column], numeric, rtol=1e-3, atol=1e-5)


def test_unknown_and_constant_gaps_teach_nothing() -> None:
    X = np.random.default_rng(2).uniform(size=(6, 2))
    gaps = np.column_stack([np.full(6, np.nan), np.full(6, -1.0), disc_gaps(X)[:, 0]])
    gaps[0, 2] = np.nan  # a failed trial reported no metric
    model = Feasibility.fit(X, gaps, None, "optuna")
    assert len(model.constraints) == 1 and len(model.constraints[0].model.X) == 5


def test_squash_keeps_the_order_and_the_limit() -> None:
    gaps = np.array([-100.0, -0.5, 0.0, 0.5, 100.0])
    assert np.all(np.diff(squash(gaps)) > 0) and squash(gaps)[2] == 0
    assert squash(gaps)[-1] < 5


def tell_disc(config: dict[str, Any]) -> Observation:
    """Distance to the corner (1, 1), feasible only inside the disc around (0.5, 0.5)."""
    x, y = config["x"], config["y"]
    gap = ((x - 0.5) ** 2 + (y - 0.5) ** 2 - 0.09) / 0.09
    return Observation(dict(config), (x - 1) ** 2 + (y - 1) ** 2, constraint_gaps=(gap,))


@pytest.mark.parametrize("seed", range(3))
def test_without_a_feasible_trial_the_gp_looks_for_feasibility(seed: int) -> None:
    """Ten trials in the corners, all infeasible: the next suggestions move into the disc."""
    rng = np.random.default_rng(seed)
    corners = [{"x": float(x), "y": float(y)} for x, y in rng.uniform(0, 0.12, size=(10, 2))]
    optimizer = create_optimizer("gp", PLANE, seed=seed, options={"n_initial": 5})
    optimizer.update([tell_disc(c) for c in corners], [])
    suggested = [tell_disc(c) for c in optimizer.suggest(3)]
    assert sum(o.feasible for o in suggested) >= 2


def test_the_gp_refines_at_the_constraints_edge_and_the_penalty_stays_an_option() -> None:
    """The corner's best feasible point lies on the disc's edge, at distance 0.4071 from
    (1, 1): with the constraint modelled the GP gets within 0.002 of it in 30 trials."""
    best = {}
    for model in ("probability", "penalty"):
        optimizer = create_optimizer(
            "gp", PLANE, seed=0, budget=30, options={"constraints": model, "n_initial": 8}
        )
        history: list[Observation] = []
        for _ in range(30):
            optimizer.update(history, [])
            history += [tell_disc(c) for c in optimizer.suggest(1)]
        best[model] = min(np.sqrt(o.value) for o in history if o.feasible)
    optimum = np.sqrt(2) * 0.5 - 0.3
    assert best["probability"] - optimum < 0.002
    assert best["penalty"] - optimum > best["probability"] - optimum


def test_a_failed_trial_is_never_the_feasible_incumbent() -> None:
    """Infeasible corners and one failure in the disc's middle: the failure reported no metric,
    so nothing is feasible yet and the GP still looks for feasibility."""
    rng = np.random.default_rng(4)
    corners = [{"x": float(x), "y": float(y)} for x, y in rng.uniform(0, 0.12, size=(9, 2))]
    failed = Observation({"x": 0.5, "y": 0.5}, None, failed=True)
    optimizer = create_optimizer("gp", PLANE, seed=4, options={"n_initial": 5})
    optimizer.update([*map(tell_disc, corners), failed], [])
    suggested = [tell_disc(c) for c in optimizer.suggest(3)]
    assert sum(o.feasible for o in suggested) >= 2
