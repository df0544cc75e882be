"""Built-in task `nas_cnn`: a small CNN on the 8x8 digits as (1, 8, 8) images, built from params.

Params: `blocks` (conv blocks, 1..4); per block i: `channels_i` (else `channels`, 16),
`kernel_i` (else `kernel`, 3; odd kernels keep the size, even ones grow it by one), and `pool_i`
(else `pool`: max | avg | none, default max; each pooling halves the size, flooring);
`dense` (hidden units of the head, 0 = none, default 64), `dropout` (before the head, default 0),
`act` (relu | gelu | elu | ...), `lr`. As with NNLO's MNIST net, many combinations do not fit an
8x8 image (four poolings shrink it to nothing): those raise ValueError while building, which
makes a failed trial, not a crashed study.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from foldwise.trainers.builtin.digits_data import check_options as check_options  # test_fraction
from foldwise.trainers.builtin.digits_data import has_test_data as has_test_data
from foldwise.trainers.builtin.digits_data import load_digits_images
from foldwise.trainers.builtin.nas_mlp import activation, layer_choice

kind = "classification"

POOLS: dict[str, type[nn.Module] | None] = {"max": nn.MaxPool2d, "avg": nn.AvgPool2d, "none": None}
MAX_BLOCKS = 4
IMAGE_SIZE = 8


def load_data(options: dict[str, Any]) -> tuple[Any, Any]:
    return load_digits_images(options)


def load_test_data(options: dict[str, Any]) -> tuple[Any, Any]:
    """The ``test_fraction`` of the digits kept aside for a hold-out score."""
    return load_digits_images(options, test=True)


def build_model(params: dict[str, Any]) -> nn.Module:
    """`blocks` x (Conv2d, activation, pooling), flatten, optional dense layer, 10 outputs."""
    blocks = int(params.get("blocks", 2))
    if not 1 <= blocks <= MAX_BLOCKS:
        raise ValueError(f"nas_cnn: blocks must be in [1, {MAX_BLOCKS}], got {blocks}")
    act = params.get("act", "relu")
    layers: list[nn.Module] = []
    channels_in, size = 1, IMAGE_SIZE
    for i in range(1, blocks + 1):
        conv, channels_in, size = _conv_block(params, i, channels_in, size, act)
        layers += conv
    dense = int(params.get("dense", 64))
    dropout = float(params.get("dropout", 0.0))
    layers.append(nn.Flatten())
    if dropout > 0:
        layers.append(nn.Dropout(dropout))
    features = channels_in * size * size
    if dense > 0:
        layers += [nn.Linear(features, dense), activation(act, "nas_cnn")]
        features = dense
    layers.append(nn.Linear(features, 10))
    return nn.Sequential(*layers)


def _conv_block(
    params: dict[str, Any], i: int, channels_in: int, size: int, act: Any
) -> tuple[list[nn.Module], int, int]:
    """Block i's layers, its output channels and the image size after it."""
    channels = int(layer_choice(params, "channels", i, 16))
    kernel = int(layer_choice(params, "kernel", i, 3))
    pool_name = str(layer_choice(params, "pool", i, "max"))
    if channels < 1 or kernel < 1 or pool_name not in POOLS:
        raise ValueError(
            f"nas_cnn: block {i} needs channels >= 1, kernel >= 1 and pool in {sorted(POOLS)}"
        )
    padding = kernel // 2
    size = size + 2 * padding - kernel + 1
    layers = [
        nn.Conv2d(channels_in, channels, kernel, padding=padding),
        activation(act, "nas_cnn"),
    ]
    pool = POOLS[pool_name]
    if pool is not None:
        size //= 2
        layers.append(pool(2))
    if size < 1:
        raise ValueError(
            f"nas_cnn: block {i} shrinks the 8x8 image to nothing "
            f"(kernel {kernel}, pool {pool_name}); use fewer pooling blocks"
        )
    return layers, channels, size
