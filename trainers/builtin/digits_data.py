"""scikit-learn's 8x8 digits (1,797 samples, 10 classes), shared by the built-in digits tasks."""

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
