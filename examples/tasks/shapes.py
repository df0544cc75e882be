"""An own-loop task (``train_fold``): a small CNN on generated images of shapes.

What it shows, each a line or two of the loop below:
- the data as a ``Dataset`` read lazily, sample by sample, by a ``DataLoader`` with worker
  processes (``trainer.options.workers``), and augmented (flips, shifts, noise) afresh every
  epoch for training only: validation reads ``load_eval_data``, the same images clean;
- four classes of very different sizes, so the objective is the macro-averaged F1 over the
  whole validation fold (a confusion matrix summed over the ranks), and the loss weights each
  class by the inverse of its share in this fold's training labels;
- AdamW with ``OneCycleLR``, each step at the study's scaling by ranks and warm-up
  (``ctx.optimizer_step``), gradient clipping, and mixed precision: bfloat16 on CPUs, float16
  with a gradient scaler on a GPU;
- checkpoints that a retried attempt resumes from, and the best epoch's model.

Study: ``examples/shapes.yaml``. Check it without a service:
``foldwise task check examples.tasks.shapes --params '{"lr": 0.01}' --epochs 3``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

metrics = ["val_f1", "val_loss", "val_accuracy", "train_loss", "lr"]
"""What ``train_fold`` reports every epoch; any of them may be a study's objective."""

CLASSES = ("square", "disc", "cross", "ring")
SHARES = (0.45, 0.3, 0.15, 0.1)
SIZE = 16


class Shapes(Dataset):
    """``count`` 16x16 grey images of one of four shapes each, drawn once from ``seed``;
    with ``augment``, every read flips, shifts and adds noise anew (torch's RNG, so the
    DataLoader's per-epoch seeding makes it reproducible)."""

    def __init__(self, count: int = 800, seed: int = 0, augment: bool = False) -> None:
        rng = np.random.default_rng(seed)
        self.targets = rng.choice(len(CLASSES), size=count, p=SHARES).astype(np.int64)
        self.images = np.stack([_draw(int(c), rng) for c in self.targets]).astype(np.float32)
        self.augment = augment

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = torch.from_numpy(self.images[i]).unsqueeze(0)
        if self.augment:
            if torch.rand(()) < 0.5:
                image = image.flip(-1)
            if torch.rand(()) < 0.5:
                image = image.flip(-2)
            shift = torch.randint(-1, 2, (2,)).tolist()
            image = image.roll(shifts=shift, dims=(-2, -1))
            image = image + 0.1 * torch.randn_like(image)
        return image, int(self.targets[i])


def load_data(options: dict[str, Any]) -> Dataset:
    return Shapes(int(options.get("images", 800)), augment=True)


def load_eval_data(options: dict[str, Any]) -> Dataset:
    return Shapes(int(options.get("images", 800)), augment=False)


def build_net(params: dict[str, Any]) -> nn.Module:
    channels = int(params.get("channels", 16))
    return nn.Sequential(
        nn.Conv2d(1, channels, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(channels, 2 * channels, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(float(params.get("dropout", 0.1))),
        nn.Linear(2 * channels, len(CLASSES)),
    )


def train_fold(ctx: Any) -> None:
    """One fold: train on ``ctx.train_dataset``, report macro-F1 on ``ctx.val_dataset``."""
    net = build_net(ctx.params)
    model = ctx.prepare_model(net)
    workers = int(ctx.options.get("workers", 0))
    train = ctx.prepare_loader(
        ctx.train_dataset, ctx.batch_size, shuffle=True, num_workers=workers,
        persistent_workers=workers > 0,
    )  # fmt: skip
    val = ctx.prepare_eval_loader(ctx.val_dataset, 256, num_workers=workers)
    counts = np.bincount(ctx.train_targets, minlength=len(CLASSES))
    weights = torch.tensor(counts.sum() / (len(CLASSES) * np.maximum(counts, 1)))
    loss_fn = nn.CrossEntropyLoss(weight=weights.float().to(ctx.device))
    lr = float(ctx.params.get("lr", 0.01))  # one process's rate: ctx.optimizer_step scales it
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=lr, total_steps=ctx.epochs * len(train)
    )
    cuda = ctx.device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)
    state = ctx.load_checkpoint()
    if state is not None:
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
    for epoch in range(ctx.start_epoch, ctx.epochs):
        model.train()
        loss_sum = seen = 0.0
        for step, (images, labels) in enumerate(train):
            images, labels = images.to(ctx.device), labels.to(ctx.device)
            optimizer.zero_grad(set_to_none=True)
            with _autocast(ctx.device):
                loss = loss_fn(model(images), labels)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), float(ctx.params.get("clip", 1.0)))
            used_lr = ctx.optimizer_step(optimizer, epoch, step, len(train), scaler=scaler)
            scheduler.step()
            loss_sum += float(loss.detach()) * len(labels)
            seen += len(labels)
        confusion, val_loss = _evaluate(net, val, loss_fn, ctx.device)
        confusion = ctx.sum(confusion)  # every rank's share of the validation fold, together
        val_loss, train_loss, samples = ctx.sum([val_loss, loss_sum, seen])
        ctx.report(
            epoch,
            val_f1=macro_f1(confusion),
            val_accuracy=float(confusion.diagonal().sum() / confusion.sum()),
            val_loss=val_loss / float(confusion.sum()),
            train_loss=train_loss / samples,
            lr=used_lr,
        )
        ctx.save_model(net)
        if ctx.should_stop():
            break
        if ctx.checkpoint_due:
            ctx.save_checkpoint(
                {
                    "model": net.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "scaler": scaler.state_dict(),
                }
            )


@torch.no_grad()
def _evaluate(
    net: nn.Module, loader: Any, loss_fn: nn.Module, device: torch.device
) -> tuple[torch.Tensor, float]:
    """This rank's confusion matrix (true x predicted) and summed loss on its share."""
    net.eval()
    confusion = torch.zeros(len(CLASSES), len(CLASSES), dtype=torch.float64, device=device)
    loss_sum = 0.0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        with _autocast(device):
            out = net(images)
        loss_sum += float(loss_fn(out.float(), labels)) * len(labels)
        index = labels * len(CLASSES) + out.argmax(dim=1)
        confusion += torch.bincount(index, minlength=len(CLASSES) ** 2).view_as(confusion)
    return confusion, loss_sum


def macro_f1(confusion: torch.Tensor) -> float:
    """The mean over classes of F1 = 2 TP / (2 TP + FP + FN); a class never seen nor
    predicted counts as 0."""
    tp = confusion.diagonal()
    fp, fn = confusion.sum(dim=0) - tp, confusion.sum(dim=1) - tp
    return float((2 * tp / (2 * tp + fp + fn).clamp(min=1)).mean())


def _autocast(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """float16 on a GPU, bfloat16 on CPUs."""
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    return torch.autocast(device.type, dtype=dtype)


def _draw(shape: int, rng: np.random.Generator) -> np.ndarray:
    """One shape of random size and place on a dark 16x16 canvas."""
    image = np.zeros((SIZE, SIZE))
    r = int(rng.integers(3, 6))
    cy, cx = (int(v) for v in rng.integers(r, SIZE - r, size=2))
    yy, xx = np.mgrid[:SIZE, :SIZE]
    distance = np.hypot(yy - cy, xx - cx)
    if shape == 0:
        image[cy - r : cy + r, cx - r : cx + r] = 1.0
    elif shape == 1:
        image[distance <= r] = 1.0
    elif shape == 2:
        image[cy - r : cy + r, cx - 1 : cx + 1] = 1.0
        image[cy - 1 : cy + 1, cx - r : cx + r] = 1.0
    else:
        image[(distance <= r) & (distance >= r - 1.5)] = 1.0
    return image + 0.05 * rng.normal(size=image.shape)


class BuiltInLoop:
    """The same data and network through foldwise's built-in loop (``build_model``), to
    compare what an own loop costs: ``task: "examples.tasks.shapes:BuiltInLoop"``, objective
    ``val_accuracy`` (the built-in loop reports accuracy, not F1)."""

    kind = "classification"

    def load_data(self, options: dict[str, Any]) -> Dataset:
        return load_data(options)

    def load_eval_data(self, options: dict[str, Any]) -> Dataset:
        return load_eval_data(options)

    def build_model(self, params: dict[str, Any]) -> nn.Module:
        return build_net(params)
