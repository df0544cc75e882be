"""foldwise on a real multi-node Ray cluster on loopback, with no shared filesystem.

A head and two worker nodes, each started from its own empty directory with no PYTHONPATH to
the project's tests or to the user's task; the service joins with FOLDWISE_RAY_ADDRESS and runs
studies of a task module that exists only in the service's own directory. Ray ships that code
to the workers; checkpoints and models come back to the service through Ray.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import torch

from tests.live_service import LiveService
from tests.ray_cluster import LoopbackCluster
from tests.service.study_specs import study_spec

pytestmark = pytest.mark.slow

LAB_TASK = '''"""A user's task that exists only in the service's directory."""

import time

import numpy as np
from torch import nn

kind = "classification"


def load_data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(240, 6)).astype(np.float32)
    return X, (X[:, 0] + X[:, 1] > 0).astype(np.int64)


class _Net(nn.Module):
    def __init__(self, delay: float, width: int) -> None:
        super().__init__()
        self.delay = delay
        self.net = nn.Sequential(nn.Linear(6, width), nn.ReLU(), nn.Linear(width, 2))

    def forward(self, x):
        if self.delay:
            time.sleep(self.delay)
        return self.net(x)


def build_model(params):
    return _Net(float(params["delay"]), 8)
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    cluster = LoopbackCluster(tmp_path_factory.mktemp("ray"), workers=2, cpus=2).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def service(cluster: LoopbackCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    home = tmp_path_factory.mktemp("service")
    (home / "labtasks").mkdir()
    (home / "labtasks" / "__init__.py").write_text("")
    (home / "labtasks" / "clusterfit.py").write_text(LAB_TASK)
    live = LiveService(
        f"sqlite:///{home / 'foldwise.db'}",
        home / "service.log",
        cwd=home,
        env={
            **cluster.env,
            "FOLDWISE_RAY_ADDRESS": cluster.address,
            "FOLDWISE_TASK_MODULES": "labtasks",
            "FOLDWISE_ARTIFACT_DIR": str(home / "artifacts"),
        },
    )
    live.start()
    try:
        yield live
    finally:
        live.stop()


def _spec(name: str, delay: float, **overrides: Any) -> dict[str, Any]:
    return study_spec(
        name=name,
        space={
            "delay": {"type": "categorical", "choices": [delay]},
            "lr": {"type": "float", "low": 1e-2, "high": 1e-1, "log": True},
        },
        optimizer={"name": "random", "seed": 1},
        **{
            "budget": {"trials": 2},
            "parallel": {"trial_groups": 1, "folds": 4, "workers_per_fold": 2},
            "resources": {"cpus_per_worker": 1},
            "trainer": {"task": "labtasks.clusterfit", "epochs": 2, "batch_size": 32},
            **overrides,
        },
    )


def _node_loss_spec(name: str, *, trials: int, epochs: int, retries: int) -> dict[str, Any]:
    """Folds of 2 workers that checkpoint every epoch and are retried when a node is lost."""
    return _spec(
        name,
        0.1,
        budget={"trials": trials},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 2},
        trainer={
            "task": "labtasks.clusterfit",
            "epochs": epochs,
            "batch_size": 32,
            "checkpoint_every": 1,
            "retries": retries,
        },
    )


def _submit(http: httpx.Client, spec: dict[str, Any]) -> int:
    response = http.post("/studies", json=spec)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _until(check: Callable[[], Any], timeout: float, what: str, service: LiveService) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout:g} s:\n{service.log()}")


def _fold_runs(http: httpx.Client, study_id: int) -> list[dict[str, Any]]:
    trials = http.get(f"/studies/{study_id}/trials", params={"limit": 500}).json()["data"]
    runs = []
    for trial in trials:
        detail = http.get(f"/studies/{study_id}/trials/{trial['number']}").json()
        runs += [{**run, "trial": trial["number"]} for run in detail["folds"]]
    return runs


def _finished(http: httpx.Client, study_id: int) -> dict[str, Any] | None:
    study = http.get(f"/studies/{study_id}").json()
    return study if study["status"] in ("completed", "failed", "stopped") else None


def test_a_study_of_shipped_code_runs_on_every_worker_node(
    cluster: LoopbackCluster, service: LiveService
) -> None:
    nodes = cluster.node_ids()
    with service.http() as http:
        study_id = _submit(http, _spec("on-the-cluster", 0.0))
        study = _until(lambda: _finished(http, study_id), 240, "the study's end", service)
        assert study["status"] == "completed", study
        runs = _fold_runs(http, study_id)
        assert len(runs) == 8 and all(r["status"] == "completed" for r in runs)
        placed = {rank["node_id"] for run in runs for rank in run["placement"]}
        assert placed == {nodes["node_a"], nodes["node_b"]}  # never the head: it has no CPUs
        assert all(r["placement"][0]["gpu_ids"] == [] for r in runs)
        for fold in range(4):  # models came back through Ray from whichever node trained them
            response = http.get(f"/studies/{study_id}/best/folds/{fold}/model")
            assert response.status_code == 200
            assert torch.load(io.BytesIO(response.content), weights_only=False)["fold"] == fold
        too_big = _spec("too-big", 0.0, resources={"cpus_per_worker": 3})
        refused = http.post("/studies", json=too_big)
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"][-2:] == ["resources", "cpus_per_worker"]
    for node in cluster.nodes:  # nothing of the task or the tests reached a node's directory
        assert not any(p.suffix == ".py" for p in node.directory.rglob("*")), node.name


def test_studies_share_the_cluster_and_a_waiting_one_says_so(
    cluster: LoopbackCluster, service: LiveService
) -> None:
    """A study of small folds fills the cluster; one of big folds (every CPU) waits, says
    why, and gets the cluster before the first has finished: the share drains for it. The
    small folds have the shape of the first test's, whose idle worker groups they reuse."""
    small = _spec(
        "small-folds",
        0.15,
        budget={"trials": 3},
        parallel={"trial_groups": 2, "folds": 4, "workers_per_fold": 2},
    )
    big = _spec(
        "big-folds",
        0.0,
        budget={"trials": 1},
        parallel={"trial_groups": 1, "folds": 2, "workers_per_fold": 2},
        resources={"cpus_per_worker": 2},
        trainer={"task": "labtasks.clusterfit", "epochs": 1, "batch_size": 32},
    )
    with service.http() as http:
        first = _submit(http, small)

        def cluster_full() -> bool:
            return sum(r["status"] == "running" for r in _fold_runs(http, first)) >= 2

        _until(cluster_full, 120, "two running fold runs", service)
        second = _submit(http, big)
        waiting = _until(
            lambda: http.get(f"/studies/{second}").json()["waiting"], 60, "a waiting note", service
        )
        assert waiting.startswith("waiting for cluster resources: ")
        assert "each needs 4 CPUs" in waiting and "held by studies" in waiting
        done = _until(lambda: _finished(http, second), 240, "the big study's end", service)
        assert done["status"] == "completed" and done["waiting"] is None
        _until(lambda: _finished(http, first), 240, "the small study's end", service)
        big_started = min(r["started_at"] for r in _fold_runs(http, second))
        small_runs = _fold_runs(http, first)
        assert big_started < max(r["finished_at"] for r in small_runs)  # not starved
        assert any(r["started_at"] > big_started for r in small_runs)


def test_a_lost_node_costs_a_retry_from_the_checkpoint_and_nothing_else(
    cluster: LoopbackCluster, service: LiveService
) -> None:
    """SIGKILL to every process of the node running a fold: the fold is retried on another
    node from the checkpoint its first attempt sent to the service, and the study ends well."""
    cluster.add_worker("c")  # room for the retry once a node is gone
    nodes = cluster.node_ids()
    names = {node_id: name for name, node_id in nodes.items()}
    spec = _node_loss_spec("node-loss", trials=1, epochs=8, retries=2)
    with service.http() as http:
        study_id = _submit(http, spec)

        def checkpointed_run() -> dict[str, Any] | None:
            runs = [r for r in _fold_runs(http, study_id) if r["placement"]]
            return next((r for r in runs if len(r["epochs"]) >= 2), None)

        victim = _until(checkpointed_run, 180, "a fold run with two epochs", service)
        lost_node = names[victim["placement"][0]["node_id"]]
        killed_at = time.monotonic()
        cluster.worker(lost_node).kill()

        def resumed() -> dict[str, Any] | None:
            runs = _fold_runs(http, study_id)
            retry = [r for r in runs if r["fold"] == victim["fold"] and r["attempt"] > 0]
            trained = [r for r in retry if any(not e["restored"] for e in r["epochs"])]
            return trained[0] if trained else None

        retry = _until(resumed, 180, "the retried fold's first new epoch", service)
        recovery = time.monotonic() - killed_at
        study = _until(lambda: _finished(http, study_id), 240, "the study's end", service)
        print(f"\nlost node {lost_node}: the fold trained again {recovery:.1f} s after the kill")
        assert study["status"] == "completed", study
        assert names[retry["placement"][0]["node_id"]] != lost_node
        restored = [e for e in retry["epochs"] if e["restored"]]
        assert len(restored) >= 2  # resumed from the checkpoint, not from scratch
        trial = http.get(f"/studies/{study_id}/trials/0").json()
        assert trial["status"] == "completed" and trial["value_folds"] == 2
        survivors = {node.name for node in cluster.nodes if node.alive()}
        assert survivors == {"head", "node_a", "node_b", "node_c"} - {lost_node}


def test_a_study_whose_last_worker_node_died_says_so_and_resumes_when_one_joins(
    cluster: LoopbackCluster, service: LiveService
) -> None:
    """Every worker node SIGKILLed mid-study (the head has no CPUs): the study says in
    ``waiting`` that no alive node can run its folds, and goes on when a node joins."""
    # 12 epochs: the study is still running when its nodes die, however slowly this polls
    spec = _node_loss_spec("last-node-loss", trials=1, epochs=12, retries=3)
    with service.http() as http:
        study_id = _submit(http, spec)
        _until(
            lambda: any(len(r["epochs"]) >= 1 for r in _fold_runs(http, study_id)),
            180,
            "a fold run with an epoch",
            service,
        )
        for node in cluster.nodes:
            if node.name != "head" and node.alive():
                node.kill()
        killed_at = time.monotonic()

        def waiting() -> str | None:
            study = http.get(f"/studies/{study_id}").json()
            assert study["status"] == "running", study
            return study["waiting"]

        said = _until(
            lambda: "no alive node" in (w := waiting() or "") and w, 240, "no node", service
        )
        print(f"\n{time.monotonic() - killed_at:.0f} s after the kill, waiting: {said}")
        assert "hold 0 CPUs in all and a fold run needs 2 CPUs" in said, said
        cluster.add_worker("d", cpus=4)  # room for both folds at once
        study = _until(lambda: _finished(http, study_id), 240, "the study's end", service)
        assert study["status"] == "completed", study
        assert study["waiting"] is None, study
