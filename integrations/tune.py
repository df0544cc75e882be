"""foldwise's optimizers inside Ray Tune: ``FoldwiseSearch``, a ``ray.tune.search.Searcher``.

    from ray import tune
    from foldwise.integrations.tune import FoldwiseSearch

    search = FoldwiseSearch("gp", metric="loss", mode="min", seed=0)
    tuner = tune.Tuner(
        train_fn,  # reports {"loss": mean, "loss_std_error": standard error}
        param_space={"lr": tune.loguniform(1e-4, 1e-1), "layers": tune.randint(1, 4)},
        tune_config=tune.TuneConfig(search_alg=search, num_samples=40, max_concurrent_trials=4),
    )

The searcher keeps the history (completed trials in the order they finished, trials in flight)
and hands all of it to the optimizer before every suggestion, as the service does: an optimizer
depends only on its seed and that history, so ``save`` writes the history as JSON and
``restore`` rebuilds the optimizer from it; no optimizer object is ever pickled.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
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
from foldwise.spec import Direction

STATE_FORMAT = "foldwise.integrations.tune.FoldwiseSearch"
STATE_VERSION = 1
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
    """

    def __init__(
        self,
        optimizer: str = "gp",
        space: Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        *,
        seed: int = 0,
        options: Mapping[str, Any] | None = None,
        budget: int | None = None,
        std_error_metric: str | None = None,
    ) -> None:
        _check_mode(mode)
        super().__init__(metric=metric, mode=mode)
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
        """The result key read as a trial's standard error."""
        return self._std_error_metric or f"{self.metric}_std_error"

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
        _check_mode(mode)
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
        value = None if error or not result else _finite(result.get(self.metric))
        std_error = None if value is None else _finite(result.get(self.std_error_metric))
        self._tell(params, value, std_error, trial_id=trial_id)

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
        *,
        std_error: float | None = None,
    ) -> None:
        """Tell the optimizer about a trial run outside this searcher (a Tune config): a
        prior observation, which does not count against the budget."""
        params = self._require_space().from_config(parameters)
        value = None if error else _finite(value)
        self._tell(params, value, None if value is None else _finite(std_error), pruned=pruned)

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
            "space": None if self._space is None else self._space.to_json(),
            "completed": [_observation_record(o) for o in self._completed],
            "pending": [{"trial_id": t, "params": p} for t, p in self._pending.items()],
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Take what ``get_state`` gave. A searcher that has its space keeps it (its choices may
        be objects JSON cannot hold) but refuses a history from another space."""
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise ValueError(f"not a {STATE_FORMAT} state of version {STATE_VERSION}")
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
    ) -> None:
        if std_error is not None and std_error < 0:
            std_error = None
        self._completed.append(
            Observation(
                params,
                value,
                std_error=std_error,
                failed=value is None,
                pruned=pruned and value is not None,
                extra={"trial_id": trial_id},
            )
        )

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
            self._optimizer = create_optimizer(
                self._optimizer_name,
                space.params,
                direction=MODES[self._mode] if self._mode else Direction.MINIMIZE,
                seed=self._seed,
                budget=budget,
                options=self._options,
            )
        return self._optimizer


def _check_mode(mode: str | None) -> None:
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")


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
    }


def _observation(record: Mapping[str, Any]) -> Observation:
    return Observation(
        dict(record["params"]),
        record["value"],
        std_error=record["std_error"],
        failed=record["failed"],
        pruned=record["pruned"],
        extra={"trial_id": record["trial_id"]},
    )


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))
