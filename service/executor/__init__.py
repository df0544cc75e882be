"""Runs fold runs as DDP jobs on Ray core with a warm worker pool (DESIGN §7).

What the scheduler sees is ``contract`` (no Ray, no torch); ``RayExecutor`` is imported on first
use, so importing this package loads neither.
"""

from __future__ import annotations

from typing import Any

from foldwise.service.executor.contract import Executor, FoldFailed, FoldRunStats

__all__ = ["Executor", "FoldFailed", "FoldRunStats", "RayExecutor"]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from foldwise.service.executor.ray_executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
