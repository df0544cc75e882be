"""Maximisation of an acquisition function over a mixed, conditional space.

The encoded space mixes one-hot blocks, rounded integers and parameters that switch on and
off, so the search starts from scored candidates: uniform points, perturbations of the best
observed configurations, and rounds of ever smaller perturbations of the best candidates so
far. When the acquisition has a gradient, the leading candidates and the best observed
configurations are then polished by L-BFGS-B on their numeric columns, each set of starts
together (BoTorch's multi-start optimisation, with the discrete part of each start held).
Every candidate is decoded and encoded again, so it is scored exactly as the configuration it
stands for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import minimize

from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.sampling import config_key

Score = Callable[[np.ndarray], np.ndarray]
Gradient = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""Acquisition values at rows of X and their gradients (one row per point)."""

LOCAL_COPIES = 20
"""Perturbed copies of each anchor or leading candidate."""

MIN_GAP = 0.02
"""Least distance, in encoded units, between a suggestion and a running trial."""

REFINE_SCALES = (0.05, 0.015, 0.005, 0.0015)
"""Standard deviations (in unit coordinates) of the refinement rounds."""

POLISH_STARTS = 5
"""The leading candidates polished by L-BFGS-B."""
POLISH_ANCHORS = 2
"""The first anchors polished too, as Optuna's GP ascends from its best trial: the observed
configurations the model predicts best (feasible first; under EHVI, the front's in NSGA-II's
order, its extremes first). The candidates' leaders can all sit in one region while the next
refinement lies beside the incumbent (Hartmann6 with a constraint, its optimum on the edge)."""
POLISH_ITERATIONS = 100


def maximize_acquisition(
    score: Score,
    encoding: SpaceEncoding,
    rng: np.random.Generator,
    *,
    anchors: np.ndarray,
    seen: set[tuple],
    candidates: int,
    avoid: np.ndarray | None = None,
    top: int = 5,
    gradient: Gradient | None = None,
) -> dict[str, Any] | None:
    """The highest-scoring configuration whose key is not in ``seen`` and that lies at least
    ``MIN_GAP`` from every row of ``avoid`` (running trials); None if there is none.
    ``gradient`` (the score and its gradient) turns on the polishing of the leaders."""
    starts = [encoding.sample(candidates, rng)]
    if len(anchors):
        starts.append(perturb(encoding, np.repeat(anchors, LOCAL_COPIES, axis=0), 0.1, rng))
    configs, X = canonical(encoding, np.vstack(starts))
    scores = score(X)
    for scale in REFINE_SCALES:
        leaders = X[np.argsort(-scores, kind="stable")[:top]]
        local = perturb(encoding, np.repeat(leaders, LOCAL_COPIES, axis=0), scale, rng)
        more_configs, more_X = canonical(encoding, local)
        configs += more_configs
        X = np.vstack([X, more_X])
        scores = np.concatenate([scores, score(more_X)])
    numeric = [encoding.columns[name].start for name in encoding.scales]
    if gradient is not None and numeric:
        leaders = X[np.argsort(-scores, kind="stable")[:POLISH_STARTS]]
        # apart: in one problem a steep climb near an anchor sets the step of every start
        for starts in (leaders, anchors[:POLISH_ANCHORS]):
            if len(starts):
                more_configs, more_X = canonical(encoding, polish(gradient, starts, numeric))
                configs += more_configs
                X = np.vstack([X, more_X])
                scores = np.concatenate([scores, score(more_X)])
    crowded = too_close(X, avoid)
    for i in np.argsort(-scores, kind="stable"):
        if not crowded[i] and config_key(configs[i]) not in seen:
            return configs[i]
    return None


def polish(gradient: Gradient, starts: np.ndarray, numeric: list[int]) -> np.ndarray:
    """The starts after L-BFGS-B ascent of the acquisition on their ``numeric`` columns within
    [0, 1], all starts as one problem (their sum), so one optimiser run serves them all."""
    base, shape = starts.copy(), (len(starts), len(numeric))

    def negative(flat: np.ndarray) -> tuple[float, np.ndarray]:
        X = base.copy()
        X[:, numeric] = flat.reshape(shape)
        values, grads = gradient(X)
        return -float(values.sum()), -grads[:, numeric].ravel()

    result = minimize(
        negative,
        base[:, numeric].ravel(),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, 1.0)] * (shape[0] * shape[1]),
        options={"maxiter": POLISH_ITERATIONS},
    )
    polished = base.copy()
    polished[:, numeric] = np.clip(result.x.reshape(shape), 0.0, 1.0)
    return polished


def too_close(X: np.ndarray, avoid: np.ndarray | None) -> np.ndarray:
    """Whether each row of ``X`` lies within ``MIN_GAP`` of a row of ``avoid``.

    A lie shrinks the model's uncertainty at a running trial but not to zero, so on a boundary
    (where clipped candidates pile up) the best candidate could otherwise be a near-copy of it.
    """
    if avoid is None or not len(avoid):
        return np.zeros(len(X), dtype=bool)
    gaps = ((X[:, None, :] - avoid[None, :, :]) ** 2).sum(-1)
    return gaps.min(1) < MIN_GAP**2


def perturb(
    encoding: SpaceEncoding, X: np.ndarray, scale: float, rng: np.random.Generator
) -> np.ndarray:
    """Gaussian steps on numeric columns; each categorical block redrawn with prob. 2·scale."""
    X = X.copy()
    numeric = [encoding.columns[name].start for name in encoding.scales]
    steps = rng.normal(0.0, scale, size=(len(X), len(numeric)))
    X[:, numeric] = np.clip(X[:, numeric] + steps, 0.0, 1.0)
    for name in encoding.names:
        if name in encoding.scales:
            continue
        columns = encoding.columns[name]
        k = columns.stop - columns.start
        redraw = rng.random(len(X)) < min(0.5, 2.0 * scale)
        X[redraw, columns] = np.eye(k)[rng.integers(k, size=int(redraw.sum()))]
    return X


def canonical(encoding: SpaceEncoding, X: np.ndarray) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The configurations rows of ``X`` stand for, and their exact encodings."""
    configs = encoding.decode(X)
    return configs, encoding.encode(configs)
