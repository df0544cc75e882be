"""One rank's side of a fold run's reporting: reports, stops, checkpoints and the fold's model.

``FoldContext`` hands a fold function's ``report``, ``should_stop``, ``save_checkpoint`` and
``save_model`` to this channel. Every report is an exchange with the other ranks
(``trainers.rank_exchange``): they check they are at the same epoch, learn whether the run was
asked to stop or early stopping fired, and average what foldwise measured. Rank 0 puts its
reports, checkpoints and model on the ``outbox``, which the fold runner streams to its caller.

The channel also watches what the run reports for what it knows is suspect, and says so once
per run as a ``FoldWarning``: a metric that differs across the ranks (computed over one rank's
share of the fold), and what the fold function or foldwise's loops said with ``warn``. Each
epoch's report carries the learning rate its last optimizer step used (``RATE_METRIC``); a
study that asks for lr scaling or warm-up a fold function never applied fails at its first
report (``lr_schedule.RatePlan``).
"""

from __future__ import annotations

import io
import math
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from foldwise.trainers.fold_errors import (
    FoldContractError,
    FoldStopped,
    PeersLate,
    RankReturnedAlone,
    RunAbandoned,
    TrainingDiverged,
)
from foldwise.trainers.job import FoldJob
from foldwise.trainers.lr_schedule import RatePlan
from foldwise.trainers.monitor import ResourceMonitor
from foldwise.trainers.objective import EarlyStopping, SmoothedStopping, improved, make_stopper
from foldwise.trainers.optimizer_steps import StepWatch
from foldwise.trainers.rank_exchange import RankExchange
from foldwise.trainers.report import (
    RATE_METRIC,
    RESERVED_METRICS,
    ArtifactKind,
    EpochReport,
    FoldWarning,
    SavedArtifact,
    WarningKind,
)
from foldwise.trainers.task import BUILTIN_TASKS

RETURN_GRACE_S = 60.0
"""How long a rank whose fold function returned waits for the others to return too (or a
quarter of ``trainer.fold_timeout``, when shorter): they report the same epochs, so only what
follows their last report is left to them."""
SAME_ON_EVERY_RANK = 1e-9
"""Relative difference below which a metric's values on the ranks are the same number (a sum
over the ranks is the same on each; only a rank's own share differs by more)."""
_TIMING = re.compile(r"(seconds|_time|_secs?)$")
"""Metrics named as timings: each rank measures its own, and they differ without being wrong."""


@dataclass(frozen=True)
class _KeptModel:
    epoch: int
    metrics: dict[str, float]
    state_dict: dict[str, Any]
    extra: dict[str, Any]


class FoldChannel:
    """Reporting for rank ``rank`` of ``job``; rank 0 writes to ``outbox``."""

    def __init__(
        self,
        job: FoldJob,
        *,
        rank: int,
        exchange: RankExchange,
        outbox: queue.Queue,
        monitor: ResourceMonitor | None = None,
        stop_requested: Callable[[], bool] | None = None,
        rates: RatePlan | None = None,
    ) -> None:
        self.job, self.rank, self.exchange, self.outbox = job, rank, exchange, outbox
        self.monitor = monitor
        self.rates = rates or job.rate_plan(own_loop=True)
        """The run's learning-rate scaling and warm-up, and what the fold function read."""
        self.steps = StepWatch()
        """The fold thread's optimizer steps (the fold runner enters it on that thread)."""
        self.model_params: int | None = None
        """Trainable parameters of the model the fold function prepared, once it has."""
        self.stop_requested = stop_requested or (lambda: False)
        self.abandoned: threading.Event = exchange.abandoned
        self.last_epoch = 0
        """The number (from 1) of the last epoch reported, restored ones included."""
        self.history: list[dict[str, float]] = []
        """Rank 0's reports so far (what a checkpoint replays)."""
        self.stop_reason: str | None = None
        """None while training goes on; "asked" (racing, pruning, the study) or "early"."""
        self._stopper = self._make_stopper()
        self._kept: _KeptModel | None = None
        self._epoch_began = time.perf_counter()
        self._epoch_began_wall = time.time()
        self._phase = "starting"
        self._phase_since = time.monotonic()
        self._warned: set[tuple[str, str]] = set()
        self._unsent: list[tuple[str, str]] = []
        self._rates_checked = False
        self._partial: set[str] = set()
        """The metrics already said to differ from rank to rank."""

    # -- what a fold function calls (through FoldContext) -------------------------------------

    def report(self, epoch: int, metrics: dict[str, Any]) -> None:
        """Report epoch ``epoch`` (from 0) with ``metrics``; every rank calls it each epoch."""
        if self.abandoned.is_set():
            raise RunAbandoned("the fold run was abandoned")
        if self.stop_reason is not None:
            raise FoldStopped(f"the fold was told to stop after epoch {self.last_epoch}")
        number = _epoch_number(epoch)
        values, problem = self._check(number, metrics)
        if problem is None and not self._rates_checked and self.steps.steps:
            self._rates_checked = True
            problem = self.rates.unapplied()
        early = False
        if problem is None and self.rank == 0 and self._stopper is not None:
            early = self._stopper.should_stop(values[self.job.objective.metric])
        usage = self.monitor.take() if self.monitor is not None else {}
        payload = {
            "kind": "report",
            "epoch": number,
            "stop": bool(self.stop_requested()),
            "early": early,
            "problem": problem,
            "usage": usage,
            "seconds": time.perf_counter() - self._epoch_began,
            "began": self._epoch_began_wall,
            "values": values,
            "rate": self.steps.take_rate(),
            "warnings": self._take_unsent(),
        }
        peers = self._exchange(payload, f"waiting in ctx.report(epoch={number - 1})")
        self._check_peers(peers)
        self._forward_warnings(peers)
        asked = any(p["stop"] for p in peers)
        self.stop_reason = "asked" if asked else "early" if peers[0]["early"] else None
        self.last_epoch = number
        if self.rank == 0:
            measured = _measured(peers)
            if peers[0]["rate"] is not None:
                measured[RATE_METRIC] = peers[0]["rate"]
            record = {**values, **measured}
            if self.model_params is not None:
                record.setdefault("n_params", float(self.model_params))
            self.history.append(record)
            self.outbox.put(EpochReport(number, record, stopped=asked))
        self._epoch_began, self._epoch_began_wall = time.perf_counter(), time.time()
        self._enter("in train_fold")

    def warn(self, kind: WarningKind, message: str) -> None:
        """Say ``message`` to the user, once per run, as one line of at most 500 characters:
        rank 0 sends it at once, another rank with its next report (or its return)."""
        message = " ".join(str(message).split())[:500]
        key = (str(kind), message)
        if key in self._warned:
            return
        self._warned.add(key)
        if self.rank == 0:
            self.outbox.put(FoldWarning(WarningKind(kind), message))
        else:
            self._unsent.append(key)

    def should_stop(self) -> bool:
        """Whether the fold should end now (the same answer on every rank)."""
        return self.stop_reason is not None

    @property
    def checkpoint_due(self) -> bool:
        """Whether ``save_checkpoint`` would keep a checkpoint now (rank 0, every
        ``trainer.checkpoint_every`` epochs, while the fold goes on)."""
        every = self.job.trainer.checkpoint_every
        return (
            self.rank == 0
            and self.job.keeps_artifacts
            and every > 0
            and self.last_epoch > 0
            and self.last_epoch % every == 0
            and self.last_epoch < self.job.epochs
            and self.stop_reason is None
        )

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Keep ``state`` as the fold's checkpoint when one is due; a retried attempt resumes
        from it (``load_checkpoint``), after its epochs are replayed."""
        if not self.checkpoint_due:
            return
        checkpoint = {
            "fingerprint": self.job.fingerprint(),
            "history": self.history,
            "state": state,
            "kept": self._kept,
        }
        self.outbox.put(
            SavedArtifact(ArtifactKind.CHECKPOINT, self.last_epoch, _dumps(checkpoint))
        )

    def save_model(self, model: nn.Module | dict[str, Any], **extra: Any) -> None:
        """Keep ``model`` (or its state dict) as the fold's model at the epoch just reported,
        when it is the best so far (``objective.use: best``) or always (``last``)."""
        if self.rank != 0 or not self.job.keeps_artifacts:
            return
        if not self.history:
            raise ValueError("save_model comes after the epoch's ctx.report")
        metrics = self.history[-1]
        objective = self.job.objective
        if self._kept is not None and objective.use == "best":
            value, best = metrics[objective.metric], self._kept.metrics[objective.metric]
            if not improved(value, best, objective.direction.value):
                return
        weights = model if isinstance(model, dict) else _unwrapped(model).state_dict()
        cpu = {
            k: v.detach().to("cpu", copy=True) if torch.is_tensor(v) else v
            for k, v in weights.items()
        }
        self._kept = _KeptModel(self.last_epoch, dict(metrics), cpu, extra)

    # -- what the fold runner calls -----------------------------------------------------------

    def restore(self, checkpoint: dict[str, Any] | None) -> Any:
        """Take over an earlier attempt's checkpoint: replay its epochs (rank 0 streams them as
        restored) and return the fold function's state, or None to start from scratch."""
        if checkpoint is None:
            return None
        for record in checkpoint["history"]:
            self.last_epoch += 1
            if self._stopper is not None:
                self._stopper.should_stop(record[self.job.objective.metric])
            if self.rank == 0:
                self.history.append(record)
                self.outbox.put(EpochReport(self.last_epoch, record, restored=True))
        self._kept = checkpoint.get("kept") if self.rank == 0 else None
        return checkpoint["state"]

    def finish(self) -> None:
        """The fold function returned on this rank: check every rank did so after the same
        epoch, then (rank 0) send the kept model, unless the run was asked to stop."""
        payload = {
            "kind": "returned",
            "epoch": self.last_epoch,
            "warnings": self._take_unsent(),
        }
        self._enter(f"returned after epoch {self.last_epoch}, waiting for the other ranks")
        try:
            peers = self.exchange.exchange(payload, timeout=self._return_grace)
        except PeersLate as late:
            raise RankReturnedAlone(self._returned_alone(late)) from None
        self._check_peers(peers)
        self._forward_warnings(peers)
        if self.last_epoch == 0:
            raise FoldContractError(
                "train_fold returned without reporting an epoch: call "
                "ctx.report(epoch, metric=value, ...) once per epoch"
            )
        self._enter("done")
        if self.rank == 0 and self._kept is not None and self.stop_reason != "asked":
            kept, job = self._kept, self.job
            model = {
                **kept.extra,
                "task": job.task,
                "module": BUILTIN_TASKS.get(job.task, job.task),
                "code_hash": job.code_hash,
                "params": job.params,
                "trainer": job.trainer.model_dump(mode="json"),
                "fold": None if job.refit else job.fold,
                "refit": job.refit,
                "epoch": kept.epoch,
                "metrics": kept.metrics,
                "state_dict": kept.state_dict,
            }
            self.outbox.put(SavedArtifact(ArtifactKind.MODEL, kept.epoch, _dumps(model)))

    def _returned_alone(self, late: PeersLate) -> str:
        """Why a rank that returned waited in vain for the others."""
        others = []
        for rank in late.missing:
            said = late.last.get(rank)
            where = f"its last report: epoch {said['epoch']}" if said else "it never reported"
            others.append(f"rank {rank} ({where})")
        return (
            f"rank {self.rank} returned from train_fold after epoch {self.last_epoch}, "
            f"and {', '.join(others)} had not {self._return_grace:g} s later: every rank reports "
            "the same epochs, then returns (a rank still training, or waiting in a collective "
            "this rank left)"
        )

    @property
    def _return_grace(self) -> float:
        return min(RETURN_GRACE_S, self.job.trainer.fold_timeout / 4)

    def status(self) -> str:
        """Where this rank is, for a run that timed out."""
        seconds = time.monotonic() - self._phase_since
        after = f" (last report: epoch {self.last_epoch})" if self.last_epoch else ""
        return f"{self._phase} for {seconds:.0f} s{after}"

    def began(self) -> None:
        """The fold function starts: its first epoch's clock starts now."""
        self._epoch_began, self._epoch_began_wall = time.perf_counter(), time.time()
        self._enter("in train_fold")

    # -- inside -------------------------------------------------------------------------------

    def _make_stopper(self) -> EarlyStopping | SmoothedStopping | None:
        stopping = self.job.early_stopping
        if stopping is None:
            return None
        return make_stopper(
            stopping.rule,
            direction=self.job.objective.direction.value,
            patience=stopping.patience,
            min_delta=stopping.min_delta,
        )

    def _take_unsent(self) -> list[tuple[str, str]]:
        unsent, self._unsent = self._unsent, []
        return unsent

    def _forward_warnings(self, peers: list[dict[str, Any]]) -> None:
        """On rank 0: send what the other ranks warned of, and what their reports show (a
        metric that is not the same number on every rank)."""
        if self.rank != 0:
            return
        for peer in peers[1:]:
            for kind, message in peer.get("warnings", ()):
                self.warn(WarningKind(kind), message)
        if peers[0]["kind"] != "report":
            return
        differing = [name for name in _differing_metrics(peers) if name not in self._partial]
        if differing:
            self._partial.update(differing)
            self.warn(WarningKind.PARTIAL_METRIC, self._partial_message(differing))

    def _partial_message(self, names: list[str]) -> str:
        objective = self.job.objective.metric
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        what = f"the objective {listed}" if objective in names else listed
        verb = "differs" if len(names) == 1 else "differ"
        return (
            f"{what} {verb} from rank to rank in the same epoch: each rank computed it over "
            "its own share of the fold, and foldwise records rank 0's. For a metric of the "
            "whole fold, sum counts with ctx.sum, compute it from ctx.gather(...), or log it "
            "with sync_dist=True in Lightning"
        )

    def _enter(self, phase: str) -> None:
        self._phase, self._phase_since = phase, time.monotonic()

    def _exchange(self, payload: dict[str, Any], phase: str) -> list[dict[str, Any]]:
        self._enter(phase)
        return self.exchange.exchange(payload)

    def _check(self, number: int, metrics: dict[str, Any]) -> tuple[dict[str, float], str | None]:
        """The metrics as floats, and what is wrong with this report (None: nothing)."""
        label = f"epoch {number}"
        if number <= self.last_epoch:
            return {}, f"reported {label} after epoch {self.last_epoch}: epochs must increase"
        values: dict[str, float] = {}
        for name, value in metrics.items():
            if name in RESERVED_METRICS:
                return {}, f"reported {name!r} at {label}: foldwise measures it itself"
            number_value = _as_float(value)
            if number_value is None:
                kind = type(value).__name__
                return {}, f"reported {name}={value!r:.60} ({kind}) at {label}: not a number"
            if not math.isfinite(number_value):
                return {}, f"{name} became {number_value} at {label}"
            values[name] = number_value
        metric = self.job.objective.metric
        if metric not in values:
            reported = ", ".join(sorted(values)) or "nothing"
            return {}, (
                f"the report of {label} lacks the objective metric {metric!r} (it holds "
                f"{reported})"
            )
        return values, None

    def _check_peers(self, peers: list[dict[str, Any]]) -> None:
        """Raise on every rank alike when a rank's report was bad or the ranks disagree."""
        for rank, peer in enumerate(peers):
            problem = peer.get("problem")
            if problem:
                prefix = f"rank {rank} " if len(peers) > 1 else ""
                error = TrainingDiverged if "became" in problem else FoldContractError
                raise error(f"{prefix}{problem}")
        places = [(p["kind"], p["epoch"]) for p in peers]
        if len(set(places)) > 1:
            where = ", ".join(
                f"rank {rank} "
                + (f"reported epoch {e}" if kind == "report" else f"returned after epoch {e}")
                for rank, (kind, e) in enumerate(places)
            )
            raise FoldContractError(
                f"the ranks are at different epochs: {where} (every rank reports every epoch "
                "and returns after the same one)"
            )


def _differing_metrics(peers: list[dict[str, Any]]) -> list[str]:
    """The metrics (not timings) whose values are not the same number on every rank."""
    first = peers[0]["values"]
    differing = []
    for name, value in first.items():
        if _TIMING.search(name):
            continue
        others = [p["values"].get(name, value) for p in peers[1:]]
        scale = max(1.0, abs(value))
        if any(abs(other - value) > SAME_ON_EVERY_RANK * scale for other in others):
            differing.append(name)
    return sorted(differing)


def _epoch_number(epoch: Any) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise TypeError(f"ctx.report's epoch is a whole number from 0, got {epoch!r}")
    return epoch + 1


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool | str | bytes) or value is None:
        return None
    if torch.is_tensor(value):
        return float(value.detach().item()) if value.numel() == 1 else None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _measured(peers: list[dict[str, Any]]) -> dict[str, float]:
    """What foldwise measured of the epoch: its start and length (the slowest rank's) and each
    resource field's mean over the ranks that measured it."""
    out = {
        "epoch_start": min(p["began"] for p in peers),
        "epoch_seconds": max(p["seconds"] for p in peers),
    }
    fields: dict[str, list[float]] = {}
    for peer in peers:
        for key, value in peer["usage"].items():
            fields.setdefault(key, []).append(value)
    out.update({key: sum(v) / len(v) for key, v in fields.items()})
    return out


def _unwrapped(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel wrapper."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def _dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()
