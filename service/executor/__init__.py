"""Runs fold runs as DDP jobs on Ray core with a warm worker pool (DESIGN §7)."""

from service.executor.ray_executor import FoldFailed, FoldRunStats, RayExecutor

__all__ = ["FoldFailed", "FoldRunStats", "RayExecutor"]
