"""FoldContext: what a fold function gets (``train_fold(ctx)``), on every rank of the fold's DDP
group (DESIGN §6).

It says which fold of which trial this is, gives the fold's data lazily, and carries the
data-parallel practice as helpers so an own loop need not rewrite it. A complete own loop::

    def train_fold(ctx):
        model = ctx.prepare_model(Net(ctx.params))              # device, same weights, DDP
        opt = torch.optim.AdamW(model.parameters(), lr=ctx.params["lr"])
        train = ctx.prepare_loader(ctx.train_dataset, ctx.batch_size, shuffle=True)
        val = ctx.prepare_eval_loader(ctx.val_dataset, 256)
        for epoch in range(ctx.start_epoch, ctx.epochs):
            for step, (x, y) in enumerate(train):
                opt.zero_grad()
                loss_fn(model(x.to(ctx.device)), y.to(ctx.device)).backward()
                ctx.optimizer_step(opt, epoch, step, len(train))  # the study's lr scaling
            scores, labels = predict(model, val)                  # this rank's share
            auroc = roc_auc_score(ctx.gather(labels), ctx.gather(scores))  # the whole fold
            ctx.report(epoch, val_auroc=auroc)
            ctx.save_model(model)
            if ctx.should_stop():                                 # racing, pruning, patience
                break
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, Subset

from foldwise.trainers.ddp import release_models, wrap_model
from foldwise.trainers.fold_channel import FoldChannel
from foldwise.trainers.fold_data import EvalShardSampler, TaskData, array_batches, train_sampler
from foldwise.trainers.job import FoldJob
from foldwise.trainers.lr_schedule import step_scaled
from foldwise.trainers.report import WarningKind
from foldwise.trainers.splits import fold_indices
from foldwise.trainers.task import Task


class FoldContext:
    """One rank's view of one fold run. Attributes:

    ``params`` (the trial's), ``options`` (``trainer.options``), ``fold``, ``folds``, ``seed``,
    ``rank``, ``local_rank``, ``world_size``, ``is_chief`` (rank 0), ``device``; ``epochs``,
    ``batch_size`` (per rank) and ``trainer`` (every trainer setting, with what the trial's
    params search); ``start_epoch`` (above 0 when a retried attempt resumed from a checkpoint);
    ``train_indices`` / ``val_indices`` (into the task's data), ``train_dataset`` /
    ``val_dataset`` (views of it; validation reads ``load_eval_data`` when the task has it),
    ``train_targets`` (the training fold's labels, e.g. for class weights); ``task`` (the
    task object the user wrote). ``refit``: this run trains the trial's params on all the
    training data (``fold`` is None) and validates on the same data (the test data is scored
    once, after it, by foldwise: nothing the run sees of it could choose anything).
    ``rank_seed``: the seed torch, numpy and ``random`` were given on this rank before the
    fold function began (its own on every rank, and the same on a rerun). ``lr_scaling`` and
    ``warmup_epochs``: the study's, or the loop's default where it left them open.
    """

    def __init__(
        self,
        job: FoldJob,
        task: Task,
        data: TaskData,
        channel: FoldChannel,
        *,
        rank: int,
        device: torch.device,
        local_rank: int | None = None,
    ) -> None:
        self.job, self._channel = job, channel
        self.task = task.obj
        self.params = job.params
        self.options = job.trainer.options
        self.trainer = job.trainer
        self.refit = job.refit
        self.fold = None if job.refit else job.fold
        self.folds, self.seed = job.folds, job.seed
        self.rank, self.world_size = rank, job.world_size
        self.local_rank = rank if local_rank is None else local_rank
        self.is_chief = rank == 0
        self.device = device
        self.epochs, self.batch_size = job.epochs, job.batch_size
        self.rank_seed = job.rank_seed(rank)
        self._rates = channel.rates
        self.lr_scaling, self.warmup_epochs = self._rates.scaling, self._rates.warmup_epochs
        self.start_epoch = 0
        self._restored: Any = None
        self._wrapped: list[nn.Module] = []
        if job.refit:  # everything trains, and validation reads the same samples
            self.train_indices = self.val_indices = np.arange(len(data))
        else:
            self.train_indices, self.val_indices = fold_indices(job, task, data)
        self.train_dataset: Dataset = Subset(data.dataset, self.train_indices.tolist())
        self.val_dataset: Dataset = Subset(data.eval_dataset, self.val_indices.tolist())
        self.train_targets = None if data.targets is None else data.targets[self.train_indices]

    # -- data parallelism -------------------------------------------------------------------

    def prepare_model(self, model: nn.Module) -> nn.Module:
        """``model`` on this rank's device, wrapped in DistributedDataParallel when there are
        several ranks (DDP gives every rank rank 0's initial weights). Every rank calls it."""
        wrapped = wrap_model(model, self.device)
        self._wrapped.append(wrapped)
        if self._channel.model_params is None:  # the first model prepared is the one trained
            trainable = (p.numel() for p in model.parameters() if p.requires_grad)
            self._channel.model_params = sum(trainable)
        return wrapped

    def prepare_loader(
        self, dataset: Dataset, batch_size: int, *, shuffle: bool = True, **options: Any
    ) -> DataLoader:
        """A training DataLoader over this rank's share of ``dataset``: a DistributedSampler
        (one shuffle per epoch, shared by the ranks, set anew each time the loader is
        iterated), the same number of batches on every rank. ``options`` go to DataLoader
        (``num_workers``, ``collate_fn``, ``drop_last``, ...); pinned memory on CUDA by
        default. ``drop_last`` drops what does not fill a batch, as DataLoader's does (and the
        sampler deals the ranks equal shares without padding)."""
        sampler = train_sampler(
            len(dataset),  # type: ignore[arg-type]
            rank=self.rank,
            world_size=self.world_size,
            seed=self.seed,
            shuffle=shuffle,
            drop_last=bool(options.get("drop_last", False)),
        )
        return self._loader(dataset, batch_size, sampler, options)

    def prepare_eval_loader(self, dataset: Dataset, batch_size: int, **options: Any) -> DataLoader:
        """A DataLoader over this rank's share of ``dataset`` for evaluation: the ranks
        together read every sample exactly once (sum what they count with ``ctx.sum``, or
        ``ctx.gather`` what a metric of the whole fold needs), in the same number of batches
        on every rank where the data allows it."""
        sampler = self.eval_sampler(dataset, batch_size)
        return self._loader(dataset, batch_size, sampler, options)

    def eval_sampler(self, dataset: Dataset, batch_size: int | None = None) -> EvalShardSampler:
        """The sampler of ``prepare_eval_loader``: this rank's share of ``dataset``."""
        return EvalShardSampler(
            len(dataset),  # type: ignore[arg-type]
            rank=self.rank,
            world_size=self.world_size,
            batch_size=batch_size,
        )

    @property
    def lr_scale(self) -> float:
        """What the study's ``lr_scaling`` multiplies the single-process rate by."""
        return self._rates.scale

    def lr_factor(self, epoch: int, step: int, steps_per_epoch: int) -> float:
        """The multiplier of the single-process learning rate at optimizer ``step`` of
        ``epoch`` (both from 0): ``lr_scale`` reached by a linear warm-up over
        ``warmup_epochs``."""
        return self._rates.factor(epoch, step, steps_per_epoch)

    def optimizer_step(
        self,
        optimizer: torch.optim.Optimizer,
        epoch: int,
        step: int,
        steps_per_epoch: int,
        *,
        scaler: torch.amp.GradScaler | None = None,
    ) -> float:
        """``optimizer.step()`` (``scaler.step`` and ``update`` with a gradient scaler) at
        ``lr_factor(epoch, step, steps_per_epoch)`` times the rates its groups hold, which are
        put back after, so a scheduler keeps stepping its own values: the study's scaling and
        warm-up compose with any scheduler, as in the built-in loop. The first group's rate
        used, to report."""
        return step_scaled(optimizer, self.lr_factor(epoch, step, steps_per_epoch), scaler)

    def sum(self, value: Any) -> Any:
        """``value`` (a number, a list of numbers or a tensor) summed over the ranks; every
        rank calls it (a collective, like DDP's own)."""
        return self._all_reduce(value, dist.ReduceOp.SUM)

    def max(self, value: Any) -> Any:
        """``value`` (a number, a list of numbers or a tensor) maximised over the ranks."""
        return self._all_reduce(value, dist.ReduceOp.MAX)

    def mean(self, value: Any, weight: float = 1.0) -> float:
        """The ``weight``-weighted mean of a number over the ranks; every rank calls it."""
        total, weights = self.sum([float(value) * weight, float(weight)])
        return total / weights if weights else float("nan")

    def gather(self, value: Any) -> Any:
        """``value`` of every rank, joined in rank order, on every rank (a collective: every
        rank calls it). Tensors and numpy arrays are concatenated along their first dimension
        (each rank's may have its own length; a 0-d one is stacked), lists and tuples into one
        list, anything else (a number, a dict) is a list of each rank's. What a metric of the
        whole fold needs, computed by any library::

            preds, labels = predict(model, ctx.prepare_eval_loader(ctx.val_dataset, 256))
            auroc = roc_auc_score(ctx.gather(labels), ctx.gather(preds))
        """
        if self.world_size == 1:
            parts = [value]
        else:
            parts = [None] * self.world_size
            sent = value.detach().cpu() if torch.is_tensor(value) else value
            dist.all_gather_object(parts, sent)
        return _joined(parts, value)

    def warn(self, message: str) -> None:
        """Tell the user ``message`` as a warning of the study (shown once, with the trials
        whose fold runs said it): something this run knows is suspect about its results."""
        self._channel.warn(WarningKind.TASK, message)

    # -- reporting ----------------------------------------------------------------------------

    def report(self, epoch: int, **metrics: Any) -> None:
        """Report epoch ``epoch`` (counting from 0, as ``range(ctx.epochs)``): every rank calls
        it once per epoch with the same metric names; rank 0's values are the fold's. It
        drives early stopping, pruning, racing and the dashboard; afterwards ``should_stop()``
        says whether to leave the loop (a report after that raises ``FoldStopped``)."""
        self._channel.report(epoch, metrics)

    def should_stop(self) -> bool:
        """Whether to leave the loop now: early stopping fired, or racing, pruning or the
        study stopped the fold. Every rank gets the same answer at the same epoch."""
        return self._channel.should_stop()

    @property
    def checkpoint_due(self) -> bool:
        """Whether ``save_checkpoint`` keeps a checkpoint now (to skip building its state)."""
        return self._channel.checkpoint_due

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Keep ``state`` (model, optimizer, ... state dicts) every ``trainer.checkpoint_every``
        epochs, on rank 0 (other ranks return at once). A retried attempt gets it back from
        ``load_checkpoint()`` and starts at ``start_epoch``."""
        self._channel.save_checkpoint(state)

    def load_checkpoint(self) -> Any:
        """The state an earlier attempt of this fold saved last, on every rank, or None."""
        return self._restored

    def save_model(self, model: nn.Module | dict[str, Any], **extra: Any) -> None:
        """Keep ``model`` as the fold's model at the epoch just reported: the best epoch's
        (``objective.use: best``) or the last's. It downloads from the service when the fold
        ends; ``extra`` is saved with it. Rank 0 keeps it; other ranks return at once."""
        self._channel.save_model(model, **extra)

    # -- the fold runner's ----------------------------------------------------------------------

    def resume_from(self, state: Any) -> None:
        self._restored = state
        self.start_epoch = self._channel.last_epoch

    def scale_every_step(self, factor: Any) -> None:
        """Every optimizer step this fold's thread takes from now on is taken at ``factor()``
        times the rates the optimizer holds (put back right after the step): for loops that
        foldwise drives around the user's optimizers (Lightning)."""
        self._channel.steps.factor = factor

    def release(self) -> None:
        """Free the DDP wrappers this context made, before the process group goes."""
        release_models(self._wrapped)

    def _all_reduce(self, value: Any, op: dist.ReduceOp) -> Any:
        if self.world_size == 1:
            return value
        device = self.device if self.job.backend == "nccl" else torch.device("cpu")
        tensor = torch.as_tensor(value, dtype=torch.float64, device=device).clone()
        dist.all_reduce(tensor, op=op)
        return tensor if torch.is_tensor(value) else tensor.tolist()

    def _loader(
        self, dataset: Dataset, batch_size: int, sampler: Any, options: dict[str, Any]
    ) -> DataLoader:
        if self.device.type == "cuda":
            options.setdefault("pin_memory", True)
        batches = array_batches(dataset) if "collate_fn" not in options else None
        if batches is not None:  # arrays: a batch is one slice, not batch_size reads
            drop_last = bool(options.pop("drop_last", False))
            by_batch = BatchSampler(sampler, batch_size, drop_last=drop_last)
            return _EpochLoader(
                self, sampler, batches, sampler=by_batch, batch_size=None, **options
            )
        return _EpochLoader(
            self, sampler, dataset, batch_size=batch_size, sampler=sampler, **options
        )


def _joined(parts: list[Any], value: Any) -> Any:
    """Every rank's ``value`` as one: see ``FoldContext.gather``."""
    if torch.is_tensor(value):
        joined = torch.stack(parts) if value.dim() == 0 else torch.cat(parts)
        return joined.to(value.device)
    if isinstance(value, np.ndarray):
        return np.stack(parts) if value.ndim == 0 else np.concatenate(parts)
    if isinstance(value, list | tuple):
        return list(itertools.chain.from_iterable(parts))
    return parts


class _EpochLoader(DataLoader):
    """A DataLoader whose sampler learns the epoch each time it is iterated: the epochs the
    fold has reported so far, so a resumed attempt shuffles as the first one would have."""

    def __init__(
        self, ctx: FoldContext, epoch_sampler: Any, dataset: Dataset, **kwargs: Any
    ) -> None:
        super().__init__(dataset, **kwargs)
        self._ctx, self._epoch_sampler = ctx, epoch_sampler

    def __iter__(self) -> Any:
        set_epoch = getattr(self._epoch_sampler, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(self._ctx._channel.last_epoch)
        return super().__iter__()
