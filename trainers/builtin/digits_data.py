"""scikit-learn's 8x8 digits (1,797 samples, 10 classes), shared by the built-in digits tasks.

With ``trainer.options.test_fraction`` (say 0.25) the tasks keep that share of the digits
aside, stratified and always the same, as their test data (``load_test_data``, for a hold-out
score), and train on the rest.
"""

from __future__ import annotations

import numpy as np


def load_digits_flat() -> tuple[np.ndarray, np.ndarray]:
    """Standardised pixels as (n, 64) float32 features and int64 labels."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    std = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(std > 0, std, 1.0)
    return X.astype(np.float32), y.astype(np.int64)


def load_digits_images() -> tuple[np.ndarray, np.ndarray]:
    """Pixels scaled to [0, 1] as (n, 1, 8, 8) float32 images and int64 labels."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    images = (X / 16.0).reshape(-1, 1, 8, 8)
    return images.astype(np.float32), y.astype(np.int64)


def split_off_test(
    data: tuple[np.ndarray, np.ndarray], options: dict, *, test: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The training part of ``data`` (or with ``test`` its test part) under the task's
    ``test_fraction`` option; all of it for training without one."""
    fraction = float(options.get("test_fraction", 0.0))
    if not fraction:
        if test:
            raise ValueError(
                "the built-in digits tasks keep test data aside only when trainer.options "
                "sets test_fraction (e.g. 0.25)"
            )
        return data
    if not 0 < fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {fraction}")
    from sklearn.model_selection import train_test_split

    X, y = data
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=fraction, random_state=0, stratify=y
    )
    return (X_test, y_test) if test else (X_train, y_train)
