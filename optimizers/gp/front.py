"""The GP's model of several objectives: a GP per objective, scored by log EHVI.

Each objective's losses are penalised for failures, warped and standardised on their own
(:mod:`optimizers.gp.output_warp`, with a warp that never saturates: the front spans each
objective's whole range), each with its trials' fold standard errors as noise, and get
their own hyperparameters. The front to improve is what the GPs predict at the usable
(feasible, not failed) completed trials, not their observed means, for the reason EI's
incumbent is a prediction (:mod:`optimizers.gp.optimizer`). The reference point
(:func:`reference_of`) depends on the number of objectives. With two it is the worst predicted
value of each objective over all those trials, dominated ones included, plus a tenth of their
range: farther out than BoTorch's rule (the front's own worst corner plus a tenth of its
range), so the ends of the front keep some worth, as they do against the fixed reference points
of benchmarks.
With three or four it is the front's own worst corner, without a margin: there the region a
far reference point adds behind the front's ends outweighs its interior, and EHVI spent its
trials on the ends (docs/optimizers.md, "Three objectives: ParEGO, then EHVI"). Running
trials are told to every GP as lies (under the believer lie they join the front too, so a
batch spreads along it). The constraints' model weighs the acquisition as it does for one
objective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from foldwise.optimizers.gp import ehvi
from foldwise.optimizers.gp.acquisition import Gradient, Score
from foldwise.optimizers.gp.feasibility import Feasibility
from foldwise.optimizers.gp.fit import condition, fit_model, keep_rows, penalize_failures
from foldwise.optimizers.gp.model import ExactGP, Hyper
from foldwise.optimizers.gp.optimizer import ANCHORS, GPOptimizer
from foldwise.optimizers.gp.output_warp import warp_losses
from foldwise.optimizers.pareto import non_dominated


def fit_front(gp: GPOptimizer, rng: np.random.Generator) -> FittedFront | None:
    """A GP per objective of ``gp``'s completed trials, the constraints' model, and the front
    the GPs predict at the usable trials; None when there is no front to improve (nothing
    feasible succeeded yet) or it needs too many boxes: the scalarised model serves then."""
    losses, errors = gp.loss_matrix(), gp.objective_errors()
    width = losses.shape[1]
    rows = keep_rows(-gp.ranking_fitness(), gp.max_points)
    X = gp.encoding.encode([gp.completed[i].params for i in rows])
    feasibility, feasible = gp._feasibility(X, rows)
    usable = feasible & ~np.isnan(losses[rows]).any(axis=1)
    observed = losses[rows][usable]
    # checked on the observed values before any objective is fitted: the front the GPs will
    # predict is (nearly) the same set of trials
    if not usable.any() or ehvi.decompose(observed, reference_of(observed)) is None:
        return None
    targets = [
        warp_losses(penalize_failures(losses[:, j]), errors[:, j], gp.warp, unbounded=True)
        for j in range(width)
    ]
    ys = [y[rows] for y, _ in targets]
    noises = [noise[rows] for _, noise in targets]
    hypers = [
        fit_model(X, y, noise, gp.restarts, rng, gp.columns, gp.prior)
        for y, noise in zip(ys, noises, strict=True)
    ]
    believed = [condition(h, X, y, noise) for h, y, noise in zip(hypers, ys, noises, strict=True)]
    predicted = np.column_stack([b.predict(X) for b in believed])
    front = predicted[usable]
    reference = reference_of(front)
    if ehvi.decompose(front, reference) is None:
        return None
    ranks = np.where(usable, -gp.ranking_fitness(rows), np.inf)
    anchors = X[np.argsort(ranks, kind="stable")[:ANCHORS]]
    return FittedFront(
        gp, hypers, X, ys, noises, believed, feasibility, predicted.min(axis=0), front,
        reference, anchors,
    )  # fmt: skip


def reference_of(points: np.ndarray) -> np.ndarray:
    """The reference point of the front among ``points`` (objective values, a row per usable
    trial, dominated ones included): with two objectives every point's worst value plus a
    tenth of their range, with more the worst corner of the non-dominated ones."""
    if points.shape[1] == 2:
        return ehvi.reference_point(points)
    return ehvi.reference_point(points[non_dominated(points)], margin=0.0)


@dataclass(frozen=True)
class FittedFront:
    """One suggestion's models of several objectives (:func:`fit_front`)."""

    optimizer: GPOptimizer
    hypers: list[Hyper]
    X: np.ndarray
    ys: list[np.ndarray]
    noises: list[np.ndarray]
    believed: list[ExactGP]
    feasibility: Feasibility | None
    floors: np.ndarray
    """Each objective's best predicted loss: no running trial is told a better one."""
    front: np.ndarray
    """The objectives the GPs predict at the usable (feasible, not failed) trials, dominated
    ones included (:func:`~optimizers.gp.ehvi.decompose` keeps the non-dominated ones strictly
    below the reference point: with three or more objectives, whose reference is the front's
    worst corner, a point worst in some objective adds no volume and is left out)."""
    reference: np.ndarray
    anchors: np.ndarray

    def acquisition(self, X_run: np.ndarray) -> tuple[Score, Gradient]:
        """Log EHVI (plus the log probability of feasibility) and its gradient, with the
        running trials at ``X_run`` told as lies to every objective's GP; under the believer
        lie (the default) they also join the front, so the next point looks for a different
        part of it (a constant lie is no point of the front: "min" would dominate all of it).
        Should the lies make the front need too many boxes, the front goes without them."""

        gp, models, lies = self.optimizer, [], []
        for hyper, y, noise, believed, floor in zip(
            self.hypers, self.ys, self.noises, self.believed, self.floors, strict=True
        ):
            told = gp._lies(believed, X_run, y, float(floor))
            lies.append(told)
            models.append(
                condition(
                    hyper,
                    np.vstack([self.X, X_run]),
                    np.concatenate([y, told]),
                    np.concatenate([noise, np.zeros(len(X_run))]),
                )
            )
        boxes = None
        if len(X_run) and gp.liar == "believer":
            boxes = ehvi.decompose(np.vstack([self.front, np.column_stack(lies)]), self.reference)
        if boxes is None:
            boxes = ehvi.decompose(self.front, self.reference)
        feasibility = self.feasibility or Feasibility(())

        def score(Z: np.ndarray) -> np.ndarray:
            predictions = [model.predict(Z, return_std=True) for model in models]
            means = np.column_stack([mean for mean, _ in predictions])
            stds = np.column_stack([std for _, std in predictions])
            return ehvi.log_ehvi(means, stds, boxes) + feasibility.log_probability(Z)

        def gradient(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            parts = [model.predict_gradient(Z) for model in models]
            value, slope = ehvi.log_ehvi_gradient(
                np.column_stack([p[0] for p in parts]),
                np.column_stack([p[1] for p in parts]),
                [p[2] for p in parts],
                [p[3] for p in parts],
                boxes,
            )
            log_p, p_slope = feasibility.log_probability_gradient(Z)
            return value + log_p, slope + p_slope

        return score, gradient
