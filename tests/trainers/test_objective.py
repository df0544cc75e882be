from __future__ import annotations

import pytest

from foldwise.trainers.objective import EarlyStopping, fold_metric_values, fold_value

EPOCHS = [
    {"epoch": 1.0, "val_loss": 0.9, "val_accuracy": 0.5},
    {"epoch": 2.0, "val_loss": 0.4, "val_accuracy": 0.8},
    {"epoch": 3.0, "val_loss": 0.6, "val_accuracy": 0.7},
]


def test_fold_value_best_and_last() -> None:
    assert fold_value(EPOCHS, "val_loss", "minimize") == 0.4
    assert fold_value(EPOCHS, "val_accuracy", "maximize") == 0.8
    assert fold_value(EPOCHS, "val_loss", "minimize", use="last") == 0.6


def test_fold_value_ignores_non_finite_epochs_when_it_can() -> None:
    epochs = [{"val_loss": 0.5}, {"val_loss": float("nan")}]
    assert fold_value(epochs, "val_loss", "minimize") == 0.5


def test_fold_value_names_the_missing_metric() -> None:
    with pytest.raises(ValueError, match="'val_mse' was never reported; reported: \\['epoch'"):
        fold_value(EPOCHS, "val_mse", "minimize")
    with pytest.raises(ValueError, match="reported: nothing"):
        fold_value([], "val_loss", "minimize")


def test_fold_value_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="use must be"):
        fold_value(EPOCHS, "val_loss", "minimize", use="mean")
    with pytest.raises(ValueError, match="direction"):
        fold_value(EPOCHS, "val_loss", "down")


def test_early_stopping_waits_for_patience() -> None:
    stopper = EarlyStopping(direction="minimize", patience=2, min_delta=0.05)
    decisions = [stopper.should_stop(v) for v in [1.0, 0.8, 0.78, 0.9, 0.7]]
    assert decisions == [False, False, False, True, False]
    assert stopper.best == 0.7


def test_early_stopping_without_patience_never_stops() -> None:
    stopper = EarlyStopping(direction="maximize", patience=None)
    assert not any(stopper.should_stop(v) for v in [0.5, 0.4, 0.3, 0.2])


SCORED_EPOCHS = [
    {"val_loss": 1.0, "n_params": 100.0},
    {"val_loss": 0.5, "val_accuracy": 0.7},
    {"val_loss": 0.8, "val_accuracy": 0.9},
]


def test_every_scored_metric_is_read_at_the_epoch_the_objective_picks() -> None:
    names = ["val_loss", "val_accuracy", "n_params"]
    best = fold_metric_values(SCORED_EPOCHS, names, "val_loss", "minimize")
    assert best == {"val_loss": 0.5, "val_accuracy": 0.7, "n_params": 100.0}  # count: epoch 1
    last = fold_metric_values(SCORED_EPOCHS, names, "val_loss", "minimize", use="last")
    assert last == {"val_loss": 0.8, "val_accuracy": 0.9, "n_params": 100.0}
    # a metric first reported after the picked epoch is read where it first was
    early = fold_metric_values(SCORED_EPOCHS[:2], ["val_accuracy"], "val_loss", "maximize")
    assert early == {"val_accuracy": 0.7}


def test_a_scored_metric_never_reported_or_not_finite_is_an_error() -> None:
    with pytest.raises(ValueError, match="metric 'latency_ms' was never reported"):
        fold_metric_values(SCORED_EPOCHS, ["latency_ms"], "val_loss", "minimize")
    broken = [*SCORED_EPOCHS[:1], {"val_loss": 0.5, "val_accuracy": float("nan")}]
    with pytest.raises(ValueError, match="metric 'val_accuracy' was nan at epoch 2"):
        fold_metric_values(broken, ["val_accuracy"], "val_loss", "minimize")
