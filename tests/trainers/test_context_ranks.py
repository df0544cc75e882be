"""What an own loop's context gives on two ranks: a random stream of its own on each rank,
``ctx.gather`` for metrics of the whole fold, a warning for a metric computed over one rank's
share, and learning-rate settings that are applied, or refused in one line, never ignored."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_runner import run_fold
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import EpochReport, FoldWarning
from tests.trainers.fold_jobs import make_job, run_local

PROBE = "tests.user_tasks.rank_probe"


def _job(mode: str, **trainer: Any) -> FoldJob:
    return make_job(
        PROBE,
        params={"mode": mode},
        world_size=2,
        epochs=2,
        seed=4,
        objective={"metric": "val_score", "direction": "maximize"},
        **trainer,
    )


def _ranks_main(rank: int, jobs: list[FoldJob], ports: list[int], out: str) -> None:
    torch.set_num_threads(1)
    results = []
    for job, port in zip(jobs, ports, strict=True):
        result: dict[str, Any] = {"epochs": [], "warnings": []}
        try:
            for event in run_fold(job, rank=rank, master_addr="127.0.0.1", master_port=port):
                if isinstance(event, EpochReport):
                    result["epochs"].append(event.metrics)
                elif isinstance(event, FoldWarning):
                    result["warnings"].append([str(event.kind), event.message])
        except Exception as err:
            result["error"] = f"{type(err).__name__}: {err}"
        results.append(result)
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every scenario's rank 0 result, from one pair of spawned ranks (each starts torch)."""
    scenarios = {
        "streams": _job("streams"),
        "streams again": _job("streams"),
        "gather": _job("gather"),
        "auroc": _job("auroc"),
        "asks, plain step": _job("plain_step", lr_scaling="sqrt", warmup_epochs=2),
        "asks warm-up, plain step": _job("plain_step", lr_scaling="none", warmup_epochs=2),
        "asks nothing, plain step": _job("plain_step"),
        "asks nothing, ctx step": _job("ctx_step"),
        "asks, ctx step": _job("ctx_step", lr_scaling="linear", warmup_epochs=1),
    }
    out = tmp_path_factory.mktemp("ranks")
    jobs = list(scenarios.values())
    ports = [free_port() for _ in jobs]
    mp.spawn(_ranks_main, args=(jobs, ports, str(out)), nprocs=2)
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    for zero, one in zip(*ranks, strict=True):
        assert one["epochs"] == [] and one["warnings"] == []  # rank 0 speaks for the run
        assert zero.get("error", "").removeprefix("FoldContractError: rank 0 ") == (
            one.get("error", "").removeprefix("FoldContractError: rank 0 ")
        )
    return dict(zip(scenarios, ranks[0], strict=True))


@pytest.mark.slow  # two spawned interpreters import torch
def test_each_rank_draws_from_its_own_stream_and_a_rerun_draws_the_same(runs) -> None:
    (first,) = runs["streams"]["epochs"]
    assert [first[k] for k in ("same_torch", "same_numpy", "same_random", "same_worker")] == [
        0.0, 0.0, 0.0, 0.0,
    ]  # fmt: skip
    (again,) = runs["streams again"]["epochs"]
    assert again["draw"] == first["draw"]  # from (seed, fold, rank, attempt): reproducible


def test_the_rank_seed_depends_on_seed_fold_rank_and_attempt() -> None:
    job = make_job(PROBE, world_size=2, seed=4, fold=1)
    seeds = {
        job.rank_seed(0),
        job.rank_seed(1),
        make_job(PROBE, world_size=2, seed=5, fold=1).rank_seed(0),
        make_job(PROBE, world_size=2, seed=4, fold=0).rank_seed(0),
        dataclasses.replace(job, attempt=1).rank_seed(0),
    }
    assert len(seeds) == 5 and job.rank_seed(0) == make_job(PROBE, seed=4, fold=1).rank_seed(0)
    assert all(0 <= seed < 2**63 for seed in seeds)


@pytest.mark.slow
def test_gather_joins_every_ranks_values_of_unequal_sizes(runs) -> None:
    (report,) = runs["gather"]["epochs"]
    assert report["gathered"] == 1.0


@pytest.mark.slow
def test_a_metric_over_one_ranks_share_is_flagged_and_gather_gives_the_whole_fold(runs) -> None:
    (report,) = runs["auroc"]["epochs"]
    assert report["val_count"] == 67.0  # each validation sample once: 34 + 33
    assert report["val_auroc"] != report["val_auroc_whole"]
    (warning,) = runs["auroc"]["warnings"]
    assert warning[0] == "partial_metric"
    assert warning[1].startswith("val_auroc differs from rank to rank in the same epoch")
    assert "ctx.gather" in warning[1]


def test_one_rank_gathers_its_own_values_and_warns_of_nothing() -> None:
    events = run_local(
        make_job(PROBE, params={"mode": "gather"}, objective={"metric": "val_score"})
    )
    assert not [e for e in events if isinstance(e, FoldWarning)]


@pytest.mark.slow
def test_lr_settings_a_loop_ignores_fail_its_first_report_in_one_line(runs) -> None:
    error = runs["asks, plain step"]["error"]
    assert error == (
        "FoldContractError: rank 0 stepped its optimizer at its own rate, but "
        "trainer.lr_scaling: sqrt asks for 1.41421x it on 2 ranks: step with "
        "ctx.optimizer_step(optimizer, epoch, step, steps_per_epoch) or scale by "
        "ctx.lr_factor(...), or leave lr_scaling out to train at your own rates"
    )
    assert runs["asks, plain step"]["epochs"] == []
    # a warm-up to 1x asks for nothing: the loop's own rate is what it asks
    assert len(runs["asks warm-up, plain step"]["epochs"]) == 2


@pytest.mark.slow
def test_an_own_loop_trains_at_its_own_rate_unless_the_study_asks(runs) -> None:
    for scenario in ("asks nothing, plain step", "asks nothing, ctx step"):
        rates = [e["optimizer_lr"] for e in runs[scenario]["epochs"]]
        assert rates == pytest.approx([0.1, 0.1]), scenario  # no scaling, no warm-up
    rates = [e["optimizer_lr"] for e in runs["asks, ctx step"]["epochs"]]
    assert 0.1 < rates[0] < 0.2 and rates[1] == pytest.approx(0.2)  # warm-up to 2 ranks' 2x
