"""The GP optimizer's own policies: failure penalty, lies, initial design, noise, speed."""

from __future__ import annotations

import numpy as np
import pytest

import foldwise.optimizers.gp.fit as gp_fit
import foldwise.optimizers.gp.optimizer as gp_optimizer
from foldwise.optimizers.base import Observation, OptionError
from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.gp import GPOptimizer
from foldwise.optimizers.gp.acquisition import MIN_GAP, maximize_acquisition, too_close
from foldwise.optimizers.gp.fit import keep_rows, penalize_failures
from foldwise.optimizers.sampling import config_key
from foldwise.spec import Direction
from tests.optimizers.problems import PLANE, make_space, observe


def test_failures_cost_the_worst_loss_plus_a_tenth_of_the_spread() -> None:
    losses = np.array([1.0, np.nan, 3.0, np.nan])
    assert penalize_failures(losses) == pytest.approx([1.0, 3.2, 3.0, 3.2])
    assert penalize_failures(np.array([-5.0, np.nan])) == pytest.approx([-5.0, -4.5])
    assert penalize_failures(np.array([np.nan, np.nan])) == pytest.approx([0.0, 0.0])


def test_long_studies_keep_the_best_half_and_the_most_recent_rest() -> None:
    y = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 0.0])
    assert keep_rows(y, 4).tolist() == [1, 3, 4, 5]
    assert keep_rows(y, 6).tolist() == list(range(6))


def test_a_long_study_is_modelled_from_a_bounded_window() -> None:
    optimizer = GPOptimizer(PLANE, seed=0, max_points=100, candidates=100, restarts=0)
    rng = np.random.default_rng(0)
    configs = [{"x": float(a), "y": float(b)} for a, b in rng.random((400, 2))]
    optimizer.update([observe(c, c["x"] - c["y"]) for c in configs], [])
    (config,) = optimizer.suggest(1)
    assert config["x"] < 0.2 and config["y"] > 0.8


def test_the_initial_design_counts_pending_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_model(*args: object) -> None:
        raise AssertionError("the model was fitted during the initial design")

    monkeypatch.setattr(gp_optimizer, "fit_model", no_model)
    optimizer = GPOptimizer(PLANE, n_initial=6)
    history = [observe({"x": 0.1 * i, "y": 0.5}, float(i)) for i in range(3)]
    optimizer.update(history, [{"x": 0.9, "y": 0.9}])
    assert len(optimizer.suggest(2)) == 2  # trials 5 and 6 of the initial design
    with pytest.raises(AssertionError, match="initial design"):
        optimizer.suggest(3)


def test_the_sobol_initial_design_spreads_evenly_and_resumes_where_it_was() -> None:
    from foldwise.space import CategoricalParam, FloatParam

    space = {
        "x": FloatParam(type="float", low=0.0, high=1.0),
        "kind": CategoricalParam(type="categorical", choices=["a", "b", "c", "d"]),
    }
    optimizer = GPOptimizer(space, seed=5, n_initial=8, initial="sobol")
    design = optimizer.suggest(8)
    assert sorted(int(c["x"] * 8) for c in design) == list(range(8))  # one per eighth
    assert sorted(c["kind"] for c in design) == ["a", "a", "b", "b", "c", "c", "d", "d"]
    restarted = GPOptimizer(space, seed=5, n_initial=8, initial="sobol")
    restarted.update([observe(c, 1.0) for c in design[:3]], design[3:5])
    assert restarted.suggest(3) == design[5:]
    other_seed = GPOptimizer(space, seed=6, n_initial=8, initial="sobol").suggest(8)
    assert other_seed != design


def test_one_objective_over_a_box_starts_from_a_sobol_design() -> None:
    """Not asked for, the first trials of a box are a Sobol sequence's: one per eighth of a
    parameter's range in eight trials, where independent draws leave gaps."""
    line = make_space({"x": {"type": "float", "low": 0.0, "high": 1.0}})
    for seed in range(5):
        design = GPOptimizer(line, seed=seed, n_initial=8).suggest(8)
        assert sorted(int(c["x"] * 8) for c in design) == list(range(8))


def test_no_standard_error_and_a_zero_one_are_the_same_information() -> None:
    """A trial that reports no standard error (the Ray Tune searcher's, a task without folds)
    is modelled as exact, as one that reports 0: the same model and the same suggestions,
    seeded draws included; a standard error that is given is heard as noise."""
    configs = [{"x": 0.1 * i, "y": (0.37 * i) % 1.0} for i in range(1, 13)]

    def told(std_error: float | None) -> GPOptimizer:
        optimizer = GPOptimizer(PLANE, seed=3)
        history = [Observation(c, (c["x"] - 0.4) ** 2 + c["y"], std_error) for c in configs]
        optimizer.update(history, [])
        return optimizer

    nothing, zero, some = told(None), told(0.0), told(0.3)
    assert nothing.suggest(2) == zero.suggest(2)
    assert not nothing._targets()[1].any() and not zero._targets()[1].any()
    assert (some._targets()[1] > 0).all()


def test_maximised_values_are_negated_and_fold_noise_is_scaled() -> None:
    optimizer = GPOptimizer(PLANE, direction="maximize", warp="none")
    history = [observe({"x": 0.1, "y": 0.1}, 1.0), observe({"x": 0.2, "y": 0.1}, 3.0)]
    history.append(observe({"x": 0.3, "y": 0.1}, None))
    history[1] = type(history[1])(history[1].params, 3.0, std_error=0.5)
    optimizer.update(history, [])
    y, noise = optimizer._targets()
    assert np.argsort(y).tolist() == [1, 0, 2]  # 3.0 is best, the failure is worst
    scale = np.std([-1.0, -3.0, -1.0 + 0.2])
    assert noise == pytest.approx([0.0, (0.5 / scale) ** 2, 0.0])
    warped = GPOptimizer(PLANE, direction="maximize")  # the warp is tested on its own
    warped.update(history, [])
    y, noise = warped._targets()
    assert np.argsort(y).tolist() == [1, 0, 2] and noise[1] > 0 and not noise[[0, 2]].any()


@pytest.mark.parametrize("liar", ["believer", "min", "mean", "max"])
def test_every_liar_keeps_a_batch_apart(liar: str) -> None:
    optimizer = GPOptimizer(PLANE, seed=1, n_initial=4, liar=liar, candidates=200)
    history = [observe(c, c["x"] + c["y"]) for c in GPOptimizer(PLANE, seed=9).suggest(8)]
    optimizer.update(history, [{"x": 0.0, "y": 0.0}])
    batch = optimizer.suggest(3)
    points = np.array([[c["x"], c["y"]] for c in batch + [{"x": 0.0, "y": 0.0}]])
    gaps = np.linalg.norm(points[:, None] - points[None], axis=2) + np.eye(4)
    assert gaps.min() > 1e-3


def test_eis_margin_anneals_over_the_budget() -> None:
    optimizer = GPOptimizer(PLANE, budget=20, xi=0.02)
    history = [observe({"x": 0.05 * i, "y": 0.5}, float(i)) for i in range(10)]
    optimizer.update(history, [])
    assert optimizer.margin() == pytest.approx(0.01)
    optimizer.update(history * 2, [])
    assert optimizer.margin() == 0.0
    assert GPOptimizer(PLANE, xi=0.02).margin() == 0.02  # no budget: constant


def test_the_acquisition_search_keeps_clear_of_running_trials() -> None:
    """A score that peaks on a running trial at the edge still yields a point MIN_GAP away."""
    encoding = SpaceEncoding(PLANE)
    running = np.array([[1.0, 0.5]])

    def peak(X: np.ndarray) -> np.ndarray:
        return -np.linalg.norm(X - running, axis=1)

    config = maximize_acquisition(
        peak, encoding, np.random.default_rng(0), anchors=running, seen=set(), candidates=200,
        avoid=running,
    )  # fmt: skip
    gap = np.hypot(config["x"] - 1.0, config["y"] - 0.5)
    assert MIN_GAP <= gap < 2 * MIN_GAP


def test_the_polishing_climbs_from_the_best_observed_configuration_too() -> None:
    """A narrow peak beside the incumbent, which no candidate comes near in six dimensions,
    is found by polishing from the incumbent; the candidates' leaders sit on a broad, lower
    hill elsewhere and would win without it."""
    encoding = SpaceEncoding(make_space({f"x{i}": {"type": "float", "low": 0.0, "high": 1.0}
                                         for i in range(6)}))  # fmt: skip
    incumbent = np.full((1, 6), 0.2)
    peak = incumbent + np.array([0.03, 0, 0, 0, 0, 0])

    def gradient(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        near, far = X - peak, X - 0.8
        narrow = 2.0 * np.exp(-(near**2).sum(1) / (2 * 0.02**2))
        broad = np.exp(-(far**2).sum(1) / (2 * 0.3**2))
        grads = -narrow[:, None] * near / 0.02**2 - broad[:, None] * far / 0.3**2
        return narrow + broad, grads

    config = maximize_acquisition(
        lambda X: gradient(X)[0], encoding, np.random.default_rng(0), anchors=incumbent,
        seen={config_key(encoding.decode(incumbent)[0])}, candidates=200, gradient=gradient,
    )  # fmt: skip
    found = np.array([[config[f"x{i}"] for i in range(6)]])
    assert np.abs(found - peak).max() < 0.01


def test_too_close_measures_distance_to_running_trials() -> None:
    X = np.array([[0.0, 0.0], [0.5, 0.5], [1.0, 0.99]])
    avoid = np.array([[1.0, 1.0]])
    assert too_close(X, avoid).tolist() == [False, False, True]
    assert too_close(X, None).tolist() == [False, False, False]


def test_candidates_are_scored_by_the_acquisition_with_running_trials_told() -> None:
    """score_candidates: None before the model can learn; near the best result scores above a
    far corner; a candidate on top of a running trial scores below the same point free."""
    optimizer = GPOptimizer(PLANE, seed=0)
    optimizer.update([observe({"x": 0.5, "y": 0.5}, 1.0)], [])
    assert optimizer.score_candidates([{"x": 0.1, "y": 0.1}], []) is None
    history = [
        observe({"x": x, "y": y}, (x - 0.2) ** 2 + (y - 0.3) ** 2)
        for x, y in np.random.default_rng(0).uniform(0, 1, size=(15, 2))
    ]
    optimizer.update(history, [])
    near, far = {"x": 0.22, "y": 0.31}, {"x": 0.95, "y": 0.95}
    free = optimizer.score_candidates([near, far], [])
    assert free is not None and free[0] > free[1]
    crowded = optimizer.score_candidates([near], [near])
    assert crowded is not None and crowded[0] < free[0]


@pytest.mark.parametrize("prior_mean", [None, "average"])
def test_far_from_every_trial_the_model_expects_the_worst_loss_told(
    prior_mean: str | None,
) -> None:
    """One objective's default prior mean is the worst loss told: a region the model knows
    nothing of promises no improvement but through its variance. ``prior_mean: average`` (the
    default with several objectives) expects the losses' mean there instead."""
    box = make_space({f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(6)})
    optimizer = GPOptimizer(box, seed=0, prior_mean=prior_mean)
    rng = np.random.default_rng(1)
    corner = [{f"x{i}": float(v) for i, v in enumerate(row)} for row in 0.15 * rng.random((12, 6))]
    optimizer.update([observe(c, sum(c.values())) for c in corner], [])
    fitted = optimizer._fit(np.random.default_rng(0))
    far = float(fitted.believed.predict(np.ones((1, 6)))[0])
    spread = float(fitted.y.max() - fitted.y.min())
    expected = fitted.y.mean() if prior_mean == "average" else fitted.y.max()
    assert abs(far - expected) < 0.05 * spread
    assert abs(fitted.y.max() - fitted.y.mean()) > 0.3 * spread  # the two differ


def _defaults(optimizer: GPOptimizer) -> tuple[str, str, str]:
    return optimizer.prior_mean, optimizer.prior, optimizer.initial


ONE_BOX = ("worst", "dimension-scaled", "sobol")
OTHERWISE = ("average", "optuna", "random")


def test_one_objective_over_a_box_has_defaults_of_its_own() -> None:
    """The worst loss as the prior mean, BoTorch's length-scale prior and a Sobol design for one
    objective with a numeric parameter; the average, Optuna's prior and random draws among
    categories only and with several objectives; any of them can be asked for anywhere."""
    assert _defaults(GPOptimizer(PLANE)) == ONE_BOX
    cells = make_space(
        {f"edge{i}": {"type": "categorical", "choices": ["a", "b"]} for i in range(3)}
    )
    assert _defaults(GPOptimizer(cells)) == OTHERWISE  # no box, no corners to keep EI from
    with_depth = {**cells, **make_space({"depth": {"type": "int", "low": 1, "high": 4}})}
    assert _defaults(GPOptimizer(with_depth)) == ONE_BOX
    two = GPOptimizer(PLANE, directions=[Direction.MINIMIZE, Direction.MAXIMIZE])
    assert _defaults(two) == OTHERWISE
    asked = GPOptimizer(cells, prior="dimension-scaled", initial="sobol", prior_mean="worst")
    assert _defaults(asked) == ONE_BOX
    assert _defaults(GPOptimizer(PLANE, prior="optuna", initial="random")) == (
        "worst",
        *OTHERWISE[1:],
    )
    for option in ("prior", "initial", "multi_objective"):
        with pytest.raises(OptionError, match=option):
            GPOptimizer(PLANE, **{option: ""})
    assert (
        GPOptimizer(PLANE, directions=[Direction.MINIMIZE] * 2, prior_mean="worst").prior_mean
        == "worst"
    )
    assert GPOptimizer(cells, prior_mean="worst").prior_mean == "worst"
    with pytest.raises(OptionError):
        GPOptimizer(PLANE, prior_mean="")


def test_a_long_studys_suggestion_works_on_bounded_matrices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 2,000 results and 32 trials pending, the hyperparameters are fitted and polished
    on at most ``POLISH_POINTS`` rows and the model conditions on at most ``max_points`` (its
    default) plus the pending trials: the cost of a suggestion stops growing with the study."""
    fitted_rows: list[int] = []
    conditioned_rows: list[int] = []
    fit_hyper, exact_gp = gp_fit.fit_hyper, gp_fit.ExactGP

    def recording_fit(X: np.ndarray, *args: object, **kwargs: object) -> object:
        fitted_rows.append(len(X))
        return fit_hyper(X, *args, **kwargs)

    class RecordingGP(exact_gp):  # type: ignore[misc, valid-type]
        def __init__(self, hyper: object, X: np.ndarray, *args: object) -> None:
            conditioned_rows.append(len(X))
            super().__init__(hyper, X, *args)

    monkeypatch.setattr(gp_fit, "fit_hyper", recording_fit)
    monkeypatch.setattr(gp_fit, "ExactGP", RecordingGP)
    rng = np.random.default_rng(0)
    configs = [{"x": float(a), "y": float(b)} for a, b in rng.random((2032, 2))]
    optimizer = GPOptimizer(PLANE, seed=0, candidates=100)
    optimizer.update([observe(c, c["x"] - c["y"]) for c in configs[:2000]], configs[2000:])
    (config,) = optimizer.suggest(1)
    assert fitted_rows and max(fitted_rows) == gp_fit.POLISH_POINTS
    assert max(conditioned_rows) == gp_optimizer.MAX_POINTS_DEFAULT + 32
    assert config["x"] < 0.2 and config["y"] > 0.8  # and it still finds the corner
