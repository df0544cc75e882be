"""How well a study used its fold slots: busy (training) and idle slot-seconds while it ran."""

from __future__ import annotations

import time


class SlotMeter:
    """Integrates the number of training fold runs over time, against ``slots``."""

    def __init__(self, slots: int = 0) -> None:
        self.slots = slots
        self.busy_seconds = 0.0
        self.idle_seconds = 0.0
        self._running = 0
        self._since = time.monotonic()

    def update(self, running: int) -> tuple[float, float]:
        """Account for the time since the last update, then note ``running`` fold runs
        training from now on; returns the busy and idle slot-seconds just accounted for."""
        now = time.monotonic()
        elapsed, self._since = now - self._since, now
        busy = min(self._running, self.slots) * elapsed
        idle = max(self.slots - self._running, 0) * elapsed
        self.busy_seconds += busy
        self.idle_seconds += idle
        self._running = running
        return busy, idle

    def utilisation(self) -> float:
        """Busy share of the slot-seconds so far (0 before any time passed)."""
        total = self.busy_seconds + self.idle_seconds
        return self.busy_seconds / total if total else 0.0
