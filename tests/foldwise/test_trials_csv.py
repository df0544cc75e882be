"""The trials CSV: its columns, cells a spreadsheet will not run, and reading it back typed."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import TypeAdapter

from foldwise.space import Param
from foldwise.trials_csv import (
    TrialRecord,
    cell,
    columns,
    csv_header,
    csv_rows,
    read_trials_csv,
)


def _space(doc: dict) -> dict[str, Param]:
    return TypeAdapter(dict[str, Param]).validate_python(doc)


SPACE = _space(
    {
        "lr": {"type": "float", "low": 1e-4, "high": 1.0},
        "depth": {"type": "int", "low": 1, "high": 3},
        "act": {"type": "categorical", "choices": ["relu", "=1+1", "'quoted", 2, 0.5, True]},
    }
)
START = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


def _records() -> list[TrialRecord]:
    return [
        TrialRecord(
            number=0,
            status="completed",
            params={"lr": 0.01, "depth": 2, "act": "=1+1"},
            value=-0.25,
            std_error=0.01,
            value_folds=3,
            fold_values={0: -0.2, 1: -0.3, 2: -0.25},
            started_at=START,
            finished_at=START + timedelta(seconds=65),
        ),
        TrialRecord(
            number=1,
            status="failed",
            params={"lr": 0.5, "depth": 1, "act": True, "extra": "@SUM(A1)"},
            fold_values={1: 0.75},
            started_at=START,
            error='-2+3 "cmd" | whatever\nsecond line',
        ),
        TrialRecord(
            number=2,
            status="pruned",
            params={"lr": 0.1, "act": 2},
            value=0.5,
            value_folds=1,
            fold_values={0: 0.5},
            pruned_reason="+worse than the incumbent",
        ),
    ]


def _text(records: list[TrialRecord], folds: int = 3, names: list[str] | None = None) -> str:
    names = [*SPACE, "extra"] if names is None else names
    return csv_header(names, folds) + csv_rows(records, names, folds)


def test_columns_put_params_in_the_order_given_then_each_fold() -> None:
    header = next(csv.reader(io.StringIO(_text(_records()))))
    assert header == [
        *("number", "status", "value", "std_error", "value_folds"),
        *("params_lr", "params_depth", "params_act", "params_extra"),
        *("fold_0", "fold_1", "fold_2"),
        *("started_at", "finished_at", "duration_s", "error", "pruned_reason"),
    ]
    assert columns([], 2) == [
        *("number", "status", "value", "std_error", "value_folds", "fold_0", "fold_1"),
        *("started_at", "finished_at", "duration_s", "error", "pruned_reason"),
    ]


def test_text_a_spreadsheet_would_run_is_escaped_and_numbers_stay_bare() -> None:
    rows = list(csv.reader(io.StringIO(_text(_records()))))
    header, first, second, third = rows
    row = dict(zip(header, first, strict=True))
    assert row["params_act"] == "'=1+1" and row["value"] == "-0.25" and row["fold_1"] == "-0.3"
    assert row["duration_s"] == "65.0" and row["started_at"] == "2026-11-01T10:00:00+00:00"
    row = dict(zip(header, second, strict=True))
    assert row["error"] == '\'-2+3 "cmd" | whatever\nsecond line'
    assert row["params_extra"] == "'@SUM(A1)" and row["params_act"] == "true"
    assert row["fold_0"] == "" and row["fold_1"] == "0.75" and row["duration_s"] == ""
    assert dict(zip(header, third, strict=True))["pruned_reason"] == "'+worse than the incumbent"
    # Every text cell is quoted and every bare one a number: nothing else is bare.
    raw = _text(_records())
    bare = list(csv.reader(io.StringIO(raw), quoting=csv.QUOTE_NONNUMERIC))
    assert all(isinstance(value, str | float) for line in bare for value in line)
    assert [line[2] for line in bare[1:]] == [-0.25, "", 0.5]


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("=HYPERLINK()", "'=HYPERLINK()"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@x", "'@x"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("'x", "''x"),
        ("x=1", "x=1"),
        (-1, -1),
        (-0.5, -0.5),
        (None, ""),
        (False, "false"),
        (True, "true"),
        ("true", "'true"),
        ("false", "'false"),
        ("True", "True"),
        ("", "'"),
    ],
)
def test_cells(value, written) -> None:
    assert cell(value) == written


def test_reading_back_gives_each_column_its_type() -> None:
    rows, header = read_trials_csv(_text(_records()), SPACE)
    assert header[:5] == ["number", "status", "value", "std_error", "value_folds"]
    first, second, third = rows
    assert first["number"] == 0 and first["value_folds"] == 3 and first["value"] == -0.25
    assert first["params_act"] == "=1+1" and first["params_depth"] == 2
    assert type(first["params_depth"]) is int and type(first["params_lr"]) is float
    assert [first[f"fold_{k}"] for k in range(3)] == [-0.2, -0.3, -0.25]
    assert first["started_at"] == START and first["duration_s"] == 65.0
    assert first["error"] is None and first["pruned_reason"] is None
    assert second["error"] == '-2+3 "cmd" | whatever\nsecond line'
    assert second["params_act"] is True and second["params_extra"] == "@SUM(A1)"
    assert second["fold_0"] is None and second["finished_at"] is None
    assert third["params_act"] == 2 and type(third["params_act"]) is int
    assert third["params_depth"] is None and third["pruned_reason"].startswith("+worse")
    assert third["status"] == "pruned" and third["std_error"] is None


def test_a_choice_that_starts_with_a_quote_reads_back_as_itself() -> None:
    record = TrialRecord(number=0, status="completed", params={"act": "'quoted"})
    rows, _ = read_trials_csv(_text([record]), SPACE)
    assert rows[0]["params_act"] == "'quoted"


def test_the_empty_choice_reads_back_as_itself_not_as_absent() -> None:
    # both were an empty cell: the choice "" read back as a parameter the trial did not have
    space = _space({"act": {"type": "categorical", "choices": ["", "x"]}})
    records = [
        TrialRecord(number=0, status="completed", params={"act": ""}),
        TrialRecord(number=1, status="completed", params={}),
    ]
    rows, _ = read_trials_csv(_text(records, 1, ["act"]), space)
    assert [row["params_act"] for row in rows] == ["", None]


def test_booleans_and_the_text_true_read_back_as_themselves() -> None:
    choices = ["true", True, "false", False, 1, "1"]
    space = _space({"flag": {"type": "categorical", "choices": choices}})
    values = ["true", True, "false", False, 1, "1"]
    records = [
        TrialRecord(number=n, status="completed", params={"flag": v, "other": v})
        for n, v in enumerate(values)
    ]
    rows, _ = read_trials_csv(_text(records, 1, [*space, "other"]), space)
    for row, value in zip(rows, values, strict=True):
        for column in ("params_flag", "params_other"):  # in the space, and outside it
            if column == "params_other" and type(value) is int:
                value = float(value)  # nothing says an unknown parameter's 1 is an int
            assert row[column] == value and type(row[column]) is type(value), (column, value)


def test_errors_and_reasons_lose_terminal_colour_codes() -> None:
    record = TrialRecord(
        number=0,
        status="failed",
        params={},
        error="\x1b[36mray::DDPWorker.run()\x1b[39m (pid=1)\n\x1b[1mValueError\x1b[0m: boom",
        pruned_reason="\x1b[31mworse\x1b[0m",
    )
    text = _text([record], 1, [])
    assert "\x1b" not in text
    [row] = list(csv.DictReader(io.StringIO(text)))
    assert row["error"] == "ray::DDPWorker.run() (pid=1)\nValueError: boom"
    assert row["pruned_reason"] == "worse"


def test_pages_follow_the_header_and_empty_exports_are_a_header() -> None:
    records = [TrialRecord(number=n, status="running", params={}) for n in range(1201)]
    pages = [csv_rows(records[i : i + 500], ["lr"], 2) for i in range(0, 1201, 500)]
    rows, _ = read_trials_csv(csv_header(["lr"], 2) + "".join(pages), SPACE)
    assert [r["number"] for r in rows] == list(range(1201))
    assert csv_rows([], ["lr"], 2) == ""
    assert read_trials_csv(csv_header(["lr"], 2), SPACE) == ([], columns(["lr"], 2))
    assert read_trials_csv("", SPACE) == ([], [])
