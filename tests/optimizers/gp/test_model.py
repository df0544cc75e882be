"""The fast exact GP against scikit-optimize's regressor, and what per-point noise does."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from skopt.learning import GaussianProcessRegressor
from skopt.learning.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from foldwise.optimizers.gp.model import (
    Columns,
    ExactGP,
    Hyper,
    fit_hyper,
    log_prior,
    matern52,
    neg_log_posterior,
)

THETA = np.array([0.3, -0.5, 0.1, -1.0, np.log(0.02)])


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.random((25, 3))
    y = np.sin(X @ np.array([3.0, -2.0, 1.0]))
    return X, (y - y.mean()) / y.std(), rng.random(25) * 0.05


def skopt_model(
    hyper: Hyper, X: np.ndarray, y: np.ndarray, noise: np.ndarray
) -> GaussianProcessRegressor:
    """skopt's regressor with the same kernel and hyperparameters, conditioned on the data."""
    kernel = ConstantKernel(hyper.amplitude) * Matern(hyper.scales, nu=2.5)
    model = GaussianProcessRegressor(kernel + WhiteKernel(hyper.floor), alpha=noise + 1e-8)
    model.optimizer = None  # keep the given hyperparameters
    return model.fit(X, y)


def test_the_likelihood_is_skopts(data) -> None:
    X, y, noise = data
    hyper = Hyper(THETA)
    reference = skopt_model(hyper, X, y, noise)
    ours, _ = neg_log_posterior(THETA, X, y, noise)
    prior, _ = log_prior(hyper)
    assert -(ours + prior) == pytest.approx(reference.log_marginal_likelihood_value_, rel=1e-9)


def test_the_gradient_is_exact(data) -> None:
    X, y, noise = data
    _, gradient = neg_log_posterior(THETA, X, y, noise)
    numeric = approx_fprime(THETA, lambda t: neg_log_posterior(t, X, y, noise)[0], 1e-7)
    assert gradient == pytest.approx(numeric, rel=1e-4, abs=1e-4)


def test_a_categorical_shares_one_length_scale_and_its_gradient_is_exact(data) -> None:
    X, y, noise = data
    onehot = np.eye(3)[np.random.default_rng(2).integers(0, 3, len(X))]
    X = np.hstack([X[:, :1], onehot])  # a numeric column, then a three-level categorical
    columns = Columns.of_blocks([1, 3])
    theta = np.array([0.3, -0.5, 0.2, np.log(0.02)])
    hyper = Hyper(theta, columns)
    assert hyper.scales == pytest.approx(np.exp([-0.5, 0.2, 0.2, 0.2]) * [1, *[np.sqrt(2)] * 3])
    _, gradient = neg_log_posterior(theta, X, y, noise, columns)
    numeric = approx_fprime(theta, lambda t: neg_log_posterior(t, X, y, noise, columns)[0], 1e-7)
    assert gradient == pytest.approx(numeric, rel=1e-4, abs=1e-4)
    # two different categories are one length-scale apart, like the Hamming kernel
    a, b = np.array([[0.0, 1, 0, 0]]), np.array([[0.0, 0, 1, 0]])
    model = ExactGP(hyper, X, y, noise)
    assert model._kernel(a, b)[0, 0] == pytest.approx(hyper.amplitude * matern52(np.exp(-0.2)))


def test_predictions_are_skopts_without_the_noise(data) -> None:
    X, y, noise = data
    hyper = Hyper(THETA)
    reference = skopt_model(hyper, X, y, noise)
    Z = np.random.default_rng(1).random((7, 3))
    mean, std = ExactGP(hyper, X, y, noise).predict(Z, return_std=True)
    ref_mean, ref_std = reference.predict(Z, return_std=True)
    assert mean == pytest.approx(ref_mean, abs=1e-8)
    assert std**2 + hyper.floor == pytest.approx(ref_std**2, abs=1e-8)  # skopt adds the floor


def test_a_fit_finds_the_relevant_columns() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((40, 2))
    y = np.sin(6 * X[:, 0])
    hyper = fit_hyper(X, (y - y.mean()) / y.std(), np.zeros(40), [Hyper.default(2).theta], 100)
    assert 5 * hyper.scales[0] < hyper.scales[1]  # x1 is irrelevant: a long length-scale
    assert hyper.floor < 1e-3  # and the data are exact


def test_a_trial_with_disagreeing_folds_pulls_the_model_less() -> None:
    """A wild mean with a large fold standard error barely moves the prediction there."""
    X = np.linspace(0, 1, 11)[:, None]
    y = np.zeros(11)
    y[5] = -3.0  # an outlier in the middle
    hyper = Hyper(np.array([0.0, np.log(0.3), np.log(1e-4)]))
    exact = ExactGP(hyper, X, y, np.zeros(11)).predict(X[5:6])[0]
    noise = np.zeros(11)
    noise[5] = 9.0  # its folds disagreed: standard error 3
    told = ExactGP(hyper, X, y, noise).predict(X[5:6])[0]
    assert exact == pytest.approx(-3.0, abs=0.05)
    assert -0.5 < told < 0.0
