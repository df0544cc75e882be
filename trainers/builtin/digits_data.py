"""scikit-learn's 8x8 digits (1,797 samples, 10 classes), shared by the built-in digits tasks.

With ``trainer.options.test_fraction`` (say 0.25) the tasks keep that share of the digits
aside, stratified and always the same, as their test data (``load_test_data``, for a hold-out
score), and train on the rest; features are standardised with the training part's statistics
only, so nothing of the test data reaches training.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def load_digits_flat(
    options: dict[str, Any], *, test: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Standardised pixels as (n, 64) float32 features and int64 labels: the training part,
    or with ``test`` the part ``test_fraction`` keeps aside."""
    X, y = _digits(options, test=test)
    X_train, _ = _digits(options, test=False) if test else (X, y)
    std = X_train.std(axis=0)
    X = (X - X_train.mean(axis=0)) / np.where(std > 0, std, 1.0)
    return X.astype(np.float32), y


def load_digits_images(
    options: dict[str, Any], *, test: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Pixels scaled to [0, 1] as (n, 1, 8, 8) float32 images and int64 labels."""
    X, y = _digits(options, test=test)
    return (X / 16.0).reshape(-1, 1, 8, 8).astype(np.float32), y


SAMPLES, CLASSES = 1797, 10
MIN_TRAINING_SAMPLES = 100
"""What ``test_fraction`` must leave for training: ten a class, enough for ten stratified folds."""


def has_test_data(options: dict[str, Any]) -> bool:
    """Whether ``options`` keep test data aside (``test_fraction``)."""
    return bool(options.get("test_fraction"))


def check_options(options: dict[str, Any]) -> dict[str, str]:
    """What is wrong with ``options`` for the digits tasks, by option (empty: nothing): a
    ``test_fraction`` must be a number that keeps a sample of every class aside and leaves
    ``MIN_TRAINING_SAMPLES`` to train on."""
    fraction = options.get("test_fraction")
    if fraction is None:
        return {}
    low, high = CLASSES / SAMPLES, 1 - MIN_TRAINING_SAMPLES / SAMPLES
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        return {"test_fraction": f"test_fraction must be a number, got {fraction!r}"}
    if fraction == 0:
        return {}
    if not low <= fraction <= high:
        return {
            "test_fraction": f"test_fraction must keep at least {CLASSES} of the {SAMPLES} "
            f"digits aside and leave {MIN_TRAINING_SAMPLES} to train on: between {low:.4f} "
            f"and {high:.4f}, got {fraction!r}"
        }
    return {}


def _digits(options: dict[str, Any], *, test: bool) -> tuple[np.ndarray, np.ndarray]:
    """The raw pixels and labels of the training part (or the test part) of the digits."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    y = y.astype(np.int64)
    fraction = float(options.get("test_fraction", 0.0))
    if not fraction:
        if test:
            raise ValueError(
                "the built-in digits tasks keep test data aside only when trainer.options "
                "sets test_fraction (e.g. 0.25)"
            )
        return X, y
    if not 0 < fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {fraction}")
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=fraction, random_state=0, stratify=y
    )
    return (X_test, y_test) if test else (X_train, y_train)
