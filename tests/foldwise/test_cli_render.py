"""Number, time and table formatting of the CLI, on schema objects."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from foldwise import cli_render as render
from foldwise.schemas import Study, TrialSummary
from foldwise.spec import EXAMPLE_SPEC, StudySpec


def text_of(renderable) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "-"), (0.123456789, "0.1235"), (12345.678, "1.235e+04"), (3.0, "3"), (-0.5, "-0.5")],
)
def test_fmt_number_keeps_four_significant_digits(value, expected):
    assert render.fmt_number(value) == expected


def test_fmt_value_with_standard_error():
    assert render.fmt_value(0.0841234, 0.0031234) == "0.08412 ± 0.0031"
    assert render.fmt_value(0.0841234) == "0.08412"
    assert render.fmt_value(None, 0.1) == "-"


def test_fmt_params():
    params = {"lr": 0.000123456, "depth": 2, "act": "relu", "bn": True}
    assert render.fmt_params(params) == "lr=0.0001235 depth=2 act=relu bn=True"


@pytest.mark.parametrize(
    ("seconds", "precise", "expected"),
    [
        (12.34, True, "12.3s"),
        (185, True, "3m05s"),
        (3720, True, "1h02m"),
        (3 * 86_400 + 4 * 3600, True, "3d04h"),
        (185, False, "3m"),
        (42.9, False, "42s"),
    ],
)
def test_fmt_duration(seconds, precise, expected):
    assert render.fmt_duration(seconds, precise=precise) == expected


def test_fmt_time_is_relative_within_a_day_then_iso():
    now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert render.fmt_time(now - timedelta(seconds=2), now) == "just now"
    assert render.fmt_time(now - timedelta(minutes=5, seconds=3), now) == "5m ago"
    assert render.fmt_time(now - timedelta(hours=3), now) == "3h ago"
    assert render.fmt_time(datetime(2025, 1, 2, 3, 4), now) == "2025-01-02 03:04"  # naive = UTC
    assert render.fmt_time(None) == "-"


def test_fmt_span_mixes_naive_and_aware_times():
    start = datetime(2025, 1, 1, 10, 0)
    assert render.fmt_span(start, datetime(2025, 1, 1, 10, 1, 5, tzinfo=UTC)) == "1m05s"
    assert render.fmt_span(None, start) == "-"


def test_studies_table(make_study):
    studies = [
        Study.model_validate(make_study(1, "completed", 10)),
        Study.model_validate(make_study(2, "queued", 0)),
    ]
    text = text_of(render.studies_table(studies))
    header, *rows = [line for line in text.splitlines() if "│" in line or "┃" in line]
    for column in ("id", "name", "status", "trials", "best", "optimizer", "created"):
        assert column in header
    assert all(cell in rows[0] for cell in ("1", "digits-mlp", "completed", "10/10", "0.1235"))
    assert all(cell in rows[1] for cell in ("2", "queued", "0/10", " - ", "gp", "2025-01-01"))


def test_trials_table_shows_errors_and_a_caption(make_trial):
    trials = [
        TrialSummary.model_validate(make_trial(0)),
        TrialSummary.model_validate(
            make_trial(1, None, status="failed", error="ValueError: boom\n  at line 3")
        ),
    ]
    text = text_of(render.trials_table(trials, total=40))
    assert "0.1235 ± 0.0042" in text and "1m05s" in text
    assert "[ValueError: boom]" in text and "line 3" not in text
    assert "2 of 40 trials" in text
    assert "of 2 trials" not in text_of(render.trials_table(trials, total=2))


REASON = (
    "after 2 of 5 folds: 0.31 ± 0.02 vs incumbent (trial 3) 0.12 on the same folds, worse by "
    "0.19, more than the incumbent's worst fold lies from its mean (0.05; forgiving rule)"
)


def test_trials_table_shows_the_folds_and_the_reason_of_a_pruned_trial(make_trial):
    pruned = make_trial(
        3, 0.31, status="pruned", std_error=0.02, value_folds=2, pruned_reason=REASON
    )
    trials = [
        TrialSummary.model_validate(make_trial(0, value_folds=5)),
        TrialSummary.model_validate(pruned),
    ]
    text = text_of(render.trials_table(trials, folds=5))
    completed, rest = text.split("│ 3 │")
    assert "0.1235 ± 0.0042 " in completed and "folds" not in completed
    assert "pruned" in rest and "0.31 ± 0.02 (2/5 folds)" in rest
    assert "pruned: after 2 of 5 folds:" in rest and "forgiving rule)" in rest
    assert render.trial_value_text(trials[1]) == "0.31 ± 0.02 (2 folds)"  # K unknown


def test_status_counts_the_pruned_trials(make_study):
    data = make_study(finished=9)
    data["progress"].update(completed=5, failed=1, pruned=3)
    text = text_of(render.study_details(Study.model_validate(data)))
    assert "9/10 finished (5 completed, 1 failed, 3 pruned; 2 running, 0 pending)" in text


def test_status_says_what_a_warm_start_brought_in(make_study):
    assert "warm start" not in text_of(render.study_details(Study.model_validate(make_study())))
    warm = {"studies": [3, 7], "observations": 41, "skipped": 9}
    text = text_of(render.study_details(Study.model_validate(make_study(warm_start=warm))))
    assert "warm start  41 prior observations from studies 3, 7 (9 skipped)" in text
    warm = {"studies": [3], "observations": 5, "skipped": 0}
    text = text_of(render.study_details(Study.model_validate(make_study(warm_start=warm))))
    assert "5 prior observations from study 3 (0 skipped)" in text


def test_status_shows_the_code_a_user_task_runs(make_study):
    """The first 12 characters of the hash of the task package's copy; none for a built-in."""
    assert "code" not in text_of(render.study_details(Study.model_validate(make_study())))
    study = Study.model_validate(make_study(code_hash="1a2b3c4d5e6f" + "7" * 52))
    rows = [line.split() for line in text_of(render.study_details(study)).splitlines()]
    assert ["code", "1a2b3c4d5e6f"] in rows


def test_study_details_and_best_trial(make_study):
    study = Study.model_validate(make_study(error="worker lost"))
    text = text_of(render.study_details(study))
    for fragment in (
        "7 digits-mlp",
        "running",
        "val_loss (minimize)",
        "gp",
        "2 trials × 5 folds × 2 workers",
        "3/10 finished",
        "#2 0.1235 ± 0.0042",
        "worker lost",
    ):
        assert fragment in text
    best = text_of(render.best_trial_view(study, study.best_trial))
    assert best.splitlines()[0] == (
        "best trial #2 of study 7 digits-mlp: 0.1235 ± 0.0042  val_loss (minimize)"
    )
    assert "lr" in best and "0.01235" in best and "relu" in best


def test_wall_time_runs_from_submission_to_the_end(make_study):
    running = Study.model_validate(make_study())
    assert render.wall_time_text(running) is None
    ended = make_study(status="completed", finished_at="2025-01-01T10:02:05Z")
    ended = Study.model_validate(ended)
    assert render.wall_time_text(ended) == (
        "study 7 took 3m05s (wall time from its submission to its end)"
    )


def test_next_steps_are_runnable_lines_with_their_purpose_as_a_comment():
    lines = render.next_steps(7, ".venv/bin/foldwise --url http://127.0.0.1:8001")
    commands = [line.partition("  # ")[0].rstrip() for line in lines]
    assert commands == [
        ".venv/bin/foldwise --url http://127.0.0.1:8001 trials 7 --sort best",
        ".venv/bin/foldwise --url http://127.0.0.1:8001 status 7",
        ".venv/bin/foldwise --url http://127.0.0.1:8001 trials 7 --csv -o study-7-trials.csv",
    ]
    assert len({line.index("  # ") for line in lines}) == 1  # the comments line up


def test_geometry_text_counts_nouns():
    doc = {**EXAMPLE_SPEC, "parallel": {"trial_groups": 2, "folds": 3, "workers_per_fold": 1}}
    assert render.geometry_text(StudySpec.model_validate(doc)) == "2 trials × 3 folds × 1 worker"


def test_status_names_every_objective_and_constraint_and_points_at_the_front(make_study):
    data = make_study()
    data["spec"] = {
        **data["spec"],
        "objectives": [
            {"metric": "val_loss", "direction": "minimize"},
            {"metric": "n_params", "direction": "minimize"},
        ],
        "constraints": [{"metric": "n_params", "op": "<=", "value": 250000}],
        "racing": {"rule": "off"},
    }
    text = text_of(render.study_details(Study.model_validate(data)))
    assert "val_loss (minimize), n_params (minimize); n_params <= 250000" in text
    assert "its Pareto front: foldwise best 7" in text
