"""Small messages between the ranks of a fold run, through its rendezvous store, not a collective.

At each report every rank says where it is (reporting epoch e, or returned from its fold
function) and learns where the others are. A collective would pair up with whatever collective
a peer is in instead (a rank that skipped one of the user's), and gloo aborts the process when
their sizes differ; a key-value exchange cannot mismatch, so a rank that went astray is named.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import torch.distributed as dist

from foldwise.trainers.fold_errors import PeerFailed, PeersLate, RunAbandoned

FAILED = "foldwise/failed"
FIRST_PAUSE_S = 0.0002
LONGEST_PAUSE_S = 0.05
"""A rank waiting for its peers at an exchange looks for their keys after pauses that double
from the first to the longest: a peer a moment behind costs a fraction of a millisecond."""
LOOK_AROUND_S = 1.0
"""How often a waiting rank checks whether its run was abandoned or a peer failed."""


class RankExchange:
    """Every rank's payload, on every rank: ``exchange`` returns them in rank order.

    The n-th exchange of every rank meets the n-th of the others, whatever each says, so
    ranks that disagree about where they are learn it at once.
    """

    def __init__(
        self, store: dist.Store | None, *, rank: int, world_size: int, abandoned: threading.Event
    ) -> None:
        if store is None and world_size > 1:
            raise ValueError("several ranks need the run's store to exchange messages")
        self.store, self.rank, self.world_size = store, rank, world_size
        self.abandoned = abandoned
        self._count = 0

    def exchange(
        self, payload: dict[str, Any], *, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Send ``payload`` (JSON-able) and wait for the others' of the same exchange; after
        ``timeout`` seconds, ``PeersLate`` says who is missing and where they were last."""
        if self.world_size == 1 or self.store is None:
            return [payload]
        tag = f"foldwise/exchange/{self._count}"
        self._count += 1
        deadline = None if timeout is None else time.monotonic() + timeout
        self.store.set(f"{tag}/{self.rank}", json.dumps(payload))
        keys = [f"{tag}/{r}" for r in range(self.world_size)]
        pause, looked = FIRST_PAUSE_S, time.monotonic()
        while not self.store.check(keys):  # polled: a timed-out wait logs a warning each time
            time.sleep(pause)
            pause = min(2 * pause, LONGEST_PAUSE_S)
            if time.monotonic() - looked < LOOK_AROUND_S:
                continue
            looked = time.monotonic()
            if self.abandoned.is_set():
                raise RunAbandoned("the fold run was abandoned")
            self._raise_if_a_peer_failed()
            if deadline is not None and time.monotonic() > deadline:
                raise self._late(keys)
        return [json.loads(value) for value in self.store.multi_get(keys)]

    def _late(self, keys: list[str]) -> PeersLate:
        missing = [r for r, key in enumerate(keys) if not self.store.check([key])]
        last: dict[int, dict[str, Any]] = {}
        if self._count >= 2:
            previous = f"foldwise/exchange/{self._count - 2}"
            for rank in missing:
                with contextlib.suppress(Exception):
                    last[rank] = json.loads(self.store.get(f"{previous}/{rank}"))
        return PeersLate(missing, last)

    def fail(self, error: BaseException) -> None:
        """Tell the other ranks this rank's fold function raised ``error`` (best effort), so
        those waiting for it at a report stop waiting."""
        if self.world_size == 1 or self.store is None:
            return
        lines = str(error).strip().splitlines()
        text = f"{type(error).__name__}: {lines[0] if lines else ''}"
        try:
            self.store.set(f"{FAILED}/{self.rank}", text[:500])
        except Exception:  # the store went with rank 0: the peers learn it from the store
            pass

    def _raise_if_a_peer_failed(self) -> None:
        for rank in range(self.world_size):
            key = f"{FAILED}/{rank}"
            if rank != self.rank and self.store.check([key]):
                said = self.store.get(key).decode(errors="replace")
                raise PeerFailed(f"rank {rank} failed ({said}) while rank {self.rank} waited")
