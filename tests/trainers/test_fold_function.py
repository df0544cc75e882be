"""A task's own loop (``train_fold(ctx)``) through the fold runner: what ctx gives, reports,
stops, checkpoints and models, lazy data, and every way a fold function can break the contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import Subset

from foldwise.trainers import fold_channel
from foldwise.trainers.ddp import free_port
from foldwise.trainers.fold_channel import FoldContractError, TrainingDiverged
from foldwise.trainers.fold_data import ArrayDataset
from foldwise.trainers.fold_runner import run_fold
from foldwise.trainers.job import FoldJob
from foldwise.trainers.report import ArtifactKind, EpochReport, SavedArtifact
from tests.trainers.fold_jobs import epochs_of, make_job, run_local

OWN = "tests.user_tasks.own_loop"
SEEN: dict[str, Any] = {}


def _job(mode: str = "ok", **overrides: Any) -> FoldJob:
    fields: dict[str, Any] = {
        "params": {"mode": mode, "lr": 0.02},
        "folds": 4,
        "seed": 5,
        "epochs": 3,
        "batch_size": 16,
        "objective": {"metric": "val_accuracy", "direction": "maximize"},
        "options": {"flavour": "plain"},
    }
    return make_job(OWN, **{**fields, **overrides})


def look(ctx: Any) -> None:
    """A fold function that notes what its context says, then reports one epoch."""
    SEEN.update(
        {
            name: getattr(ctx, name)
            for name in (
                "params", "options", "fold", "folds", "seed", "rank", "local_rank",
                "world_size", "device", "is_chief", "epochs", "batch_size", "start_epoch",
            )
        }
    )  # fmt: skip
    SEEN["indices"] = (ctx.train_indices, ctx.val_indices)
    SEEN["datasets"] = (ctx.train_dataset, ctx.val_dataset)
    SEEN["train_targets"] = ctx.train_targets
    SEEN["lr"] = (ctx.lr_scale, ctx.lr_factor(0, 0, 10), ctx.sum(2.0), ctx.mean(3.0, weight=2))
    arrays = ArrayDataset(np.zeros((180, 2)), np.zeros(180), classify=True)  # sliced batches
    SEEN["batches"] = [
        [len(y) for _x, y in ctx.prepare_loader(data, 64, **options)]
        for data in (ctx.train_dataset, arrays)
        for options in ({}, {"drop_last": True})
    ]
    ctx.report(0, val_accuracy=torch.tensor(0.5), val_loss=np.float32(0.25), train_noise=0)


class _Look:
    metrics = ["val_accuracy", "val_loss", "train_noise"]

    def load_data(self, options: dict) -> Any:
        from tests.user_tasks.own_loop import load_data

        return load_data()

    def load_eval_data(self) -> Any:
        from tests.user_tasks.own_loop import load_eval_data

        return load_eval_data()

    def train_fold(self, ctx: Any) -> None:
        look(ctx)


def test_the_context_says_which_fold_this_is_and_gives_its_data_lazily() -> None:
    job = _job(world_size=1, warmup_epochs=2)
    events = run_local(FoldJob(**{**job.__dict__, "trainer": job.trainer.model_copy(
        update={"task": f"{__name__}:_Look"})}))  # fmt: skip
    assert SEEN["params"] == job.params and SEEN["options"] == {"flavour": "plain"}
    assert (SEEN["fold"], SEEN["folds"], SEEN["seed"]) == (0, 4, 5)
    assert (SEEN["rank"], SEEN["local_rank"], SEEN["world_size"], SEEN["is_chief"]) == (
        0, 0, 1, True,
    )  # fmt: skip
    assert SEEN["device"] == torch.device("cpu") and SEEN["start_epoch"] == 0
    assert (SEEN["epochs"], SEEN["batch_size"]) == (3, 16)
    train, val = SEEN["indices"]
    assert len(train) == 180 and len(val) == 60 and not set(train) & set(val)
    train_set, val_set = SEEN["datasets"]
    assert isinstance(train_set, Subset) and train_set.dataset.augment
    assert isinstance(val_set, Subset) and not val_set.dataset.augment  # load_eval_data
    assert list(train_set.indices) == train.tolist()
    assert np.bincount(SEEN["train_targets"]).tolist() == [90, 90]  # stratified
    assert SEEN["lr"] == (1.0, 1.0, 2.0, 3.0)  # one rank: nothing to scale or sum
    assert SEEN["batches"] == [[64, 64, 52], [64, 64]] * 2  # drop_last as DataLoader's
    (report,) = epochs_of(events)
    assert report.epoch == 1 and report.metrics["val_accuracy"] == 0.5
    assert report.metrics["val_loss"] == 0.25 and "epoch_seconds" in report.metrics


def test_an_own_loop_trains_with_fresh_augmentation_every_epoch() -> None:
    events = run_local(_job(epochs=4))
    epochs = epochs_of(events)
    assert [e.epoch for e in epochs] == [1, 2, 3, 4]
    assert epochs[-1].metrics["val_accuracy"] > 0.9
    noise = [e.metrics["train_noise"] for e in epochs]
    assert all(n > 0 for n in noise) and len(set(noise)) == 4  # drawn afresh every epoch


def test_early_stopping_and_a_report_after_the_stop(tmp_path: Path) -> None:
    job = _job("ignore_stop", epochs=10, early_stopping={"patience": 1, "min_delta": 5.0})
    epochs = epochs_of(run_local(job))
    assert len(epochs) == 2  # the report after should_stop() raised FoldStopped: a normal end


def test_the_best_epochs_model_is_saved_with_what_the_fold_function_added(tmp_path) -> None:
    events = run_local(_job(epochs=3, artifact_key="k"), tmp_path)
    saved = [e for e in events if isinstance(e, SavedArtifact)]
    assert [a.kind for a in saved] == [ArtifactKind.CHECKPOINT] * 2 + [ArtifactKind.MODEL]
    model = torch.load(tmp_path / "model.pt", weights_only=False)
    best = max(epochs_of(events), key=lambda e: e.metrics["val_accuracy"])
    assert model["epoch"] == best.epoch and model["note"] == "own loop"
    assert set(model["state_dict"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_a_retried_attempt_resumes_the_own_loop_from_its_checkpoint(tmp_path: Path) -> None:
    first = run_local(_job(epochs=4, artifact_key="k"), tmp_path)
    checkpoint = [e for e in first if isinstance(e, SavedArtifact)][1]  # after epoch 2
    assert (checkpoint.kind, checkpoint.epoch) == (ArtifactKind.CHECKPOINT, 2)
    resumed = run_local(_job(epochs=4, artifact_key="k", resume=True), restore=checkpoint.data)
    epochs = epochs_of(resumed)
    assert [(e.epoch, e.restored) for e in epochs] == [
        (1, True), (2, True), (3, False), (4, False),
    ]  # fmt: skip
    assert epochs[1].metrics == epochs_of(first)[1].metrics  # replayed as reported


@pytest.mark.parametrize(
    ("mode", "error", "message"),
    [
        ("silent", FoldContractError, "train_fold returned without reporting an epoch"),
        ("text", FoldContractError, r"reported val_loss='low' \(str\) at epoch 1: not a number"),
        ("nan", TrainingDiverged, "val_accuracy became nan at epoch 1"),
        ("no_objective", FoldContractError, "lacks the objective metric 'val_accuracy'"),
    ],
)
def test_a_bad_report_fails_the_fold_in_one_line(mode: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as info:
        run_local(_job(mode))
    assert "\n" not in str(info.value)


def _rank_main(rank: int, job: FoldJob, port: int, out: str) -> None:
    torch.set_num_threads(1)
    fold_channel.RETURN_GRACE_S = 2.0
    result: dict[str, Any] = {"epochs": []}
    try:
        for event in run_fold(job, rank=rank, master_addr="127.0.0.1", master_port=port):
            if isinstance(event, EpochReport):
                result["epochs"].append(event.epoch)
    except Exception as err:
        result["error"] = f"{type(err).__name__}: {err}"
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))


@pytest.mark.slow  # two spawned interpreters import torch
def test_a_rank_that_returns_early_fails_the_fold_naming_it(tmp_path) -> None:
    job = _job("early", world_size=2, epochs=3)
    mp.spawn(_rank_main, args=(job, free_port(), str(tmp_path)), nprocs=2)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[1]["error"].startswith(
        "RankReturnedAlone: rank 1 returned from train_fold after epoch 1, and rank 0 (its "
        "last report: epoch 1) had not 2 s later"
    )
    assert results[0]["epochs"] == [1] and "error" in results[0]  # its peer left its DDP step


class _Grouped(_Look):
    """The own loop's 240 samples in 30 groups of 8 (a patient, say), each in a fold of its
    own when the ids are asked for, in time order as they are."""

    def load_groups(self) -> np.ndarray:
        return np.arange(240) // 8

    def load_fold_ids(self) -> np.ndarray:
        return (np.arange(240) // 8) % 4


@pytest.mark.parametrize(
    ("cv", "folds"),
    [
        ({"scheme": "group"}, 4),
        ({"scheme": "stratified_group"}, 4),
        ({"scheme": "time_series", "gap": 5}, 4),
        ({"scheme": "predefined"}, 4),
        ({"scheme": "kfold", "repeats": 2}, 8),
    ],
)
def test_the_fold_function_gets_the_folds_the_studys_cv_makes(cv, folds) -> None:
    groups, ids = np.arange(240) // 8, (np.arange(240) // 8) % 4
    seen = []
    for fold in range(folds):
        job = make_job(
            f"{__name__}:_Grouped", folds=folds, fold=fold, seed=5, epochs=1, cv=cv,
            objective={"metric": "val_accuracy", "direction": "maximize"},
        )  # fmt: skip
        run_local(job)
        train, val = SEEN["indices"]
        seen.append(val)
        assert not set(train) & set(val)
        if cv["scheme"] in ("group", "stratified_group"):
            assert not set(groups[train]) & set(groups[val])  # no group in two folds
        if cv["scheme"] == "time_series":
            assert train.max() + 5 < val.min()  # never trained on what comes after
        if cv["scheme"] == "predefined":
            assert set(ids[val]) == {fold} and fold not in set(ids[train])
    if cv["scheme"] != "time_series":  # each repeat's validation folds cover every sample
        for repeat in range(folds // 4):
            block = np.concatenate(seen[repeat * 4 : repeat * 4 + 4])
            assert sorted(block.tolist()) == list(range(240))
