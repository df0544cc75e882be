"""benchmarks/racing.py: its modes, and the paired figures it prints."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from benchmarks.racing import (
    Run,
    _front_hypervolume,
    _modes_of,
    main,
    parse_args,
    parse_mode,
    study_document,
    summarise,
)
from foldwise.schemas import TrialStatus
from foldwise.service.db.models import TrialRow
from foldwise.spec import StudySpec


def run(mode: str, seed: int, fold_epochs: int, best: float, reached_at: float) -> Run:
    return Run(
        "digits",
        "gp",
        mode,
        seed,
        wall=100.0,
        utilisation=0.9,
        fold_epochs=fold_epochs,
        trials=10,
        pruned=5 if mode != "off" else 0,
        best=best,
        completed=[(reached_at / 2, best + 0.1), (reached_at, best)],
        epoch_ends=[float(t) for t in range(fold_epochs)],
    )


def test_modes_are_named_or_spelled_out_section_by_section() -> None:
    assert parse_mode("racing")["racing"] == {"rule": "forgiving"}
    assert parse_mode("off") == {"racing": {"rule": "off"}, "pruning": {"rule": "off"}}
    assert parse_mode("racing:ttest:alpha=0.05+pruning:asha:eta=2") == {
        "racing": {"rule": "ttest", "alpha": 0.05},
        "pruning": {"rule": "asha", "eta": 2},
    }
    with pytest.raises(ValueError, match="racing|pruning"):
        parse_mode("hyperband")
    with pytest.raises(SystemExit):
        parse_args(["--modes", "racing"])  # every ratio is to full CV: off must be there
    assert parse_args(["--modes", "pruning", "--save", "more.json"]).modes == ["pruning"]


def test_a_run_reaches_a_target_when_a_completed_trial_is_as_good() -> None:
    done = run("racing", 0, fold_epochs=100, best=0.2, reached_at=40.0)
    assert done.reach(0.25) == (40.0, 41)  # seconds, and fold-epochs ended by then
    assert done.reach(0.3) == (20.0, 21)
    assert done.reach(0.1) is None


def test_figures_are_paired_by_seed_with_full_cv() -> None:
    runs = [
        run("off", 0, 400, 0.20, 80.0),
        run("racing", 0, 200, 0.20, 40.0),
        run("off", 1, 300, 0.30, 60.0),
        run("racing", 1, 100, 0.25, 30.0),
    ]
    [off, racing] = summarise(runs)["digits"]
    assert (off.mode, racing.mode) == ("off", "racing")
    names = ["runs", "epochs", "saved", "wall", "reached", "time"]
    cells = dict(zip(names, racing.cells[: len(names)], strict=True))
    assert cells["epochs"] == "150" and cells["saved"] == "2.45x"  # sqrt(2 x 3)
    assert cells["reached"] == "2/2" and cells["time"] == "2.00x"
    assert racing.cells[-4] == "0.2250 ± 0.0250"
    assert racing.cells[-3].startswith("-0.0250 ± 0.0250 (p ")


def test_tables_are_printed_from_several_saved_files(tmp_path, capsys) -> None:
    first, more = tmp_path / "runs.json", tmp_path / "more.json"
    first.write_text(json.dumps([asdict(run("off", 0, 400, 0.2, 80.0))]))
    more.write_text(json.dumps([asdict(run("racing", 0, 200, 0.2, 40.0))]))
    main(["--load", str(first), str(more)])
    table = capsys.readouterr().out
    assert "| gp | racing | - | 200 | 2.00x |" in table


def test_pareto_studies_race_on_two_objectives_and_score_their_front() -> None:
    args = parse_args(["--tasks", "digits", "--pareto", "2.5,200000"])
    document = study_document("digits", "gp", 0, "racing", args)
    assert "objective" not in document
    assert [o["metric"] for o in document["objectives"]] == ["val_loss", "n_params"]
    assert StudySpec.model_validate(document).racing.rule == "forgiving"
    trials = [
        TrialRow(status=TrialStatus.COMPLETED, objective_values=[[1.5, 0.1], [100000, 0.0]]),
        TrialRow(status=TrialStatus.COMPLETED, objective_values=[[0.5, 0.1], [150000, 0.0]]),
        TrialRow(status=TrialStatus.PRUNED, objective_values=[[0.1, 0.1], [1000, 0.0]]),
        TrialRow(status=TrialStatus.COMPLETED, objective_values=[[3.0, 0.1], [10, 0.0]]),
    ]
    # (1.5, 1e5) and (0.5, 1.5e5) from (2.5, 2e5); pruned and out-of-bounds trials add nothing
    assert _front_hypervolume(trials, [2.5, 200000]) == pytest.approx(100000 + 1.0 * 50000)


def test_pareto_runs_race_but_never_prune_inside_a_fold() -> None:
    assert parse_args(["--pareto", "2.5,200000"]).modes == ["off", "racing"]
    with pytest.raises(SystemExit):
        parse_args(["--pareto", "2.5,200000", "--modes", "off,pruning"])
    with pytest.raises(SystemExit):
        parse_args(["--pareto", "2.5"])


def test_optuna_runs_its_own_modes_and_foldwise_its_own() -> None:
    modes = ["off", "racing", "wilcoxon", "pruning:curve"]
    assert _modes_of("optuna_tpe", modes) == ["off", "wilcoxon"]
    assert _modes_of("gp", modes) == ["off", "racing", "pruning:curve"]
    args = parse_args(["--optimizers", "gp,optuna_gp", "--modes", "off,wilcoxon"])
    assert args.modes == ["off", "wilcoxon"]  # Optuna's mode is not a foldwise spec's
    with pytest.raises(SystemExit):
        parse_args(["--modes", "off,wilcoxn"])


def test_the_one_epoch_baseline_runs_with_random_search_only() -> None:
    modes = ["off", "one_epoch", "racing"]
    assert _modes_of("random", modes) == modes
    assert _modes_of("gp", modes) == ["off", "racing"]
    assert _modes_of("optuna_tpe", modes) == ["off"]
    assert parse_args(["--modes", "off,one_epoch"]).modes == ["off", "one_epoch"]
