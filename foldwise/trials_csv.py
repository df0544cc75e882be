"""A study's trials as CSV (``GET /studies/{id}/trials.csv``): its columns, its cells, and
reading it back with its types, so the service writes and the SDK reads one format.

Columns: ``number, status, value, std_error, value_folds``, then ``params_<name>`` for each
parameter of the space in spec order and any other a trial holds (by name), then ``fold_0`` ..
``fold_{K-1}`` (the value of each fold the trial's value rests on: empty where the fold did not
finish); a study of several objectives adds ``objective_<metric>`` and
``objective_<metric>_std_error`` per objective, one with constraints ``constraint_<metric>`` per
constrained metric (its fold mean) and ``feasible``; then ``started_at, finished_at,
duration_s, error, pruned_reason``.

Cells: numbers are written bare (a negative value stays a number) and every other cell quoted,
an empty one included, so a bare cell is always a number. Text comes from users (a categorical
choice, an error message), and a spreadsheet runs a cell that starts with ``=``, ``+``, ``-``,
``@``, a tab or a carriage return as a formula (CSV injection): such a cell gets a leading
``'``, as OWASP recommends, and so does one that starts with ``'`` itself, so that reading it
back strips exactly one. Booleans are ``true``/``false``, and text that is exactly ``true`` or
``false`` gets the ``'`` too, so a boolean choice and the text choice ``"true"`` never read
alike, and so does empty text (``'``), so the choice ``""`` never reads as an absent value.
Times are ISO 8601 with their offset. Errors and pruning reasons are plain text: terminal colour
codes are dropped, as every other face shows them (``foldwise.schemas.PlainText``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from foldwise.ansi import strip_ansi
from foldwise.space import CategoricalParam, FloatParam, IntParam, Param

HEAD = ("number", "status", "value", "std_error", "value_folds")
TAIL = ("started_at", "finished_at", "duration_s", "error", "pruned_reason")
PARAM_PREFIX = "params_"
FOLD_PREFIX = "fold_"
OBJECTIVE_PREFIX = "objective_"
CONSTRAINT_PREFIX = "constraint_"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")
"""OWASP's list of a formula's first characters, and the quote that escapes them."""
BOOLEANS = {"true": True, "false": False}
"""How booleans are written; text that reads the same is escaped like a formula."""


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One trial as a row of the CSV."""

    number: int
    status: str
    params: dict[str, Any]
    value: float | None = None
    std_error: float | None = None
    value_folds: int | None = None
    fold_values: dict[int, float] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None
    pruned_reason: str | None = None
    objective_values: list[list[float | None]] | None = None
    constraint_values: list[float] | None = None
    feasible: bool | None = None

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class ScoredColumns:
    """The columns of a study scored on more than its value: ``objectives``, the metric of
    each objective when there are several; ``constraints``, each constraint's metric in the
    spec's order (a metric with two limits has one column)."""

    objectives: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        out = []
        for metric in self.objectives:
            out += [f"{OBJECTIVE_PREFIX}{metric}", f"{OBJECTIVE_PREFIX}{metric}_std_error"]
        out += [CONSTRAINT_PREFIX + metric for metric in dict.fromkeys(self.constraints)]
        return out + (["feasible"] if self.constraints else [])

    def cells(self, record: TrialRecord) -> list[Any]:
        objectives = record.objective_values or []
        out: list[Any] = []
        for i in range(len(self.objectives)):
            out += objectives[i] if i < len(objectives) else [None, None]
        held = dict(zip(self.constraints, record.constraint_values or [], strict=False))
        out += [held.get(metric) for metric in dict.fromkeys(self.constraints)]
        return out + ([record.feasible] if self.constraints else [])


def columns(
    param_names: Sequence[str], folds: int, scored: ScoredColumns = ScoredColumns()
) -> list[str]:
    """The header: ``param_names`` in their order, ``folds`` fold columns, then ``scored``'s."""
    params = [PARAM_PREFIX + name for name in param_names]
    folds_ = [f"{FOLD_PREFIX}{k}" for k in range(folds)]
    return [*HEAD, *params, *folds_, *scored.names, *TAIL]


def csv_header(
    param_names: Sequence[str], folds: int, scored: ScoredColumns = ScoredColumns()
) -> str:
    """The CSV's first line: ``columns(param_names, folds, scored)``."""
    return _lines([columns(param_names, folds, scored)])


def csv_rows(
    records: Iterable[TrialRecord],
    param_names: Sequence[str],
    folds: int,
    scored: ScoredColumns = ScoredColumns(),
) -> str:
    """The CSV lines of ``records``: a page of an export, sent while the next is read."""
    return _lines(_row(record, param_names, folds, scored) for record in records)


def _lines(rows: Iterable[list[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC).writerows(rows)
    return buffer.getvalue()


def _row(
    record: TrialRecord, names: Sequence[str], folds: int, scored: ScoredColumns
) -> list[Any]:
    values = [
        record.number,
        record.status,
        record.value,
        record.std_error,
        record.value_folds,
        *(record.params.get(name) for name in names),
        *(record.fold_values.get(k) for k in range(folds)),
        *scored.cells(record),
        record.started_at,
        record.finished_at,
        record.duration_s,
        _plain(record.error),
        _plain(record.pruned_reason),
    ]
    return [cell(value) for value in values]


def cell(value: Any) -> int | float | str:
    """What the CSV holds for ``value``: a number as it is, anything else as safe text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    escaped = text.startswith(FORMULA_STARTS) or text in BOOLEANS or text == ""
    return "'" + text if escaped else text


def _plain(text: str | None) -> str | None:
    return None if text is None else strip_ansi(text)


def read_trials_csv(
    text: str, space: Mapping[str, Param]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows (by column) and columns of a trials CSV, each cell back to its type: numbers,
    ``None`` for an empty cell, aware datetimes, text without its escape, and a parameter's
    value as the space's own (``space``: the study's ``spec.space``)."""
    reader = csv.reader(io.StringIO(text, newline=""), quoting=csv.QUOTE_NONNUMERIC)
    header = next(reader, None)
    if header is None:
        return [], []
    header = [str(name) for name in header]
    readers = [_column_reader(name, space) for name in header]
    rows = [
        {name: read(raw) for name, read, raw in zip(header, readers, values, strict=True)}
        for values in reader
        if values
    ]
    return rows, header


def _column_reader(name: str, space: Mapping[str, Param]) -> Any:
    if name in ("number", "value_folds"):
        return _integer
    if name in ("status", "error", "pruned_reason"):
        return _text
    if name in ("started_at", "finished_at"):
        return _moment
    if name == "feasible":
        return _boolean
    if name.startswith(PARAM_PREFIX):
        return _param_reader(space.get(name.removeprefix(PARAM_PREFIX)))
    return _number


def _param_reader(param: Param | None) -> Any:
    if isinstance(param, IntParam):
        return _integer
    if isinstance(param, FloatParam):
        return _number
    choices = {}
    if isinstance(param, CategoricalParam):
        choices = {_choice_key(choice): choice for choice in reversed(param.choices)}
    return lambda raw: _param_value(raw, choices)


def _choice_key(choice: Any) -> Any:
    """A choice as its cell reads back: a float for a number, else its text as written."""
    if isinstance(choice, int | float) and not isinstance(choice, bool):
        return float(choice)
    return cell(choice)


def _param_value(raw: Any, choices: Mapping[Any, Any]) -> Any:
    """A parameter's cell as its value: the choice written so, else a number, a boolean or
    text (a parameter outside the space, or a value the space no longer offers)."""
    if raw == "":
        return None
    if raw in choices:
        return choices[raw]
    if isinstance(raw, str):
        return BOOLEANS[raw] if raw in BOOLEANS else _unquoted(raw)
    return raw


def _unquoted(raw: Any) -> Any:
    return raw[1:] if isinstance(raw, str) and raw.startswith("'") else raw


def _integer(raw: Any) -> int | None:
    return None if raw == "" else int(raw)


def _boolean(raw: Any) -> bool | None:
    return None if raw == "" else BOOLEANS[str(raw)]


def _number(raw: Any) -> float | None:
    return None if raw == "" else float(raw)


def _text(raw: Any) -> str | None:
    return None if raw == "" else str(_unquoted(raw))


def _moment(raw: Any) -> datetime | None:
    return None if raw == "" else datetime.fromisoformat(str(raw))
