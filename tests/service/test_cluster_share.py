"""The cluster's fold runs go round the running studies, weighted by priority."""

from __future__ import annotations

from foldwise.service.admission.cluster_fit import NodeCapacity
from foldwise.service.scheduler.cluster_share import ClusterShare


def _share(cpus: float, gpus: float = 0.0) -> tuple[ClusterShare, list[int]]:
    share = ClusterShare()
    share.set_capacity([NodeCapacity(cpus=cpus / 2, gpus=gpus / 2)] * 2)
    return share, []


def _settle(share: ClusterShare, ready: dict[int, int], woken: list[int]) -> dict[int, int]:
    """The studies ask in turn, the first one alone at first (it takes what is free); then
    round after round each study's oldest fold run ends and every study asks again. How many
    fold runs each holds once the rounds repeat themselves."""
    running = dict.fromkeys(ready, 0)
    seen: list[dict[int, int]] = []
    for _ in range(100):
        for study in ready:
            got = share.grant(study, running=running[study], ready=ready[study] - running[study])
            running[study] += got
        woken.clear()
        if running in seen:
            return running
        seen.append(dict(running))
        for study in ready:  # one fold run of each study ends (it says so when it next asks)
            running[study] = max(running[study] - 1, 0)
    raise AssertionError("the share never settled")


def test_equal_studies_split_a_full_cluster_evenly() -> None:
    share, woken = _share(cpus=4)
    for study in (1, 2):
        share.join(study, cpus=1, gpus=0, priority=1, wake=lambda s=study: woken.append(s))
    assert _settle(share, {1: 8, 2: 8}, woken) == {1: 2, 2: 2}


def test_priority_weighs_the_share() -> None:
    share, woken = _share(cpus=8)
    share.join(1, cpus=1, gpus=0, priority=3, wake=lambda: None)
    share.join(2, cpus=1, gpus=0, priority=1, wake=lambda: None)
    assert _settle(share, {1: 20, 2: 20}, woken) == {1: 6, 2: 2}


def test_a_study_that_wants_little_leaves_the_rest_to_others() -> None:
    share, woken = _share(cpus=6)
    share.join(1, cpus=1, gpus=0, priority=1, wake=lambda: None)
    share.join(2, cpus=2, gpus=0, priority=1, wake=lambda: None)
    assert _settle(share, {1: 1, 2: 10}, woken) == {1: 1, 2: 2}  # 1 + 2 x 2 = 5 of 6 CPUs


def test_running_folds_are_not_taken_away_but_freed_slots_go_to_the_waiting_study() -> None:
    share, woken = _share(cpus=4)
    share.join(1, cpus=1, gpus=0, priority=1, wake=lambda: woken.append(1))
    assert share.grant(1, running=0, ready=4) == 4  # alone: the whole cluster
    share.join(2, cpus=1, gpus=0, priority=1, wake=lambda: woken.append(2))
    assert share.grant(2, running=0, ready=4) == 0
    assert "0 of 4 CPUs are free (held by studies 1)" in (share.explain(2) or "")
    assert share.explain(1) is None
    assert share.grant(1, running=3, ready=1) == 0  # a fold of study 1 ended: study 2's turn
    assert 2 in woken
    assert share.grant(2, running=0, ready=4) == 1
    assert share.explain(2) is None or "fold runs ready" in share.explain(2)


def test_a_study_of_big_folds_is_not_starved_by_one_of_small_folds() -> None:
    """The cluster drains for the big fold instead of refilling with small ones."""
    share, woken = _share(cpus=4)
    share.join(1, cpus=1, gpus=0, priority=1, wake=lambda: None)
    assert share.grant(1, running=0, ready=10) == 4
    share.join(2, cpus=4, gpus=0, priority=1, wake=lambda: woken.append(2))
    assert share.grant(2, running=0, ready=1) == 0
    assert share.grant(1, running=3, ready=7) == 0  # a slot is free, but study 2 is first
    assert share.grant(1, running=0, ready=7) == 0
    assert 2 in woken
    assert share.grant(2, running=0, ready=1) == 1
    assert share.grant(1, running=0, ready=7) == 0  # study 2 holds every CPU now
    assert share.grant(2, running=0, ready=0) == 0  # its fold run ended
    assert share.grant(1, running=0, ready=7) == 4


def test_a_fold_bigger_than_the_cluster_reserves_nothing() -> None:
    share, woken = _share(cpus=4)
    share.join(1, cpus=8, gpus=0, priority=1, wake=lambda: None)
    share.join(2, cpus=1, gpus=0, priority=1, wake=lambda: None)
    assert share.grant(1, running=0, ready=1) == 0
    assert share.grant(2, running=0, ready=2) == 2


def test_gpu_folds_count_by_their_dominant_share() -> None:
    share, woken = _share(cpus=16, gpus=2)
    share.join(1, cpus=1, gpus=1, priority=1, wake=lambda: None)  # GPUs are its bottleneck
    share.join(2, cpus=1, gpus=0, priority=1, wake=lambda: None)
    settled = _settle(share, {1: 4, 2: 20}, woken)
    assert settled[1] == 2  # every GPU
    assert settled[2] == 14  # the CPUs left


def test_unknown_capacity_holds_nothing_back_and_leaving_wakes_the_waiting() -> None:
    share = ClusterShare()
    share.join(1, cpus=64, gpus=0, priority=1, wake=lambda: None)
    assert share.grant(1, running=0, ready=5) == 5
    assert share.explain(1) is None
    woken: list[int] = []
    share.set_capacity([NodeCapacity(cpus=64, gpus=0)])
    share.join(2, cpus=64, gpus=0, priority=1, wake=lambda: woken.append(2))
    assert share.grant(2, running=0, ready=1) == 0
    share.leave(1)
    assert woken == [2]
    assert share.grant(2, running=0, ready=1) == 1


def test_a_cluster_that_lost_its_last_worker_node_says_no_node_can_run_the_folds() -> None:
    share = ClusterShare()
    share.set_capacity([NodeCapacity(cpus=2, gpus=0), NodeCapacity(cpus=2, gpus=0)])
    share.join(1, cpus=2, gpus=0, priority=1, wake=lambda: None)
    assert share.unrunnable(1) is None
    share.set_capacity([NodeCapacity(cpus=0, gpus=0)])  # the head alone: it holds no CPUs
    said = share.unrunnable(1)
    assert said is not None and said.startswith("no alive node can run its folds"), said
    assert "hold 0 CPUs in all and a fold run needs 2 CPUs" in said, said
    assert share.grant(1, running=0, ready=2) == 0
    share.set_capacity([NodeCapacity(cpus=0, gpus=0), NodeCapacity(cpus=2, gpus=0)])  # joined
    assert share.unrunnable(1) is None
    assert share.grant(1, running=0, ready=2) == 1
