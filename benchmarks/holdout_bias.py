"""The selection bias of a study's best CV value, against its hold-out score, in numbers.

Runs one study a seed through a live service (SQLite, a local Ray): the built-in digits MLP
with a quarter of the digits kept aside as test data (``trainer.options.test_fraction``), a
search space wide enough for the best of many trials to be lucky, and ``holdout: {score:
both}``. For each seed it prints the best trial's CV value (the mean validation loss over its
folds, ± its standard error) beside the same loss on the test data of the same fold models
(the mean of their own scores: the difference is the selection bias of the CV value), of their
ensemble, and of a model refit on all the training data, and the test accuracies; and the
selection-corrected estimate the service gives beside the CV value (``GET
/studies/{id}/insights/folds``: ``selection``), with the error of each estimate against the
fold models' test loss. Usage:

    .venv/bin/python benchmarks/holdout_bias.py [--seeds 5] [--trials 16] [--epochs 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_service import LiveService  # noqa: E402


def spec(seed: int, trials: int, optimizer: str, epochs: int = 6) -> dict[str, Any]:
    return {
        "name": f"holdout-bias-{seed}",
        "seed": seed,
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "space": {
            "lr": {"type": "float", "low": 1e-4, "high": 0.3, "log": True},
            "depth": {"type": "int", "low": 1, "high": 3},
            "width": {"type": "int", "low": 8, "high": 256, "log": True},
            "dropout": {"type": "float", "low": 0.0, "high": 0.5},
            "act": {"type": "categorical", "choices": ["relu", "tanh", "gelu"]},
        },
        "optimizer": {"name": optimizer},
        "budget": {"trials": trials},
        "parallel": {"trial_groups": 2, "folds": 3, "workers_per_fold": 1},
        "resources": {"cpus_per_worker": 0.5},
        "trainer": {
            "task": "digits_mlp",
            "epochs": epochs,
            "batch_size": 64,
            "options": {"test_fraction": 0.25},
        },
        "racing": {"rule": "off"},  # every trial's value rests on all its folds
        "holdout": {"score": "both"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=6, help="epochs per fold")
    parser.add_argument("--optimizer", default="random")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        service = LiveService(f"sqlite:///{tmp}/bias.db", Path(tmp) / "service.log")
        service.start()
        try:
            with service.sdk() as client:
                for seed in range(args.seeds):
                    document = spec(seed, args.trials, args.optimizer, args.epochs)
                    study = client.create_study(document)
                    study.wait(timeout=3600, poll=1)
                    holdout = study.wait_for_holdout(timeout=3600, poll=1)
                    objective = holdout.objective
                    assert objective is not None and holdout.ensemble and holdout.refit
                    assert holdout.folds
                    selection = client.fetch_top_folds(study.id, top=1).selection
                    assert selection is not None and selection.number == holdout.trial
                    rows.append(
                        (
                            seed,
                            objective.cv,
                            objective.cv_std_error,
                            holdout.folds["loss"],
                            holdout.ensemble["loss"],
                            holdout.refit["loss"],
                            holdout.ensemble["accuracy"],
                            holdout.refit["accuracy"],
                            selection.corrected,
                        )
                    )
                    print(f"  seed {seed}: {rows[-1]}", file=sys.stderr)
        finally:
            service.stop()
    print(
        f"digits_mlp, {args.trials} trials of 3 folds ({args.optimizer}), 6 epochs; 1,347 "
        "training digits, 450 kept aside as test data\n"
    )
    print(
        "| seed | CV-best val_loss ± s.e. | selection-corrected | test loss: its fold models "
        "| ensemble | refit | test accuracy: ensemble | refit |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for seed, cv, se, folds, ens, ref, ens_acc, ref_acc, corrected in rows:
        print(
            f"| {seed} | {cv:.4f} ± {se:.4f} | {corrected:.4f} | {folds:.4f} | {ens:.4f} | "
            f"{ref:.4f} | {ens_acc:.4f} | {ref_acc:.4f} |"
        )
    means = [statistics.fmean(column) for column in list(zip(*rows, strict=True))[1:]]
    print(
        f"| mean | {means[0]:.4f} | {means[7]:.4f} | {means[2]:.4f} | {means[3]:.4f} | "
        f"{means[4]:.4f} | {means[5]:.4f} | {means[6]:.4f} |"
    )
    print("\nerror of each estimate of the fold models' test loss (estimate minus test loss):")
    for name, at in (("CV-best value", 1), ("selection-corrected", 8)):
        errors = [row[at] - row[3] for row in rows]
        spread = statistics.stdev(errors) / len(errors) ** 0.5 if len(errors) > 1 else float("nan")
        mean_abs = statistics.fmean(abs(e) for e in errors)
        print(
            f"- {name}: mean {statistics.fmean(errors):+.4f} ± {spread:.4f} (s.e.), mean "
            f"absolute {mean_abs:.4f}, below the test loss in {sum(e < 0 for e in errors)} "
            f"of {len(errors)} seeds"
        )


if __name__ == "__main__":
    main()
