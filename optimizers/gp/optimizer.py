"""The GP optimizer: an initial design, then the model's best candidate by log expected
improvement, with pending trials told as lies and failures as a penalty (the package's
docstring says the method)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from skopt.acquisition import gaussian_ei
from threadpoolctl import threadpool_limits

from foldwise.optimizers.base import (
    BaseOptimizer,
    check_count,
    choice_option,
    float_option,
    int_option,
)
from foldwise.optimizers.encoding import SpaceEncoding
from foldwise.optimizers.gp.acquisition import Gradient, Score, maximize_acquisition
from foldwise.optimizers.gp.feasibility import Feasibility
from foldwise.optimizers.gp.fit import (
    FIT_POINTS,
    condition,
    fit_model,
    keep_rows,
    penalize_failures,
)
from foldwise.optimizers.gp.log_ei import log_ei, log_ei_gradient
from foldwise.optimizers.gp.model import PRIORS, Columns, ExactGP, Hyper
from foldwise.optimizers.gp.output_warp import WARPS, warp_losses
from foldwise.optimizers.gp.scalarize import scalarize, simplex_weights
from foldwise.optimizers.sampling import config_key, sample_unique, sobol_unique
from foldwise.space import CategoricalParam

if TYPE_CHECKING:
    from foldwise.optimizers.gp.front import FittedFront

MAX_POINTS = 5000
"""Largest ``max_points``: the fit costs the cube of the points it keeps."""
MAX_POINTS_DEFAULT = 300
"""The most completed trials the model conditions on unless told otherwise: a suggestion then
takes about 0.1 s however long the study, with 32 trials pending (``benchmarks/optimizers.py
--timing-points``); the regret this costs a long study is in docs/optimizers.md, "A bounded
model for long studies"."""
ANCHORS = 5
MAX_CANDIDATES = 5000
SCORING_WORK = 250_000
"""Random candidates × observations per acquisition search, while above ``candidates``."""
SCALARIZATION_SALT = 7
"""Seeds a suggestion's scalarisation weights apart from its other random draws."""
GUIDE_SALT = 11
"""Seeds the fit behind :meth:`GPOptimizer.score_candidates` apart from the caller's draws."""
LIARS = ("believer", "min", "mean", "max")
MULTI_OBJECTIVE = ("ehvi", "parego", "parego-ehvi")
EHVI_SHARE = 0.25
"""Under ``multi_objective: parego-ehvi``, the final share of the study's budget scored by
EHVI (ParEGO before it)."""
EHVI_MIN_TRIALS = 25
"""The fewest trials that share must hold for EHVI to take over, so only studies of 100 trials
or more hand over: a threshold fitted to the two budgets measured (in studies of 50 every
hand-over tried lost to ParEGO alone, in studies of 100 every one from trial 38 to 80 won)."""
ACQUISITIONS = ("ei", "log-ei")
PRIOR_MEANS = ("worst", "average")
CONSTRAINT_MODELS = ("probability", "penalty")


class GPOptimizer(BaseOptimizer):
    """GP-EI after an initial design, with lies for pending trials and penalised failures.

    Three defaults differ between one objective over a space with a numeric parameter (a
    "box") and the rest (several objectives, or a space of categories only); each can be asked
    for anywhere. Options: ``n_initial`` (10) trials of the initial design before the model is
    used, counting pending ones; ``initial`` their design: "sobol" (a scrambled Sobol sequence
    of the seed; the default for one objective over a box) or "random" (independent draws;
    the default otherwise); ``acquisition`` ("log-ei") or "ei" (skopt's, without gradient
    polishing); ``prior`` the length-scale prior: "dimension-scaled" (BoTorch's; the default
    for one objective over a box) or "optuna" (Optuna GPSampler's; the default otherwise);
    ``prior_mean`` the GP's constant prior mean: "worst" (the worst loss told; the default for
    one objective over a box; with several objectives it acts on ParEGO's scalarised GP, not
    on EHVI's) or "average" (the losses' mean; the default otherwise);
    ``xi`` (0.01) EI's exploration margin in standardised units, annealed to 0 over the budget;
    ``liar`` ("believer") the made-up loss for pending trials; ``candidates`` (1000) the fewest
    random candidates per acquisition search (more, up to 5000, while observations are few);
    ``restarts`` (1) extra random starts of the hyperparameter fit; ``max_points`` (300) the
    most completed trials the model conditions on (the best half and the most recent rest),
    which bounds the cost of a suggestion however long the study runs; ``warp``
    ("yeo-johnson") how losses are warped before the fit, or "none"
    (:mod:`optimizers.gp.output_warp`); ``constraints`` ("probability") how constraints are
    modelled, or "penalty" (infeasible trials told as bad losses); ``multi_objective``
    the acquisition of several objectives: "ehvi" (the default for two), "parego" (one
    random scalarisation per suggestion and batch member) or "parego-ehvi" (ParEGO, then EHVI
    over the final quarter of the study's budget when that is 25 trials or more, ParEGO
    throughout otherwise; the default for three or four).
    """

    def configure(
        self,
        *,
        n_initial: int = 10,
        xi: float = 0.01,
        liar: str = "believer",
        acquisition: str = "log-ei",
        initial: str | None = None,
        candidates: int = 1000,
        restarts: int = 1,
        max_points: int = MAX_POINTS_DEFAULT,
        warp: str = "yeo-johnson",
        prior: str | None = None,
        constraints: str = "probability",
        multi_objective: str | None = None,
        prior_mean: str | None = None,
        **unknown: Any,
    ) -> None:
        super().configure(**unknown)
        self.n_initial = int_option("n_initial", n_initial, minimum=1, maximum=10_000)
        self.xi = float_option("xi", xi, minimum=0.0)
        self.liar = choice_option("liar", liar, LIARS)
        self.acquisition = choice_option("acquisition", acquisition, ACQUISITIONS)
        self.candidates = int_option("candidates", candidates, minimum=10, maximum=100_000)
        self.restarts = int_option("restarts", restarts, minimum=0, maximum=50)
        self.max_points = int_option(
            "max_points", max_points, minimum=FIT_POINTS, maximum=MAX_POINTS
        )
        self.warp = choice_option("warp", warp, WARPS)
        # One objective over a box (a numeric parameter at least) has defaults of its own,
        # measured on the synthetic suite (docs/optimizers.md, "Latest results"). The worst as
        # the prior mean: the corners it keeps EI from are a box's; among categories alone the
        # average's pull to untried combinations is what reaches the best cell (NAS-Bench-201).
        # A Sobol design with length-scales free to shrink: level with the random design and
        # Optuna's prior on every problem, with the medians within the peers' spread (module
        # doc). Several objectives keep the defaults measured for them.
        boxed = any(not isinstance(p, CategoricalParam) for p in self.space.values())
        one_box = boxed and not self.multi_objective
        self.initial = choice_option(
            "initial", _given(initial, "sobol" if one_box else "random"), ("sobol", "random")
        )
        self.prior = choice_option(
            "prior", _given(prior, "dimension-scaled" if one_box else "optuna"), tuple(PRIORS)
        )
        self.prior_mean = choice_option(
            "prior_mean", _given(prior_mean, "worst" if one_box else "average"), PRIOR_MEANS
        )
        self.constraint_model = choice_option("constraints", constraints, CONSTRAINT_MODELS)
        default = "ehvi" if len(self.directions) == 2 else "parego-ehvi"
        self.front_model = choice_option(
            "multi_objective",
            _given(multi_objective, default),
            MULTI_OBJECTIVE,
        )
        self.encoding = SpaceEncoding(self.space)
        widths = [c.stop - c.start for c in self.encoding.columns.values()]
        self.columns = Columns.of_blocks(widths)  # one length-scale per parameter
        self._guide_fit: tuple[list, _Fitted | FittedFront] | None = None
        """The model behind ``score_candidates`` and the history digest it was fitted on."""

    def suggest(self, count: int) -> list[dict[str, Any]]:
        count = check_count(count)
        rng, seen = self.rng(), self.seen_keys()
        started = self.started
        n_random = count if len(self.completed) < 2 else self.n_initial - started
        n_random = min(max(n_random, 0), count)
        if self.initial == "sobol" and started < self.n_initial:
            batch = sobol_unique(
                self.encoding, n_random, start=started, seed=self.seed, rng=rng, seen=seen
            )
        else:
            batch = sample_unique(self.encoding, n_random, rng, seen)
        if len(batch) < count:
            # One BLAS thread: the matrices are small, and threads spinning against a busy
            # host (trials run beside the service) made fits ten times slower in tests.
            with threadpool_limits(limits=1, user_api="blas"):
                batch += self._model_batch(count - len(batch), rng, seen, batch)
        return batch

    def _model_batch(
        self, count: int, rng: np.random.Generator, seen: set[tuple], chosen: list[dict]
    ) -> list[dict[str, Any]]:
        fitted = self._fit(rng)
        running, batch = [*self.pending, *chosen], []
        for member in range(count):
            if member and self._rescalarizes(fitted):
                # qParEGO: each member of a batch gets its own scalarisation, so the batch
                # spreads along the front instead of around the one point a weighting favours
                fitted = self._fit(rng, member)
            X_run = self.encoding.encode(running)
            score, gradient = fitted.acquisition(X_run)
            X = fitted.X
            config = maximize_acquisition(
                score,
                self.encoding,
                rng,
                anchors=fitted.anchors,
                seen=seen,
                candidates=max(self.candidates, min(MAX_CANDIDATES, SCORING_WORK // len(X))),
                avoid=X_run,
                gradient=gradient,
            )
            if config is None:  # every candidate was seen: the space is (nearly) exhausted
                config = sample_unique(self.encoding, 1, rng, seen)[0]
            seen.add(config_key(config))
            running.append(config)
            batch.append(config)
        return batch

    def score_candidates(
        self, candidates: list[dict[str, Any]], running: list[dict[str, Any]]
    ) -> np.ndarray | None:
        """The acquisition of each candidate configuration under the model of the history last
        given to ``update``, with ``running`` (the pending trials and any already chosen) told
        as lies; higher is better. None while the model has too little to learn from (fewer
        than two completed trials). For searches that make their own candidates
        (``nas_evolution`` scores its mutants with it)."""
        if len(self.completed) < 2 or not candidates:
            return None
        with threadpool_limits(limits=1, user_api="blas"):
            if self._guide_fit is None or self._guide_fit[0] != self._digest:
                # one fit per history: a batch's children are scored under the same model
                self._guide_fit = (self._digest, self._fit(self.rng(GUIDE_SALT)))
            score, _ = self._guide_fit[1].acquisition(self.encoding.encode(running))
            return np.asarray(score(self.encoding.encode(candidates)), dtype=float)

    def _fit(self, rng: np.random.Generator, member: int = 0) -> _Fitted | FittedFront:
        """The model of the completed trials: hyperparameters, the conditioned GP, the
        constraints' model, EI's incumbent and the anchors of the acquisition search; with
        several objectives scored by EHVI, a GP per objective and their front. ``member`` is
        the place in the batch being chosen: several objectives told as one loss get a
        scalarisation of their own for each, under the model the batch's first member chose
        (:meth:`_rescalarizes`), so only the first tries EHVI."""
        if member == 0 and self._scores_hypervolume():
            from foldwise.optimizers.gp.front import fit_front  # loads moocore

            fitted = fit_front(self, rng)
            if fitted is not None:
                return fitted
        y, noise = self._targets(member)
        rows = keep_rows(y, self.max_points)
        X = self.encoding.encode([self.completed[i].params for i in rows])
        y, noise = y[rows], noise[rows]
        if self.prior_mean == "worst":
            # the GP's prior mean 0 becomes the worst loss told: away from the data the model
            # expects nothing better, so EI draws to where it has seen good results, not to
            # every unexplored corner (De Ath, Fieldsend & Everson, GECCO 2020)
            y = y - y.max()
        hyper = fit_model(X, y, noise, self.restarts, rng, self.columns, self.prior)
        believed = condition(hyper, X, y, noise)  # real results only: tells the lies
        feasibility, feasible = self._feasibility(X, rows)
        # the incumbent is the best *predicted* feasible result: a lucky noisy mean is not a
        # target; without a feasible result there is none, and feasibility alone is sought
        fitted = believed.predict(X)
        best = float(fitted[feasible].min()) if feasible.any() else None
        ranked = np.where(feasible, fitted, np.inf)
        anchors = X[np.lexsort((fitted, ranked))[:ANCHORS]]
        return _Fitted(
            self, hyper, X, y, noise, believed, feasibility, best, float(fitted.min()), anchors
        )

    def _rescalarizes(self, fitted: _Fitted | FittedFront) -> bool:
        """Whether further members of a batch need a model of their own: when several
        objectives are told as one scalarised loss (ParEGO, or EHVI's fallback) and there is a
        feasible incumbent (while nothing is feasible the weights play no part)."""
        return self.multi_objective and isinstance(fitted, _Fitted) and fitted.best is not None

    def _scores_hypervolume(self) -> bool:
        """Whether several objectives get a GP each and EHVI (else one scalarised GP): under
        ``parego-ehvi`` only over the final :data:`EHVI_SHARE` of a known budget, and only
        when that share is :data:`EHVI_MIN_TRIALS` trials or more."""
        if self.front_model == "parego-ehvi":
            used = self.budget_used()
            late = (
                used is not None
                and EHVI_SHARE * self.budget >= EHVI_MIN_TRIALS
                and used >= 1.0 - EHVI_SHARE
            )
        else:
            late = self.front_model == "ehvi"
        return (
            self.multi_objective
            and late
            and self.constraint_model == "probability"
            and self.acquisition == "log-ei"
        )

    def _feasibility(
        self, X: np.ndarray, rows: np.ndarray
    ) -> tuple[Feasibility | None, np.ndarray]:
        """The constraints' model on rows ``rows`` of the history (None when the study has
        none, tells them as a penalty, or no constraint has anything to learn from yet), and
        which of those rows are feasible (a failed trial is not)."""
        gaps = self.constraint_gaps()[rows]
        if not gaps.shape[1] or self.constraint_model == "penalty":
            return None, np.ones(len(rows), dtype=bool)
        model = Feasibility.fit(X, gaps, self.columns, self.prior)
        if not model.constraints:  # nothing to learn yet: the objective alone, as without
            return None, np.ones(len(rows), dtype=bool)
        # a failed trial (NaN gaps) is not feasible: it must not become EI's incumbent
        feasible = np.isfinite(gaps).all(axis=1) & (gaps <= 0).all(axis=1)
        return model, feasible

    def _acquisition(
        self, model: ExactGP, best: float | None, feasibility: Feasibility | None
    ) -> tuple[Score, Gradient | None]:
        """The acquisition's score of encoded rows, and its gradient when it has one: EI
        (or log EI) below ``best``, weighed by the probability of feasibility when there are
        constraints; that probability alone while ``best`` is None (nothing feasible yet)."""
        xi = self.margin()
        if feasibility is not None and best is None:
            return feasibility.log_probability, feasibility.log_probability_gradient
        if feasibility is None:
            feasibility = Feasibility(())
        if self.acquisition == "ei":
            return (
                lambda Z: gaussian_ei(Z, model, y_opt=best, xi=xi) * feasibility.probability(Z),
                None,
            )

        def gradient(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            value, slope = log_ei_gradient(model, Z, best, xi)
            log_p, p_slope = feasibility.log_probability_gradient(Z)
            return value + log_p, slope + p_slope

        return lambda Z: log_ei(model, Z, best, xi) + feasibility.log_probability(Z), gradient

    def margin(self) -> float:
        """EI's margin: ``xi``, annealed linearly to 0 over the study's budget when it has one,
        so the last trials refine the best region instead of exploring."""
        used = self.budget_used()
        return self.xi if used is None else self.xi * max(0.0, 1.0 - used)

    def budget_used(self) -> float | None:
        """The share of the study's trial budget completed or running; None without one."""
        if self.budget is None:
            return None
        return self.started / self.budget

    def _lies(self, believed: ExactGP, X: np.ndarray, y: np.ndarray, best: float) -> np.ndarray:
        """Made-up standardised losses for running trials at ``X``."""
        if not len(X):
            return np.empty(0)
        if self.liar == "believer":  # floored: a predicted record would keep drawing the batch
            return np.maximum(believed.predict(X), best)
        return np.full(len(X), {"min": y.min(), "mean": y.mean(), "max": y.max()}[self.liar])

    def objective_errors(self) -> np.ndarray:
        """Each completed trial's standard error of each objective, a row per trial: 0 where
        none is known or the trial failed."""
        width = len(self.directions)
        errors = np.array(
            [
                [e or 0.0 for e in o.objective_errors] if o.ok else [0.0] * width
                for o in self.completed
            ]
        ).reshape(len(self.completed), width)
        return np.nan_to_num(errors, nan=0.0, posinf=0.0)

    def _targets(self, member: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Warped, standardised penalised losses, and each point's noise variance in those
        units. With several objectives the losses are a random scalarisation
        (:mod:`optimizers.gp.scalarize`), drawn anew for each suggestion and each ``member`` of a
        batch, which also penalises infeasible trials under ``constraints: penalty``."""
        errors = self.objective_errors()
        if self.constraint_model == "penalty":
            violations = self.violations()
        else:  # the constraints have their own models
            violations = np.zeros(len(self.completed))
        if not self.multi_objective and not violations.any():
            losses, errors = self.losses(), errors[:, 0]
        else:
            salt = (SCALARIZATION_SALT, member) if member else (SCALARIZATION_SALT,)
            weights = simplex_weights(len(self.directions), self.rng(*salt))
            losses, errors = scalarize(self.loss_matrix(), errors, violations, weights)
        return warp_losses(penalize_failures(losses), errors, self.warp)


@dataclass(frozen=True)
class _Fitted:
    """One suggestion's model of the completed trials (:meth:`GPOptimizer._fit`)."""

    optimizer: GPOptimizer
    hyper: Hyper
    X: np.ndarray
    y: np.ndarray
    noise: np.ndarray
    believed: ExactGP
    feasibility: Feasibility | None
    best: float | None
    floor: float
    """The best predicted loss: no running trial is told a better one."""
    anchors: np.ndarray

    def acquisition(self, X_run: np.ndarray) -> tuple[Score, Gradient | None]:
        """The acquisition with the running trials at ``X_run`` told as lies."""
        gp = self.optimizer
        lies = gp._lies(self.believed, X_run, self.y, self.floor)
        model = condition(
            self.hyper,
            np.vstack([self.X, X_run]),
            np.concatenate([self.y, lies]),
            np.concatenate([self.noise, np.zeros(len(X_run))]),
        )
        return gp._acquisition(model, self.best, self.feasibility)


def _given(option: str | None, default: str) -> str:
    """An option as given, or its default where it was not (an empty value is refused later,
    not read as the default)."""
    return default if option is None else option
