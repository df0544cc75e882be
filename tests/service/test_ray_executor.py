"""RayExecutor against a real local Ray (4 logical CPUs) and real gloo DDP workers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import re
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray
import torch

from foldwise.service.artifact_store import ArtifactStore
from foldwise.service.executor import FoldFailed, FoldRunStats, RayExecutor, pool, ray_executor
from foldwise.service.executor.pool import EVICT_AFTER_S, TaskCode, WorkerGroup
from foldwise.service.executor.ray_executor import fold_failure
from foldwise.service.executor.task_probe import describe_remotely
from foldwise.trainers.fold_channel import TrainingDiverged
from foldwise.trainers.fold_errors import FoldContractError
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import (
    MODEL_FILE,
    ArtifactKind,
    EpochReport,
    FoldEvent,
    SavedArtifact,
)
from foldwise.trainers.task import Loop, TaskNotFound
from tests.trainers.fold_jobs import make_job

CPUS = 0.5
WARM_RUNS = 30


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop:
        yield loop


@pytest.fixture(scope="module")
def executor(runner: asyncio.Runner) -> Iterator[RayExecutor]:
    ex = RayExecutor(num_cpus=4, max_idle_groups=2)
    runner.run(ex.start())
    yield ex
    runner.run(ex.shutdown())
    assert not ray.is_initialized()


def _task_error(cause: BaseException) -> BaseException:
    error = ray.exceptions.RayTaskError("run", f"Traceback...\n{cause!r}", cause)
    return error.as_instanceof_cause()


def test_failure_names_the_user_error_not_its_peers_broken_connection() -> None:
    gloo = RuntimeError("[gloo/transport/tcp/pair.cc:537] Connection reset by peer")
    failure = fold_failure({0: _task_error(gloo), 1: _task_error(KeyError("width"))}, "t", 2)
    assert not failure.retryable and failure.message == "rank 1: KeyError: 'width'"
    assert "Traceback" in failure.traceback and not failure.workers_intact


def test_failure_text_loses_the_colour_codes_ray_puts_in_its_header() -> None:
    """Ray colours a remote traceback's header even when no terminal reads it."""
    header = "\x1b[36mray::DDPWorker.run()\x1b[39m (pid=9247, ip=192.0.2.2)"
    cause = ValueError("\x1b[1mrefused\x1b[0m")
    error = ray.exceptions.RayTaskError("run", f"{header}\nValueError: refused", cause)
    failure = fold_failure({0: error.as_instanceof_cause()}, "t", 1)
    assert failure.message == "ValueError: refused"
    assert failure.traceback.startswith("ray::DDPWorker.run() (pid=9247")
    assert "\x1b" not in failure.traceback


def test_failure_of_a_dead_worker_is_retryable() -> None:
    gloo = RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer")
    failure = fold_failure({0: _task_error(gloo), 1: ray.exceptions.ActorDiedError()}, "t", 2)
    assert failure.retryable and failure.message.startswith("workers lost (rank 1): ActorDied")
    broken = fold_failure({0: _task_error(gloo)}, "t", 2)
    assert broken.retryable and "Connection closed by peer" in broken.message


def test_divergence_on_every_rank_leaves_the_workers_intact() -> None:
    nan = TrainingDiverged("rank 1 train_loss became nan at epoch 2")
    diverged = {rank: _task_error(nan) for rank in (0, 1)}
    assert fold_failure(diverged, "t", 2).workers_intact
    assert not fold_failure({0: diverged[0]}, "t", 2).workers_intact


def test_a_contract_error_that_reaches_the_service_late_still_keeps_the_workers() -> None:
    """Every rank raises a contract error at the same report, but on a loaded machine the
    second one reached the service more than ROOT_CAUSE_GRACE_S after the first: the group,
    intact, was killed. A lone error of the task's own, whose peers may be stuck, and a lost
    worker keep their graces."""
    contract = FoldContractError("rank 0 the report of epoch 1 lacks the objective metric")
    late = ray_executor.ROOT_CAUSE_GRACE_S + 0.5

    async def rank_run(delay: float) -> AsyncIterator[Any]:
        await asyncio.sleep(delay)
        raise _task_error(contract)
        yield  # an async generator, as a rank's stream of results is

    async def scenario() -> FoldFailed:
        queue: asyncio.Queue = asyncio.Queue()
        tasks = [
            asyncio.create_task(ray_executor._consume(rank, rank_run(delay), queue))
            for rank, delay in ((0, 0.0), (1, late))
        ]
        _, rank, first = await queue.get()
        grace = ray_executor._failure_grace(first)
        errors = {rank: first} | await ray_executor._collect_errors(tasks, queue, grace)
        return fold_failure(errors, "t", 2)

    failure = asyncio.run(scenario())
    assert failure.workers_intact and not failure.retryable
    grace = ray_executor._failure_grace
    assert grace(_task_error(KeyError("width"))) == ray_executor.ROOT_CAUSE_GRACE_S
    assert grace(ray.exceptions.ActorDiedError()) == ray_executor.FAILURE_GRACE_S


def test_fractional_gpus_cannot_share_a_gpu_between_ranks() -> None:
    run = RayExecutor().run_fold(_job(), cpus_per_worker=1, gpus_per_worker=0.5)
    with pytest.raises(FoldFailed, match="whole GPU per rank") as info:
        asyncio.run(anext(run))
    assert not info.value.retryable


def _job(
    task: str = "tests.user_tasks.tiny", epochs: int = 3, *, job: dict | None = None, **params: Any
) -> FoldJob:
    return make_job(
        task,
        params={"lr": 0.01, **params},
        fold=1,
        folds=3,
        epochs=epochs,
        batch_size=32,
        world_size=2,
        trial_key="test",
        **(job or {}),
    )


async def _collect(
    ex: RayExecutor, job: FoldJob, stats: FoldRunStats | None = None, gpus: float = 0.0
) -> list[EpochReport]:
    """The run's epoch reports (the files it saved are left out)."""
    return [e for e in await _events(ex, job, stats, gpus) if isinstance(e, EpochReport)]


async def _events(
    ex: RayExecutor, job: FoldJob, stats: FoldRunStats | None = None, gpus: float = 0.0
) -> list[FoldEvent]:
    return [
        m async for m in ex.run_fold(job, cpus_per_worker=CPUS, gpus_per_worker=gpus, stats=stats)
    ]


async def _pids(group: WorkerGroup) -> list[int]:
    return [info["pid"] for info in await asyncio.gather(*(a.info.remote() for a in group.actors))]


async def _dead(group: WorkerGroup) -> bool:
    for actor in group.actors:
        try:
            await asyncio.wait_for(actor.info.remote(), 30)
            return False
        except ray.exceptions.RayActorError:
            pass
    return ray.util.placement_group_table(group.pg)["state"] == "REMOVED"


@pytest.mark.slow
def test_two_rank_digits_fold_streams_every_epoch(runner, executor: RayExecutor) -> None:
    stats = FoldRunStats(world_size=2)
    epochs = runner.run(_collect(executor, _job("digits_mlp", epochs=3, depth=1), stats))
    assert [e.epoch for e in epochs] == [1, 2, 3]
    assert {
        "train_loss",
        "val_loss",
        "val_accuracy",
        "lr",
        "epoch_seconds",
        "samples_per_second",
        "epoch_start",
        "train_seconds",
        "val_seconds",
        "cpu_percent",
        "rss_mb",
    } <= set(epochs[0].metrics)
    assert epochs[0].metrics["rss_mb"] > 10 and epochs[0].metrics["cpu_percent"] > 0
    assert epochs[-1].metrics["val_loss"] < epochs[0].metrics["val_loss"]
    assert stats.epochs == 3 and stats.wall_seconds >= stats.train_seconds > 0
    assert executor.last_run_stats is stats
    health = executor.health()
    assert health["ok"] and health["nodes"] == 1 and health["cpus"] == 4.0


@pytest.mark.slow
def test_same_shape_reuses_the_warm_group(runner, executor: RayExecutor) -> None:
    runner.run(_collect(executor, _job()))
    (group,) = [g for g in executor.pool.idle_groups if g.shape == (2, CPUS, 0.0)]
    pids = runner.run(_pids(group))
    stats = FoldRunStats(world_size=2)
    assert len(runner.run(_collect(executor, _job(), stats))) == 3
    assert not stats.cold
    assert group in executor.pool.idle_groups and runner.run(_pids(group)) == pids


@pytest.mark.slow
def test_a_warm_group_runs_fold_after_fold_without_hanging(runner, executor) -> None:
    # Freeing DDP after its process group deadlocked about one warm run in ten (release_ddp);
    # a stuck rank would make the executor replace the group, so the group must stay the same.
    async def scenario() -> tuple[WorkerGroup, int]:
        await _collect(executor, _job(epochs=1))
        (group,) = [g for g in executor.pool.idle_groups if g.shape == (2, CPUS, 0.0)]
        runs = group.runs
        for _ in range(WARM_RUNS):
            assert len(await asyncio.wait_for(_collect(executor, _job(epochs=1)), 120)) == 1
        return group, runs

    group, runs = runner.run(scenario())
    assert group in executor.pool.idle_groups and group.runs == runs + WARM_RUNS


@pytest.mark.slow
def test_every_process_a_fold_starts_ends_with_the_run(runner, executor) -> None:
    """A process the fold function started and left (a DataLoader's workers, a subprocess of
    the user's) ends with the run, on a worker that stays warm for the next fold."""
    objective = {"objective": {"metric": "val_loss"}}
    job = _job("tests.user_tasks.own_loop", epochs=1, mode="spawn", job=objective)
    (report,) = runner.run(_collect(executor, job))
    pid = int(report.metrics["child_pid"])
    deadline = time.monotonic() + 15
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break  # ended, and not yet reaped by its parent
        time.sleep(0.2)
    else:
        assert not psutil.pid_exists(pid), "the fold's process outlived its run"
    assert [g for g in executor.pool.idle_groups if g.shape == (2, CPUS, 0.0)]


class _ImportRecorder:
    """A finder that notes every attempt to import a module of ``tests.untrusted``."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.startswith("tests.untrusted"):
            self.attempts.append(fullname)


@pytest.mark.slow
def test_a_task_is_described_in_a_worker_and_only_text_comes_back(executor, monkeypatch) -> None:
    # a worker's exception of the task's own class, unpickled here, would import its module
    recorder = _ImportRecorder()
    monkeypatch.setattr(sys, "meta_path", [recorder, *sys.meta_path])
    with pytest.raises(TaskNotFound, match="own_error refuses to say its kind"):
        describe_remotely("tests.untrusted.own_error:Task", 60)
    profile = describe_remotely("tests.untrusted.side_effect", 60)
    assert (profile.kind, profile.loop) == ("classification", Loop.BUILTIN)
    assert recorder.attempts == []


@pytest.mark.slow
def test_rank_0_already_listens_on_the_rendezvous_port_it_announced(runner, executor) -> None:
    # A port found free and closed again could be taken by another socket before rank 0 bound
    # it; the fold then failed at rendezvous with EADDRINUSE and spent a retry.
    async def scenario() -> list[int]:
        ports = []
        for _ in range(2):  # a new group, then the same group taken warm from the idle list
            group, _ = await executor.pool.acquire((2, CPUS, 0.0))
            try:
                host, port = group.master
                with socket.socket() as sock, pytest.raises(OSError, match="in use"):
                    sock.bind((host, port))
                ports.append(port)
            finally:
                executor.pool.release(group)
        assert len(await _collect(executor, _job(epochs=1))) == 1  # and the warm group runs
        return ports

    first, second = runner.run(scenario())
    assert first != second  # each run rendezvous on a store of its own


@pytest.mark.slow
def test_a_stopped_fold_ends_after_its_epoch_on_every_rank_and_stays_warm(
    runner, executor
) -> None:
    async def scenario() -> tuple[list[FoldEvent], WorkerGroup, list[int], bool]:
        await _collect(executor, _job(epochs=1))  # a warm group of this shape
        (group,) = [g for g in executor.pool.idle_groups if g.shape == (2, CPUS, 0.0)]
        pids = await _pids(group)
        stop = asyncio.Event()
        seen = []
        stats = FoldRunStats(world_size=2)
        async for metrics in executor.run_fold(
            _job(epochs=200), cpus_per_worker=CPUS, gpus_per_worker=0, stop=stop, stats=stats
        ):
            seen.append(metrics)
            stop.set()  # after the first epoch: the ranks stop together
        return seen, group, pids, stats.cold

    epochs, group, pids, cold = runner.run(asyncio.wait_for(scenario(), 120))
    assert not cold and 2 <= len(epochs) <= 3  # the epoch being trained when told ends it
    assert epochs[-1].stopped and not any(e.stopped for e in epochs[:-1])
    assert group in executor.pool.idle_groups and runner.run(_pids(group)) == pids
    assert len(runner.run(_collect(executor, _job(epochs=2)))) == 2  # its next run is whole


@pytest.mark.slow
def test_a_fold_stopped_before_its_workers_were_ready_never_starts(runner, executor) -> None:
    async def scenario() -> list[FoldEvent]:
        stop = asyncio.Event()
        stop.set()
        run = executor.run_fold(_job(), cpus_per_worker=CPUS, gpus_per_worker=0, stop=stop)
        return [m async for m in run]

    assert runner.run(scenario()) == []
    assert any(g.shape == (2, CPUS, 0.0) for g in executor.pool.idle_groups)


def test_ranks_that_do_not_finish_after_the_others_are_reported_stuck(monkeypatch) -> None:
    monkeypatch.setattr(ray_executor, "FINISH_GRACE_S", 0.05)

    async def scenario() -> list[int]:
        queue: asyncio.Queue = asyncio.Queue()
        queue.put_nowait(("event", 0, EpochReport(1, {})))
        assert (await ray_executor._next(queue, set(), 3, None))[0] == "event"  # no grace yet
        with pytest.raises(ray_executor._StuckRanks) as info:
            await ray_executor._next(queue, {0}, 3, None)
        return info.value.ranks

    assert asyncio.run(scenario()) == [1, 2]


def test_the_fold_deadline_wins_over_the_finishing_grace(monkeypatch) -> None:
    monkeypatch.setattr(ray_executor, "FINISH_GRACE_S", 5.0)

    async def scenario() -> None:
        queue: asyncio.Queue = asyncio.Queue()
        soon = time.monotonic() + 0.05
        with pytest.raises(ray_executor._DeadlinePassed):
            await ray_executor._next(queue, set(), 2, soon)
        with pytest.raises(ray_executor._DeadlinePassed):
            await ray_executor._next(queue, {0}, 2, soon)

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_hung_fold_times_out_and_its_workers_are_killed(runner, executor) -> None:
    async def scenario() -> tuple[list[FoldEvent], WorkerGroup | None]:
        seen: list[FoldEvent] = []
        run = executor.run_fold(
            _job(mode="hang"), cpus_per_worker=CPUS, gpus_per_worker=0, timeout=8
        )
        with pytest.raises(FoldFailed) as info:
            async for metrics in run:
                seen.append(metrics)
        assert not info.value.retryable
        assert info.value.message.startswith("timed out: the fold run took longer than")
        assert "trainer.fold_timeout (8 s)" in info.value.message
        # rank 1 sleeps in its training step; rank 0 waits for it in DDP's all-reduce
        assert "rank 0 in train_fold for" in info.value.message
        assert "rank 1 in train_fold for" in info.value.message
        assert "(last report: epoch 1)" in info.value.message
        return seen, executor.pool.busy_groups[0] if executor.pool.busy_groups else None

    started = time.monotonic()
    seen, busy = runner.run(scenario())
    assert [e.epoch for e in seen if isinstance(e, EpochReport)] == [1]  # rank 1 hangs next
    assert busy is None and time.monotonic() - started < 60
    runner.run(_collect(executor, _job()))  # the next fold runs as usual


@pytest.mark.slow
def test_user_error_is_not_retryable_and_kills_the_group(runner, executor) -> None:
    with pytest.raises(FoldFailed) as info:
        runner.run(_collect(executor, _job(mode="raise")))
    failure = info.value
    assert not failure.retryable
    # every rank raises it; the first to fail is named (the others may come after the grace)
    assert re.fullmatch(r"rank [01]: ValueError: tiny task refuses mode=raise", failure.message)
    assert "build_model" in failure.traceback
    assert "ray::" in failure.traceback and "\x1b" not in failure.traceback  # Ray colours it
    assert not executor.pool.busy_groups


@pytest.mark.slow
def test_divergence_is_not_retryable_and_keeps_the_workers(runner, executor) -> None:
    with pytest.raises(FoldFailed) as info:
        runner.run(_collect(executor, _job(mode="nan")))
    assert not info.value.retryable and info.value.workers_intact
    assert info.value.message == "TrainingDiverged: rank 0 train_loss became nan at epoch 1"
    stats = FoldRunStats(world_size=2)
    runner.run(_collect(executor, _job(), stats))
    assert not stats.cold


@pytest.mark.slow
def test_dead_worker_is_retryable(runner, executor: RayExecutor) -> None:
    with pytest.raises(FoldFailed) as info:
        runner.run(_collect(executor, _job(mode="crash")))
    assert info.value.retryable
    assert info.value.message.startswith("workers lost (rank 1): ActorDiedError")
    assert not executor.pool.busy_groups


@pytest.mark.slow
def test_a_retried_fold_resumes_from_the_checkpoint_rank_0_sent_to_the_store(
    runner, executor: RayExecutor, tmp_path: Path
) -> None:
    """The service's way on a cluster: rank 0 writes nothing where it runs; its checkpoint
    reaches the artifact store through Ray, and the retry (on any node) resumes from it."""
    store = ArtifactStore(f"memory://executor-{uuid.uuid4().hex}")
    key = "study-1/trial-0/fold-1"
    first = _job(epochs=4, mode="crash_once", job={"artifact_key": key, "checkpoint_every": 1})
    executor.artifacts = store
    try:
        with pytest.raises(FoldFailed) as info:  # rank 1 dies as epoch 3 starts
            runner.run(_collect(executor, first))
        assert info.value.retryable and store.checkpoint(key) is not None
        stats = FoldRunStats(world_size=2)
        retry = dataclasses.replace(first, resume=True)
        events = runner.run(_events(executor, retry, stats))
    finally:
        executor.artifacts = None
    epochs = [e for e in events if isinstance(e, EpochReport)]
    assert [(e.epoch, e.restored) for e in epochs] == [
        (1, True),
        (2, True),
        (3, False),
        (4, False),
    ]
    saved = [e for e in events if isinstance(e, SavedArtifact)]
    assert [a.kind for a in saved] == [ArtifactKind.CHECKPOINT, ArtifactKind.MODEL]
    assert store.checkpoint(key) is None  # the model supersedes it
    model = torch.load(io.BytesIO(store.read(f"{key}/{MODEL_FILE}")), weights_only=False)
    assert model["fold"] == 1 and model["epoch"] >= 1
    trained = sum(e.metrics["epoch_seconds"] for e in epochs[2:])
    assert stats.train_seconds == pytest.approx(trained)
    assert [p["rank"] for p in stats.placement] == [0, 1]
    assert all(p["node_id"] and p["gpu_ids"] == [] for p in stats.placement)
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_idle_groups_give_their_cpus_to_a_fold_that_needs_them(runner, executor) -> None:
    """Warm groups of one shape hold CPUs while idle; a fold run of another shape that needs
    them gets them (the idle groups are killed), instead of waiting for ever."""
    runner.run(_collect(executor, _job()))
    idle = [g for g in executor.pool.idle_groups if g.shape == (2, CPUS, 0.0)]
    assert idle
    whole = dataclasses.replace(_job(epochs=1), world_size=2)
    stats = FoldRunStats(world_size=2)

    async def run_whole() -> list[FoldEvent]:
        return [
            m
            async for m in executor.run_fold(
                whole, cpus_per_worker=2.0, gpus_per_worker=0.0, stats=stats
            )
        ]

    assert len(runner.run(run_whole())) == 1  # 2 ranks x 2 CPUs: the whole local Ray
    assert stats.cold and all(g not in executor.pool.idle_groups for g in idle)
    assert all(runner.run(_dead(g)) for g in idle)


@pytest.mark.slow
def test_a_run_waiting_for_room_takes_the_group_of_its_shape_as_it_comes_free(
    runner, executor: RayExecutor, monkeypatch
) -> None:
    """A run that waits for Ray to place its workers, while one of its own shape holds the
    room, takes that group once its run ends: warm, instead of evicting it for cold ones, and
    woken by the release (here its next timed look is minutes away)."""
    shape = (2, 2.0, 0.0)  # the whole local Ray

    async def scenario() -> tuple[WorkerGroup, WorkerGroup, bool, bool]:
        first, _ = await executor.pool.acquire(shape)  # evicting every other idle group
        monkeypatch.setattr(pool, "EVICT_AFTER_S", 600.0)
        waiting = asyncio.create_task(executor.pool.acquire(shape))
        await asyncio.sleep(2.0)
        waited = not waiting.done()
        executor.pool.release(first)
        second, new = await asyncio.wait_for(waiting, 60)
        return first, second, new, waited

    first, second, new, waited = runner.run(scenario())
    executor.pool.release(second)
    assert waited and second is first and not new
    assert not runner.run(_dead(second))


@pytest.mark.slow
def test_a_run_cancelled_while_it_waits_for_room_leaves_nothing_placed(
    runner, executor: RayExecutor
) -> None:
    """Cancelled before Ray could place its workers (a study stopped while its folds queue),
    a run leaves no pending placement group behind, and the room's group stays warm."""
    shape = (2, 2.0, 0.0)  # the whole local Ray

    async def scenario() -> tuple[WorkerGroup, WorkerGroup, WorkerGroup]:
        first, _ = await executor.pool.acquire(shape)
        waiting = asyncio.create_task(executor.pool.acquire(shape))
        await asyncio.sleep(1.5 * EVICT_AFTER_S)
        (pending,) = [g for g in executor.pool.busy_groups if not g.actors]
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        executor.pool.release(first)
        again, _ = await asyncio.wait_for(executor.pool.acquire(shape), 60)
        executor.pool.release(again)
        return first, pending, again

    first, pending, again = runner.run(scenario())
    assert pending not in executor.pool.busy_groups + executor.pool.idle_groups
    assert not executor.pool._released and not executor.pool._waiting  # nothing left waiting
    assert ray.util.placement_group_table(pending.pg)["state"] == "REMOVED"
    assert again is first and not runner.run(_dead(first))


@pytest.mark.slow
def test_a_run_readying_its_code_takes_a_group_of_its_kind_released_meanwhile(
    runner, executor: RayExecutor, monkeypatch
) -> None:
    """A run whose task code's environment is being readied (seconds, when the code is
    uploaded) when a group of its shape and code is released takes that group: it looks
    again before it asks Ray for a new one (here its next timed look is minutes away)."""
    shape, code = (2, 2.0, 0.0), TaskCode("a-snapshot", "/unused")

    def slow_environment(path: str) -> dict[str, Any]:
        time.sleep(2.0)
        return {}

    monkeypatch.setattr(pool, "code_runtime_env", slow_environment)

    async def scenario() -> tuple[WorkerGroup, WorkerGroup, bool]:
        first, _ = await executor.pool.acquire(shape, code=code)
        monkeypatch.setattr(pool, "EVICT_AFTER_S", 600.0)
        waiting = asyncio.create_task(executor.pool.acquire(shape, code=code))
        await asyncio.sleep(0.5)  # while its environment is readied
        executor.pool.release(first)
        second, new = await asyncio.wait_for(waiting, 60)
        return first, second, new

    first, second, new = runner.run(scenario())
    executor.pool.discard(second)  # no later test runs this code
    assert second is first and not new


@pytest.mark.slow
def test_a_run_of_another_shape_does_not_evict_a_group_that_a_waiting_run_takes(
    runner, executor: RayExecutor
) -> None:
    """Two runs wait for room, one of another shape: the room's group, once free, goes to the
    run of its shape, and the other run evicts it only after that run has released it."""
    whole, small = (2, 2.0, 0.0), (1, 1.0, 0.0)
    workers = executor.pool

    async def scenario() -> tuple[WorkerGroup, WorkerGroup, bool, WorkerGroup]:
        first, _ = await workers.acquire(whole)
        other = asyncio.create_task(workers.acquire(small))  # evicts at 1, 2, 3 x EVICT_AFTER_S
        await asyncio.sleep(0.5 * EVICT_AFTER_S)
        same = asyncio.create_task(workers.acquire(whole))
        await asyncio.sleep(2.1 * EVICT_AFTER_S)
        workers.release(first)
        second, new = await asyncio.wait_for(same, 120)
        await asyncio.sleep(2 * EVICT_AFTER_S)
        assert not other.done()  # no room while the whole local Ray is busy
        workers.release(second)
        placed, _ = await asyncio.wait_for(other, 120)
        workers.release(placed)
        return first, second, new, placed

    first, second, new, placed = runner.run(scenario())
    assert second is first and not new
    assert placed.shape == small and runner.run(_dead(second))  # evicted for it only then


def test_the_group_to_evict_is_the_oldest_idle_one_no_waiting_run_would_take() -> None:
    """A run of another shape that waits for room evicts the oldest idle group, but never one
    that a run making a new group (readying its code or waiting for placement) would take."""
    workers = pool.WorkerPool()
    whole = (2, 2.0, 0.0)
    taken = pool.WorkerGroup(id=1, shape=whole, pg=None, actors=["warm"], code_hash="a")
    other_code = pool.WorkerGroup(id=2, shape=whole, pg=None, actors=["warm"], code_hash="b")
    workers._idle = [taken, other_code]  # oldest first
    assert workers._evictable() is taken
    workers._waiting[(whole, "a")] += 1
    assert workers._evictable() is other_code
    workers._waiting[(whole, "b")] += 1
    assert workers._evictable() is None
    del workers._waiting[(whole, "a")]
    assert workers._evictable() is taken


@pytest.mark.slow
def test_cancelling_the_iteration_kills_the_group(runner, executor: RayExecutor) -> None:
    """(Of 2-CPU workers: the shape the test before leaves idle, so no cold start.)"""

    async def scenario() -> bool:
        first_epoch = asyncio.Event()

        async def consume() -> None:
            async for _ in executor.run_fold(
                _job("digits_mlp", epochs=500), cpus_per_worker=2.0, gpus_per_worker=0
            ):
                first_epoch.set()

        task = asyncio.create_task(consume())
        await first_epoch.wait()
        (group,) = executor.pool.busy_groups
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert group not in executor.pool.idle_groups + executor.pool.busy_groups
        return await _dead(group)

    assert runner.run(scenario())


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_one_gpu_fold_uses_nccl(runner, executor: RayExecutor) -> None:
    if ray.cluster_resources().get("GPU", 0) < 1:
        pytest.skip("the local Ray sees no GPU")
    job = make_job("digits_mlp", params={"lr": 0.01}, epochs=2)
    assert len(runner.run(_collect(executor, job, gpus=1.0))) == 2
