"""Early stopping: patience with min_delta, and NNLO's smoothed rule."""

from __future__ import annotations

import pytest

from foldwise.trainers.objective import EarlyStopping, SmoothedStopping, make_stopper
from tests.trainers.fold_jobs import epochs_of, make_job, run_local


def _stops_at(stopper: EarlyStopping | SmoothedStopping, values: list[float]) -> int | None:
    for i, value in enumerate(values, start=1):
        if stopper.should_stop(value):
            return i
    return None


def test_patience_counts_epochs_without_improvement_beyond_min_delta() -> None:
    values = [1.0, 0.9, 0.89, 0.885, 0.5]
    assert _stops_at(EarlyStopping(direction="minimize", patience=2), values) is None
    assert _stops_at(EarlyStopping(direction="minimize", patience=2, min_delta=0.05), values) == 4
    assert _stops_at(EarlyStopping(direction="maximize", patience=1), [0.5, 0.6, 0.6]) == 3


def test_smoothed_rule_compares_the_mean_of_the_last_p_epochs_with_the_p_before() -> None:
    noisy_but_falling = [1.0, 0.8, 0.85, 0.7, 0.75, 0.6, 0.65]  # patience 1 would stop at 3
    assert _stops_at(EarlyStopping(direction="minimize", patience=1), noisy_but_falling) == 3
    assert _stops_at(SmoothedStopping(direction="minimize", patience=2), noisy_but_falling) is None
    flat = [1.0, 0.8, 0.7, 0.72, 0.71, 0.73]  # mean(0.71, 0.73) is no better than mean(0.7, 0.72)
    assert _stops_at(SmoothedStopping(direction="minimize", patience=2), flat) == 6
    rising = [0.5, 0.6, 0.7, 0.8]
    assert _stops_at(SmoothedStopping(direction="maximize", patience=2), rising) is None
    assert _stops_at(SmoothedStopping(direction="minimize", patience=2), rising) == 4


def test_smoothed_rule_needs_two_windows_and_honours_min_delta() -> None:
    stopper = SmoothedStopping(direction="minimize", patience=3, min_delta=0.1)
    assert _stops_at(stopper, [1.0, 1.0, 1.0, 1.0, 1.0]) is None  # 5 < 2 x 3 epochs
    stopper = SmoothedStopping(direction="minimize", patience=1, min_delta=0.1)
    assert _stops_at(stopper, [1.0, 0.95]) == 2  # better, but not by more than min_delta


def test_make_stopper_by_name() -> None:
    assert isinstance(make_stopper("smoothed", direction="minimize", patience=2), SmoothedStopping)
    assert isinstance(make_stopper("patience", direction="minimize", patience=2), EarlyStopping)
    with pytest.raises(ValueError, match="patience or smoothed"):
        make_stopper("median", direction="minimize", patience=2)


def test_fold_runner_applies_the_smoothed_rule() -> None:
    job = make_job(
        params={"lr": 0.5},
        epochs=40,
        early_stopping={"patience": 1, "min_delta": 10.0, "rule": "smoothed"},
    )
    epochs = epochs_of(run_local(job))
    assert len(epochs) == 2  # the smoothed rule needs 2 x patience epochs before it can fire
