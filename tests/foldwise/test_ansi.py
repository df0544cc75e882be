"""Terminal colour codes never reach a reader: stripped from text, schemas and CLI tables."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from rich.console import Console

from foldwise import cli_render
from foldwise.ansi import strip_ansi
from foldwise.schemas import FoldRun, Study, TrialSummary
from foldwise.spec import EXAMPLE_SPEC

# The header Ray puts on a remote traceback, as a fold run stored it before the fix.
RAY_HEADER = "\x1b[36mray::DDPWorker.run()\x1b[39m (pid=9247, ip=192.0.2.2)"
TRACEBACK = f'{RAY_HEADER}\n  File "tiny.py", line 44, in build_model\nValueError: refused'


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        (RAY_HEADER, "ray::DDPWorker.run() (pid=9247, ip=192.0.2.2)"),
        ("\x1b[1;31mred\x1b[0m and \x1b[38;5;208morange\x1b[m", "red and orange"),
        ("\x1b]8;;https://ray.io\x1b\\link\x1b]8;;\x1b\\", "link"),  # an OSC hyperlink
        ("\x1b]0;title\x07after", "after"),
        ("line\x1bM up\x1b[2K", "line up"),
        ("no codes: [36m stays, as do ü and tabs\t", "no codes: [36m stays, as do ü and tabs\t"),
    ],
)
def test_strip_ansi_drops_escape_sequences_only(text: str, plain: str) -> None:
    assert strip_ansi(text) == plain


def test_wire_models_strip_colour_codes_from_stored_text() -> None:
    """Rows stored before the executor stripped the codes read clean through the schemas."""
    fold = FoldRun(
        fold=0, attempt=0, status="failed", error="\x1b[31mboom\x1b[0m", traceback=TRACEBACK
    )
    assert fold.error == "boom"
    assert fold.traceback.startswith("ray::DDPWorker.run() (pid=9247")
    assert "\x1b" not in fold.model_dump_json()
    trial = TrialSummary(id=1, number=3, status="failed", params={}, error=f"fold 0: {RAY_HEADER}")
    assert trial.error == "fold 0: ray::DDPWorker.run() (pid=9247, ip=192.0.2.2)"
    study = _study(error="\x1b[33mstopped\x1b[0m", waiting="\x1b[2mwaiting\x1b[0m")
    assert (study.error, study.waiting) == ("stopped", "waiting")


def _study(**fields: object) -> Study:
    progress = dict.fromkeys(
        ("budget", "finished", "running", "pending", "completed", "failed", "pruned"), 0
    )
    return Study(
        id=1,
        name="s",
        status="failed",
        spec=EXAMPLE_SPEC,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        progress=progress,
        **fields,
    )


def test_cli_tables_show_no_escape_codes() -> None:
    """What the SDK parsed is clean, so the CLI's tables print no ``[36m`` litter."""
    trial = TrialSummary.model_validate(
        {"id": 1, "number": 3, "status": "failed", "params": {"lr": 0.1}, "error": TRACEBACK}
    )
    study = _study(error=f"trial 3 failed: {RAY_HEADER}")
    for renderable in (cli_render.trials_table([trial]), cli_render.study_details(study)):
        console = Console(width=200, record=True, file=io.StringIO(), force_terminal=True)
        console.print(renderable)
        text = console.export_text(styles=False)
        assert "ray::DDPWorker.run()" in text
        assert "[36m" not in text and "[39m" not in text
