"""Per-epoch resource use: CPU % and resident memory always, GPU fields only with CUDA."""

from __future__ import annotations

import time

import pytest
import torch

from foldwise.trainers.monitor import ResourceMonitor


def _busy(cpu_seconds: float = 0.3) -> float:
    """Work until this process has used ``cpu_seconds`` of CPU: a fixed count of products took
    under one clock tick (10 ms) on a fast machine, which psutil reads as no CPU at all."""
    x = torch.ones(256, 256)
    total, start = 0.0, time.process_time()
    while time.process_time() - start < cpu_seconds:
        total += float((x @ x).sum())
    return total


def test_cpu_and_memory_are_averaged_per_epoch() -> None:
    with ResourceMonitor(torch.device("cpu"), interval=0.01) as monitor:
        _busy()
        first = monitor.take()
        second = monitor.take()
    assert set(first) == {"cpu_percent", "rss_mb"}
    assert first["cpu_percent"] > 0  # it did work between the calls
    assert first["rss_mb"] > 10  # a Python process with torch loaded
    assert set(second) == {"cpu_percent", "rss_mb"}  # an empty interval still answers


def test_the_sampling_thread_stops() -> None:
    monitor = ResourceMonitor(torch.device("cpu"), interval=0.01)
    with monitor:
        assert monitor._thread.is_alive()
    assert not monitor._thread.is_alive()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_memory_is_reported_with_cuda() -> None:
    device = torch.device("cuda", 0)
    with ResourceMonitor(device, interval=0.01) as monitor:
        x = torch.ones(1024, 1024, device=device)
        (x @ x).sum().item()
        usage = monitor.take()
    assert usage["gpu_mem_mb"] >= 4.0  # at least the 4 MiB tensor
