import numpy as np
import pytest
from scipy.stats import yeojohnson

from foldwise.optimizers.gp.output_warp import warp_losses, yeo_johnson_slope

# validation losses of a small MLP: most runs train, two learning rates diverge
DIVERGING = np.array([0.121, 0.134, 0.19, 0.47, 0.128, 45.9, 3.72, 0.252, 0.143, 1.87])
# thousands of parameters of the digits CNNs one search tried: most small, a few large; the
# maximum-likelihood λ is below 0, where the transform is bounded above
PARAM_COUNTS = np.array([0.36, 0.54, 0.69, 0.75, 1.37, 1.5, 2.73, 2.99, 5.45, 14.3, 27.8, 33.8])


@pytest.mark.parametrize("losses", [DIVERGING, -DIVERGING, DIVERGING - 1.0])
def test_the_warp_keeps_the_order_and_standardises(losses):
    z, _ = warp_losses(losses, np.zeros(len(losses)))
    assert np.array_equal(np.argsort(z), np.argsort(losses))
    assert z.mean() == pytest.approx(0.0, abs=1e-12)
    assert z.std() == pytest.approx(1.0)


def test_the_warp_pulls_in_a_diverged_run_so_good_runs_stay_apart():
    plain, _ = warp_losses(DIVERGING, np.zeros(len(DIVERGING)), "none")
    warped, _ = warp_losses(DIVERGING, np.zeros(len(DIVERGING)))
    best, second = np.argsort(DIVERGING)[:2]
    # unwarped, the one diverged run is the whole variance and the best runs look identical
    assert plain[second] - plain[best] < 0.001
    assert warped[second] - warped[best] > 10 * (plain[second] - plain[best])
    assert warped.max() < plain.max()


def test_no_warp_is_plain_standardisation():
    errors = np.linspace(0.0, 0.05, len(DIVERGING))
    z, noise = warp_losses(DIVERGING, errors, "none")
    spread = DIVERGING.std()
    assert np.allclose(z, (DIVERGING - DIVERGING.mean()) / spread)
    assert np.allclose(noise, (errors / spread) ** 2)


@pytest.mark.parametrize(
    ("losses", "unbounded"),
    [(DIVERGING, False), (1.0 - DIVERGING, False), (PARAM_COUNTS, True)],
)
def test_fold_errors_follow_the_warp_by_its_slope(losses, unbounded):
    """se_warped = ψ'(y)·se: nudging one loss (λ and the scales held) moves its warped value by
    the slope the noise was scaled with; with λ held at 0 (``unbounded``), the slope of the
    transform actually applied."""
    errors = np.full(len(losses), 0.01)
    _, noise = warp_losses(losses, errors, unbounded=unbounded)
    spread = losses.std()
    lam = 0.0 if unbounded else yeojohnson(losses / spread)[1]
    warped = yeojohnson(losses / spread, lmbda=lam)
    step = 1e-7
    for i in range(len(losses)):
        nudged = yeojohnson((losses[i] + step) / spread, lam)
        slope = (nudged - warped[i]) / step
        assert np.sqrt(noise[i]) == pytest.approx(slope * 0.01 / warped.std(), rel=1e-4)


def test_the_slope_of_yeo_johnson_matches_finite_differences_on_both_signs():
    x = np.array([-3.0, -0.4, 0.0, 0.7, 5.0])
    for lam in (-1.5, 0.0, 0.5, 1.0, 2.0, 2.7):
        step = 1e-7
        numeric = (yeojohnson(x + step, lam) - yeojohnson(x - step, lam)) / (2 * step)
        assert np.allclose(yeo_johnson_slope(x, lam), numeric, rtol=1e-5)


def test_equal_losses_give_a_flat_target():
    z, noise = warp_losses(np.full(4, 0.3), np.full(4, 0.01))
    assert not z.any() and not noise.any()


def test_an_unbounded_warp_keeps_a_fronts_far_end_apart() -> None:
    """λ < 0 squeezes every large value towards one bound, so 14 and 34 thousand parameters
    look nearly alike; held at λ = 0, the far end keeps its spread and the order stays."""
    assert yeojohnson(PARAM_COUNTS / PARAM_COUNTS.std())[1] < 0
    bounded, _ = warp_losses(PARAM_COUNTS, np.zeros(len(PARAM_COUNTS)))
    unbounded, _ = warp_losses(PARAM_COUNTS, np.zeros(len(PARAM_COUNTS)), unbounded=True)
    assert np.array_equal(np.argsort(unbounded), np.argsort(PARAM_COUNTS))
    assert unbounded[-1] - unbounded[-3] > 2 * (bounded[-1] - bounded[-3])
    at_zero = yeojohnson(PARAM_COUNTS / PARAM_COUNTS.std(), lmbda=0.0)
    assert np.allclose(unbounded, (at_zero - at_zero.mean()) / at_zero.std())


def test_an_unbounded_warp_changes_nothing_where_the_fitted_one_is_unbounded() -> None:
    symmetric = np.array([-1.2, -0.5, -0.1, 0.0, 0.2, 0.4, 0.9, 1.3])
    assert 0 <= yeojohnson(symmetric / symmetric.std())[1] <= 2
    errors = np.full(len(symmetric), 0.05)
    for got, want in zip(
        warp_losses(symmetric, errors, unbounded=True), warp_losses(symmetric, errors), strict=True
    ):
        assert np.allclose(got, want)
