"""Every script in benchmarks/ runs as its docs give it, at a tiny size, so none rots unseen (one
broke when auth came on, another when make_folds changed). Nothing is timed here: a run passes
when it prints its tables. ``test_every_script_has_a_smoke_run`` keeps the list whole."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.browser import require_chromium

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(args: list[str], timeout: float) -> str:
    """Run ``python ARGS`` from the repository root as a user would; its output."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if not k.startswith("FOLDWISE_")},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


SMOKE_RUNS = {
    "fold_overhead": (
        ["--reps", "1", "--epochs", "1", "--num-cpus", "2"],
        "| world size | pool |",
    ),
    "trainer_throughput": (
        ["--samples", "512", "--epochs", "2", "--repeats", "1", "--reports", "10", "--ray"]
        + ["--warm-runs", "0", "--ranks", "2"],
        "| placement to first step, 2 ranks on Ray | seconds |",
    ),
    "loops_end_to_end": (
        ["--trials", "1", "--repeats", "1", "--warm-runs", "0", "--epochs", "1", "--folds", "2"],
        "| shapes: own loop (train_fold) |",
    ),
    "holdout_bias": (
        ["--seeds", "1", "--trials", "1", "--epochs", "2"],
        "| seed | CV-best val_loss ± s.e. | selection-corrected |",
    ),
    "racing": (
        [
            "--tasks",
            "digits",
            "--seeds",
            "1",
            "--trials",
            "3",
            "--modes",
            "off,racing,wilcoxon,one_epoch",
        ]
        + ["--optimizers", "random,optuna_tpe"],
        "| optuna_tpe | wilcoxon |",
    ),
    "api_load": (
        ["--backends", "sqlite", "--clients", "5", "--seconds", "2", "--quiet", "1"]
        + ["--warm-trials", "0"],
        "| now sqlite | study |",
    ),
    "optimizers": (
        ["--problems", "branin", "--methods", "gp,random", "--seeds", "2", "--budget", "8"]
        + ["--timing-points", "", "--noise-seeds", "0", "--results", "{tmp}/runs.jsonl"],
        "| gp |",
    ),
    "multi_objective": (
        [
            "--seeds",
            "2",
            "--budget",
            "12",
            "--checkpoint",
            "6",
            "--methods",
            "gp,evolution,random",
            "--results",
            "{tmp}/runs.jsonl",
        ],
        "| BraninCurrin | Branin+disc | Hartmann6+ball | DigitsCNN | all |",
    ),
    "digits_cnn_table": (["--limit", "1", "--out", "{tmp}/table.json"], "| architectures |"),
    "initial_designs": (
        ["--seeds", "1", "--first-seed", "3", "--budget", "12", "--optimizers", "foldwise"],
        "seeds 3 to 3; first 10 trials from:",
    ),
    "scheduler_scale": (
        ["--backends", "sqlite", "--slots", "10", "--epochs", "1", "--racing", "off"]
        + ["--seconds", "5"],
        "| now | sqlite | 10 | 1 | off |",
    ),
    "cluster": (
        ["--reps", "2", "--trials", "1", "--epochs", "1", "--folds", "2", "--node-loss", "1"],
        "| local Ray (4 CPUs) |",
    ),
}
"""Each script's tiny arguments and a line of the table it must print (``{tmp}``: a scratch
directory). dashboard_scale has a test of its own below."""


def test_every_script_has_a_smoke_run() -> None:
    scripts = {
        path.stem
        for path in (ROOT / "benchmarks").glob("*.py")
        if '__name__ == "__main__"' in path.read_text()
    }
    assert scripts == {*SMOKE_RUNS, "dashboard_scale"}


@pytest.mark.parametrize("script", sorted(SMOKE_RUNS))
def test_benchmark_script_prints_its_tables_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    args, expected = SMOKE_RUNS[script]
    out = _run(["-m", f"benchmarks.{script}", *(a.format(tmp=tmp_path) for a in args)], 600)
    assert expected in out, out[-4000:]


def test_dashboard_scale_signs_in_and_times_every_page() -> None:
    require_chromium()
    out = _run(
        ["-m", "benchmarks.dashboard_scale", "--trials", "30", "--folds", "2", "--epochs", "3"]
        + ["--repeats", "1"],
        timeout=300,
    )
    assert "30 trials × 2 folds × 3 epochs" in out, out
    assert "| `GET /studies/1/trials?sort=value&limit=50&offset=5000` |" in out, out
    for page in ("studies page", "study page", "trial page", "sort trial table by value"):
        assert f"| {page} |" in out, out


def test_a_constrained_cell_says_how_many_runs_found_nothing_feasible() -> None:
    """A run with no feasible point has infinite regret: the cell says so instead of failing
    (statistics.stdev raises on it) or printing a mean that hides it."""
    from benchmarks.multi_objective import score_cell

    assert score_cell([1.0, math.inf, math.inf]) == "inf (2 of 3 runs found none feasible)"
    assert score_cell([1.0, 3.0]) == "2 ± 1 (2) [2]"
    assert score_cell([2.5]) == "2.5 [1]"
    assert score_cell([]) == "–"


def test_multi_objective_runs_are_stored_and_resume(tmp_path: Path, capsys) -> None:
    """A second call runs only the seeds the store lacks, and ``--report-only`` runs none: the
    tables come from the stored runs (a stopped benchmark loses nothing it finished)."""
    from benchmarks.multi_objective import main

    results = tmp_path / "runs.jsonl"
    args = ["--budget", "4", "--checkpoint", "2", "--problems", "ZDT1,Branin+disc"]
    args += ["--methods", "random", "--results", str(results)]
    main(["--seeds", "1", *args])
    assert len(results.read_text().splitlines()) == 2
    first = capsys.readouterr().out
    main(["--seeds", "2", "--report-only", *args])
    assert len(results.read_text().splitlines()) == 2
    assert "[1]" in capsys.readouterr().out
    main(["--seeds", "2", *args])
    capsys.readouterr()
    assert len(results.read_text().splitlines()) == 4
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert {(r["problem"], r["seed"]) for r in lines} == {
        (p, s) for p in ("ZDT1:4", "Branin+disc:4") for s in (0, 1)
    }
    assert all(len(r["values"]) == 4 for r in lines)
    assert all(len(row) == 3 for r in lines if r["problem"] == "ZDT1:4" for row in r["values"])
    [zdt1_row, *_] = [line for line in first.splitlines() if line.startswith("| ZDT1 |")]
    assert zdt1_row.endswith("[1] |")
    other_budget = [a if a != "4" else "6" for a in args]  # stored runs of 4 do not count
    main(["--seeds", "2", "--report-only", *other_budget])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ZDT1 |")]
    assert rows and all(row.endswith("| – |") for row in rows)
    with pytest.raises(SystemExit):  # a mistyped method is refused, not run as another
        main(["--seeds", "1", *args, "--methods", "optuna-tpe"])
    capsys.readouterr()
    # --code reads the runs of another version of foldwise's optimizer code, and runs nothing
    stored = lines[0]["version"].split("|")[0]
    for code, shown in ((stored, "[2] |"), ("optimizers-000000000000", "| – |")):
        main(["--seeds", "2", "--report-only", "--code", code, *args])
        out = capsys.readouterr().out
        assert f"foldwise's runs: of {code}" in out
        assert ("no stored run" in out) == (code != stored)
        [row] = [line for line in out.splitlines() if line.startswith("| ZDT1 |")][:1]
        assert row.endswith(shown)
    with pytest.raises(SystemExit):
        main(["--seeds", "3", "--code", stored, *args])
    assert len(results.read_text().splitlines()) == 4


def test_multi_objective_studies_of_a_shorter_budget_are_run_as_such(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--studies-of N`` runs foldwise's methods as studies of N trials, stored apart, and a
    peer (which takes no budget) as its run of ``--budget``, scored by its first N
    evaluations; N above the budget is refused. The peer here stands in for Optuna (not
    installed by ``make test``): its k-th evaluation has regret 10 - k."""
    from benchmarks import multi_objective_peers as peers
    from benchmarks.multi_objective import main
    from benchmarks.multi_objective_problems import Problem

    def run_peer(name: str, problem: Problem, budget: int, seed: int) -> list:
        return [((problem.optimum + 10 - k,), -1.0) for k in range(budget)]

    monkeypatch.setattr(peers, "available", lambda name: True)
    monkeypatch.setattr(peers, "prepare", lambda name: None)
    monkeypatch.setattr(peers, "version", lambda name: "stand-in")
    monkeypatch.setattr(peers, "run_peer", run_peer)
    results = tmp_path / "runs.jsonl"
    args = ["--seeds", "1", "--budget", "4", "--problems", "Branin+disc"]
    args += ["--methods", "gp,optuna-nsga2", "--results", str(results)]
    main([*args, "--studies-of", "3"])
    runs = {r["method"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert runs["gp"]["problem"] == "Branin+disc:3" and len(runs["gp"]["values"]) == 3
    assert runs["optuna-nsga2"]["problem"] == "Branin+disc:4"
    assert len(runs["optuna-nsga2"]["values"]) == 4
    out = capsys.readouterr().out
    assert "## After 3 evaluations" in out and "## After 4" not in out
    [row] = [line for line in out.splitlines() if line.startswith("| Branin+disc |")]
    assert row.endswith("| 8 [1] |")  # the peer's best of its first 3, not of all 4 (7)
    with pytest.raises(SystemExit):
        main([*args, "--studies-of", "5"])


def test_the_digits_cnn_table_covers_its_space_and_ignores_absent_blocks() -> None:
    """Every configuration of the space names a row of the shipped table (two that differ only
    in a block they do not have name the same one), and the rows hold plausible values."""
    from benchmarks import digits_cnn_table as table
    from benchmarks.multi_objective_problems import problems
    from foldwise.optimizers.pareto import hypervolume

    rows = table.load_table()
    assert len(rows) == len(table.architectures()) == 672
    config = {"blocks": 1, "log2_channels_1": 3, "log2_channels_2": 5, "log2_channels_3": 4}
    config |= {"kernel": 5, "pool": "avg", "dense": 64}
    assert table.key(config) == table.key(config | {"log2_channels_2": 2}) == "8|k5|avg|d64"
    assert table.key(config) != table.key(config | {"blocks": 2})
    assert all(0 <= r["error"] < 100 and r["se"] >= 0 and r["params"] > 0 for r in rows.values())
    values, gap = problems()["DigitsCNN"].evaluate(config)
    assert values == [rows["8|k5|avg|d64"]["error"], rows["8|k5|avg|d64"]["params"] / 1000]
    assert gap == 0.0
    reference = np.array(problems()["DigitsCNN"].reference)
    points = np.array([[r["error"], r["params"] / 1000] for r in rows.values()])
    front = points[[not np.any(np.all(points <= p, 1) & np.any(points < p, 1)) for p in points]]
    assert len(front) >= 10 and np.all(front < reference)  # the reference cuts none of it
    assert hypervolume(points, reference) == pytest.approx(1298.7, abs=0.05)


def test_the_stored_runs_key_by_the_optimizers_code_not_their_docstrings() -> None:
    """Rewording a docstring or a comment keeps the stored runs; changing what runs does not."""
    from benchmarks.optimizer_results import code_of

    source = '"""Module."""\n\nSHARE = 0.25\n"""Attribute."""\n\n\ndef f(x):\n    """Doc."""\n    return x * SHARE  # why\n'  # noqa: E501
    reworded = '"""Another."""\n\nSHARE = 0.25\n\n\ndef f(x):\n    return x * SHARE\n'
    changed = '"""Module."""\n\nSHARE = 0.5\n"""Attribute."""\n\n\ndef f(x):\n    """Doc."""\n    return x * SHARE\n'  # noqa: E501
    assert code_of(source) == code_of(reworded)
    assert code_of(source) != code_of(changed)
    only_doc = 'def g():\n    """Nothing but a docstring."""\n'
    assert code_of(only_doc) == code_of("def g():\n    pass\n")


def test_optimizers_report_reads_the_runs_of_a_named_code(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--code`` prints foldwise's stored runs of another optimizer code and runs nothing."""
    from benchmarks.optimizers import main

    results = tmp_path / "runs.jsonl"
    args = ["optimizers.py", "--problems", "branin", "--methods", "random", "--budget", "4"]
    args += ["--timing-points", "", "--noise-seeds", "0", "--results", str(results)]
    monkeypatch.setattr("sys.argv", [*args, "--seeds", "1"])
    main()
    [line] = results.read_text().splitlines()
    current = json.loads(line)["version"].split("|")[0]
    results.write_text(line.replace(current, "optimizers-000000000001"))
    capsys.readouterr()
    for code, cells in (("optimizers-000000000001", 1), (None, 0)):
        named = ["--code", code] if code else []
        monkeypatch.setattr("sys.argv", [*args, "--seeds", "1", "--report-only", *named])
        main()
        out = capsys.readouterr().out
        [row] = [r for r in out.splitlines() if r.startswith("| random |")][:1]
        assert (row != "| random | - |") == bool(cells), row
    monkeypatch.setattr("sys.argv", [*args, "--seeds", "1", "--code", "optimizers-000000000001"])
    with pytest.raises(SystemExit):
        main()
    assert len(results.read_text().splitlines()) == 1
