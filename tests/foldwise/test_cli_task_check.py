"""``foldwise task check``, driven as a user types it: epochs printed, one-line failures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from foldwise import cli

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
EPOCH_LINE = re.compile(r"^epoch (\d+)  (.*)  \((\d+\.\d\d) s\)$")


def check(*args: str):
    return runner.invoke(cli.app, ["task", "check", *args])


def epoch_lines(output: str) -> list[tuple[int, dict[str, float]]]:
    """Each epoch's number and the metrics its line shows."""
    found = []
    for line in output.splitlines():
        match = EPOCH_LINE.match(line)
        if match:
            pairs = (pair.split("=") for pair in match.group(2).split("  "))
            found.append((int(match.group(1)), {name: float(value) for name, value in pairs}))
    return found


def assert_one_line_error(result, *fragments: str, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def test_a_built_in_task_trains_and_prints_each_epoch() -> None:
    result = check("digits_mlp", "--params", '{"lr": 0.05}', "--epochs", "2", "--seed", "1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("checking digits_mlp (the built-in loop around build_model): ")
    assert "fold 0/3, 1 rank on cpu, 2 epochs, batch 64, objective val_loss (minimize)" in lines[0]
    assert lines[0].endswith('params {"lr": 0.05}')
    epochs = epoch_lines(result.stdout)
    assert [number for number, _ in epochs] == [1, 2]
    assert all(set(m) == {"train_loss", "val_loss", "val_accuracy", "lr"} for _, m in epochs)
    best = min(m["val_loss"] for _, m in epochs)
    best_epoch = next(n for n, m in epochs if m["val_loss"] == best)
    assert re.fullmatch(
        rf"ok: 2 epochs; val_loss best {best:.4f} at epoch {best_epoch} \(minimize\); "
        r"\d+\.\d\d s per epoch",
        lines[-1],
    )
    assert result.stderr == ""


def test_an_own_loop_prints_the_metrics_it_reports() -> None:
    result = check(
        "tests.user_tasks.own_loop",
        *("--epochs", "2", "--folds", "4", "--fold", "3"),
        *("--metric", "val_accuracy", "--direction", "maximize"),
    )
    assert result.exit_code == 0, result.output
    assert "(its own train_fold): fold 3/4" in result.stdout
    epochs = epoch_lines(result.stdout)
    assert [n for n, _ in epochs] == [1, 2]
    assert list(epochs[0][1]) == ["val_loss", "val_accuracy", "train_noise", "train_loss"]
    best = max(m["val_accuracy"] for _, m in epochs)
    assert f"val_accuracy best {best:.4f} at epoch" in result.stdout
    assert "(maximize)" in result.stdout.splitlines()[-1]


def test_a_task_that_cannot_import_is_one_line() -> None:
    result = check("no_such_package.tasks")
    assert_one_line_error(result, "task 'no_such_package.tasks': cannot import")
    assert result.stdout == ""


def test_an_error_in_build_model_is_one_line_naming_it() -> None:
    result = check("tests.user_tasks.tiny", "--params", '{"mode": "raise"}', "--epochs", "1")
    line = assert_one_line_error(
        result, "failed before its first report: ValueError: tiny task refuses mode=raise"
    )
    assert "(tests/user_tasks/tiny.py:" in line and line.endswith(", in build_model)")
    assert epoch_lines(result.stdout) == []


def test_a_task_that_never_reports_is_one_line() -> None:
    result = check("tests.user_tasks.own_loop", "--params", '{"mode": "silent"}')
    assert_one_line_error(result, "train_fold returned without reporting an epoch")


def test_a_declared_metric_never_reported_is_one_line_after_the_epochs() -> None:
    result = check("tests.user_tasks.declares_more", "--epochs", "2")
    assert_one_line_error(
        result, "declares val_f1 but never reported it in 2 epochs (it reported val_loss)"
    )
    assert [n for n, _ in epoch_lines(result.stdout)] == [1, 2]  # the epochs were shown


def test_a_metric_the_task_does_not_report_fails_before_training() -> None:
    result = check("tests.user_tasks.declares_more", "--metric", "val_auc")
    assert_one_line_error(result, "reports val_loss, val_f1, not 'val_auc'")
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--params", "{lr: 1}"], "not JSON"),
        (["--params", "[1, 2]"], "a JSON object is needed"),
        (["--options", '"fast"'], "a JSON object is needed"),
        (["--workers", "0"], "--workers"),
        (["--device", "tpu"], "--device"),
    ],
)
def test_bad_option_values_are_usage_errors(args: list[str], fragment: str) -> None:
    result = check("digits_mlp", *args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert fragment in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_one_line() -> None:
    assert_one_line_error(check("digits_mlp", "--device", "cuda"), "torch sees no CUDA device")


def test_the_cli_still_imports_without_torch_or_the_trainers() -> None:
    code = "import sys, foldwise.cli; print(sorted({'torch', 'trainers'} & set(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow  # spawns two interpreters that import torch
def test_two_workers_train_as_spawned_gloo_ranks() -> None:
    result = check("digits_mlp", "--workers", "2", "--epochs", "2", "--params", '{"lr": 0.05}')
    assert result.exit_code == 0, result.output
    assert "fold 0/3, 2 ranks on cpu, 2 epochs" in result.stdout
    epochs = epoch_lines(result.stdout)
    assert [n for n, _ in epochs] == [1, 2]
    assert epochs[-1][1]["lr"] == pytest.approx(0.1)  # the rate scaled by the two ranks
    assert result.stdout.splitlines()[-1].startswith("ok: 2 epochs; val_loss best ")


class _AugmentsValidationToo:
    """The own-loop task's data, read with augmentation for validation too (no
    load_eval_data): a check trains it, and says so."""

    metrics = ["val_loss", "val_accuracy", "train_noise", "train_loss"]

    def load_data(self):
        from tests.user_tasks.own_loop import Points

        return Points(augment=True)

    def train_fold(self, ctx) -> None:
        from tests.user_tasks.own_loop import train_fold

        train_fold(ctx)


def test_a_dataset_that_augments_validation_too_is_noted() -> None:
    result = check(f"{__name__}:_AugmentsValidationToo", "--epochs", "1")
    assert result.exit_code == 0, result.output
    note = result.stdout.splitlines()[1]
    assert note.startswith("note: load_data's Dataset reads sample 0 differently each time")
    assert "has no load_eval_data, so the validation folds are read with them too" in note
    clean = check("tests.user_tasks.own_loop", "--epochs", "1")
    assert clean.exit_code == 0 and "note:" not in clean.stdout
