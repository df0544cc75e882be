"""Sharing one Ray cluster among the running studies (weighted fair share, DESIGN §7).

Every study runner asks before it starts fold runs. The cluster's CPUs and GPUs go round the
studies that have folds ready: the next fold run goes to the study with the smallest weighted
share in use (its dominant share, CPUs or GPUs, over its ``priority``), so two equal studies on a
full cluster each get half, and one of priority 2 gets twice what one of priority 1 gets. When
that study's fold does not fit in what is free, nobody else starts one: the cluster drains until
it fits, so a study of big folds is never starved by one of small folds. Running folds are never
taken away: a study over its share gives slots back as its fold runs end. With no capacity
known, nothing is held back (Ray queues what does not fit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from foldwise.service.admission.cluster_fit import NodeCapacity

EPS = 1e-9
T = TypeVar("T")


@dataclass
class _Claim:
    cpus: float
    gpus: float
    priority: float
    order: int
    wake: Callable[[], None]
    last_grant: int = 0
    running: int = 0
    ready: int = 0


class ClusterShare:
    """What each running study may start now; ``set_capacity`` keeps it to the live cluster."""

    def __init__(self) -> None:
        self._claims: dict[int, _Claim] = {}
        self._joined = 0
        self._grants = 0
        self.cpus: float | None = None
        self.gpus: float = 0.0
        self._version = 0
        """Counts the changes to the claims and the capacity: what is derived from them (the
        study next in line) is worked out once per change, not once per study that asks (every
        waiting study asks each turn of its loop; with hundreds queued that was most of the
        scheduler's time)."""
        self._derived: dict[str, tuple[int, Any]] = {}

    def set_capacity(self, nodes: Sequence[NodeCapacity]) -> None:
        """The alive nodes' CPUs and GPUs in all; an empty list means unknown (no limit)."""
        before = (self.cpus, self.gpus)
        if nodes:
            self.cpus = sum(n.cpus for n in nodes)
            self.gpus = sum(n.gpus for n in nodes)
        else:
            self.cpus, self.gpus = None, 0.0
        if (self.cpus, self.gpus) != before:
            self._version += 1
            self._wake_waiting()

    def join(
        self,
        study_id: int,
        *,
        cpus: float,
        gpus: float,
        priority: float,
        wake: Callable[[], None],
    ) -> None:
        """A study starts running: ``cpus`` and ``gpus`` are what one of its fold runs holds."""
        self._joined += 1
        self._version += 1
        self._claims[study_id] = _Claim(cpus, gpus, priority, self._joined, wake)

    def leave(self, study_id: int) -> None:
        if self._claims.pop(study_id, None) is not None:
            self._version += 1
            self._wake_waiting()

    def grant(self, study_id: int, *, running: int, ready: int) -> int:
        """How many of its ``ready`` folds the study may start now, given it has ``running``
        fold runs holding resources. The study next in line is woken when it is not this one."""
        me = self._claims.get(study_id)
        if me is None:
            return ready
        freed = running < me.running
        if (me.running, me.ready) != (running, ready):
            self._version += 1
            me.running, me.ready = running, ready
        if self.cpus is None:  # nothing known of the cluster: Ray queues what does not fit
            self._version += 1
            me.running, me.ready = running + ready, 0
            return ready
        if freed:
            self._wake_waiting(but=study_id)
        granted = 0
        while granted < ready and self._next_in_line() is me:
            self._grants += 1
            self._version += 1
            me.last_grant = self._grants
            me.running += 1
            me.ready -= 1
            granted += 1
        if me.ready > 0:
            following = self._next_in_line()
            if following is not None and following is not me:
                following.wake()
        return granted

    def explain(self, study_id: int) -> str | None:
        """Why the study's ready folds wait, in words, or None when they do not."""
        me = self._claims.get(study_id)
        if me is None or me.ready <= 0 or self.cpus is None:
            return None
        free_cpus, free_gpus = self._free()
        need = fold_needs(me.cpus, me.gpus)
        others = [
            sid for sid in self._once_per_change("holders", self._holders) if sid != study_id
        ]
        held = f" (held by studies {', '.join(map(str, others))})" if others else ""
        return (
            f"waiting for cluster resources: {me.ready} fold runs ready, each needs {need}; "
            f"{free_cpus:g} of {self.cpus:g} CPUs"
            + (f" and {free_gpus:g} of {self.gpus:g} GPUs" if self.gpus or me.gpus else "")
            + f" are free{held}"
        )

    def unrunnable(self, study_id: int) -> str | None:
        """Why none of the study's fold runs can run on the cluster as it is now (its alive
        nodes, in all, hold less than one fold run needs: its last worker node died), in
        words, or None. Ray places them once a node joins."""
        me = self._claims.get(study_id)
        if me is None or self.cpus is None:
            return None
        if me.cpus <= self.cpus + EPS and me.gpus <= self.gpus + EPS:
            return None
        held = f"{self.cpus:g} CPU{'' if self.cpus == 1 else 's'}"
        if self.gpus or me.gpus:
            held += f" and {self.gpus:g} GPU{'' if self.gpus == 1 else 's'}"
        return (
            f"no alive node can run its folds: the cluster's alive nodes hold {held} in all "
            f"and a fold run needs {fold_needs(me.cpus, me.gpus)}; it goes on when a node "
            "joins (see GET /health)"
        )

    def _holders(self) -> list[int]:
        """The studies with fold runs holding resources, by id."""
        return sorted(sid for sid, c in self._claims.items() if c.running)

    def _free(self) -> tuple[float, float]:
        return self._once_per_change("free", self._work_out_free)

    def _work_out_free(self) -> tuple[float, float]:
        assert self.cpus is not None
        cpus = self.cpus - sum(c.running * c.cpus for c in self._claims.values())
        gpus = self.gpus - sum(c.running * c.gpus for c in self._claims.values())
        return cpus, gpus

    def _next_in_line(self) -> _Claim | None:
        """The study that gets the next fold run, if it fits now: the lowest weighted share in
        use among those with folds ready (on ties, the one served least recently). A fold
        bigger than the whole cluster reserves nothing (it waits for nodes to join). Worked
        out once per change of the claims."""
        return self._once_per_change("next", self._work_out_next)

    def _once_per_change(self, name: str, work: Callable[[], T]) -> T:
        """``work()``, worked out again only when the claims or the capacity changed."""
        version, value = self._derived.get(name, (-1, None))
        if version != self._version:
            value = work()
            self._derived[name] = (self._version, value)
        return value

    def _work_out_next(self) -> _Claim | None:
        ready = [c for c in self._claims.values() if c.ready > 0]
        if self.cpus is None:
            return None
        possible = [c for c in ready if c.cpus <= self.cpus + EPS and c.gpus <= self.gpus + EPS]
        if not possible:
            return None
        first = min(possible, key=lambda c: (self._share(c), c.last_grant, c.order))
        free_cpus, free_gpus = self._free()
        fits = first.cpus <= free_cpus + EPS and first.gpus <= free_gpus + EPS
        return first if fits else None

    def _share(self, claim: _Claim) -> float:
        """The dominant share of the cluster the study holds, over its priority."""
        assert self.cpus is not None
        cpu = claim.running * claim.cpus / self.cpus if self.cpus > 0 else 0.0
        gpu = claim.running * claim.gpus / self.gpus if self.gpus > 0 else 0.0
        return max(cpu, gpu) / claim.priority

    def _wake_waiting(self, but: int | None = None) -> None:
        for study_id, claim in self._claims.items():
            if claim.ready > 0 and study_id != but:
                claim.wake()


def fold_needs(cpus: float, gpus: float) -> str:
    """What one fold run holds, in words: "4 CPUs", "1 CPU and 1 GPU"."""
    text = f"{cpus:g} CPU{'' if cpus == 1 else 's'}"
    return text + (f" and {gpus:g} GPU{'' if gpus == 1 else 's'}" if gpus else "")
