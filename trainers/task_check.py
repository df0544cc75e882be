"""Run one fold of a task here, without the service or Ray (``foldwise task check``).

``prepare_check`` resolves the task and builds the fold job as a study would, ``run_check``
trains it (one rank in this process, or several spawned gloo or NCCL processes) and yields each
epoch's report as it comes, and ``summarize`` checks what the run reported. Whatever would
otherwise surface only as failed trials (a task that does not import, a model that does not
fit the data, a metric declared but never reported) raises ``CheckFailed`` with one line.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.multiprocessing as mp
from pydantic import ValidationError

from foldwise.limits import DEFAULT_CHECK_TIMEOUT_S
from foldwise.spec import Objective, TrainerSpec
from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_data import TaskData, augmented_validation, load_task_data
from foldwise.trainers.fold_errors import (
    FoldContractError,
    FoldTimedOut,
    PeerFailed,
    RankReturnedAlone,
    RunAbandoned,
)
from foldwise.trainers.fold_runner import FoldRunner, run_fold
from foldwise.trainers.job import FoldJob
from foldwise.trainers.objective import fold_value
from foldwise.trainers.report import MODEL_METRICS, RESERVED_METRICS, EpochReport
from foldwise.trainers.task import BUILTIN_TASKS, Loop, Task, TaskNotFound, resolve_task

DEVICES = ("cpu", "cuda")
BUILTIN_TIMINGS = frozenset({"train_seconds", "val_seconds", "samples_per_second"})
"""What the built-in loop reports of its own speed: left out of an epoch's line, as what
foldwise measures is (the epoch's time is shown apart)."""
PEER_GRACE_S = 10.0
"""How long the other ranks have to end once one failed, before they are terminated."""
_OURS = (FoldContractError, RankReturnedAlone, PeerFailed, RunAbandoned, FoldTimedOut)
"""foldwise's own errors of a fold run: their message says it all, in one line."""


class CheckFailed(Exception):
    """The task would fail as a study's trials would; the message is one line saying why."""


@dataclass(frozen=True)
class TaskCheck:
    """A resolved task and the fold job that checks it, on ``device`` (cpu or cuda)."""

    task: Task
    job: FoldJob
    device: str = "cpu"


@dataclass(frozen=True)
class CheckSummary:
    """What a finished check found: the objective's best epoch, the mean time per epoch, and
    the metrics reported that the task does not declare (a study cannot optimise those)."""

    epochs: int
    metric: str
    best: float
    best_epoch: int
    seconds_per_epoch: float
    undeclared: tuple[str, ...]


def prepare_check(
    name: str,
    *,
    params: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    epochs: int = 3,
    batch_size: int | None = None,
    workers: int = 1,
    fold: int = 0,
    folds: int = 3,
    metric: str | None = None,
    direction: str = "minimize",
    precision: str | None = None,
    device: str = "cpu",
    seed: int = 0,
    timeout: float = DEFAULT_CHECK_TIMEOUT_S,
) -> TaskCheck:
    """The check of fold ``fold`` of ``folds`` of task ``name`` with ``params``, as a study's
    trial would run it: ``epochs`` and ``batch_size`` win over the same names in ``params``.
    The objective defaults to the task's first declared metric (``val_loss`` for the built-in
    loop). ``timeout``: seconds the run may take (``trainer.fold_timeout``); a rank still
    training then fails the check, saying where each rank was. Nothing is trained yet;
    ``CheckFailed`` says what would stop a study at once."""
    params = dict(params or {})
    try:
        task = resolve_task(name)
    except TaskNotFound as err:
        raise CheckFailed(str(err)) from err
    _check_device(device, workers)
    metric = metric or default_metric(task)
    allowed = task.profile().metrics(gpu=device == "cuda")
    if metric not in task.declared_metrics:
        known = ", ".join(task.declared_metrics)
        measured = " (foldwise measures it; the task must report its objective)"
        why = measured if metric in allowed else ""
        raise CheckFailed(f"task {name!r} reports {known}, not {metric!r}{why}")
    if precision is not None and task.loop is Loop.OWN:
        raise CheckFailed(
            f"task {name!r} trains with its own train_fold, which precision does not reach "
            "(it sets the built-in loop and Lightning)"
        )
    explicit = {"epochs": epochs, **({} if batch_size is None else {"batch_size": batch_size})}
    searched = {k: v for k, v in params.items() if k not in explicit}
    settings = {**explicit, **({} if precision is None else {"precision": precision})}
    settings["fold_timeout"] = timeout
    try:
        trainer = TrainerSpec(task=name, options=dict(options or {}), **settings)
        # as a trial's: the params' searched settings, then checked against their bounds
        trainer = TrainerSpec.model_validate(trainer.for_trial(searched).model_dump())
        objective = Objective.model_validate(
            {"metric": metric, "direction": direction}, strict=False
        )
        job = FoldJob(
            trainer=trainer,
            params=params,
            fold=fold,
            folds=folds,
            objective=objective,
            seed=seed,
            world_size=workers,
            backend="nccl" if device == "cuda" else "gloo",
        )
    except ValidationError as err:
        raise CheckFailed(_validation_problem(err)) from err
    except (TypeError, ValueError) as err:  # a searched setting that is no number, a bad fold
        raise CheckFailed(str(err).removeprefix("FoldJob: ")) from err
    return TaskCheck(task, job, device)


def default_metric(task: Task) -> str:
    """The objective a check reports on: ``val_loss`` for the built-in loop, else the first
    metric the task declares."""
    return "val_loss" if task.loop is Loop.BUILTIN else task.declared_metrics[0]


def inspect_data(check: TaskCheck) -> tuple[TaskData | None, list[str]]:
    """The task's data, loaded once here, and notes on what a study would take from it without
    a word but its author likely does not want: a Dataset that reads a sample differently each
    time (random transforms) and no ``load_eval_data``, so the validation folds would be read
    augmented too. (None, []) when the data does not load: the run says why."""
    task = check.task
    try:
        data = load_task_data(task, check.job.trainer.options)
    except Exception:
        return None, []
    note = augmented_validation(task, data)
    return data, [] if note is None else [note]


def run_check(
    check: TaskCheck, *, num_threads: int | None = None, data: TaskData | None = None
) -> Iterator[EpochReport]:
    """Train ``check``'s fold and yield rank 0's report of each epoch as it comes; any error
    of the run is a ``CheckFailed`` naming it in one line. ``num_threads``: torch's threads
    per rank (default: its own for one rank, the CPUs shared out for several); ``data``: the
    task's data already loaded (one rank reads it; spawned ranks load their own)."""
    job = check.job
    if job.world_size > 1 and num_threads is None:
        num_threads = max(1, (torch.get_num_threads() or 1) // job.world_size)
    reported = 0
    try:
        if job.world_size == 1:
            reports = _run_here(check, num_threads, data)
        else:
            reports = _run_spawned(check, num_threads)
        for report in reports:
            reported += 1
            yield report
    except _RankError as err:
        raise CheckFailed(_failed(check, reported, err.line)) from None
    except Exception as err:
        raise CheckFailed(_failed(check, reported, describe_error(err, check.task.name))) from err


def summarize(check: TaskCheck, reports: Sequence[EpochReport]) -> CheckSummary:
    """Check a finished run reported every metric its task declares and the objective; the
    objective's best epoch and the time per epoch."""
    task, objective = check.task, check.job.objective
    seen = list(dict.fromkeys(k for r in reports for k in r.metrics if k not in RESERVED_METRICS))
    missing = [m for m in task.declared_metrics if m not in seen]
    if missing:
        them = "it" if len(missing) == 1 else "them"
        raise CheckFailed(
            f"task {task.name!r} declares {', '.join(missing)} but never reported {them} in "
            f"{_count(len(reports), 'epoch')} (it reported {', '.join(seen) or 'nothing'}): "
            "report every declared metric, or take it out of metrics"
        )
    history = [r.metrics for r in reports]
    try:
        best = fold_value(history, objective.metric, objective.direction.value)
    except ValueError as err:
        raise CheckFailed(f"task {task.name!r}: {err}") from err
    best_epoch = next(r.epoch for r in reports if r.metrics.get(objective.metric) == best)
    seconds = [r.metrics.get("epoch_seconds", 0.0) for r in reports]
    return CheckSummary(
        epochs=len(reports),
        metric=objective.metric,
        best=best,
        best_epoch=best_epoch,
        seconds_per_epoch=sum(seconds) / max(1, len(seconds)),
        undeclared=tuple(
            m for m in seen if m not in task.declared_metrics and m not in MODEL_METRICS
        ),
    )


def shown_metrics(check: TaskCheck, report: EpochReport) -> dict[str, float]:
    """What an epoch's line shows: the metrics the task reported, without the timings and
    resource use foldwise measures (the epoch's time is shown apart), nor the parameter count
    it takes of the model unless the task declares it."""
    quiet = RESERVED_METRICS | (BUILTIN_TIMINGS if check.task.loop is Loop.BUILTIN else set())
    quiet |= set(MODEL_METRICS) - set(check.task.declared_metrics)
    return {k: v for k, v in report.metrics.items() if k not in quiet}


def describe_error(err: BaseException, task_name: str) -> str:
    """``err`` in one line: foldwise's own contract errors as they are, the user's code's as
    ``Type: message`` with the line of the task's code that raised it, when there is one."""
    lines = [line for line in str(err).strip().splitlines() if line.strip()]
    message = lines[0].strip()[:300] if lines else ""
    if isinstance(err, _OURS):
        return message
    text = f"{type(err).__name__}: {message}" if message else type(err).__name__
    where = _task_frame(err, task_name)
    return f"{text} ({where})" if where else text


# -- one rank, here -----------------------------------------------------------------------


def _run_here(
    check: TaskCheck, num_threads: int | None, data: TaskData | None
) -> Iterator[EpochReport]:
    events = run_fold(
        check.job,
        data=data,
        rank=0,
        master_addr="127.0.0.1",
        master_port=free_port(),
        num_threads=num_threads,
        device="cuda:0" if check.device == "cuda" else "cpu",
        timeout=check.job.trainer.fold_timeout,
    )
    try:
        for event in events:
            if isinstance(event, EpochReport):
                yield event
    finally:
        events.close()  # at once, when the caller stops early


# -- several ranks, spawned ---------------------------------------------------------------


class _RankEnd(NamedTuple):
    """How a spawned rank failed: ``line`` says it in one line; ``echo``: it only echoes
    another rank's failure; ``timed_out``: the run took too long (``line`` says where the rank
    was)."""

    line: str
    echo: bool = False
    timed_out: bool = False


class _RankError(Exception):
    """A spawned rank failed; ``line`` says how, already in one line."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def _run_spawned(check: TaskCheck, num_threads: int | None) -> Iterator[EpochReport]:
    """Rank r of the job in spawned process r; rank 0 sends its reports here through a queue,
    every rank its end: ("report", 0, EpochReport), ("done", rank, None) or ("error", rank,
    _RankEnd)."""
    world = check.job.world_size
    events = mp.get_context("spawn").SimpleQueue()
    ranks = mp.start_processes(
        _rank_main,
        args=(check.job, check.device, free_port(), num_threads, events),
        nprocs=world,
        join=False,
        start_method="spawn",
    )
    ended: dict[int, _RankEnd | None] = {}
    try:
        while len(ended) < world:
            if events.empty():
                _raise_if_a_rank_died(events, ranks.processes, ended)
                time.sleep(0.05)
                continue
            kind, rank, payload = events.get()
            if kind == "report":
                yield payload
            else:
                ended[rank] = payload
                if payload is not None:
                    _wait_for_peers(events, ranks.processes, ended)
                    raise _RankError(_first_cause(ended, check.job.trainer.fold_timeout))
    finally:
        for process in ranks.processes:
            if process.is_alive():
                process.terminate()
        for process in ranks.processes:
            process.join()


def _rank_main(
    rank: int, job: FoldJob, device: str, port: int, num_threads: int | None, events: Any
) -> None:
    """One spawned rank: run the fold, send rank 0's reports and this rank's end. Past the
    job's ``fold_timeout`` it sends where it is at once (a rank stuck in a collective could
    not say so later); the parent then ends every rank. The processes the fold starts
    (DataLoader workers) fork from it, as they do from the service's workers: a spawned rank
    would otherwise spawn each of them too, importing torch and the task every epoch."""
    if "fork" in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method("fork", force=True)
    runner = FoldRunner(
        job,
        rank=rank,
        master_addr="127.0.0.1",
        master_port=port,
        num_threads=num_threads,
        device=f"cuda:{rank}" if device == "cuda" else "cpu",
    )
    watchdog = threading.Timer(
        job.trainer.fold_timeout,
        lambda: events.put(
            ("error", rank, _RankEnd(f"rank {rank} {runner.status()}", timed_out=True))
        ),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        for event in runner.events():
            if isinstance(event, EpochReport):
                events.put(("report", rank, event))
    except Exception as err:
        echo = isinstance(err, PeerFailed | RunAbandoned)
        events.put(
            ("error", rank, _RankEnd(f"rank {rank}: {describe_error(err, job.task)}", echo))
        )
        return  # exit code 0: a rank that exits otherwise died without a word
    finally:
        watchdog.cancel()
    events.put(("done", rank, None))


def _wait_for_peers(events: Any, processes: list[Any], ended: dict[int, Any]) -> None:
    """Gather the other ranks' ends for a while after one failed (it may only be an echo)."""
    deadline = time.monotonic() + PEER_GRACE_S
    while len(ended) < len(processes) and time.monotonic() < deadline:
        if events.empty():
            if not any(p.is_alive() for r, p in enumerate(processes) if r not in ended):
                return
            time.sleep(0.05)
            continue
        kind, rank, payload = events.get()
        if kind != "report":
            ended[rank] = payload


def _raise_if_a_rank_died(events: Any, processes: list[Any], ended: dict[int, Any]) -> None:
    """Raise when a rank's process ended without saying how (killed, or ``os._exit``)."""
    for rank, process in enumerate(processes):
        code = process.exitcode
        if rank in ended or code in (None, 0) or not events.empty():  # its word may be there
            continue
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise _RankError(f"rank {rank}'s process {how} without a word")


def _first_cause(ended: dict[int, _RankEnd | None], timeout: float) -> str:
    """The failure to show: the lowest rank's that does not echo another rank's; when the run
    timed out, where every rank that timed out was."""
    failures = {rank: end for rank, end in ended.items() if end is not None}
    _rank, first = min(failures.items(), key=lambda item: (item[1].echo, item[0]))
    if not first.timed_out:
        return first.line
    where = "; ".join(end.line for _rank, end in sorted(failures.items()) if end.timed_out)
    return f"timed out after {timeout:g} s (--timeout): {where}"


# -- inside -------------------------------------------------------------------------------


def _check_device(device: str, workers: int) -> None:
    if device not in DEVICES:
        raise CheckFailed(f"device must be cpu or cuda, got {device!r}")
    if device != "cuda":
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise CheckFailed("device cuda: torch sees no CUDA device here")
    if workers > count:
        raise CheckFailed(f"{workers} ranks on cuda need {workers} GPUs; torch sees {count}")


def _failed(check: TaskCheck, reported: int, line: str) -> str:
    when = "before its first report" if reported == 0 else f"after {_count(reported, 'epoch')}"
    return f"task {check.task.name!r} failed {when}: {line}"


def _task_frame(err: BaseException, task_name: str) -> str | None:
    """Where in the task's own files (its module's folder) ``err`` was raised, innermost."""
    module = sys.modules.get(BUILTIN_TASKS.get(task_name, task_name).partition(":")[0])
    file = getattr(module, "__file__", None)
    if not file:
        return None
    folder = Path(file).resolve().parent
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(folder) and "site-packages" not in path.parts:
            return f"{_shown_path(path)}:{frame.lineno}, in {frame.name}"
    return None


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _validation_problem(err: ValidationError) -> str:
    error = err.errors()[0]
    where = ".".join(map(str, error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
