"""The profiles of user tasks already described, by their code's snapshot.

Describing a user task imports it in a Ray worker or a subprocess: seconds of imports (torch,
Lightning) for every study submitted. A snapshot is content-addressed, so a task of the same
snapshot, name and ``trainer.options`` is the same task: its profile is kept for the next
study (what the task answers depends on its code and options; the libraries it imports are the
service's own). Only profiles are kept: a task that could not be loaded is tried again.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from foldwise.trainers.task import TaskProfile

PROFILES_KEPT = 256
"""Profiles a service keeps, the least recently used dropped first."""

Key = tuple[str, str, str]


class TaskProfiles:
    """Profiles by (task name, snapshot's unpacked package, options as JSON); thread-safe (the
    API checks specs in worker threads)."""

    def __init__(self, size: int = PROFILES_KEPT) -> None:
        self.size = size
        self._kept: OrderedDict[Key, TaskProfile] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(name: str, code: Path, options: dict[str, Any]) -> Key:
        return name, str(code), json.dumps(options, sort_keys=True)

    def get(self, key: Key) -> TaskProfile | None:
        with self._lock:
            profile = self._kept.get(key)
            if profile is not None:
                self._kept.move_to_end(key)
            return profile

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def put(self, key: Key, profile: TaskProfile) -> None:
        with self._lock:
            self._kept[key] = profile
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)


DESCRIBED = TaskProfiles()
"""This process's profiles: every app in it admits studies of the same code alike."""
