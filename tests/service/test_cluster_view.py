"""The words a waiting study shows about Ray's capacity, and how often Ray is asked for them."""

from __future__ import annotations

import asyncio

from foldwise.service.executor.cluster_view import ClusterView
from foldwise.service.executor.pool import WorkerPool

TWO_NODES = {"ok": True, "nodes": 2, "cpus": 4.0, "gpus": 0.0, "cpus_free": 1.5, "gpus_free": 0.0}


def _view(*answers: dict) -> tuple[ClusterView, list[int]]:
    view, asked, replies = ClusterView(WorkerPool()), [], iter(answers)
    view.health = lambda: asked.append(1) or next(replies)  # type: ignore[method-assign]
    return view, asked


def test_capacity_is_said_in_words_and_ray_is_asked_once_per_ttl() -> None:
    view, asked = _view(TWO_NODES, {"ok": False, "error": "never asked"})
    assert asyncio.run(view.describe_capacity()) == "Ray has 1.5 of 4 CPUs free on 2 alive nodes"
    assert asyncio.run(view.describe_capacity(gpus=True)) == (
        "Ray has 1.5 of 4 CPUs and 0 of 0 GPUs free on 2 alive nodes"
    )
    assert len(asked) == 1


def test_a_ray_with_no_alive_node_is_named_with_where_to_look() -> None:
    view, _ = _view({"ok": False})
    assert asyncio.run(view.describe_capacity()) == "Ray reports no alive node (see GET /health)"
