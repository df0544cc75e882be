"""The spec's racing across folds and pruning inside a fold: when a trial, or one of its fold
runs, is stopped as clearly worse than the others (docs/racing.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from foldwise.space import StrictModel


class Racing(StrictModel):
    """Racing across folds: a trial's folds run in waves, and once it is clearly worse than the
    incumbent on the same folds its remaining folds are cancelled (the trial is ``pruned``)."""

    rule: Literal["off", "forgiving", "ttest", "posterior", "model"] = Field(
        "forgiving",
        description="forgiving (the default): prune when the trial is worse than the incumbent "
        "on the same folds by more than the incumbent's worst fold lies from its mean; "
        "ttest: prune when a one-sided paired t-test on those folds says it is worse at "
        "level `alpha`; posterior: prune when the probability that the trial's mean over all "
        "its folds beats the incumbent's is below `alpha` (the paired fold differences as "
        "normal draws, the folds to come from their posterior predictive); model: the same "
        "probability from the study's fold model (each fold's offset and the trial-by-fold "
        "noise learnt from all its trials, so one fold can be judged; one objective only); "
        "off: every fold runs",
    )
    min_folds: int | None = Field(
        None,
        ge=1,
        le=99,
        description="Folds every trial finishes before it can be pruned, below its folds: "
        "by default 1 (forgiving, model) or 2 (ttest, posterior)",
    )
    stepwise: bool | None = Field(
        None,
        description="Once past its first min_folds, a trial behind the incumbent (below even "
        "odds to beat it by the model rule; worse on the folds both ran by the others; with "
        "no incumbent yet, worse than another trial in flight on the folds both ran) runs "
        "one more fold at a time, so that racing can stop it after each, and the slots it "
        "would have taken go to other trials; off: it runs all its other folds at once. By "
        "default on with the model rule, off with the others; one objective only",
    )
    alpha: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="ttest: the p-value below which a trial is pruned; posterior, model: the "
        "probability of beating the incumbent below which it is",
    )


class Pruning(StrictModel):
    """Pruning inside a fold: stop a fold run whose learning curve is clearly worse than other
    trials' runs of the same fold at the same epoch; its trial is then ``pruned``."""

    rule: Literal["off", "median", "asha", "curve"] = Field(
        "off",
        description="median: prune when the run's best value so far is worse than the median "
        "of the other runs at that epoch; asha: at rungs warmup_epochs x eta^k, only the top "
        "1/eta of the runs that reached the rung go on; curve: prune when even the most "
        "optimistic of a few parametric curves fitted to the run's epochs (from its 4th on) "
        "ends worse than the best finished run of the fold",
    )
    warmup_epochs: int = Field(
        2, ge=1, le=100_000, description="Epochs a fold run always trains before a decision"
    )
    min_runs: int = Field(
        4,
        ge=1,
        le=100_000,
        description="Other trials' runs of the same fold needed before any run is pruned",
    )
    eta: int = Field(3, ge=2, le=100, description="asha: the reduction factor between rungs")
