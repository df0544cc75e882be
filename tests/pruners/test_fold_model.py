"""The study's fold model: fold offsets and trial-by-fold noise learnt from all its trials, the
predictive of a trial's mean over all folds, and the ``model`` racing rule built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foldwise.pruners.fold_model import MIN_POOL_DOF, PRIOR_DOF, fit_fold_model
from foldwise.pruners.racing import Incumbent, behind, race_verdict
from foldwise.racing import Racing

MODEL = Racing(rule="model", min_folds=1, alpha=0.1)


def synthetic_study(
    seed: int, *, trials: int = 30, folds: int = 5, noise: float = 0.02, missing: float = 0.0
) -> tuple[dict[int, dict[int, float]], np.ndarray, np.ndarray]:
    """Fold values y = level + offset + noise, some folds not run; with the true levels and
    offsets."""
    rng = np.random.default_rng(seed)
    levels = rng.uniform(0.1, 0.5, trials)
    offsets = rng.normal(0.0, 0.05, folds)
    offsets -= offsets.mean()
    table = {}
    for t in range(trials):
        ran = [k for k in range(folds) if k == 0 or rng.random() >= missing]
        table[t] = {k: levels[t] + offsets[k] + rng.normal(0, noise) for k in ran}
    return table, levels, offsets


def test_the_fit_recovers_the_fold_offsets_and_the_noise_with_folds_missing() -> None:
    table, _levels, offsets = synthetic_study(0, trials=200, missing=0.4)
    model = fit_fold_model(table)
    assert model is not None
    fitted = np.array([model.offsets[k] for k in range(5)])
    assert np.max(np.abs(fitted - offsets)) < 0.006  # offsets spread 0.05, noise 0.02
    assert model.noise == pytest.approx(0.02, rel=0.1)
    assert model.trials == sum(len(row) >= 2 for row in table.values())


def test_a_trial_with_one_fold_is_not_fitted_and_too_small_a_pool_gives_no_model() -> None:
    assert fit_fold_model({}) is None
    assert fit_fold_model({0: {0: 0.1}, 1: {0: 0.2}}) is None
    assert fit_fold_model({0: {0: 0.1, 1: 0.2}, 1: {0: 0.3, 1: float("nan")}}) is None
    # two trials on five folds: 10 values - 2 levels - 4 offsets = 4 residual dof
    two = {0: {k: 0.1 + 0.01 * k for k in range(5)}, 1: {k: 0.2 + 0.01 * k for k in range(5)}}
    assert MIN_POOL_DOF <= 4 and fit_fold_model(two).offsets[4] == pytest.approx(0.02)


def test_one_completed_trial_gives_a_model_without_offsets_that_takes_its_spread_for_noise():
    values = [0.10, 0.12, 0.30, 0.11, 0.13]
    one = fit_fold_model({0: dict(enumerate(values))})  # 5 - 1 - 4 = 0 dof for offsets
    assert one is not None and one.offsets == {} and one.dof == 4
    assert one.noise == pytest.approx(np.std(values, ddof=1))
    assert fit_fold_model({0: {0: 0.1, 1: 0.2, 2: 0.3}}) is None  # 2 dof only


def test_a_hard_fold_is_not_held_against_the_trial_that_drew_it() -> None:
    table, _levels, _offsets = synthetic_study(1, trials=40)
    model = fit_fold_model(table)
    hard = max(model.offsets, key=model.offsets.get)
    easy = min(model.offsets, key=model.offsets.get)
    # the same level seen on the hardest and on the easiest fold predicts the same mean
    level = 0.3
    on_hard, _, _ = model.predict_mean({hard: level + model.offsets[hard]}, 5)
    on_easy, _, _ = model.predict_mean({easy: level + model.offsets[easy]}, 5)
    assert on_hard == pytest.approx(on_easy)
    assert on_hard == pytest.approx(level + np.mean(list(model.offsets.values())))


def test_the_predictive_scale_shrinks_to_nothing_as_the_folds_run() -> None:
    table, _levels, _offsets = synthetic_study(2)
    model = fit_fold_model(table)
    values = {0: 0.3, 1: 0.31, 2: 0.29, 3: 0.3, 4: 0.32}
    scales = [model.predict_mean(dict(list(values.items())[:n]), 5)[1] for n in range(1, 6)]
    assert all(a > b for a, b in zip(scales, scales[1:], strict=False))
    assert scales[-1] == 0.0
    centre, _, _ = model.predict_mean(values, 5)
    assert centre == pytest.approx(np.mean(list(values.values())))  # all folds: their mean
    assert model.chance_below(values, 0.31, 5) == 1.0
    assert model.chance_below(values, 0.30, 5) == 0.0


def test_a_trial_whose_own_folds_scatter_more_than_the_pool_is_judged_less_sure() -> None:
    table, _levels, _offsets = synthetic_study(3)
    model = fit_fold_model(table)
    steady = {0: 0.30 + model.offsets[0], 1: 0.30 + model.offsets[1]}
    wild = {0: 0.20 + model.offsets[0], 1: 0.40 + model.offsets[1]}
    assert model.predict_mean(steady, 5)[1] < model.predict_mean(wild, 5)[1]
    assert model.predict_mean(wild, 5)[2] == PRIOR_DOF + 1


@pytest.mark.parametrize("first_folds", [1, 2, 3])
def test_the_chance_is_calibrated_on_simulated_studies(first_folds: int) -> None:
    """The probability the model gives a trial's mean over all folds to come out below its
    true value is uniform over many simulated studies and trials (each fifth of the range
    holds a fifth of them): the predictive is neither too sure nor too unsure."""
    chances = []
    for seed in range(100):
        table, _levels, offsets = synthetic_study(seed, trials=25, noise=0.03)
        model = fit_fold_model(table)
        rng = np.random.default_rng(1000 + seed)
        for _ in range(20):
            level = rng.uniform(0.1, 0.5)
            full = {k: level + offsets[k] + rng.normal(0, 0.03) for k in range(5)}
            partial = {k: full[k] for k in range(first_folds)}
            chances.append(model.chance_below(partial, float(np.mean(list(full.values()))), 5))
    shares = np.histogram(chances, bins=5, range=(0.0, 1.0))[0] / len(chances)
    assert np.all(np.abs(shares - 0.2) < 0.03), shares


def test_the_model_rule_prunes_after_one_fold_and_says_why() -> None:
    table, _levels, _offsets = synthetic_study(4, noise=0.01)
    model = fit_fold_model(table)
    incumbent = Incumbent(7, {k: 0.1 + model.offsets[k] for k in range(5)})
    far = {2: 0.3 + model.offsets[2]}
    reason = race_verdict(MODEL, far, incumbent, folds=5, maximize=False, model=model)
    assert reason is not None and reason.startswith("after 1 of 5 folds: ")
    assert "vs incumbent (trial 7) 0.1," in reason and "< 0.1 to beat it" in reason
    close = {2: 0.105 + model.offsets[2]}
    assert race_verdict(MODEL, close, incumbent, folds=5, maximize=False, model=model) is None


def test_the_model_rule_waits_for_a_pool_min_folds_and_a_full_incumbent() -> None:
    table, _levels, _offsets = synthetic_study(5, noise=0.01)
    model = fit_fold_model(table)
    incumbent = Incumbent(0, {k: 0.1 for k in range(5)})
    far = {0: 0.9}
    kwargs = {"folds": 5, "maximize": False}
    assert race_verdict(MODEL, far, incumbent, model=None, **kwargs) is None
    two = Racing(rule="model", min_folds=2)
    assert race_verdict(two, far, incumbent, model=model, **kwargs) is None
    partial = Incumbent(0, {k: 0.1 for k in range(4)})
    assert race_verdict(MODEL, far, partial, model=model, **kwargs) is None
    assert race_verdict(MODEL, far, incumbent, model=model, **kwargs) is not None


def test_the_model_rule_prunes_the_lower_trial_when_maximizing() -> None:
    table, _levels, _offsets = synthetic_study(6, noise=0.01)
    losses = fit_fold_model(table)
    accuracy = Incumbent(1, {k: 0.9 - losses.offsets[k] for k in range(5)})
    kwargs = {"folds": 5, "maximize": True, "model": losses}
    assert race_verdict(MODEL, {0: 0.6 - losses.offsets[0]}, accuracy, **kwargs) is not None
    assert race_verdict(MODEL, {0: 0.9 - losses.offsets[0]}, accuracy, **kwargs) is None
    assert math.isfinite(losses.noise)


def test_behind_is_below_even_odds_by_the_model_and_a_worse_mean_by_the_other_rules() -> None:
    table, _levels, _offsets = synthetic_study(7, noise=0.02)
    model = fit_fold_model(table)
    incumbent = Incumbent(0, {k: 0.2 + model.offsets[k] for k in range(5)})
    kwargs = {"folds": 5, "maximize": False}
    assert behind(MODEL, {1: 0.21 + model.offsets[1]}, incumbent, model=model, **kwargs)
    assert not behind(MODEL, {1: 0.19 + model.offsets[1]}, incumbent, model=model, **kwargs)
    assert not behind(MODEL, {1: 0.9}, incumbent, model=None, **kwargs)  # no pool yet
    assert not behind(MODEL, {1: 0.9}, None, model=model, **kwargs)
    forgiving = Racing(rule="forgiving")
    # on folds 1 and 2 the incumbent has 0.2 + offsets; a fold-by-fold gap of +0.01 is behind
    worse = {k: incumbent.values[k] + 0.01 for k in (1, 2)}
    assert behind(forgiving, worse, incumbent, **kwargs)
    assert not behind(forgiving, worse, incumbent, folds=5, maximize=True)
    assert not behind(forgiving, {}, incumbent, **kwargs)
