"""Lightning tasks as a fold function: a LightningModule trained by a Lightning ``Trainer`` on
every rank of the fold's DDP group, inside the process group foldwise made (DESIGN §6).

The task gives ``build_module(params)`` (a LightningModule) and ``load_data``; its data reaches
the Trainer as DataLoaders over the fold's views, or through ``build_datamodule(ctx)`` (a
LightningDataModule for the fold). The Trainer joins foldwise's group through a cluster
environment read from ``ctx`` (Lightning launches nothing); at the end of each training epoch
(after validation) the metrics the module logged (``self.log``) are reported, the module is
kept as the fold's model and a checkpoint saved; when racing, pruning or early stopping say
stop, the Trainer stops. The module's own optimizers, schedulers and callbacks run unchanged;
``trainer.precision`` and ``trainer.clip_grad_norm`` set the Trainer's, and every optimizer step
takes the study's learning-rate scaling and warm-up (``ctx.lr_factor``) as the other loops do.
"""

from __future__ import annotations

import logging
import math
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.plugins.environments import ClusterEnvironment
from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

from foldwise.trainers.builtin_loop import loader_options
from foldwise.trainers.context import FoldContext
from foldwise.trainers.task import Task

PRECISION = {"32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}
"""``trainer.precision`` as Lightning names it."""
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]")


def train_lightning(ctx: FoldContext, task: Task) -> None:
    """Fit ``task``'s module on ``ctx``'s fold for ``ctx.epochs`` epochs (or until stopped)."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    # Lightning's launcher sets torch's threads to the machine's cores over its processes
    # unless OMP_NUM_THREADS says otherwise: keep the share this rank was given.
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    module = task.obj.build_module(ctx.params)
    datamodule_hook = task.hook("build_datamodule")
    with tempfile.TemporaryDirectory(prefix="foldwise-lightning-") as workdir:
        trainer = _trainer(ctx, workdir, own_sampler=datamodule_hook is not None)
        resume = _resume_file(ctx, Path(workdir))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", ".*does not have many workers.*")
            warnings.filterwarnings("ignore", ".*sync_dist=True.*")
            warnings.filterwarnings("ignore", ".*LeafSpec.*is deprecated.*")
            if datamodule_hook is not None:
                trainer.fit(module, datamodule=datamodule_hook(ctx), ckpt_path=resume)
            else:
                train, val = _loaders(ctx, task)
                trainer.fit(module, train_dataloaders=train, val_dataloaders=val, ckpt_path=resume)


class FoldEnvironment(ClusterEnvironment):
    """The fold's DDP group as Lightning sees it: the ranks foldwise started, already joined."""

    def __init__(self, ctx: FoldContext) -> None:
        self.ctx = ctx

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return "127.0.0.1"  # unused: the process group exists before the Trainer starts

    @property
    def main_port(self) -> int:
        return 0

    @staticmethod
    def detect() -> bool:
        return False

    def world_size(self) -> int:
        return self.ctx.world_size

    def set_world_size(self, size: int) -> None:
        pass  # the fold's, not Lightning's to set

    def global_rank(self) -> int:
        return self.ctx.rank

    def set_global_rank(self, rank: int) -> None:
        pass

    def local_rank(self) -> int:
        return self.ctx.local_rank

    def node_rank(self) -> int:
        return 0


class FoldDDPStrategy(DDPStrategy):
    """DDP on this rank's device, sharding data over the fold's ranks."""

    def __init__(self, ctx: FoldContext, **kwargs: Any) -> None:
        super().__init__(
            cluster_environment=FoldEnvironment(ctx),
            parallel_devices=[ctx.device],
            process_group_backend=ctx.job.backend,
            **kwargs,
        )
        self._fold_device = ctx.device

    @property
    def root_device(self) -> torch.device:
        return self._fold_device

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": self.world_size, "rank": self.global_rank}


class _ReportEpochs(Checkpoint):
    """At the end of each training epoch (after its validation): report what the module
    logged, keep the module as the fold's model, checkpoint, and stop when told.

    A ``Checkpoint`` so that Lightning calls it after the module's own ``on_train_epoch_end``
    (as it does ModelCheckpoint and EarlyStopping): what the module logs there is reported
    with its epoch, not the next."""

    def __init__(self, ctx: FoldContext) -> None:
        self.ctx = ctx

    def on_train_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        ctx = self.ctx
        ctx.report(trainer.current_epoch, **logged_metrics(trainer.callback_metrics))
        ctx.save_model(module)
        if ctx.should_stop():
            trainer.should_stop = True
        elif ctx.checkpoint_due:
            ctx.save_checkpoint({"lightning": _dump(trainer)})


class _ScaledRate(pl.Callback):
    """Each optimizer step at ``ctx.lr_factor`` times the rates the module's optimizers hold
    (the study's scaling by world size, reached by its warm-up): they are multiplied just
    before the step and put back after the batch, so the module's schedulers step from their
    own values and its logged rates are its own."""

    def __init__(self, ctx: FoldContext) -> None:
        self.ctx = ctx
        self._held: dict[int, tuple[Any, list[float]]] = {}

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, module: pl.LightningModule, optimizer: Any
    ) -> None:
        if id(optimizer) in self._held:  # a second step of the same optimizer in one batch
            return
        steps = trainer.num_training_batches
        step = max(trainer.fit_loop.epoch_loop.batch_idx, 0)
        if not math.isfinite(steps):  # an iterable dataset: warm up by whole epochs
            step, steps = 0, 1
        factor = self.ctx.lr_factor(trainer.current_epoch, step, int(steps))
        if factor == 1.0:
            return
        own = [group["lr"] for group in optimizer.param_groups]
        self._held[id(optimizer)] = (optimizer, own)
        for group, lr in zip(optimizer.param_groups, own, strict=True):
            group["lr"] = lr * factor

    def on_train_batch_end(self, *args: Any) -> None:
        for optimizer, own in self._held.values():
            for group, lr in zip(optimizer.param_groups, own, strict=True):
                group["lr"] = lr
        self._held.clear()


def logged_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The scalars a module logged, under names a report takes ("val/acc" is "val_acc")."""
    out = {}
    for name, value in metrics.items():
        if torch.is_tensor(value) and value.numel() != 1:
            continue
        out[_NOT_A_NAME.sub("_", name)] = float(value)
    return out


def _trainer(ctx: FoldContext, workdir: str, *, own_sampler: bool) -> pl.Trainer:
    settings = ctx.trainer
    return pl.Trainer(
        accelerator="gpu" if ctx.device.type == "cuda" else "cpu",
        devices=1,
        strategy=_strategy(ctx),
        max_epochs=ctx.epochs,
        precision=PRECISION[settings.precision],
        gradient_clip_val=settings.clip_grad_norm,
        callbacks=[_ScaledRate(ctx), _ReportEpochs(ctx)],
        use_distributed_sampler=own_sampler,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=True,  # foldwise's own (_ReportEpochs), in place of Lightning's
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=workdir,
    )


def _strategy(ctx: FoldContext) -> Any:
    """DDP over the fold's ranks; one rank trains the bare module on its device, as the other
    loops do (the same arithmetic without DDP's hooks)."""
    if ctx.world_size == 1:
        return SingleDeviceStrategy(device=ctx.device)
    return FoldDDPStrategy(ctx)


def _loaders(ctx: FoldContext, task: Task) -> tuple[Any, Any]:
    """DataLoaders over the fold's views; validation shards with padding (as Lightning's
    own sampler does) so ranks that sync what they log per step take as many steps."""
    options = loader_options(ctx, task)
    train = ctx.prepare_loader(ctx.train_dataset, ctx.batch_size, shuffle=True, **options)
    val = ctx.prepare_loader(ctx.val_dataset, ctx.trainer.val_batch_size, shuffle=False, **options)
    return train, val


def _dump(trainer: pl.Trainer) -> dict[str, Any]:
    """The Trainer's checkpoint (module, optimizers, schedulers, loops) as a dict."""
    return trainer._checkpoint_connector.dump_checkpoint(weights_only=False)


def _resume_file(ctx: FoldContext, workdir: Path) -> str | None:
    """A retried attempt's Lightning checkpoint, written where ``Trainer.fit`` reads it."""
    state = ctx.load_checkpoint()
    if state is None:
        return None
    path = workdir / "resume.ckpt"
    torch.save(state["lightning"], path)
    return str(path)
