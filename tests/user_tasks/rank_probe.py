"""An own loop that reports what each rank of its fold saw, for the two-rank context tests.

Modes (param ``mode``): "streams" draws from torch, numpy, ``random`` and a DataLoader worker
on every rank and reports whether the ranks drew alike (and rank 0's torch draw); "gather"
joins tensors, arrays, lists and objects of unequal sizes per rank; "auroc" scores the
validation fold with scikit-learn's AUROC, over this rank's share (``val_auroc``, a partial
metric) and over the whole fold (``val_auroc_whole``, from ``ctx.gather``); "plain_step" and
"ctx_step" train with ``optimizer.step()`` or ``ctx.optimizer_step``; "loader_fork" reports
whether a DataLoader worker of the rank was forked from it (``forked``).
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn
from torch.utils.data import DataLoader, Dataset

metrics = [
    "val_score",
    "same_torch",
    "same_numpy",
    "same_random",
    "same_worker",
    "draw",
    "gathered",
    "val_auroc",
    "val_auroc_whole",
    "val_count",
    "forked",
]
SAMPLES = 201


def load_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(SAMPLES, 3)).astype(np.float32)
    y = (X[:, 0] + 0.8 * rng.normal(size=SAMPLES) > 0).astype(np.int64)
    return X, y


class _Draws(Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.rand(1)  # in the worker process: from the seed torch gave it


RANK_PID: int | None = None
"""Set by the rank before its DataLoader starts: a forked worker sees it, a spawned one not."""


class _Forked(Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> float:
        return float(os.getppid() == RANK_PID)


def train_fold(ctx: Any) -> None:
    global RANK_PID
    mode = ctx.params["mode"]
    report: dict[str, float] = {"val_score": 0.5}
    if mode == "streams":
        draws = [torch.rand(1).item(), float(np.random.rand()), random.random()]
        worker = next(iter(DataLoader(_Draws(), batch_size=2, num_workers=1))).sum().item()
        seen = ctx.gather([draws + [worker]])
        for i, name in enumerate(("same_torch", "same_numpy", "same_random", "same_worker")):
            report[name] = float(len({rank[i] for rank in seen}) == 1)
        report["draw"] = draws[0]
    elif mode == "loader_fork":
        RANK_PID = os.getpid()
        report["forked"] = float(next(iter(DataLoader(_Forked(), num_workers=1))).item())
        report["forked"] = ctx.sum(report["forked"]) / ctx.world_size
    elif mode == "gather":
        mine = ctx.rank + 1  # rank 0 sends 1 of each, rank 1 sends 2
        tensors = ctx.gather(torch.full((mine, 2), float(ctx.rank)))
        arrays = ctx.gather(np.arange(mine))
        lists = ctx.gather(list(range(mine)))
        objects = ctx.gather({"rank": ctx.rank})
        scalar = ctx.gather(torch.tensor(float(ctx.rank)))
        ok = (
            tensors.shape == (3, 2)
            and tensors[:, 0].tolist() == [0.0, 1.0, 1.0]
            and arrays.tolist() == [0, 0, 1]
            and lists == [0, 0, 1]
            and objects == [{"rank": 0}, {"rank": 1}]
            and scalar.tolist() == [0.0, 1.0]
        )
        report["gathered"] = float(ok)
    elif mode == "auroc":
        scores, labels = [], []
        for x, y in ctx.prepare_eval_loader(ctx.val_dataset, 16):
            scores.append(x[:, 0])
            labels.append(y)
        mine_scores, mine_labels = torch.cat(scores), torch.cat(labels)
        report["val_auroc"] = roc_auc_score(mine_labels.numpy(), mine_scores.numpy())
        whole = roc_auc_score(ctx.gather(mine_labels).numpy(), ctx.gather(mine_scores).numpy())
        report["val_auroc_whole"] = whole
        report["val_count"] = float(len(ctx.gather(mine_labels)))
    else:
        _train(ctx, mode)
    ctx.report(0, **report)
    if mode in ("plain_step", "ctx_step"):
        _train(ctx, mode, epoch=1)
        ctx.report(1, val_score=0.5)


def _train(ctx: Any, mode: str, epoch: int = 0) -> None:
    if not hasattr(ctx, "_probe"):
        model = ctx.prepare_model(nn.Linear(3, 2))
        ctx._probe = (model, torch.optim.SGD(model.parameters(), lr=0.1))
    model, optimizer = ctx._probe
    loader = ctx.prepare_loader(ctx.train_dataset, 32)
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if mode == "plain_step":
            optimizer.step()
        else:
            ctx.optimizer_step(optimizer, epoch, step, len(loader))


class _LoaderFork:
    """The "loader_fork" mode as a task of its own, declaring only what it reports."""

    metrics = ["val_score", "forked"]
    load_data = staticmethod(load_data)
    train_fold = staticmethod(train_fold)


loader_fork = _LoaderFork()
