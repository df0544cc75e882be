"""Bad user code in a fold function, on a real local Ray with 2-rank gloo groups: every way it
can break ends the fold as failed, in one line naming the rank and the cause, within the
timeout, and leaves no stuck worker behind (the group is killed, or kept when every rank
stopped at the same report)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from foldwise.service.executor import FoldFailed, FoldRunStats, RayExecutor
from foldwise.service.executor.failures import fold_failure
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import EpochReport
from tests.trainers.fold_jobs import make_job

CPUS = 0.5
TIMEOUT = 60.0
"""The timeout of folds that must end before it (a bad report, a rank that raises, a sound
fold): on a loaded 2-core machine a 3-epoch fold once took more than 12 s."""
HANG_TIMEOUT = 20.0
"""The timeout of folds that hang, which end at it: long enough for both ranks to reach
where they hang on a loaded machine (at 12 s, rank 1 had not reached its first report once)."""
EARLY_TIMEOUT = 30.0
"""The returned-early case waits a quarter of its timeout for the late rank, and that wait starts
after rank 1's first epoch, which took 8 s once on a loaded 2-core machine: 12 s was too little."""


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop:
        yield loop


@pytest.fixture(scope="module")
def executor(runner: asyncio.Runner) -> Iterator[RayExecutor]:
    ex = RayExecutor(num_cpus=2, max_idle_groups=2)
    runner.run(ex.start())
    yield ex
    runner.run(ex.shutdown())


def _job(mode: str, timeout: float = TIMEOUT) -> FoldJob:
    fields: dict[str, Any] = {"epochs": 3, "batch_size": 32, "fold_timeout": timeout}
    return make_job(
        "tests.user_tasks.own_loop",
        params={"mode": mode, "lr": 0.02},
        world_size=2,
        objective={"metric": "val_accuracy", "direction": "maximize"},
        trial_key="contract",
        **fields,
    )


def _fail(
    runner, executor: RayExecutor, mode: str, timeout: float = TIMEOUT
) -> tuple[FoldFailed, list[int], float]:
    """Run a fold that must fail: its failure, the epochs it reported, and the seconds from
    the moment its workers were ready to the failure."""
    reported: list[int] = []
    stats = FoldRunStats(world_size=2)

    async def scenario() -> None:
        job = _job(mode, timeout)
        run = executor.run_fold(job, cpus_per_worker=CPUS, gpus_per_worker=0, stats=stats)
        async for event in run:
            if isinstance(event, EpochReport):
                reported.append(event.epoch)

    with pytest.raises(FoldFailed) as info:
        runner.run(asyncio.wait_for(scenario(), 4 * timeout))
    return info.value, reported, stats.wall_seconds - stats.acquire_seconds


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("silent", "FoldContractError: train_fold returned without reporting an epoch"),
        ("text", "FoldContractError: rank 0 reported val_loss='low' (str) at epoch 1"),
        ("nan", "TrainingDiverged: rank 0 val_accuracy became nan at epoch 1"),
        ("no_objective", "the report of epoch 1 lacks the objective metric 'val_accuracy'"),
    ],
)
def test_a_bad_report_fails_every_rank_at_once_and_keeps_the_workers(
    runner, executor, mode, message
) -> None:
    failure, reported, seconds = _fail(runner, executor, mode)
    assert message in failure.message and "\n" not in failure.message
    assert not failure.retryable and failure.workers_intact and reported == []
    assert seconds < TIMEOUT
    assert any(g.shape == (2, CPUS, 0.0) for g in executor.pool.idle_groups)


@pytest.mark.slow
def test_a_rank_that_raises_alone_names_itself_and_its_group_is_killed(runner, executor) -> None:
    failure, _, seconds = _fail(runner, executor, "raise")
    assert failure.message == "rank 1: RuntimeError: own loop refuses to go on in epoch 0"
    assert "own_loop.py" in failure.traceback and not failure.retryable
    assert seconds < TIMEOUT  # its peer, waiting at the report, learns it at once
    assert not failure.workers_intact and not executor.pool.busy_groups


@pytest.mark.slow
def test_a_rank_that_returns_early_is_named_within_the_timeout(runner, executor) -> None:
    failure, reported, seconds = _fail(runner, executor, "early", EARLY_TIMEOUT)
    assert failure.message.startswith(
        "RankReturnedAlone: rank 1 returned from train_fold after epoch 1, and rank 0 (its "
        f"last report: epoch 1) had not {EARLY_TIMEOUT / 4:g} s later"
    )
    assert reported == [1] and seconds < EARLY_TIMEOUT and not failure.retryable
    assert not executor.pool.busy_groups


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["skip_collective", "sleep"])
def test_a_deadlock_or_a_hang_ends_at_the_timeout_saying_where_each_rank_was(
    runner, executor, mode
) -> None:
    failure, reported, seconds = _fail(runner, executor, mode, HANG_TIMEOUT)
    assert failure.message.startswith(
        f"timed out: the fold run took longer than trainer.fold_timeout ({HANG_TIMEOUT:g} s)"
    )
    assert not failure.retryable and reported == [] and seconds < HANG_TIMEOUT + 20
    if mode == "skip_collective":  # rank 0 waits in the collective rank 1 skipped
        assert "rank 0 in train_fold for" in failure.message
        assert "rank 1 waiting in ctx.report(epoch=0) for" in failure.message
    else:
        assert "rank 0 in train_fold" in failure.message
    assert not executor.pool.busy_groups


@pytest.mark.slow
def test_the_executor_runs_a_sound_fold_after_all_that(runner, executor) -> None:
    stats = FoldRunStats(world_size=2)

    async def run() -> list[Any]:
        job = _job("ok")
        return [
            e
            async for e in executor.run_fold(
                job, cpus_per_worker=CPUS, gpus_per_worker=0, stats=stats
            )
        ]

    events = runner.run(asyncio.wait_for(run(), 120))
    assert [e.epoch for e in events if isinstance(e, EpochReport)] == [1, 2, 3]
    assert ray.is_initialized()


def _task_error(cause: BaseException) -> BaseException:
    error = ray.exceptions.RayTaskError("run", f"Traceback...\n{cause!r}", cause)
    return error.as_instanceof_cause()


def test_running_out_of_memory_says_what_ran_out() -> None:
    bare = fold_failure({1: _task_error(MemoryError())}, "t", 2)
    assert bare.message == "rank 1: MemoryError: the worker ran out of host memory (RAM)"
    killed = fold_failure({0: ray.exceptions.OutOfMemoryError("killed")}, "t", 1)
    assert killed.retryable and "the node ran out of host memory" in killed.message
    gpu = type("OutOfMemoryError", (RuntimeError,), {})()
    assert fold_failure({0: _task_error(gpu)}, "t", 1).message.endswith(
        "the GPU ran out of memory"
    )


def _actor_died(detail: str) -> ray.exceptions.ActorDiedError:
    """An actor's death as the raylet reports it: Ray's stock line, the actor's ids, then why."""
    from ray.core.generated.common_pb2 import ActorDiedErrorContext

    context = ActorDiedErrorContext(
        class_name="FoldWorker", actor_id=bytes(16), pid=4242, error_message=detail
    )
    return ray.exceptions.ActorDiedError(context)


def test_a_worker_the_memory_monitor_killed_says_the_node_ran_out_of_memory() -> None:
    monitor = _actor_died(
        "Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 10.0.0.2) was 23.10GB / 24.00GB (0.96), which exceeds the "
        "memory usage threshold of 0.95."
    )
    failure = fold_failure(
        {1: monitor, 0: _task_error(RuntimeError("Connection reset by peer"))}, "t", 2
    )
    assert failure.retryable
    assert failure.message == (
        "workers lost (rank 1): OutOfMemoryError: Ray's memory monitor killed the worker: "
        "the node ran out of host memory (RAM)"
    )


def test_a_worker_that_died_says_why_ray_thinks_it_did() -> None:
    exited = _actor_died("Worker unexpectedly exits with a connection error code 2. End of file.")
    message = fold_failure({0: exited}, "t", 1).message
    assert message == (
        "workers lost (rank 0): ActorDiedError: Worker unexpectedly exits with a connection "
        "error code 2. End of file."
    )
    bare = fold_failure({0: ray.exceptions.ActorDiedError()}, "t", 1).message
    assert bare.endswith("ActorDiedError: The actor died unexpectedly before finishing this task.")
