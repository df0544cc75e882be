"""foldwise's optimizers inside Ray Tune: ``FoldwiseSearch``, a ``ray.tune.search.Searcher``.

    from ray import tune
    from foldwise.integrations.tune import FoldwiseSearch

    search = FoldwiseSearch("gp", metric="loss", mode="min", seed=0)
    tuner = tune.Tuner(
        train_fn,  # reports {"loss": mean, "loss_std_error": standard error}
        param_space={"lr": tune.loguniform(1e-4, 1e-1), "layers": tune.randint(1, 4)},
        tune_config=tune.TuneConfig(search_alg=search, num_samples=40, max_concurrent_trials=4),
    )

Several metrics (``metric=["loss", "n_params"], mode=["min", "min"]``, as Optuna's searcher
takes them) make a multi-objective search, and ``constraints`` (foldwise's
``{metric, op, value}``) limits on reported metrics; a trial that does not report every metric
and constrained metric is told as a failure.

The searcher keeps the history (completed trials in the order they finished, trials in flight)
and hands all of it to the optimizer before every suggestion, as the service does: an optimizer
depends only on its seed and that history, so ``save`` writes the history as JSON and
``restore`` rebuilds the optimizer from it; no optimizer object is ever pickled.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher

from foldwise.integrations.tune_space import (
    SearchSpace,
    has_tune_domains,
    read_space,
    space_from_tune,
)
from foldwise.optimizers import BaseOptimizer, Observation, create_optimizer, optimizer_names
from foldwise.spec import Constraint, Direction, constraints_conflict

STATE_FORMAT = "foldwise.integrations.tune.FoldwiseSearch"
STATE_VERSION = 2
"""Version 2 adds several metrics and constraints; a version 1 state still loads."""
MAX_METRICS = 4
MODES = {"min": Direction.MINIMIZE, "max": Direction.MAXIMIZE}


class FoldwiseSearch(Searcher):
    """A foldwise optimizer (``gp``, ``evolution``, ``nas_evolution`` or ``random``) as a Tune
    searcher.

    ``space`` is a foldwise space dict (``when`` conditions allowed) or a Tune param_space;
    without it the searcher converts the ``param_space`` Tune gives it. ``seed``, ``options``
    and ``budget`` mean what they mean in a study spec; the budget defaults to Tune's
    ``num_samples`` and counts the trials this searcher suggests: points told with
    ``add_evaluated_point`` are prior observations, as a warm-started study's, and the
    optimizer plans by the budget plus them (the GP's annealing, evolution's generations). A
    trial's ``metric`` is told to the optimizer as its value and its
    ``std_error_metric`` (default ``"<metric>_std_error"``), when reported, as the value's
    standard error, which the GP takes as that trial's noise. A trial that errored, or ended
    without a finite value, is told as a failure so the optimizer leaves its region.

    With a list of metrics (and one mode per metric) each is an objective, its standard error
    read from ``"<metric>_std_error"``; ``constraints`` are foldwise constraints
    (``{"metric", "op", "value"}`` or :class:`foldwise.spec.Constraint`), which make a trial
    that breaks one infeasible: data for the optimizer, not a failure.
    """

    def __init__(
        self,
        optimizer: str = "gp",
        space: Mapping[str, Any] | None = None,
        metric: str | Sequence[str] | None = None,
        mode: str | Sequence[str] | None = None,
        *,
        seed: int = 0,
        options: Mapping[str, Any] | None = None,
        budget: int | None = None,
        std_error_metric: str | None = None,
        constraints: Sequence[Mapping[str, Any] | Constraint] = (),
    ) -> None:
        metric, mode = _checked_metrics(metric, mode)
        super().__init__(metric=metric, mode=mode)
        self._constraints = [Constraint.model_validate(c) for c in constraints]
        if (conflict := constraints_conflict(self._constraints)) is not None:
            where, message = conflict
            raise ValueError(f"constraints[{where[0]}]: {message}")
        if optimizer not in optimizer_names():
            known = ", ".join(optimizer_names())
            raise ValueError(f"unknown optimizer {optimizer!r} (known: {known})")
        self._optimizer_name = optimizer
        self._seed = seed
        self._options = dict(options or {})
        self._budget = budget
        self._std_error_metric = std_error_metric
        self._space = None if space is None else read_space(space)
        self._completed: list[Observation] = []
        self._pending: dict[str, dict[str, Any]] = {}  # trial id -> the optimizer's params
        self._optimizer: BaseOptimizer | None = None
        self._max_concurrent: int | None = None
        if self._space is not None:
            self._build()  # unknown options and bad values fail here, not mid-experiment

    @property
    def std_error_metric(self) -> str:
        """The result key read as a trial's standard error (of the first metric)."""
        return self._std_error_metric or f"{self._metrics()[0]}_std_error"

    @property
    def constraints(self) -> list[Constraint]:
        return list(self._constraints)

    @property
    def search_space(self) -> SearchSpace | None:
        """The optimizer's parameters and where each goes in a trial's config."""
        return self._space

    @property
    def observations(self) -> list[Observation]:
        """Finished trials in the order they finished, as the optimizer is told them; each
        holds its Tune trial id in ``extra["trial_id"]``."""
        return list(self._completed)

    @property
    def pending(self) -> dict[str, dict[str, Any]]:
        """Trials suggested and not finished: Tune trial id to the optimizer's params."""
        return {trial_id: dict(params) for trial_id, params in self._pending.items()}

    @property
    def optimizer(self) -> BaseOptimizer:
        """The optimizer, updated with the whole history as of now."""
        optimizer = self._ready()
        optimizer.update(self._completed, list(self._pending.values()))
        return optimizer

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        """Take Tune's metric, mode, ``num_samples`` (as the budget) and param_space; refuse a
        param_space with search domains when the searcher has a space already."""
        metric, mode = _checked_metrics(metric or self._metric, mode or self._mode)
        if config and has_tune_domains(config):
            if self._space is not None:
                return False  # Tune then says the param_space clashes with the searcher's space
            self._space = space_from_tune(config)
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        samples = spec.get("num_samples")
        if self._budget is None and isinstance(samples, int) and samples > 0:
            self._budget = samples
        self._optimizer = None
        if self._space is not None:
            self._build()
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Tune's ``max_concurrent_trials``, kept by the searcher itself: Tune's
        ConcurrencyLimiter would drop the results of errored trials that a resumed experiment
        runs again, and the searcher tracks the trials in flight anyway."""
        self._max_concurrent = max_concurrent
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The next configuration, after telling the optimizer everything finished and in
        flight; None while ``max_concurrent_trials`` are in flight; ``FINISHED`` once the
        budget is used or the optimizer has nothing to give."""
        if self._max_concurrent and len(self._pending) >= self._max_concurrent:
            return None
        if self._budget is not None and self._suggested() >= self._budget:
            return Searcher.FINISHED
        batch = self.optimizer.suggest(1)
        if not batch:
            return Searcher.FINISHED
        self._pending[trial_id] = batch[0]
        assert self._space is not None  # self.optimizer has checked it
        return self._space.to_config(batch[0])

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Move the trial from pending to the history, as a value or as a failure; a failed
        trial that Tune has run again replaces its failure."""
        params = self._pending.pop(trial_id, None) or self._take_back_failure(trial_id)
        if params is None:
            return  # not suggested by this searcher, or told already
        metrics = self._metrics()
        values = [None if error or not result else _finite(result.get(m)) for m in metrics]
        keys = [self.std_error_metric, *(f"{m}_std_error" for m in metrics[1:])]
        errors = [_finite(result.get(k)) if result else None for k in keys]
        limits = [_finite(result.get(c.metric)) if result else None for c in self._constraints]
        if None in values or None in limits:
            self._tell(params, None, None, trial_id=trial_id)
            return
        gaps = tuple(c.gap(v) for c, v in zip(self._constraints, limits, strict=True))
        several = len(metrics) > 1
        self._tell(
            params,
            values[0],
            errors[0],
            trial_id=trial_id,
            values=tuple(values) if several else None,
            std_errors=tuple(_error(e) for e in errors) if several else None,
            constraint_gaps=gaps,
        )

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float | Sequence[float],
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
        *,
        std_error: float | None = None,
        constraint_values: Sequence[float] = (),
    ) -> None:
        """Tell the optimizer about a trial run outside this searcher (a Tune config): a
        prior observation, which does not count against the budget. With several metrics,
        ``value`` holds one value per metric; with constraints, ``constraint_values`` one
        value per constraint."""
        params = self._require_space().from_config(parameters)
        several = len(self._metrics()) > 1
        if several and not error and not isinstance(value, Sequence):
            raise ValueError(f"give a value for each of the metrics {self._metrics()}")
        values = list(value) if several and not error else [value]
        if several and not error and len(values) != len(self._metrics()):
            raise ValueError(f"give a value for each of the metrics {self._metrics()}")
        if len(constraint_values) != len(self._constraints) and not error:
            raise ValueError(f"give a value for each of the {len(self._constraints)} constraints")
        finite = [None if error else _finite(v) for v in values]
        limits = [_finite(v) for v in constraint_values]
        if None in finite or None in limits:
            self._tell(params, None, None, pruned=pruned)
            return
        self._tell(
            params,
            finite[0],
            _finite(std_error),
            pruned=pruned,
            values=tuple(finite) if several else None,
            std_errors=(_error(_finite(std_error)),) + (None,) * (len(finite) - 1)
            if several
            else None,
            constraint_gaps=tuple(
                c.gap(v) for c, v in zip(self._constraints, limits, strict=True)
            ),
        )

    def get_state(self) -> dict[str, Any]:
        """Settings, space and history as JSON-able data."""
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "optimizer": self._optimizer_name,
            "seed": self._seed,
            "options": self._options,
            "budget": self._budget,
            "metric": self._metric,
            "mode": self._mode,
            "std_error_metric": self._std_error_metric,
            "constraints": [c.model_dump() for c in self._constraints],
            "space": None if self._space is None else self._space.to_json(),
            "completed": [_observation_record(o) for o in self._completed],
            "pending": [{"trial_id": t, "params": p} for t, p in self._pending.items()],
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Take what ``get_state`` gave. A searcher that has its space keeps it (its choices may
        be objects JSON cannot hold) but refuses a history from another space."""
        if state.get("format") != STATE_FORMAT or state.get("version") not in (1, STATE_VERSION):
            raise ValueError(f"not a {STATE_FORMAT} state of version 1 or {STATE_VERSION}")
        saved = state["space"]
        space = self._space
        if saved is not None and space is None:
            space = SearchSpace.from_json(saved)
        elif saved is not None and _as_json(space.to_json()) != _as_json(saved):
            raise ValueError("the saved history belongs to another search space than this one")
        self._space = space
        self._optimizer_name = state["optimizer"]
        self._seed = state["seed"]
        self._options = dict(state["options"])
        self._budget = state["budget"]
        self._metric, self._mode = state["metric"], state["mode"]
        self._std_error_metric = state["std_error_metric"]
        if "constraints" in state:  # a version 1 state has none: the searcher's own stay
            self._constraints = [Constraint.model_validate(c) for c in state["constraints"]]
        self._completed = [_observation(record) for record in state["completed"]]
        self._pending = {p["trial_id"]: dict(p["params"]) for p in state["pending"]}
        self._optimizer = None
        if self._space is not None:
            self._build()

    def save(self, checkpoint_path: str) -> None:
        """Write the state as JSON (Tune calls it through ``save_to_dir`` during a run)."""
        text = json.dumps(self.get_state(), allow_nan=False)
        Path(checkpoint_path).write_text(text, encoding="utf-8")

    def restore(self, checkpoint_path: str) -> None:
        """Read a state ``save`` wrote; the optimizer is rebuilt from its history."""
        self.set_state(json.loads(Path(checkpoint_path).read_text(encoding="utf-8")))

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the searcher with its Tuner; the optimizer is rebuilt, never pickled
        return {**self.__dict__, "_optimizer": None}

    def _tell(
        self,
        params: dict[str, Any],
        value: float | None,
        std_error: float | None,
        *,
        trial_id: str | None = None,
        pruned: bool = False,
        values: tuple[float, ...] | None = None,
        std_errors: tuple[float | None, ...] | None = None,
        constraint_gaps: tuple[float, ...] = (),
    ) -> None:
        if value is None and len(self._metrics()) > 1:  # a failure of a multi-objective search
            values, std_errors = (None,) * len(self._metrics()), None
        self._completed.append(
            Observation(
                params,
                value,
                std_error=_error(std_error),
                failed=value is None,
                pruned=pruned and value is not None,
                extra={"trial_id": trial_id},
                values=values,
                std_errors=std_errors,
                constraint_gaps=constraint_gaps,
            )
        )

    def _metrics(self) -> list[str]:
        """The metrics told as objectives, in order."""
        metric = self._metric
        return [metric] if isinstance(metric, str) or metric is None else list(metric)

    def _modes(self) -> list[str]:
        mode = self._mode
        return [mode] * len(self._metrics()) if isinstance(mode, str) else list(mode)

    def _priors(self) -> int:
        """Observations told with ``add_evaluated_point``: they have no Tune trial id."""
        return sum(1 for o in self._completed if o.extra.get("trial_id") is None)

    def _suggested(self) -> int:
        """Trials this searcher suggested: in flight, or finished."""
        return len(self._completed) - self._priors() + len(self._pending)

    def _take_back_failure(self, trial_id: str) -> dict[str, Any] | None:
        """The params of a trial told as failed that Tune ran again (a resumed experiment
        restarts errored trials), taken out of the history to be told anew."""
        for index, observation in enumerate(self._completed):
            if observation.failed and observation.extra.get("trial_id") == trial_id:
                return self._completed.pop(index).params
        return None

    def _require_space(self) -> SearchSpace:
        if self._space is None:
            raise ValueError(
                "FoldwiseSearch has no search space: pass space= or a Tune param_space"
            )
        return self._space

    def _ready(self) -> BaseOptimizer:
        self._require_space()
        if not self._metric or not self._mode:
            raise ValueError(
                "FoldwiseSearch needs a metric and a mode: pass them to it or to tune.TuneConfig"
            )
        return self._build()

    def _build(self) -> BaseOptimizer:
        """The optimizer, built anew when the prior observations have changed its budget (it
        depends only on its settings and the history it is told, so nothing is lost)."""
        budget = None if self._budget is None else self._budget + self._priors()
        if self._optimizer is None or self._optimizer.budget != budget:
            space = self._require_space()
            directions = [MODES[m] for m in self._modes()] if self._mode else []
            self._optimizer = create_optimizer(
                self._optimizer_name,
                space.params,
                direction=directions[0] if directions else Direction.MINIMIZE,
                directions=directions if len(directions) > 1 else None,
                seed=self._seed,
                budget=budget,
                options=self._options,
            )
        return self._optimizer


def _checked_metrics(
    metric: str | Sequence[str] | None, mode: str | Sequence[str] | None
) -> tuple[str | list[str] | None, str | list[str] | None]:
    """``metric`` and ``mode`` checked: one of each, or as many modes as metrics (2 to 4)."""
    modes = [mode] if isinstance(mode, str) or mode is None else list(mode)
    for one in modes:
        if one is not None and one not in MODES:
            raise ValueError(f"mode must be 'min' or 'max', got {one!r}")
    if isinstance(metric, str) or metric is None:
        if len(modes) != 1:
            raise ValueError("one metric takes one mode")
        return metric, mode
    metrics = list(metric)
    if not 2 <= len(metrics) <= MAX_METRICS or len(set(metrics)) != len(metrics):
        raise ValueError(f"give 2 to {MAX_METRICS} different metrics, got {metrics!r}")
    if len(modes) != len(metrics):
        raise ValueError(f"give a mode for each of the {len(metrics)} metrics, got {mode!r}")
    return metrics, modes


def _error(value: float | None) -> float | None:
    """A standard error, or None where it is not a usable one."""
    return None if value is None or value < 0 else value


def _finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite real number, else None."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _observation_record(o: Observation) -> dict[str, Any]:
    return {
        "trial_id": o.extra.get("trial_id"),
        "params": o.params,
        "value": o.value,
        "std_error": o.std_error,
        "failed": o.failed,
        "pruned": o.pruned,
        "values": None if o.values is None else list(o.values),
        "std_errors": None if o.std_errors is None else list(o.std_errors),
        "constraint_gaps": list(o.constraint_gaps),
    }


def _observation(record: Mapping[str, Any]) -> Observation:
    values, errors = record.get("values"), record.get("std_errors")
    return Observation(
        dict(record["params"]),
        record["value"],
        std_error=record["std_error"],
        failed=record["failed"],
        pruned=record["pruned"],
        extra={"trial_id": record["trial_id"]},
        values=None if values is None else tuple(values),
        std_errors=None if errors is None else tuple(errors),
        constraint_gaps=tuple(record.get("constraint_gaps", ())),
    )


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))
