from __future__ import annotations

import pytest

from foldwise.trainers.objective import EarlyStopping, fold_value

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
