"""Per-epoch resource use of one rank: CPU %, resident memory and, with CUDA, GPU use.

Like NNLO's `--monitor`, a background thread samples every `interval` seconds; `take()` returns
the averages since the previous call. CPU % is the process's share of one core (100 = one core
busy, as `top` shows it), measured exactly over the interval by psutil. GPU utilisation needs
NVML (`pynvml`); without it only GPU memory (peak allocated by torch this epoch) is reported.
"""

from __future__ import annotations

import threading

import torch

try:
    import psutil
except ImportError:  # psutil comes with the [server] extra; without it there is no monitor
    psutil = None


class ResourceMonitor:
    """Samples this process; start it with `with`, read each epoch's averages with `take()`."""

    def __init__(self, device: torch.device, *, interval: float = 0.5) -> None:
        self.device = device
        self.interval = interval
        self._process = psutil.Process() if psutil is not None else None
        self._rss: list[float] = []
        self._gpu: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="foldwise-monitor", daemon=True)

    def __enter__(self) -> ResourceMonitor:
        if self._process is not None:
            self._process.cpu_percent(None)  # start the first CPU interval now
            self._thread.start()
        self._reset_gpu_peak()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2 * self.interval)

    def take(self) -> dict[str, float]:
        """Averages since the last call: cpu_percent, rss_mb and, on CUDA, gpu_* fields."""
        out: dict[str, float] = {}
        if self._process is not None:
            self._sample()
            with self._lock:
                rss, self._rss = self._rss, []
                gpu, self._gpu = self._gpu, []
            out["cpu_percent"] = float(self._process.cpu_percent(None))
            out["rss_mb"] = sum(rss) / len(rss)
            if gpu:
                out["gpu_util_percent"] = sum(gpu) / len(gpu)
        if self.device.type == "cuda":
            out["gpu_mem_mb"] = torch.cuda.max_memory_allocated(self.device) / 2**20
            self._reset_gpu_peak()
        return out

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        rss = self._process.memory_info().rss / 2**20
        gpu = _gpu_utilisation(self.device)
        with self._lock:
            self._rss.append(rss)
            if gpu is not None:
                self._gpu.append(gpu)

    def _reset_gpu_peak(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)


def _gpu_utilisation(device: torch.device) -> float | None:
    """The device's utilisation in % from NVML, or None without CUDA or NVML."""
    if device.type != "cuda":
        return None
    try:
        return float(torch.cuda.utilization(device))
    except Exception:  # pynvml missing or NVML unavailable in this container
        return None
