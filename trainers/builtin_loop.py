"""foldwise's own training loop, for tasks that give a model (``build_model``), as a fold function
on the same ``FoldContext`` an own loop gets (DESIGN §6).

Its hooks, all optional: ``make_optimizer(model, params[, ctx])`` (default Adam with ``lr`` and
``weight_decay`` from the params), ``make_scheduler(optimizer, params, steps_per_epoch,
epochs)`` (stepped every optimizer step, or per epoch when it returns ``{"scheduler": s,
"interval": "epoch", "monitor": metric}``), ``loss_fn(params[, ctx])`` (a mean over the batch;
default cross-entropy or MSE by kind) and ``collate_fn``. A hook that takes one argument more
gets the fold's context (``ctx.train_targets`` for class weights, say).

The learning rate a step uses is the one the task's optimizer and scheduler hold (the
single-process rate) times ``ctx.lr_factor``: the study's scaling by world size and its
warm-up. It is set around each step and put back after, so schedulers see their own values;
``lr`` is reported as used.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch
from torch import nn

from foldwise.trainers.context import FoldContext
from foldwise.trainers.ddp import to_device
from foldwise.trainers.task import Task, call_hook

INTERVALS = ("step", "epoch")


def train_builtin(ctx: FoldContext, task: Task) -> None:
    """Train ``task``'s model on ``ctx``'s fold for ``ctx.epochs`` epochs (or until stopped)."""
    _BuiltinLoop(ctx, task).run()


class _BuiltinLoop:
    def __init__(self, ctx: FoldContext, task: Task) -> None:
        self.ctx, self.task = ctx, task
        trainer, params = ctx.trainer, ctx.params
        self.classify = task.kind == "classification"
        self.model: nn.Module = task.obj.build_model(params)
        self.ddp = ctx.prepare_model(self.model)
        self.optimizer = _optimizer(task, self.model, ctx)
        options = loader_options(ctx, task)
        self.train_loader = ctx.prepare_loader(
            ctx.train_dataset, ctx.batch_size, shuffle=True, **options
        )
        self.val_loader = ctx.prepare_eval_loader(
            ctx.val_dataset, trainer.val_batch_size, **options
        )
        self.steps = len(self.train_loader)
        self.scheduler, self.interval, self.monitor = self._scheduler()
        self.loss_fn = self._loss()
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(trainer.precision)
        self.scaler = None
        if trainer.precision == "fp16" and ctx.device.type == "cuda":
            self.scaler = torch.amp.GradScaler("cuda")
        self.last_lr = float(self.optimizer.param_groups[0]["lr"])
        state = ctx.load_checkpoint()
        if state is not None:
            self._load(state)

    def run(self) -> None:
        ctx = self.ctx
        for epoch in range(ctx.start_epoch, ctx.epochs):
            torch.manual_seed(ctx.job.fold_seed + 7919 * (epoch + 1) + ctx.rank)  # dropout
            started = time.perf_counter()
            loss_sum, samples = self._train(epoch)
            train_seconds = time.perf_counter() - started
            val = self._validate()
            seconds = time.perf_counter() - started
            sums = ctx.sum([loss_sum, samples, *val])
            train_seconds, val_seconds = ctx.max([train_seconds, seconds - train_seconds])
            metrics = {
                "train_loss": sums[0] / max(sums[1], 1.0),
                "val_loss": sums[2] / max(sums[3], 1.0),
                "val_accuracy" if self.classify else "val_mse": sums[4] / max(sums[5], 1.0),
                "lr": self.last_lr,
                "train_seconds": train_seconds,
                "val_seconds": val_seconds,
                "samples_per_second": sums[1] / max(train_seconds, 1e-9),
            }
            if self.scheduler is not None and self.interval == "epoch":
                self._step_epoch_scheduler(metrics)
            ctx.report(epoch, **metrics)
            ctx.save_model(self.model)
            if ctx.should_stop():
                return
            if ctx.checkpoint_due:
                ctx.save_checkpoint(self._state())

    def _train(self, epoch: int) -> tuple[float, float]:
        """One pass over this rank's share; returns (sum of sample losses, samples)."""
        self.ddp.train()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.ctx.device)
        samples = 0
        clip = self.ctx.trainer.clip_grad_norm
        for step, batch in enumerate(self.train_loader):
            x, y = self._on_device(batch)
            self.optimizer.zero_grad(set_to_none=True)
            with self._autocast():
                out = self.ddp(x)
                loss = self.loss_fn(self._align(out, y), y)
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                if clip is not None:
                    self.scaler.unscale_(self.optimizer)
            else:
                loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(self.model.parameters(), clip)
            self._step(epoch, step)
            if self.scheduler is not None and self.interval == "step":
                self.scheduler.step()
            loss_sum += loss.detach().double() * len(y)  # no host sync per step
            samples += len(y)
        return float(loss_sum.item()), float(samples)

    def _step(self, epoch: int, step: int) -> None:
        self.last_lr = self.ctx.optimizer_step(
            self.optimizer, epoch, step, self.steps, scaler=self.scaler
        )

    @torch.no_grad()
    def _validate(self) -> list[float]:
        """This rank's share of the held-out fold: [loss sum, samples, metric sum, count]."""
        self.model.eval()
        sums = torch.zeros(4, dtype=torch.float64, device=self.ctx.device)
        for batch in self.val_loader:
            x, y = self._on_device(batch)
            with self._autocast():
                out = self._align(self.model(x), y)
                loss = self.loss_fn(out, y)
            sums[0] += loss.double() * len(y)
            sums[1] += len(y)
            if self.classify:
                sums[2] += (out.argmax(dim=1) == y).sum()
                sums[3] += len(y)
            else:
                sums[2] += ((out.double() - y.double()) ** 2).sum()
                sums[3] += y.numel()
        return sums.tolist()

    def _on_device(self, batch: Any) -> tuple[Any, torch.Tensor]:
        try:
            x, y = batch
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"a batch must be (inputs, targets), got {type(batch).__name__}: give the task a "
                "collate_fn that returns such pairs"
            ) from err
        device = self.ctx.device
        y = y.to(device, non_blocking=True)
        if not self.classify and y.is_floating_point():
            y = y.float()
        return to_device(x, device), y

    def _align(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Regression outputs of shape (n,) meet targets of shape (n, 1) without broadcasting."""
        if not self.classify and out.shape != target.shape and out.numel() == target.numel():
            return out.reshape(target.shape)
        return out

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.ctx.device.type, dtype=self.dtype)

    def _scheduler(self) -> tuple[Any, str, str | None]:
        hook = self.task.hook("make_scheduler")
        if hook is None:
            return None, "step", None
        made = call_hook(
            hook, self.optimizer, self.ctx.params, self.steps, self.ctx.epochs, ctx=self.ctx
        )
        if not isinstance(made, dict):
            return made, "step", None
        interval, monitor = made.get("interval", "step"), made.get("monitor")
        if interval not in INTERVALS:
            raise ValueError(
                f"make_scheduler's interval must be one of {INTERVALS}, got {interval!r}"
            )
        return made.get("scheduler"), interval, monitor

    def _step_epoch_scheduler(self, metrics: dict[str, float]) -> None:
        if self.monitor is None:
            self.scheduler.step()
            return
        if self.monitor not in metrics:
            raise ValueError(
                f"make_scheduler monitors {self.monitor!r}, which the built-in loop does not "
                f"report ({', '.join(metrics)})"
            )
        self.scheduler.step(metrics[self.monitor])

    def _loss(self) -> nn.Module:
        hook = self.task.hook("loss_fn")
        if hook is None:
            return nn.CrossEntropyLoss() if self.classify else nn.MSELoss()
        loss = call_hook(hook, self.ctx.params, ctx=self.ctx)
        return loss.to(self.ctx.device) if isinstance(loss, nn.Module) else loss

    def _state(self) -> dict[str, Any]:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def _load(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and "scaler" in state:
            self.scaler.load_state_dict(state["scaler"])


def loader_options(ctx: FoldContext, task: Task) -> dict[str, Any]:
    """DataLoader options of foldwise's loops: ``trainer.num_workers`` worker processes (kept
    from epoch to epoch) and the task's ``collate_fn``."""
    options: dict[str, Any] = {"num_workers": ctx.trainer.num_workers}
    if ctx.trainer.num_workers > 0:
        options["persistent_workers"] = True
    collate = task.hook("collate_fn")
    if collate is not None:
        options["collate_fn"] = collate
    return options


def _optimizer(task: Task, model: nn.Module, ctx: FoldContext) -> torch.optim.Optimizer:
    """The task's optimizer, or Adam with ``lr`` and ``weight_decay`` from the params."""
    hook = task.hook("make_optimizer")
    if hook is not None:
        return call_hook(hook, model, ctx.params, ctx=ctx)
    lr = float(ctx.params.get("lr", 1e-3))
    weight_decay = float(ctx.params.get("weight_decay", 0.0))
    return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
