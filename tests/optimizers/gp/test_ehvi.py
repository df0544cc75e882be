"""Expected hypervolume improvement: the boxes cover exactly what the front leaves, the closed
form equals a Monte Carlo estimate of the improvement, it keeps an order far from the front,
and the GP scores several objectives with it (or with ParEGO on request)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from foldwise.optimizers import create_optimizer
from foldwise.optimizers.base import Observation, OptionError
from foldwise.optimizers.gp import optimizer as gp_module
from foldwise.optimizers.gp.acquisition import MIN_GAP
from foldwise.optimizers.gp.ehvi import (
    MAX_BOXES,
    Boxes,
    decompose,
    log_ehvi,
    log_ehvi_gradient,
    reference_point,
)
from foldwise.optimizers.gp.front import FittedFront
from foldwise.optimizers.gp.optimizer import _Fitted
from foldwise.optimizers.gp.output_warp import warp_losses
from foldwise.optimizers.pareto import hypervolume, non_dominated
from foldwise.spec import Direction
from tests.optimizers.problems import PLANE, run_study


def _front(rng: np.random.Generator, objectives: int, points: int = 12) -> np.ndarray:
    cloud = rng.random((points, objectives))
    return cloud[non_dominated(cloud)]


@pytest.mark.parametrize("objectives", [2, 3, 4])
def test_the_boxes_cover_what_the_front_leaves_below_the_reference(objectives: int) -> None:
    """Clipped below at the origin (every front point is above it), the boxes' volumes add up
    to the reference box's volume less the hypervolume, so they neither overlap nor miss."""
    front = _front(np.random.default_rng(objectives), objectives)
    reference = reference_point(front)
    boxes = decompose(front, reference)
    assert boxes is not None
    volume = 0.0
    for low, high in zip(boxes.lower, boxes.upper, strict=True):
        sides = [
            boxes.edges[j][high[j]] - (boxes.edges[j][low[j]] if low[j] >= 0 else 0.0)
            for j in range(objectives)
        ]
        volume += math.prod(sides)
    assert volume == pytest.approx(math.prod(reference) - hypervolume(front, reference))


def _covered(boxes: Boxes, point: np.ndarray) -> int:
    """How many boxes hold ``point``."""
    count = 0
    for low, high in zip(boxes.lower, boxes.upper, strict=True):
        lows = [boxes.edges[j][i] if i >= 0 else -np.inf for j, i in enumerate(low)]
        highs = [boxes.edges[j][i] for j, i in enumerate(high)]
        count += all(a <= x < b for a, x, b in zip(lows, point, highs, strict=True))
    return count


@pytest.mark.parametrize("objectives", [2, 3])
def test_each_point_the_front_leaves_lies_in_one_box_and_no_other_in_any(objectives: int) -> None:
    """With duplicate coordinates and rows, dominated points and points on or beyond the
    reference in the input (the decomposition keeps what matters of them)."""
    rng = np.random.default_rng(objectives)
    cloud = np.round(rng.random((14, objectives)), 1)  # shared coordinates
    cloud = np.vstack([cloud, cloud[:2], np.full(objectives, 1.0), np.full(objectives, 2.0)])
    reference = np.full(objectives, 1.0)
    boxes = decompose(cloud, reference)
    assert boxes is not None
    for point in rng.random((1500, objectives)) * 1.2 - 0.1:
        left = np.all(point < reference) and not np.all(cloud <= point, axis=1).any()
        assert _covered(boxes, point) == int(left), point


def test_an_empty_front_leaves_one_box_below_the_reference() -> None:
    boxes = decompose(np.empty((0, 2)), np.array([1.0, 2.0]))
    assert boxes is not None and len(boxes) == 1
    assert _covered(boxes, np.array([-1e9, 1.99])) == 1
    assert _covered(boxes, np.array([1.0, 0.0])) == 0


@pytest.mark.parametrize("objectives", [2, 3, 4])
def test_the_closed_form_equals_the_mean_improvement_of_sampled_outcomes(objectives: int) -> None:
    rng = np.random.default_rng(10 + objectives)
    front = _front(rng, objectives)
    reference = reference_point(front)
    boxes = decompose(front, reference)
    base = hypervolume(front, reference)
    for _ in range(3):
        mean, std = rng.random(objectives) * 0.8, 0.02 + 0.3 * rng.random(objectives)
        samples = mean + std * rng.standard_normal((3000, objectives))
        gains = [hypervolume(np.vstack([front, y]), reference) - base for y in samples]
        exact = math.exp(log_ehvi(mean[None], std[None], boxes)[0])
        assert abs(exact - np.mean(gains)) < 4 * np.std(gains) / math.sqrt(len(gains)) + 1e-9


def test_far_from_the_front_the_log_keeps_an_order_instead_of_a_flat_zero() -> None:
    front = _front(np.random.default_rng(0), 2)
    boxes = decompose(front, reference_point(front))
    means = np.array([[8.0, 8.0], [20.0, 20.0], [40.0, 40.0]])
    values = log_ehvi(means, np.full_like(means, 0.1), boxes)
    assert np.isfinite(values).all()
    assert values[0] > values[1] > values[2]
    assert math.exp(values[2]) == 0.0  # EHVI itself underflowed there


@pytest.mark.parametrize("objectives", [2, 3])
@pytest.mark.parametrize("shift", [0.0, 5.0])
def test_the_gradient_matches_finite_differences(objectives: int, shift: float) -> None:
    """Near the front and far behind it (``shift``), where the log is what keeps a slope."""
    rng = np.random.default_rng(objectives)
    front = _front(rng, objectives)
    boxes = decompose(front, reference_point(front))
    A, B = rng.standard_normal((objectives, 2)), rng.standard_normal((objectives, 2))

    def moments(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return shift + 0.5 + 0.3 * np.tanh(X @ A.T), 0.05 + 0.2 / (1 + np.exp(X @ B.T))

    X = rng.standard_normal((4, 2))
    t, e = np.tanh(X @ A.T), np.exp(X @ B.T)
    d_means = [0.3 * (1 - t[:, j : j + 1] ** 2) * A[j] for j in range(objectives)]
    d_stds = [
        -0.2 * e[:, j : j + 1] / (1 + e[:, j : j + 1]) ** 2 * B[j] for j in range(objectives)
    ]
    value, gradient = log_ehvi_gradient(*moments(X), d_means, d_stds, boxes)
    assert value == pytest.approx(log_ehvi(*moments(X), boxes))
    for k in range(2):
        step = np.eye(2)[k] * 1e-6
        ahead, behind = log_ehvi(*moments(X + step), boxes), log_ehvi(*moments(X - step), boxes)
        assert gradient[:, k] == pytest.approx((ahead - behind) / 2e-6, rel=1e-4, abs=1e-6)


def test_a_front_that_needs_too_many_boxes_is_refused() -> None:
    side = math.ceil(MAX_BOXES ** (1 / 3))
    t = np.linspace(0.01, 0.99, side + 1)
    front = np.column_stack([t, t[::-1], t, 1 - t])  # every point non-dominated
    assert decompose(front, np.full(4, 2.0)) is None


def _two_objectives(config: dict[str, Any]) -> tuple[float, float]:
    """A concave front (x, 1 − √x) on y = 0; y pushes both objectives up."""
    g = 1 + 9 * config["y"]
    return config["x"] * g, g * (1 - math.sqrt(config["x"]))


def _tell(config: dict[str, Any], values: tuple[float, ...]) -> Observation:
    return Observation(dict(config), values[0], values=values)


@pytest.mark.parametrize("option", ["ehvi", "parego"])
def test_the_gp_spreads_a_batch_along_the_front(
    option: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With both acquisitions the GP reaches the front (y = 0) and covers it. Under EHVI a
    batch of three suggestions lands in three places apart, each joining the front as a lie
    before the next is chosen. (Without the lies two members sit the acquisition search's
    least gap apart on most seeds; with them, members may still explore y near one another
    along an end of the front, where one objective is 0 whatever y is, so they are asked to
    be twice that gap apart.) Under ParEGO each member has a weighting of its own and goes
    where it points: the weightings are pinned (drawn at random, three may all favour one part
    of the front, and the drawn ones differ between machines as the history's last digits do),
    and the members on the front lie apart in the weightings' order. One of three may explore
    off it: expected improvement weighs the model's doubt, not only the weighting's optimum."""
    directions = (Direction.MINIMIZE, Direction.MINIMIZE)
    optimizer = create_optimizer(
        "gp",
        PLANE,
        directions=directions,
        seed=1,
        budget=40,
        options={"multi_objective": option},
    )
    history = run_study(optimizer, _two_objectives, budget=30, tell=_tell)
    near = [o.params for o in history if o.params["y"] < 0.05]
    assert len(near) >= 8 and np.ptp([p["x"] for p in near]) > 0.5
    optimizer.update(history, [])
    fitted = optimizer._fit(np.random.default_rng(0))
    assert isinstance(fitted, FittedFront) == (option == "ehvi")
    # most weight on x first: its optimum on the front (x, 1 - sqrt(x)) lies at the smallest x
    weightings = [np.array([0.75, 0.25]), np.array([0.5, 0.5]), np.array([0.25, 0.75])]
    drawn = iter(weightings)
    monkeypatch.setattr(gp_module, "simplex_weights", lambda objectives, rng: next(drawn))
    batch = optimizer.suggest(3)
    points = np.array([[p["x"], p["y"]] for p in batch])
    if option == "ehvi":
        gaps = np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))[np.triu_indices(3, 1)]
        assert gaps.min() > 2 * MIN_GAP
    else:  # with one weighting for the whole batch a member fell off the front (y = 0.64)
        assert next(drawn, None) is None  # each member drew its own
        on_front = points[points[:, 1] < 0.05, 0]  # in the members' order
        assert len(on_front) >= 2 and (np.diff(on_front) > 0.15).all()


@pytest.mark.parametrize(
    ("objectives", "feasible", "members"),
    [(3, True, [0, 1, 2]), (2, True, [0]), (3, False, [0])],
    ids=["parego", "ehvi", "nothing-feasible"],
)
def test_each_further_member_of_a_parego_batch_gets_its_own_weighting(
    objectives: int, feasible: bool, members: list[int]
) -> None:
    """qParEGO: the first member keeps the suggestion's weighting (a lone suggestion is what
    it was), every further one draws its own; EHVI needs none, nor does a search for
    feasibility alone. A rebuilt optimizer picks the same batch."""
    rng = np.random.default_rng(7)
    history = [
        Observation(
            {"x": a, "y": b},
            a,
            values=(a, b, 1.0 - a * b)[:objectives],
            constraint_gaps=(-0.5 if feasible else 0.5 + a,),
        )
        for a, b in rng.random((12, 2))
    ]
    pending = [{"x": 0.5, "y": 0.5}]

    def build() -> Any:
        gp = _gp(objectives)
        gp.update(history, pending)
        return gp

    gp, seen = build(), []
    fit = gp._fit

    def recorded(rng: np.random.Generator, member: int = 0) -> Any:
        seen.append(member)
        return fit(rng, member)

    gp._fit = recorded
    batch = gp.suggest(3)
    assert seen == members
    assert build().suggest(3) == batch
    if objectives == 3 and feasible:
        targets = [gp._targets(member)[0] for member in (0, 1, 2)]
        assert not np.allclose(targets[1], targets[0])
        assert not np.allclose(targets[2], targets[1])


def _gp(objectives: int, **options: Any) -> Any:
    directions = (Direction.MINIMIZE,) * objectives
    return create_optimizer("gp", PLANE, directions=directions, seed=0, options=options)


def test_a_failed_trial_is_data_and_the_front_is_scored_by_ehvi() -> None:
    """A failed trial carries no values (as the service stores it) and stays out of the front."""
    rng = np.random.default_rng(5)
    configs = [{"x": a, "y": b} for a, b in rng.random((8, 2))]
    history = [_tell(c, _two_objectives(c)) for c in configs]
    history.append(Observation({"x": 0.5, "y": 0.5}, None, failed=True))
    gp = _gp(2)
    gp.update(history, [])
    fitted = gp._fit(np.random.default_rng(0))
    assert isinstance(fitted, FittedFront) and len(fitted.front) == 8
    assert len(gp.suggest(2)) == 2


def test_the_scalarised_model_serves_when_nothing_is_feasible_or_the_front_is_too_large() -> None:
    rng = np.random.default_rng(6)
    configs = [{"x": a, "y": b} for a, b in rng.random((10, 2))]
    infeasible = [
        Observation(c, c["x"], values=(c["x"], c["y"]), constraint_gaps=(1.0 - c["x"],))
        for c in configs
    ]
    gp = _gp(2)
    gp.update(infeasible, [])
    assert isinstance(gp._fit(np.random.default_rng(0)), _Fitted)
    # 4 objectives, 20 trials on one simplex: none dominates another, too many boxes to cut
    weights = rng.dirichlet(np.ones(4), size=20)
    spread = [
        Observation({"x": i / 20, "y": 0.5}, float(w[0]), values=tuple(w))
        for i, w in enumerate(weights)
    ]
    gp = _gp(4, multi_objective="ehvi")
    gp.update(spread, [])
    assert isinstance(gp._fit(np.random.default_rng(0)), _Fitted)
    assert len(gp.suggest(1)) == 1


def test_ehvi_is_the_default_for_two_objectives_parego_then_ehvi_for_more_and_is_checked() -> None:
    assert _gp(2).front_model == "ehvi" and _gp(2)._scores_hypervolume()
    assert _gp(3).front_model == "parego-ehvi" and not _gp(3)._scores_hypervolume()
    assert _gp(4).front_model == "parego-ehvi"
    assert _gp(3, multi_objective="ehvi")._scores_hypervolume()
    assert not _gp(2, multi_objective="parego")._scores_hypervolume()
    with pytest.raises(OptionError, match="multi_objective"):
        _gp(2, multi_objective="x")


def _three_objectives(config: dict[str, Any]) -> tuple[float, float, float]:
    """A plane of trade-offs x, y, 1.5 − x − y (none dominates another), bent by (x − 0.5)²."""
    x, y = config["x"], config["y"]
    return x, y, 1.5 - x - y + 2 * (x - 0.5) ** 2


def test_the_hand_over_needs_a_last_quarter_of_25_trials_or_more() -> None:
    """A budget of 100 hands over to EHVI at trial 75 (25 left); one of 96 (24 left), or
    none, stays with ParEGO to the end; running trials count as used."""
    rng = np.random.default_rng(6)
    history = [_tell({"x": a, "y": b}, (a, b, 1.0 - a)) for a, b in rng.random((95, 2))]

    def hands_over(budget: int | None, completed: int, pending: int = 0) -> bool:
        gp = create_optimizer(
            "gp", PLANE, directions=(Direction.MINIMIZE,) * 3, seed=0, budget=budget
        )
        gp.update(history[:completed], [{"x": 0.5, "y": 0.01 * i} for i in range(pending)])
        return gp._scores_hypervolume()

    assert not hands_over(100, 74) and hands_over(100, 75) and hands_over(100, 74, pending=1)
    assert not hands_over(96, 72) and not hands_over(96, 95)
    assert not hands_over(None, 95)


def test_three_objectives_hand_over_from_parego_to_ehvi_over_the_last_quarter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default for three or four objectives: ParEGO until three quarters of the budget
    are used (counting running trials), and throughout without a budget; then EHVI, against
    the worst corner of the front itself, where two objectives span every usable trial (a
    far-off dominated trial among them). A budget of 16, its last quarter allowed to hand
    over, keeps the fits small."""
    monkeypatch.setattr(gp_module, "EHVI_MIN_TRIALS", 4)
    rng = np.random.default_rng(4)
    history = [Observation({"x": 0.9, "y": 0.9}, 3.0, values=(3.0, 3.0, 3.0))]
    history += [
        _tell(c, _three_objectives(c)) for c in ({"x": a, "y": b} for a, b in rng.random((11, 2)))
    ]

    def fitted(completed: int, pending: int = 0, budget: int | None = 16, **options: Any) -> Any:
        gp = create_optimizer(
            "gp", PLANE, directions=(Direction.MINIMIZE,) * 3, seed=0, budget=budget,
            options=options,
        )  # fmt: skip
        gp.update(history[:completed], [{"x": 0.5, "y": 0.1 * i} for i in range(pending)])
        return gp._fit(np.random.default_rng(0))

    assert isinstance(fitted(11), _Fitted)  # 11 of 16: ParEGO
    assert isinstance(fitted(12, budget=None), _Fitted)
    assert isinstance(fitted(11, pending=1), FittedFront)  # 12 of 16 used: EHVI
    assert isinstance(fitted(12, multi_objective="parego"), _Fitted)  # asked for, throughout
    front = fitted(12)
    assert isinstance(front, FittedFront)
    corner = front.front[non_dominated(front.front)].max(axis=0)
    assert np.allclose(front.reference, corner)
    assert (front.reference < 2.5).all()  # the dominated trial at (3, 3, 3) is not spanned

    def late() -> Any:
        gp = create_optimizer("gp", PLANE, directions=(Direction.MINIMIZE,) * 3, seed=0, budget=16)
        gp.update(history, [])
        return gp

    batch = late().suggest(2)  # the second member against the first told as a lie
    assert len({(c["x"], c["y"]) for c in batch}) == 2
    assert late().suggest(2) == batch  # a restarted service suggests the same

    two = _gp(2)
    two.update([_tell(o.params, o.values[:2]) for o in history], [])
    spanning = two._fit(np.random.default_rng(0))
    assert isinstance(spanning, FittedFront)
    assert np.allclose(spanning.reference, reference_point(spanning.front))
    own = spanning.front[non_dominated(spanning.front)]
    assert not np.allclose(spanning.reference, reference_point(own))


def test_each_objective_of_a_front_is_warped_without_saturating() -> None:
    """The models of a front see parameter counts through a warp that keeps the far end of
    the range apart (λ ≥ 0), as the front runs across it."""
    counts = [0.36, 0.54, 0.69, 0.75, 1.37, 1.5, 2.73, 2.99, 5.45, 14.3, 27.8, 33.8]
    rng = np.random.default_rng(3)
    history = [
        _tell({"x": a, "y": b}, (1.0 / count, count))
        for (a, b), count in zip(rng.random((len(counts), 2)), counts, strict=True)
    ]
    gp = _gp(2)
    gp.update(history, [])
    fitted = gp._fit(np.random.default_rng(0))
    assert isinstance(fitted, FittedFront)
    size = np.array(counts)
    expected, _ = warp_losses(size, np.zeros(len(size)), unbounded=True)
    assert np.allclose(fitted.ys[1], expected)
    bounded, _ = warp_losses(size, np.zeros(len(size)))
    assert not np.allclose(fitted.ys[1], bounded)
