"""Stored runs of the optimizer benchmark, so that runs on separate cores and days combine.

One JSON line per (problem, method, seed): the objective values in evaluation order and the
mean seconds per suggestion (``benchmarks/multi_objective.py`` keeps its runs the same way, in
a file of its own). Each line carries the version of what produced it: the hash of
``optimizers/`` for foldwise's methods, the library version for a peer. Only lines of the
current version count, so a change to the GP reruns the GP and nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "optimizers.jsonl"


@dataclass(frozen=True)
class Run:
    problem: str
    method: str
    seed: int
    version: str
    values: list[float] | list[list[float]]
    """The objective value of each evaluation in order (the multi-objective benchmark: each
    evaluation's objectives followed by its constraint gap)."""
    seconds: float
    """Mean seconds per suggestion, the objective's time excluded."""


@functools.cache
def code_version() -> str:
    """A short hash of foldwise's optimizer sources as this process first read them (the code
    it runs): any change there makes a new version."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "optimizers").glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return "optimizers-" + digest.hexdigest()[:12]


class ResultStore:
    """The runs in one JSON-lines file; appends are single writes, so two runs may share it."""

    def __init__(self, path: Path = RESULTS) -> None:
        self.path = path
        self.runs: dict[tuple[str, str, int, str], Run] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    self._keep(Run(**json.loads(line)))

    def _keep(self, run: Run) -> None:
        self.runs[run.problem, run.method, run.seed, run.version] = run

    def get(self, problem: str, method: str, seed: int, version: str) -> Run | None:
        return self.runs.get((problem, method, seed, version))

    def add(self, run: Run) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(json.dumps(asdict(run)) + "\n")
        self._keep(run)
