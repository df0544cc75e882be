"""What each way of training a fold costs end to end: the example studies through a live service.

The own-loop example (examples/shapes.yaml) beside the built-in loop on the same data and
network, and the Lightning example (examples/lightning.yaml) beside the built-in digits MLP on
the same data, each a study of 2-rank DDP folds with racing on. Each study runs ``--warm-runs``
times (default once) to warm its workers (a pool per task code), then ``--repeats`` times; the
table gives the median wall time from submit to the study's end, the fold runs and epochs it
trained, and the wall seconds per epoch trained. Usage:

    .venv/bin/python benchmarks/loops_end_to_end.py [--trials 6] [--repeats 2] [--warm-runs 1]
        [--epochs 4] [--folds 3]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_service import LiveService  # noqa: E402

FOLDS = 3
"""Folds per trial, as the examples have them."""


def _example(
    file: str, trials: int, epochs: int | None, folds: int = FOLDS, **changes: Any
) -> dict[str, Any]:
    spec = copy.deepcopy(yaml.safe_load((ROOT / "examples" / file).read_text()))
    spec["budget"]["trials"] = trials
    spec["parallel"]["folds"] = folds
    if epochs is not None:
        spec["trainer"]["epochs"] = epochs
    for section, values in changes.items():
        spec[section] = {**spec.get(section, {}), **values} if isinstance(values, dict) else values
    return spec


def studies(
    trials: int, epochs: int | None = None, folds: int = FOLDS
) -> list[tuple[str, dict[str, Any]]]:
    """The four studies, each of ``trials`` trials of ``folds`` folds and the example's epochs
    (or ``epochs``)."""
    accuracy = {"metric": "val_accuracy", "direction": "maximize"}
    shapes_builtin = _example(
        "shapes.yaml",
        trials,
        epochs,
        folds,
        objective=accuracy,
        trainer={"task": "examples.tasks.shapes:BuiltInLoop", "options": {"images": 600}},
    )
    shapes_builtin["trainer"]["num_workers"] = 1
    return [
        ("shapes: own loop (train_fold)", _example("shapes.yaml", trials, epochs, folds)),
        ("shapes: built-in loop", shapes_builtin),
        ("digits: Lightning module", _example("lightning.yaml", trials, epochs, folds)),
        (
            "digits: built-in loop (digits_mlp)",
            _example(
                "lightning.yaml",
                trials,
                epochs,
                folds,
                objective=accuracy,
                trainer={"task": "digits_mlp"},
            ),
        ),
    ]


def run(service: LiveService, spec: dict[str, Any]) -> tuple[float, int, int]:
    """Seconds from submit to the end, fold runs and epochs trained."""
    started = time.monotonic()
    with service.sdk() as client:
        study = client.create_study(spec).wait(timeout=1800, poll=0.5)
        seconds = time.monotonic() - started
        trials = [study.trial(t.number) for t in study.trials()]
    if study.status.value != "completed":
        raise SystemExit(f"{spec['name']} ended {study.status}: {study.data.error}")
    runs = [f for t in trials for f in t.folds]
    epochs = sum(1 for f in runs for e in f.epochs if not e.restored)
    return seconds, len(runs), epochs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warm-runs", type=int, default=1, help="untimed runs first (0: cold)")
    parser.add_argument("--epochs", type=int, help="epochs per fold (default: the example's, 4)")
    parser.add_argument("--folds", type=int, default=FOLDS, help="folds per trial")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"FOLDWISE_TASK_MODULES": "examples"}
        service = LiveService(f"sqlite:///{tmp}/loops.db", Path(tmp) / "service.log", env=env)
        service.start()
        try:
            for label, spec in studies(args.trials, args.epochs, args.folds):
                for _ in range(args.warm_runs):  # warms this task's worker pool
                    run(service, spec)
                measured = [run(service, spec) for _ in range(args.repeats)]
                seconds = statistics.median(m[0] for m in measured)
                runs, epochs = measured[-1][1], measured[-1][2]
                rows.append((label, seconds, runs, epochs))
                print(f"  {label}: {[round(m[0], 1) for m in measured]} s", file=sys.stderr)
        finally:
            service.stop()
    workers = "warm workers" if args.warm_runs else "cold workers (no warm-up run)"
    print(f"{args.trials} trials, {args.folds} folds, 2 ranks per fold, racing on; {workers}\n")
    print("| study | wall s (median) | fold runs | epochs | s per epoch |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds, runs, epochs in rows:
        print(f"| {label} | {seconds:.1f} | {runs} | {epochs} | {seconds / epochs:.2f} |")


if __name__ == "__main__":
    main()
