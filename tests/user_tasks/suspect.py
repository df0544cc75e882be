"""An own loop whose results foldwise can tell are suspect, for the study-warning tests: its
Dataset augments every read and it has no ``load_eval_data`` (validation is augmented too),
it reports ``val_score`` over each rank's share of the fold (a partial metric on several
ranks), and it says something itself with ``ctx.warn``."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset

metrics = ["val_score"]
SAMPLES = 60


class Noisy(Dataset):
    targets = [i % 2 for i in range(SAMPLES)]

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.randn(2), self.targets[index]  # a fresh draw every read


def load_data() -> Dataset:
    return Noisy()


def train_fold(ctx: Any) -> None:
    ctx.warn("the probe's score is made up")
    for epoch in range(ctx.epochs):
        seen = sum(len(y) for _x, y in ctx.prepare_eval_loader(ctx.val_dataset, 8))
        ctx.report(epoch, val_score=seen + ctx.rank)  # this rank's share: differs by rank
