"""Racing and pruning against full K-fold: compute saved, time to quality, final quality.

Runs real studies (the service's study runner and store on SQLite, a local Ray, real training)
with K = 5 on three cross-validation tasks (digits MLP, wine MLP, the NAS CNN on digits), for
each optimizer and seed, once per mode (racing off, racing on, pruning alone, ...), the modes
of one seed side by side. Prints one markdown table per task with, per optimizer and mode:
fold-epochs trained (and the ratio to full CV, paired by seed), wall time, the time and the
fold-epochs each run needed to reach the final best of the full-CV run of its seed, the final
best (every reported best is a completed trial: its value is a full-CV value), its paired
difference to full CV with a one-sided Wilcoxon p-value (is the mode worse?), the share of
trials pruned and the fold-slot utilisation.

The optimizers ``optuna_tpe`` and ``optuna_gp`` run Optuna over the same folds instead
(``benchmarks/racing_optuna.py``, after ``make bench-peers``), in the modes ``off`` and
``wilcoxon`` (its ``WilcoxonPruner``), each paired with its own full CV:

    .venv/bin/python -m benchmarks.racing --tasks digits --optimizers gp,optuna_tpe \\
        --modes off,racing,wilcoxon

The mode ``one_epoch`` (with the ``random`` optimizer only) is the one-epoch baseline: every
configuration of the random search trains one epoch on one fold, the best fifth every fold
(``benchmarks/racing_one_epoch.py``), paired with random search's full CV on the same
configurations.

    .venv/bin/python -m benchmarks.racing --seeds 10                      # the table in docs
    .venv/bin/python -m benchmarks.racing --tasks digits --seeds 3 --trials 8   # a smoke run
    .venv/bin/python -m benchmarks.racing --modes off,racing:ttest,pruning:asha:eta=2
    .venv/bin/python -m benchmarks.racing --save runs.json    # then --load runs.json: tables again
    .venv/bin/python -m benchmarks.racing --first-seed 10 --save more.json  # seeds 10 to 19
    .venv/bin/python -m benchmarks.racing --spec examples/digits.yaml --optimizers gp --seeds 3
    .venv/bin/python -m benchmarks.racing --tasks digits --pareto 2.5,120000 --seeds 5

``--pareto LOSS,PARAMS`` studies each task on two objectives, val_loss and the model's
parameter count (n_params), both minimised: racing is then by dominance, and "final best" is
minus the hypervolume of the study's front from that reference point (lower is better, so the
paired test reads the same), with no time-to-best columns; its modes default to off,racing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats
from sqlalchemy import func, select

from benchmarks.racing_one_epoch import ONE_EPOCH_MODE, run_one_epoch_study
from benchmarks.racing_optuna import OPTUNA_MODES, OPTUNA_OPTIMIZERS, run_optuna_study
from foldwise.optimizers.pareto import hypervolume
from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.db import studies as study_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.models import EpochMetricRow, FoldRunRow, TrialRow
from foldwise.service.db.schema import upgrade_database
from foldwise.service.executor import RayExecutor
from foldwise.service.scheduler.store import SchedulerStore
from foldwise.service.scheduler.study_runner import StudyRunner
from foldwise.spec import StudySpec
from foldwise.spec_text import parse_spec_text

MODES = {
    "off": {"racing": {"rule": "off"}, "pruning": {"rule": "off"}},
    "racing": {"racing": {"rule": "forgiving"}, "pruning": {"rule": "off"}},
    "pruning": {"racing": {"rule": "off"}, "pruning": {"rule": "median"}},
    "racing+pruning": {"racing": {"rule": "forgiving"}, "pruning": {"rule": "median"}},
}
"""Full K-fold, racing alone, pruning alone and both, each rule at its defaults; other modes
can be named on the command line (``parse_mode``)."""

TASKS: dict[str, dict[str, Any]] = {
    "digits": {
        "trainer": {"task": "digits_mlp", "epochs": 10, "batch_size": 64},
        "early_stopping": {"patience": 3},
        "space": {
            "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
            "depth": {"type": "int", "low": 1, "high": 3},
            "width_1": {"type": "int", "low": 8, "high": 256, "log": True},
            "width_2": {
                "type": "int",
                "low": 8,
                "high": 256,
                "log": True,
                "when": {"depth": {"gte": 2}},
            },
            "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
            "dropout": {"type": "float", "low": 0.0, "high": 0.5},
        },
    },
    "wine": {
        "trainer": {
            "task": "examples.tasks.wine_quality:classification",
            "epochs": 15,
            "batch_size": 16,
        },
        "early_stopping": {"patience": 4},
        "space": {
            "lr": {"type": "float", "low": 1e-4, "high": 0.5, "log": True},
            "depth": {"type": "int", "low": 1, "high": 3},
            "width": {"type": "int", "low": 4, "high": 128, "log": True},
            "dropout": {"type": "float", "low": 0.0, "high": 0.5},
            "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-1, "log": True},
        },
    },
    "nas_cnn": {
        "trainer": {"task": "nas_cnn", "epochs": 6, "batch_size": 64},
        "early_stopping": {"patience": 2},
        "space": {
            "lr": {"type": "float", "low": 3e-4, "high": 3e-2, "log": True},
            "blocks": {"type": "int", "low": 1, "high": 3},
            "channels_1": {"type": "int", "low": 4, "high": 32, "log": True},
            "channels_2": {
                "type": "int",
                "low": 4,
                "high": 32,
                "log": True,
                "when": {"blocks": {"gte": 2}},
            },
            "channels_3": {
                "type": "int",
                "low": 4,
                "high": 32,
                "log": True,
                "when": {"blocks": {"gte": 3}},
            },
            "kernel": {"type": "int", "low": 1, "high": 5},
            "pool": {"type": "categorical", "choices": ["max", "avg", "none"]},
            "dense": {"type": "categorical", "choices": [0, 32, 128]},
        },
    },
}


def parse_mode(name: str) -> dict[str, Any]:
    """A mode's spec sections from its name: ``off``, a name of ``MODES``, or sections joined
    by ``+``, each ``racing|pruning:RULE[:key=value...]`` (``racing:ttest:alpha=0.05``)."""
    if name in MODES:
        return MODES[name]
    sections: dict[str, Any] = {"racing": {"rule": "off"}, "pruning": {"rule": "off"}}
    for part in name.split("+"):
        section, _, rest = part.partition(":")
        if section not in ("racing", "pruning") or not rest:
            raise ValueError(f"a mode is off, {', '.join(MODES)} or racing|pruning:RULE[:k=v]")
        rule, *options = rest.split(":")
        values: dict[str, Any] = {"rule": rule}
        for option in options:
            key, _, value = option.partition("=")
            values[key] = json.loads(value)
        sections[section] = values
    return sections


def study_document(task: str, optimizer: str, seed: int, mode: str, args: Any) -> dict:
    """The study of ``task`` (or of the ``--spec`` document) for one optimizer, seed and mode."""
    if args.spec:
        document, _lines = parse_spec_text(Path(args.spec).read_text(), args.spec)
        document = {**document, "name": f"{task}-{optimizer}-{mode}-{seed}", "seed": seed}
        return {**document, "optimizer": {"name": optimizer, "seed": seed}, **parse_mode(mode)}
    base = TASKS[task]
    objectives: dict[str, Any] = {"objective": {"metric": "val_loss", "direction": "minimize"}}
    if args.pareto:
        objectives = {"objectives": [{"metric": m, "direction": "minimize"} for m in PARETO]}
    return {
        "name": f"{task}-{optimizer}-{mode}-{seed}",
        "seed": seed,
        **objectives,
        "space": base["space"],
        "optimizer": {"name": optimizer, "seed": seed},
        "budget": {"trials": args.trials},
        "parallel": {"trial_groups": args.trial_groups, "folds": 5, "workers_per_fold": 1},
        "resources": {"cpus_per_worker": args.cpus_per_worker},
        "trainer": {**base["trainer"], "checkpoint_every": 0},
        "early_stopping": base["early_stopping"],
        **parse_mode(mode),
    }


@dataclass
class Run:
    """What one study did, read back from its database rows."""

    task: str
    optimizer: str
    mode: str
    seed: int
    wall: float
    utilisation: float
    fold_epochs: int
    trials: int
    pruned: int
    best: float
    fold_runs: int = 0
    folds: int = 5
    completed: list[tuple[float, float]] = field(default_factory=list)
    """(seconds from the start, value) of each completed trial, in the order they finished."""
    epoch_ends: list[float] = field(default_factory=list)
    """Seconds from the start at which each trained epoch ended, sorted."""

    def reach(self, target: float) -> tuple[float, int] | None:
        """Seconds and fold-epochs until a completed trial at least as good as ``target``
        (to a millionth: the same fold trained in this process or on a Ray worker of one
        thread differs in the last float32 digits)."""
        for seconds, value in self.completed:
            if value <= target + 1e-6 * max(1.0, abs(target)):
                return seconds, sum(1 for end in self.epoch_ends if end <= seconds)
        return None


PARETO = ("val_loss", "n_params")


async def run_study(
    executor: RayExecutor,
    db: SessionRunner,
    document: dict,
    labels: tuple,
    reference: list[float] | None = None,
) -> Run:
    spec = StudySpec.model_validate(document)
    study_id = await db.write(lambda s: study_repo.create_study(s, spec).id)
    store = SchedulerStore(db)
    runner = StudyRunner(study_id, store, executor, poll_seconds=0.2)
    started = time.time()
    await runner.run()
    wall = time.time() - started
    await store.reports.close()  # the last epoch reports in, the batch task stopped
    trials, epochs, fold_runs = await db.read(lambda s: _rows(s, study_id))
    completed = sorted(
        (t.finished_at.timestamp() - started, t.value)
        for t in trials
        if t.status is TrialStatus.COMPLETED
    )
    values = [v for _t, v in completed]
    if reference is not None:  # several objectives: the front's hypervolume, negated
        completed, values = [], [-_front_hypervolume(trials, reference)]
    return Run(
        *labels,
        wall=wall,
        utilisation=runner.fold_slots.meter.utilisation(),
        fold_epochs=len(epochs),
        trials=len(trials),
        pruned=sum(t.status is TrialStatus.PRUNED for t in trials),
        best=min(values) if values else math.nan,
        fold_runs=fold_runs,
        folds=spec.parallel.folds,
        completed=completed,
        epoch_ends=sorted(end - started for end in epochs),
    )


def _front_hypervolume(trials: list[TrialRow], reference: list[float]) -> float:
    """Hypervolume, from ``reference``, of the completed feasible trials' objective values."""
    points = [
        [v[0] for v in t.objective_values]
        for t in trials
        if t.status is TrialStatus.COMPLETED and t.objective_values and t.feasible is not False
    ]
    return hypervolume(np.array(points), np.array(reference)) if points else 0.0


def _rows(session: Any, study_id: int) -> tuple[list[TrialRow], list[float], int]:
    trials = session.scalars(select(TrialRow).where(TrialRow.study_id == study_id)).all()
    runs = (
        select(func.count())
        .select_from(FoldRunRow)
        .join(TrialRow, TrialRow.id == FoldRunRow.trial_id)
        .where(TrialRow.study_id == study_id)
    )
    query = (
        select(EpochMetricRow.metrics)
        .join(FoldRunRow, FoldRunRow.id == EpochMetricRow.fold_run_id)
        .join(TrialRow, TrialRow.id == FoldRunRow.trial_id)
        .where(TrialRow.study_id == study_id, FoldRunRow.status != FoldStatus.LOST)
    )
    ends = [m["epoch_start"] + m["epoch_seconds"] for m in session.scalars(query)]
    fold_runs = session.scalar(runs) or 0
    session.expunge_all()
    return list(trials), ends, fold_runs


async def run_all(args: argparse.Namespace) -> list[Run]:
    executor = RayExecutor(num_cpus=args.num_cpus, max_idle_groups=8)
    await executor.start()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'racing.db'}"
        upgrade_database(url)
        db = SessionRunner(url, 4)
        try:
            for task in args.tasks:
                await _warm_up(executor, db, task, args)
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    for optimizer in args.optimizers:
                        for mode in _modes_of(optimizer, args.modes):  # side by side
                            if mode == ONE_EPOCH_MODE:
                                document = study_document(task, "random", seed, "off", args)
                                spec = StudySpec.model_validate(document)
                                fields = run_one_epoch_study(spec, seed)
                                run = Run(task, optimizer, mode, seed, **fields)
                            elif optimizer in OPTUNA_OPTIMIZERS:
                                document = study_document(task, "random", seed, "off", args)
                                spec = StudySpec.model_validate(document)
                                fields = run_optuna_study(spec, optimizer, mode, seed)
                                run = Run(task, optimizer, mode, seed, **fields)
                            else:
                                document = study_document(task, optimizer, seed, mode, args)
                                run = await run_study(
                                    executor,
                                    db,
                                    document,
                                    (task, optimizer, mode, seed),
                                    args.pareto,
                                )
                            runs.append(run)
                            if args.save:  # after every run: a long benchmark can be cut short
                                Path(args.save).write_text(json.dumps([asdict(r) for r in runs]))
                            print(
                                f"  {task} {optimizer} {mode} seed {seed}: best {run.best:.4f}, "
                                f"{run.fold_epochs} fold-epochs, {run.wall:.0f} s, "
                                f"{run.pruned}/{run.trials} pruned",
                                file=sys.stderr,
                            )
        finally:
            db.engine.dispose()
            await executor.shutdown()
    return runs


def _modes_of(optimizer: str, modes: list[str]) -> list[str]:
    """The modes an optimizer runs: Optuna's only its own (off, wilcoxon), foldwise's the
    others."""
    if optimizer in OPTUNA_OPTIMIZERS:
        return [mode for mode in modes if mode in OPTUNA_MODES]
    own = [mode for mode in modes if mode not in OPTUNA_MODES or mode == "off"]
    return [mode for mode in own if mode != ONE_EPOCH_MODE or optimizer == "random"]


async def _warm_up(
    executor: RayExecutor, db: SessionRunner, task: str, args: argparse.Namespace
) -> None:
    """A short study first, so every run finds warm workers with the task's data loaded."""
    document = study_document(task, "random", 0, "off", args)
    document["budget"] = {"trials": args.trial_groups}
    document["trainer"] = {**document["trainer"], "epochs": 1}
    await run_study(executor, db, document, (task, "random", "warm-up", 0))


@dataclass
class Row:
    optimizer: str
    mode: str
    cells: list[str]


def summarise(runs: list[Run], baseline: str = "off") -> dict[str, list[Row]]:
    """Per task, one row per optimizer and mode, paired by seed with the baseline's runs."""
    tables: dict[str, list[Row]] = {}
    keys = sorted({(r.task, r.optimizer) for r in runs}, key=lambda k: (k[0], k[1]))
    for task, optimizer in keys:
        group = [r for r in runs if (r.task, r.optimizer) == (task, optimizer)]
        base = {r.seed: r for r in group if r.mode == baseline}
        for mode in dict.fromkeys(r.mode for r in group):
            mine = [r for r in group if r.mode == mode and r.seed in base]
            if mine:
                tables.setdefault(task, []).append(Row(optimizer, mode, _cells(mine, base)))
    return tables


def _cells(mine: list[Run], base: dict[int, Run]) -> list[str]:
    pairs = [(r, base[r.seed]) for r in mine]
    compute = [b.fold_epochs / r.fold_epochs for r, b in pairs]
    wall = [b.wall / r.wall for r, b in pairs]
    reached = [(r.reach(b.best), b.reach(b.best)) for r, b in pairs]
    hits = [(m, o) for m, o in reached if m is not None and o is not None]
    time_ratio = [o[0] / m[0] for m, o in hits if m[0] > 0]
    epochs_ratio = [o[1] / m[1] for m, o in hits if m[1] > 0]
    gaps = [r.best - b.best for r, b in pairs]
    p_value = _worse_p_value(gaps)
    return [
        f"{statistics.fmean(r.fold_runs for r in mine):.0f}" if mine[0].fold_runs else "-",
        f"{statistics.fmean(r.fold_epochs for r in mine):.0f}",
        f"{_geomean(compute):.2f}x",
        f"{statistics.fmean(r.wall for r in mine):.0f} ({_geomean(wall):.2f}x)",
        f"{len(hits)}/{len(pairs)}",
        f"{_geomean(time_ratio):.2f}x" if time_ratio else "-",
        f"{_geomean(epochs_ratio):.2f}x" if epochs_ratio else "-",
        _mean_se([r.best for r in mine], 4),
        f"{_mean_se(gaps, 4)} (p {p_value:.2f})",
        f"{100 * sum(r.pruned for r in mine) / sum(r.trials for r in mine):.0f}%",
        _share(statistics.fmean(r.utilisation for r in mine)),
    ]


def _share(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.0f}%"


HEADER = [
    "optimizer",
    "mode",
    "fold runs",
    "fold-epochs",
    "compute saved",
    "wall s (speed-up)",
    "reached full-CV best",
    "time to it (speed-up)",
    "fold-epochs to it (saved)",
    "final best",
    "best - full CV (p worse)",
    "pruned",
    "slots busy",
]


def print_tables(tables: dict[str, list[Row]], runs: list[Run], trial_groups: int) -> None:
    seeds = len({r.seed for r in runs})
    print(
        f"\nK = {max(r.folds for r in runs)}, {max(r.trials for r in runs)} trials, "
        f"{trial_groups} trial groups, "
        f"{seeds} seeds; ratios are geometric means over seeds of full CV / mode (paired by "
        "seed); p: one-sided Wilcoxon signed-rank test that the mode's final best is worse"
    )
    for task, rows in tables.items():
        print(f"\n### {task}\n")
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for row in rows:
            print("| " + " | ".join([row.optimizer, row.mode, *row.cells]) + " |")


def _worse_p_value(gaps: list[float]) -> float:
    """One-sided Wilcoxon signed-rank p-value that the gaps (mode - full CV) are positive."""
    if len(gaps) < 2 or all(abs(g) < 1e-12 for g in gaps):
        return 1.0
    return float(stats.wilcoxon(gaps, alternative="greater", zero_method="zsplit").pvalue)


def _geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.fmean(map(math.log, values))) if values else math.nan


def _mean_se(values: list[float], digits: int) -> str:
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.{digits}f}"
    se = statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS), type=lambda s: s.split(","))
    parser.add_argument("--optimizers", default="random,gp", type=lambda s: s.split(","))
    parser.add_argument("--modes", default=",".join(MODES), type=lambda s: s.split(","))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds run from here: extend an earlier --save"
    )
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--trial-groups", type=int, default=2)
    parser.add_argument("--cpus-per-worker", type=float, default=0.5)
    parser.add_argument("--num-cpus", type=float, default=2.0, help="the local Ray's CPUs")
    parser.add_argument(
        "--spec", help="run this study document (e.g. examples/digits.yaml) instead of the tasks"
    )
    parser.add_argument(
        "--pareto",
        type=lambda s: [float(v) for v in s.split(",")],
        help="LOSS,PARAMS: two objectives (val_loss, n_params) and the hypervolume's reference",
    )
    parser.add_argument("--save", help="write every run's record to this JSON file")
    parser.add_argument(
        "--load", nargs="+", help="print the tables of the runs saved with --save in these files"
    )
    args = parser.parse_args(argv)
    if args.spec:
        args.tasks = [Path(args.spec).stem]
    unknown = set() if args.spec else set(args.tasks) - set(TASKS)
    if unknown:
        parser.error(f"unknown tasks {sorted(unknown)}; choose from {sorted(TASKS)}")
    if args.pareto is not None:
        if len(args.pareto) != len(PARETO):
            parser.error("--pareto takes LOSS,PARAMS: the reference point of the two objectives")
        given = argv if argv is not None else sys.argv[1:]
        if not any(a.startswith("--modes") for a in given):
            args.modes = ["off", "racing"]  # pruning follows one curve: not for these studies
    for mode in args.modes:
        if (mode in OPTUNA_MODES and mode != "off") or mode == ONE_EPOCH_MODE:
            continue  # Optuna's own (racing_optuna), or the one-epoch baseline
        try:
            sections = parse_mode(mode)
        except ValueError as exc:
            parser.error(str(exc))
        if args.pareto is not None and sections["pruning"]["rule"] != "off":
            parser.error(f"mode {mode}: a study of several objectives cannot prune in a fold")
    if "off" not in args.modes and not (args.save or args.load):
        parser.error(
            "the modes must include off (every ratio is to full CV), or --save the runs to "
            "--load them with a file that has the off runs of the same seeds"
        )
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.load:
        runs = [Run(**row) for path in args.load for row in json.loads(Path(path).read_text())]
    else:
        runs = asyncio.run(run_all(args))
    print_tables(summarise(runs), runs, args.trial_groups)


if __name__ == "__main__":
    main()
