"""Stored runs of the optimizer benchmark, so that runs on separate cores and days combine.

One JSON line per (problem, method, seed): the objective values in evaluation order and the
mean seconds per suggestion (``benchmarks/multi_objective.py`` keeps its runs the same way, in
a file of its own). Each line carries the version of what produced it: the hash of the code
in ``optimizers/`` (not of its docstrings and comments) for foldwise's methods, the library
version for a peer. Only lines of the current version count, so a change to the GP reruns
foldwise's methods and no peer, and a change to its documentation reruns nothing;
``--report-only --code`` (:func:`add_code_argument`) reads the lines of an earlier version.
"""

from __future__ import annotations

import argparse
import ast
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


def add_code_argument(parser: argparse.ArgumentParser) -> None:
    """``--code``: foldwise's stored runs of an earlier version of its optimizer code."""
    parser.add_argument(
        "--code",
        default=None,
        help="with --report-only: foldwise's runs of this earlier version of its optimizer "
        "code (optimizers-...), for problems a later change leaves alone",
    )


def check_code_argument(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--code`` unless only stored runs are read."""
    if args.code is not None and not args.report_only:
        parser.error("--code reads stored runs only: add --report-only")


def code_note(code: str) -> str:
    """The line a report of another code's runs starts with."""
    return f"foldwise's runs: of {code}, not of the current code ({code_version()})"


@functools.cache
def code_version() -> str:
    """A short hash of foldwise's optimizer code as this process first read it (the code it
    runs): any change to what the modules do makes a new version; their docstrings, comments
    and layout do not (the hash is of each module's syntax tree without docstrings)."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "optimizers").glob("*.py")):
        digest.update(path.name.encode() + code_of(path.read_text()).encode())
    return "optimizers-" + digest.hexdigest()[:12]


def code_of(source: str) -> str:
    """What a module does: its syntax tree as text, without the string statements that only
    document (module, class, function and attribute docstrings); comments and layout are not
    in the tree."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or not block:
                continue
            kept = [statement for statement in block if not _is_text(statement)]
            setattr(node, field, kept or [ast.Pass()])
    return ast.dump(tree)


def _is_text(statement: ast.AST) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


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
