"""How late the service's event loop runs what is due: a task that asks to wake every
``interval`` seconds and records how late it woke (``foldwise_event_loop_lag_seconds``). A loop
that is late by more than a few milliseconds holds up every request and every fold report."""

from __future__ import annotations

import asyncio
import time

from foldwise.service.metrics import LOOP_LAG_SECONDS


async def watch_loop_lag(interval: float = 0.1) -> None:
    """Record the loop's lateness every ``interval`` seconds until cancelled."""
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(interval)
        LOOP_LAG_SECONDS.observe(max(time.perf_counter() - asked - interval, 0.0))
