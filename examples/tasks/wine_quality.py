"""A complete example task module: two tasks on scikit-learn's wine data (docs/tasks.md).

- `classification` (reference it as "examples.tasks.wine_quality:classification"): 13 chemical
  features -> 3 cultivars, data as a torch `Dataset`, SGD with momentum and a separate weight
  decay for biases as the optimizer hook, label-smoothed cross-entropy as the loss hook.
- `regression` ("examples.tasks.wine_quality:regression"): predict the alcohol content from the
  other 12 features, data as numpy arrays (optionally noisier, via `trainer.options`), a Huber
  loss hook; validation reports `val_mse`.

Both build an MLP whose width, depth and dropout come from the trial's params. The module needs
to be importable where the service and the Ray workers run (here: the repository root).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset


def _wine() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    return ((X - X.mean(axis=0)) / X.std(axis=0)).astype(np.float32), y.astype(np.int64)


def _mlp(inputs: int, outputs: int, params: dict[str, Any]) -> nn.Module:
    depth, width = int(params.get("depth", 1)), int(params.get("width", 32))
    dropout = float(params.get("dropout", 0.0))
    if depth < 1 or width < 1:
        raise ValueError(f"depth and width must be >= 1, got {depth} and {width}")
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(inputs if i == 0 else width, width), nn.ReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*layers, nn.Linear(width, outputs))


class WineDataset(Dataset):
    """A map-style Dataset of (features, label) pairs; foldwise stacks it into arrays once."""

    def __init__(self) -> None:
        self.X, self.y = _wine()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(self.X[i]), torch.tensor(self.y[i])


class Classification:
    """Three cultivars. A class is instantiated once with no arguments."""

    kind = "classification"

    def load_data(self) -> Dataset:
        return WineDataset()

    def build_model(self, params: dict[str, Any]) -> nn.Module:
        return _mlp(13, 3, params)

    def make_optimizer(self, model: nn.Module, params: dict[str, Any]) -> torch.optim.Optimizer:
        """SGD with momentum; no weight decay on biases. foldwise scales each group's lr by the
        number of ranks (trainer.lr_scaling) and warms it up, keeping the groups' ratios."""
        decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
        no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
        groups = [
            {"params": decay, "weight_decay": float(params.get("weight_decay", 1e-4))},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.SGD(groups, lr=float(params.get("lr", 0.05)), momentum=0.9)

    def loss_fn(self, params: dict[str, Any]) -> nn.Module:
        """A mean over the batch, like every loss foldwise uses."""
        return nn.CrossEntropyLoss(label_smoothing=float(params.get("smoothing", 0.0)))


class Regression:
    """Alcohol content from the other features; `options.noise` adds label noise."""

    kind = "regression"

    def load_data(self, options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        X, _ = _wine()
        rng = np.random.default_rng(int(options.get("seed", 0)))
        y = X[:, 0] + float(options.get("noise", 0.0)) * rng.normal(size=len(X))
        return X[:, 1:], y.astype(np.float32)

    def build_model(self, params: dict[str, Any]) -> nn.Module:
        return _mlp(12, 1, params)

    def loss_fn(self, params: dict[str, Any]) -> nn.Module:
        return nn.HuberLoss(delta=float(params.get("huber_delta", 1.0)))


classification = Classification()
regression = Regression()
