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
takes the study's learning-rate scaling and warm-up (``ctx.lr_factor``) as the other loops do:
applied inside the step alone (``trainers.optimizer_steps``), so the module's schedulers, at
either interval, step their own rates as in plain Lightning.

Every validation sample counts once: the fold's own loaders deal the validation fold out to
the ranks without padding, and a DataModule's validation loaders get the same sampler in place
of Lightning's (which repeats samples to even out the ranks). What Lightning warns of while it
trains the fold (an epoch-level metric logged without ``sync_dist``, say) is a warning of the
study.
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
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.data import _update_dataloader
from torch.utils.data import DataLoader, IterableDataset

from foldwise.trainers.builtin_loop import loader_options
from foldwise.trainers.context import FoldContext
from foldwise.trainers.report import WarningKind
from foldwise.trainers.task import Task

PRECISION = {"32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}
"""``trainer.precision`` as Lightning names it."""
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]")


QUIET = (".*does not have many workers.*", ".*LeafSpec.*is deprecated.*")
"""Lightning's warnings that say nothing to a foldwise user: workers are
``trainer.num_workers``, and a deprecation inside Lightning itself."""


def train_lightning(ctx: FoldContext, task: Task) -> None:
    """Fit ``task``'s module on ``ctx``'s fold for ``ctx.epochs`` epochs (or until stopped)."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    # Lightning's launcher sets torch's threads to the machine's cores over its processes
    # unless OMP_NUM_THREADS says otherwise: keep the share this rank was given.
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    module = task.obj.build_module(ctx.params)
    datamodule_hook = task.hook("build_datamodule")
    with (
        tempfile.TemporaryDirectory(prefix="foldwise-lightning-") as workdir,
        warnings.catch_warnings(record=True) as said,
    ):
        warnings.simplefilter("default")
        for quiet in QUIET:
            warnings.filterwarnings("ignore", quiet)
        heard = _LightningWarnings(ctx, said)
        trainer = _trainer(ctx, workdir, heard, own_sampler=datamodule_hook is not None)
        ctx.scale_every_step(lambda: _step_factor(ctx, trainer))
        resume = _resume_file(ctx, Path(workdir))
        try:
            if datamodule_hook is not None:
                datamodule = datamodule_hook(ctx)
                _count_each_once(ctx, datamodule)
                trainer.fit(module, datamodule=datamodule, ckpt_path=resume)
            else:
                train, val = _loaders(ctx, task)
                trainer.fit(module, train_dataloaders=train, val_dataloaders=val, ckpt_path=resume)
        finally:
            heard.forward()


def _step_factor(ctx: FoldContext, trainer: pl.Trainer) -> float:
    """``ctx.lr_factor`` at the Trainer's step: the batch's place in its epoch."""
    steps = trainer.num_training_batches
    step = max(trainer.fit_loop.epoch_loop.batch_idx, 0)
    if not math.isfinite(steps):  # an iterable dataset: warm up by whole epochs
        step, steps = 0, 1
    return ctx.lr_factor(trainer.current_epoch, step, int(steps))


class _LightningWarnings:
    """What Lightning warned of while it trained (``said``, recorded), as the study's
    warnings: each once, when an epoch ends and when the fit does."""

    def __init__(self, ctx: FoldContext, said: list[warnings.WarningMessage] | None) -> None:
        self.ctx, self.said, self._seen = ctx, said if said is not None else [], 0

    def forward(self) -> None:
        for caught in self.said[self._seen :]:
            if _from_lightning(caught):
                self.ctx._channel.warn(WarningKind.LIGHTNING, str(caught.message))
        self._seen = len(self.said)


def _from_lightning(caught: warnings.WarningMessage) -> bool:
    """A warning Lightning gave (not a deprecation): its category or the code that gave it
    is Lightning's."""
    if issubclass(caught.category, DeprecationWarning | PendingDeprecationWarning | FutureWarning):
        return False
    module = getattr(caught.category, "__module__", "") or ""
    return module.startswith("lightning") or f"{os.sep}lightning{os.sep}" in caught.filename


def _count_each_once(ctx: FoldContext, datamodule: Any) -> None:
    """The DataModule's validation loaders read every sample of the fold once over the ranks
    (``FoldContext.eval_sampler`` in place of Lightning's padding sampler), or the fold warns
    why one cannot."""
    if ctx.world_size == 1 or not callable(getattr(datamodule, "val_dataloader", None)):
        return
    own = datamodule.val_dataloader

    def val_dataloader() -> Any:
        return _each_loader(own(), lambda loader: _sharded_for_eval(ctx, loader))

    datamodule.val_dataloader = val_dataloader


def _each_loader(loaders: Any, change: Any) -> Any:
    if isinstance(loaders, DataLoader):
        return change(loaders)
    if isinstance(loaders, list | tuple):
        return type(loaders)(_each_loader(item, change) for item in loaders)
    if isinstance(loaders, dict):
        return {key: _each_loader(item, change) for key, item in loaders.items()}
    return loaders


def _sharded_for_eval(ctx: FoldContext, loader: DataLoader) -> DataLoader:
    """``loader`` reading this rank's share of its dataset, each sample on one rank."""
    dataset = loader.dataset
    if isinstance(dataset, IterableDataset) or not hasattr(dataset, "__len__"):
        ctx._channel.warn(
            WarningKind.VALIDATION_SAMPLES,
            "a validation DataLoader of the DataModule reads an iterable dataset, which every "
            "rank reads whole: each sample counts once per rank (give a map-style Dataset to "
            "count each once)",
        )
        return loader
    sampler = ctx.eval_sampler(dataset, loader.batch_size)
    try:
        sharded = _update_dataloader(loader, sampler, mode=RunningStage.VALIDATING)
    except Exception as exc:  # a loader Lightning cannot rebuild (a custom batch sampler)
        ctx._channel.warn(
            WarningKind.VALIDATION_SAMPLES,
            f"a validation DataLoader of the DataModule could not be given a sampler that reads "
            f"each sample once ({type(exc).__name__}), so Lightning's own pads the ranks' "
            "shares: a few samples count twice",
        )
        return loader
    _warn_if_uneven(ctx, sampler)
    return sharded


def _warn_if_uneven(ctx: FoldContext, sampler: Any) -> None:
    if not sampler.even:
        ctx._channel.warn(
            WarningKind.VALIDATION_SAMPLES,
            f"the validation fold's {sampler.total_size} samples do not split into the same "
            f"number of batches on each of the {ctx.world_size} ranks, so the ranks take "
            "different numbers of validation steps: a metric logged with sync_dist=True on "
            "every step would wait for the rank that has none left (log it per epoch)",
        )


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

    def __init__(self, ctx: FoldContext, heard: _LightningWarnings) -> None:
        self.ctx, self.heard = ctx, heard

    def on_train_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        ctx = self.ctx
        self.heard.forward()
        ctx.report(trainer.current_epoch, **logged_metrics(trainer.callback_metrics))
        ctx.save_model(module)
        if ctx.should_stop():
            trainer.should_stop = True
        elif ctx.checkpoint_due:
            ctx.save_checkpoint({"lightning": _dump(trainer)})


def logged_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The scalars a module logged, under names a report takes ("val/acc" is "val_acc")."""
    out = {}
    for name, value in metrics.items():
        if torch.is_tensor(value) and value.numel() != 1:
            continue
        out[_NOT_A_NAME.sub("_", name)] = float(value)
    return out


def _trainer(
    ctx: FoldContext, workdir: str, heard: _LightningWarnings, *, own_sampler: bool
) -> pl.Trainer:
    settings = ctx.trainer
    return pl.Trainer(
        accelerator="gpu" if ctx.device.type == "cuda" else "cpu",
        devices=1,
        strategy=_strategy(ctx),
        max_epochs=ctx.epochs,
        precision=PRECISION[settings.precision],
        gradient_clip_val=settings.clip_grad_norm,
        callbacks=[_ReportEpochs(ctx, heard)],
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
    """DataLoaders over the fold's views; validation reads each sample once over the ranks,
    in as many steps on each rank as the fold allows (a metric synced per step meets)."""
    options = loader_options(ctx, task)
    train = ctx.prepare_loader(ctx.train_dataset, ctx.batch_size, shuffle=True, **options)
    batch = ctx.trainer.val_batch_size
    val = ctx.prepare_eval_loader(ctx.val_dataset, batch, **options)
    if ctx.world_size > 1:
        _warn_if_uneven(ctx, ctx.eval_sampler(ctx.val_dataset, batch))
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
