"""Built-in task `digits_mlp`: an MLP on scikit-learn's 8x8 digits (1,797 samples, 10 classes).

Params: `depth` (layers, default 1), `width_1..width_{depth}` (falling back to `width`, then 64),
`act` (relu/tanh/gelu), `dropout` (default 0) and `lr` (read by the default optimizer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from foldwise.trainers.builtin.digits_data import check_options as check_options  # test_fraction
from foldwise.trainers.builtin.digits_data import has_test_data as has_test_data
from foldwise.trainers.builtin.digits_data import load_digits_flat

kind = "classification"

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}


def load_data(options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Standardised pixel features (float32) and integer labels (without the test part that
    ``trainer.options.test_fraction`` keeps aside)."""
    return load_digits_flat(options)


def load_test_data(options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The ``test_fraction`` of the digits kept aside for a hold-out score."""
    return load_digits_flat(options, test=True)


def build_model(params: dict[str, Any]) -> nn.Module:
    """`depth` hidden layers, each Linear -> activation (-> Dropout), then a 10-way Linear."""
    depth = int(params.get("depth", 1))
    if depth < 1:
        raise ValueError(f"digits_mlp: depth must be >= 1, got {depth}")
    act_name = str(params.get("act", "relu"))
    if act_name not in ACTIVATIONS:
        raise ValueError(f"digits_mlp: act must be one of {sorted(ACTIVATIONS)}, got {act_name!r}")
    dropout = float(params.get("dropout", 0.0))
    layers: list[nn.Module] = []
    width_in = 64
    for i in range(1, depth + 1):
        width = int(params.get(f"width_{i}", params.get("width", 64)))
        layers += [nn.Linear(width_in, width), ACTIVATIONS[act_name]()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width_in = width
    layers.append(nn.Linear(width_in, 10))
    return nn.Sequential(*layers)
