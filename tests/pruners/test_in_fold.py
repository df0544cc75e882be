"""Pruning inside a fold: a run against other trials' runs of the same fold, epoch by epoch."""

from __future__ import annotations

from foldwise.pruners.in_fold import FoldCurves, best_so_far, prune_verdict
from foldwise.racing import Pruning

MEDIAN = Pruning(rule="median", warmup_epochs=2, min_runs=3)
ASHA = Pruning(rule="asha", warmup_epochs=1, min_runs=2, eta=3)


def curves_of(*runs: list[float], fold: int = 0, maximize: bool = False) -> FoldCurves:
    curves = FoldCurves(maximize=maximize)
    for run in runs:
        curves.add(fold, run, finished=True)
    return curves


def test_best_so_far_is_a_running_best_that_skips_non_finite_values() -> None:
    assert best_so_far([3.0, 2.0, float("nan"), 2.5, 1.0], 1.0) == [3.0, 2.0, 2.0, 2.0, 1.0]
    assert best_so_far([0.5, 0.7, 0.6], -1.0) == [-0.5, -0.7, -0.7]


def test_references_are_the_same_fold_at_the_same_epoch() -> None:
    curves = FoldCurves(maximize=False)
    curves.add(0, [1.0, 0.8, 0.6], finished=True)
    curves.add(0, [1.0, 0.5], finished=True)  # stopped early: its best holds later
    curves.add(0, [2.0], finished=False)  # pruned at epoch 1: no value after it
    curves.add(1, [0.1, 0.1, 0.1], finished=True)
    assert curves.at(0, 1) == [1.0, 1.0, 2.0]
    assert curves.at(0, 3) == [0.6, 0.5]
    assert curves.at(1, 2) == [0.1] and curves.at(2, 1) == []


def test_median_prunes_a_run_worse_than_the_median_after_warm_up() -> None:
    curves = curves_of([0.9, 0.5, 0.4], [1.0, 0.6, 0.5], [0.8, 0.7, 0.6])
    assert prune_verdict(MEDIAN, curves, 0, [5.0], epochs=5) is None  # warming up
    reason = prune_verdict(MEDIAN, curves, 0, [1.2, 0.65], epochs=5)
    assert reason == (
        "fold 0 at epoch 2: 0.65, worse than the median 0.6 of 3 other trials' runs of that "
        "fold (median rule)"
    )
    assert prune_verdict(MEDIAN, curves, 0, [1.2, 0.55], epochs=5) is None
    assert prune_verdict(MEDIAN, curves, 1, [1.2, 0.65], epochs=5) is None  # no runs of fold 1


def test_too_few_references_or_the_last_epoch_never_prune() -> None:
    curves = curves_of([0.1, 0.1], [0.1, 0.1])
    assert prune_verdict(MEDIAN, curves, 0, [9.0, 9.0], epochs=5) is None
    curves.add(0, [0.1, 0.1], finished=True)
    assert prune_verdict(MEDIAN, curves, 0, [9.0, 9.0], epochs=5) is not None
    assert prune_verdict(MEDIAN, curves, 0, [9.0, 9.0], epochs=2) is None  # nothing to save


def test_median_on_a_maximised_metric() -> None:
    curves = curves_of([0.5, 0.9], [0.6, 0.9], [0.7, 0.95], maximize=True)
    assert prune_verdict(MEDIAN, curves, 0, [0.3, 0.8], epochs=4) is not None
    assert prune_verdict(MEDIAN, curves, 0, [0.3, 0.92], epochs=4) is None


def test_asha_decides_at_rungs_only_and_keeps_the_top_third() -> None:
    curves = curves_of(*[[v] * 9 for v in (0.1, 0.2, 0.3, 0.4, 0.5)])
    # rungs at 1, 3 and 9 epochs; 6 runs with this one: the top 2 go on
    assert prune_verdict(ASHA, curves, 0, [0.15], epochs=27) is None
    assert prune_verdict(ASHA, curves, 0, [0.25], epochs=27) == (
        "fold 0 at epoch 1: 0.25 ranks 3 of 6 runs of that fold at this rung; the top 2 go on "
        "(asha, eta 3)"
    )
    assert prune_verdict(ASHA, curves, 0, [0.9, 0.9], epochs=27) is None  # not a rung
    assert prune_verdict(ASHA, curves, 0, [0.9, 0.9, 0.9], epochs=27) is not None
    assert prune_verdict(ASHA, curves, 0, [0.2, 0.2, 0.2], epochs=27) is None  # tie goes on


CURVE = Pruning(rule="curve", warmup_epochs=2, min_runs=2)


def _pow(level: float, scale: float, rate: float, epochs: int) -> list[float]:
    return [level + scale * t**-rate for t in range(1, epochs + 1)]


def test_curve_prunes_a_run_on_course_to_end_worse_than_the_folds_best() -> None:
    curves = curves_of(_pow(0.10, 0.5, 0.8, 20), _pow(0.15, 0.5, 0.8, 20))
    heading_high = _pow(0.40, 0.5, 0.8, 6)  # levels off near 0.40: far from 0.10
    reason = prune_verdict(CURVE, curves, 0, heading_high, epochs=20)
    assert reason == (
        "fold 0 at epoch 6: 0.5192, on course for no better than 0.3498 at epoch 20, against "
        "the best 0.1455 of 2 other trials' finished runs of that fold (curve rule)"
    )
    # now worse than both references, but falling fast enough to beat them by epoch 20
    steep = _pow(0.05, 2.0, 0.9, 6)
    assert steep[-1] > 0.3 and prune_verdict(CURVE, curves, 0, steep, epochs=20) is None


def test_curve_waits_for_enough_epochs_and_finished_references() -> None:
    curves = curves_of(_pow(0.10, 0.5, 0.8, 20))
    curves.add(0, [0.05, 0.05], finished=False)  # pruned: it never ended
    hopeless = _pow(0.40, 0.5, 0.8, 6)
    assert prune_verdict(CURVE, curves, 0, hopeless, epochs=20) is None  # one finished run
    curves.add(0, _pow(0.12, 0.5, 0.8, 20), finished=True)
    assert prune_verdict(CURVE, curves, 0, hopeless[:3], epochs=20) is None  # 3 epochs: too few
    assert prune_verdict(CURVE, curves, 0, hopeless, epochs=20) is not None
    assert prune_verdict(CURVE, curves, 1, hopeless, epochs=20) is None  # another fold


def test_curve_on_a_maximised_metric() -> None:
    accuracy = [[0.90 - 0.4 * t**-0.8 for t in range(1, 21)] for _ in range(2)]
    curves = curves_of(*accuracy, maximize=True)
    low = [0.55 - 0.4 * t**-0.8 for t in range(1, 7)]
    reason = prune_verdict(CURVE, curves, 0, low, epochs=20)
    assert (
        reason is not None
        and "no better than 0.5902 at epoch 20, against the best 0.8636" in reason
    )
    assert prune_verdict(CURVE, curves, 0, accuracy[0][:6], epochs=20) is None
