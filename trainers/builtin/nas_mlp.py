"""Built-in task `nas_mlp`: an MLP on the 8x8 digits whose whole architecture comes from params.

Params (space them with conditions, e.g. `width_3: {..., when: {depth: {gte: 3}}}`):
`depth` (hidden layers, 1..8); per layer i: `width_i`, `act_i`, `dropout_i`, each falling back to
`width`, `act`, `dropout` and then to 64, relu, 0; `lr` and `weight_decay` for the default Adam.
An impossible architecture raises ValueError while building: the trial fails, the study goes on.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from foldwise.trainers.builtin.digits_data import check_options as check_options  # test_fraction
from foldwise.trainers.builtin.digits_data import has_test_data as has_test_data
from foldwise.trainers.builtin.digits_data import load_digits_flat

kind = "classification"

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "gelu": nn.GELU,
    "elu": nn.ELU,
    "selu": nn.SELU,
    "silu": nn.SiLU,
}
MAX_DEPTH = 8


def load_data(options: dict[str, Any]) -> tuple[Any, Any]:
    return load_digits_flat(options)


def load_test_data(options: dict[str, Any]) -> tuple[Any, Any]:
    """The ``test_fraction`` of the digits kept aside for a hold-out score."""
    return load_digits_flat(options, test=True)


def layer_choice(params: dict[str, Any], name: str, i: int, default: Any) -> Any:
    """Layer i's `name_i`, else the shared `name`, else `default`."""
    return params.get(f"{name}_{i}", params.get(name, default))


def activation(name: Any, task: str) -> nn.Module:
    if str(name) not in ACTIVATIONS:
        raise ValueError(f"{task}: activation must be one of {sorted(ACTIVATIONS)}, got {name!r}")
    return ACTIVATIONS[str(name)]()


def build_model(params: dict[str, Any]) -> nn.Module:
    """`depth` blocks of Linear -> activation (-> Dropout), then a 10-way Linear."""
    depth = int(params.get("depth", 1))
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"nas_mlp: depth must be in [1, {MAX_DEPTH}], got {depth}")
    layers: list[nn.Module] = []
    width_in = 64
    for i in range(1, depth + 1):
        width = int(layer_choice(params, "width", i, 64))
        dropout = float(layer_choice(params, "dropout", i, 0.0))
        if width < 1 or not 0.0 <= dropout < 1.0:
            raise ValueError(f"nas_mlp: layer {i} needs width >= 1 and dropout in [0, 1)")
        layers += [
            nn.Linear(width_in, width),
            activation(layer_choice(params, "act", i, "relu"), "nas_mlp"),
        ]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width_in = width
    layers.append(nn.Linear(width_in, 10))
    return nn.Sequential(*layers)
