"""Log expected improvement: skopt's EI where that is representable, finite far beyond it, and
gradients that match finite differences; the polishing of the acquisition search."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.stats import norm
from skopt.acquisition import gaussian_ei

from foldwise.optimizers.gp.acquisition import polish
from foldwise.optimizers.gp.log_ei import log_ei, log_ei_gradient, log_h
from foldwise.optimizers.gp.model import ExactGP, Hyper, dimension_scaled_prior, neg_log_posterior


@pytest.fixture
def model() -> ExactGP:
    rng = np.random.default_rng(1)
    X = rng.random((20, 3))
    y = np.sin(X @ np.array([4.0, -3.0, 2.0]))
    return ExactGP(Hyper(np.array([0.3, -1.0, -0.5, 0.2, -4.0])), X, (y - y.mean()) / y.std(),
                   np.full(20, 0.01))  # fmt: skip


def test_log_h_matches_the_closed_form_and_stays_finite_in_the_far_tail() -> None:
    z = np.array([-30.0, -10.0, -3.0, -1.0, -0.5, 0.0, 2.0, 10.0])
    exact = [math.log(norm.pdf(v) + v * norm.cdf(v)) for v in z[1:]]
    assert log_h(z[1:]) == pytest.approx(exact, rel=1e-9)
    far = log_h(np.array([-40.0, -1e5, -1e9]))
    assert np.all(np.isfinite(far)) and np.all(np.diff(far) < 0)  # still ordered
    # far out, h(z) ≈ φ(z)/z²
    assert far[1] == pytest.approx(-0.5e10 - 0.5 * math.log(2 * math.pi) - 2 * math.log(1e5))


def test_log_ei_is_the_log_of_skopts_ei(model) -> None:
    X = np.random.default_rng(2).random((50, 3))
    best = float(model.predict(model.X).min())
    ei = gaussian_ei(X, model, y_opt=best, xi=0.01)
    visible = ei > 1e-300
    assert visible.sum() > 10
    assert log_ei(model, X, best, 0.01)[visible] == pytest.approx(np.log(ei[visible]), rel=1e-8)


def test_log_ei_ranks_points_where_ei_underflows(model) -> None:
    X = np.random.default_rng(3).random((200, 3))
    best = float(model.predict(model.X).min()) - 40.0  # a record no point is likely to beat
    assert np.all(gaussian_ei(X, model, y_opt=best) == 0.0)
    values = log_ei(model, X, best)
    assert np.all(np.isfinite(values)) and len(np.unique(values)) == len(X)


def test_gradients_match_finite_differences(model) -> None:
    X = np.random.default_rng(4).random((4, 3))
    best = float(model.predict(model.X).min())
    mean, std, d_mean, d_std = model.predict_gradient(X)
    assert mean == pytest.approx(model.predict(X))
    assert std == pytest.approx(model.predict(X, return_std=True)[1])
    values, grads = log_ei_gradient(model, X, best, 0.01)
    for x, grad in zip(X, grads, strict=True):
        numeric = approx_fprime(x, lambda p: log_ei(model, p[None], best, 0.01)[0], 1e-7)
        assert grad == pytest.approx(numeric, rel=1e-4, abs=1e-5)
        numeric_mean = approx_fprime(x, lambda p: model.predict(p[None])[0], 1e-7)
        assert model.predict_gradient(x[None])[2][0] == pytest.approx(numeric_mean, rel=1e-4)


def test_polish_climbs_the_acquisition_and_holds_other_columns(model) -> None:
    best = float(model.predict(model.X).min())
    starts = np.random.default_rng(5).random((3, 3))
    polished = polish(lambda Z: log_ei_gradient(model, Z, best), starts, numeric=[0, 2])
    assert polished[:, 1] == pytest.approx(starts[:, 1])
    assert np.all((polished >= 0.0) & (polished <= 1.0))
    before, after = log_ei(model, starts, best), log_ei(model, polished, best)
    assert after.sum() > before.sum() + 1e-3


def test_the_dimension_scaled_prior_gradient_is_exact() -> None:
    rng = np.random.default_rng(6)
    X, y, noise = rng.random((15, 4)), rng.normal(size=15), np.full(15, 0.01)
    theta = np.array([0.2, -0.5, 0.3, 1.5, -1.0, -3.0])
    _, gradient = neg_log_posterior(theta, X, y, noise, None, "dimension-scaled")
    numeric = approx_fprime(
        theta, lambda t: neg_log_posterior(t, X, y, noise, None, "dimension-scaled")[0], 1e-7
    )
    assert gradient == pytest.approx(numeric, rel=1e-4, abs=1e-4)
    # at ℓ = 0.5 the prior pulls length-scales shorter in 2 dimensions and longer in 20
    for dims, sign in ((2, -1.0), (20, 1.0)):
        hyper = Hyper(np.array([0.0, *np.full(dims, math.log(0.5)), -3.0]))
        assert np.all(np.sign(dimension_scaled_prior(hyper)[1][1:-1]) == sign)
