"""What the end of a fold makes of its trial: the study runner's verdicts.

A study's trials in flight are here, by id. When a fold ends, ``take`` writes how it ended and
then what that means for its trial: completed once every fold finished, pruned when the racing
rule finds it clearly worse than the incumbent on the same folds (for a study scored on
several metrics: clearly dominated by a member of the front, or clearly infeasible; see
:mod:`pruners.dominance`), or the pruning rule stopped a fold; failed when a
fold failed. A trial decided ends its folds still running; a fold that
ends after its trial was decided is stored ``cancelled``, whatever its timing. This is the one
writer of fold ends and trial verdicts, one after the other, so a verdict always sees every
fold end before it: the fold end that decides a trial is written in the verdict's own
transaction.
"""

from __future__ import annotations

import logging
import statistics
from collections import deque
from typing import Any

from foldwise.optimizers.base import Observation
from foldwise.pruners.dominance import FrontMember, dominance_verdict
from foldwise.pruners.fold_model import FoldModel, fit_fold_model
from foldwise.pruners.fold_statistics import (
    aggregate,
    front_spread,
    partial_std_error,
    scored_fields,
)
from foldwise.pruners.in_fold import FoldCurves
from foldwise.pruners.racing import Incumbent, behind, behind_a_peer, race_verdict
from foldwise.schemas import FoldStatus, TrialStatus
from foldwise.service.scheduler.fold_task import FoldOutcome
from foldwise.service.scheduler.store import FoldEnd, SchedulerStore, TrialHandle, without_fold
from foldwise.service.scheduler.trial_progress import TrialProgress
from foldwise.spec import StudySpec

log = logging.getLogger(__name__)


class StudyCannotRun(Exception):
    """No trial of the study can run (its data cannot be split as it asks): it fails now."""


class TrialVerdicts:
    """The trials in flight of one study and the verdicts on them (``curves``: the learning
    curves pruning compares with, or None when pruning is off)."""

    def __init__(
        self,
        study_id: int,
        store: SchedulerStore,
        spec: StudySpec,
        curves: FoldCurves | None = None,
    ) -> None:
        self.study_id = study_id
        self.store = store
        self.spec = spec
        self.curves = curves
        self.trials: dict[int, TrialProgress] = {}
        """Trials in flight (not yet ended), by id."""
        self.incumbent: Incumbent | None = None
        """The best completed trial's fold values, which racing compares with."""
        self.front: list[FrontMember] = []
        """A study scored on several metrics: its Pareto front, which racing compares with."""
        self.history: list[Observation] = []
        """The study's finished trials in the order they finished, as the optimizer sees
        them: read once when the study starts (``read_history``), then kept here."""
        self.total = 0
        """Trials the study has in all, finished or not (what its budget counts)."""
        self.recent_errors: deque[str | None] = deque(maxlen=spec.budget.max_consecutive_failures)
        """The errors of the last finished trials (None: it did not fail), fold aside."""
        self.finished_folds: dict[int, dict[int, float]] = {}
        """The ``model`` racing rule: the completed folds' values of each completed or pruned
        trial, by id, which with the trials in flight the study's fold model is fitted to."""
        self._model: tuple[int, FoldModel | None] | None = None
        """The fold model last fitted and the ``_table_version`` it was fitted at."""
        self._table_version = 0
        self._fold_ends: list[FoldEnd] = []
        """The ends of the folds taken in and not written yet: the next verdict writes them in
        its transaction, before the trial's end, else ``write_fold_ends`` after the folds
        that ended together were taken in (so sibling folds that end at once cost one
        transaction)."""

    async def read_history(self) -> None:
        """What the study finished before this runner, once: from then on each verdict adds
        its trial, so nothing read grows with the history."""
        self.history, self.total = await self.store.history(self.study_id, self.spec.constraints)
        count = self.spec.budget.max_consecutive_failures
        self.recent_errors.extend(await self.store.recent_errors(self.study_id, count))
        if self.spec.racing.rule == "model":
            self.finished_folds = await self.store.finished_trials_fold_values(self.study_id)
            self._table_version += 1

    def fold_model(self) -> FoldModel | None:
        """The study's fold model (losses) fitted to every completed fold of its completed,
        pruned and running trials; refitted only when a fold value came or went."""
        if self._model is not None and self._model[0] == self._table_version:
            return self._model[1]
        sign = -1.0 if self.spec.objective.maximize else 1.0
        table = {**self.finished_folds, **{i: t.values for i, t in self.trials.items()}}
        losses = {i: {k: sign * v for k, v in row.items()} for i, row in table.items()}
        model = fit_fold_model(losses)
        self._model = (self._table_version, model)
        return model

    def repeated_failure(self) -> str | None:
        """The error the last ``max_consecutive_failures`` finished trials all failed with,
        or None when they did not all fail the same way."""
        errors = set(self.recent_errors)
        if len(self.recent_errors) < (self.recent_errors.maxlen or 0) or len(errors) != 1:
            return None
        return errors.pop()

    async def read_incumbent(self) -> None:
        if self.spec.racing.rule == "off":
            return
        if self.spec.scored_metrics:
            self.front = await self.store.front(self.study_id)
        else:
            self.incumbent = await self.store.incumbent(self.study_id)

    def add(self, handle: TrialHandle) -> None:
        """A new trial, none of its folds run yet."""
        self.trials[handle.id] = TrialProgress(handle)
        self.total += 1

    async def resume(self, handle: TrialHandle) -> None:
        """Take up a trial a previous run of the study left unfinished, judged again on the
        folds it finished."""
        trial = TrialProgress(handle, await self.store.completed_fold_values(handle.id))
        self._table_version += 1
        if self.spec.scored_metrics:
            trial.metrics = await self.store.completed_fold_metrics(handle.id)
        self.trials[handle.id] = trial
        await self.judge(trial)

    async def take(self, trial: TrialProgress, outcome: FoldOutcome) -> None:
        """A fold of ``trial`` ended: what that means for the trial, written with the fold's end
        when it leads to a verdict (else the caller's ``write_fold_ends`` writes the end, once it
        took in the folds that ended together, even when this raised); ``StudyCannotRun``
        when every trial would fail as it did."""
        decided = trial.handle.id not in self.trials
        status = FoldStatus.CANCELLED if decided else outcome.status
        if outcome.run_id:
            reason = outcome.reason
            if decided and outcome.status is not FoldStatus.CANCELLED:
                reason = "its trial ended first"
            self._fold_ends.append(
                FoldEnd(
                    outcome.run_id,
                    status,
                    {
                        "value": None if status is FoldStatus.CANCELLED else outcome.value,
                        "metric_values": None
                        if status is FoldStatus.CANCELLED
                        else outcome.metrics,
                        "error": reason,
                        "traceback": outcome.traceback,
                        "train_seconds": outcome.train_seconds,
                    },
                )
            )
        await self._take(trial, outcome, status, decided)

    async def write_fold_ends(self) -> None:
        """Write the fold ends taken in that no verdict wrote, in one transaction."""
        fold_ends, self._fold_ends = self._fold_ends, []
        await self.store.finish_fold_runs(self.study_id, fold_ends)

    async def _take(
        self, trial: TrialProgress, outcome: FoldOutcome, status: FoldStatus, decided: bool
    ) -> None:
        if self.curves is not None and status is not FoldStatus.FAILED and outcome.curve:
            completed = status is FoldStatus.COMPLETED
            self.curves.add(outcome.fold, list(outcome.curve), finished=completed)
        if decided:
            return
        if status is FoldStatus.COMPLETED and outcome.value is not None:
            trial.values[outcome.fold] = outcome.value
            self._table_version += 1
            if outcome.metrics is not None:
                trial.metrics[outcome.fold] = outcome.metrics
            await self.judge(trial)
        elif status is FoldStatus.PRUNED and outcome.value is not None:
            await self._prune(trial, outcome.reason or "pruned", stopped_at=outcome.value)
        elif status is FoldStatus.FAILED:
            error = f"fold {outcome.fold}: {outcome.reason}"
            await self.end_trial(trial, TrialStatus.FAILED, error=error)
            if outcome.fatal:  # every trial would fail so: end the study now, saying why
                raise StudyCannotRun(outcome.reason or error)
        else:  # only a trial that ended stops its folds: never run this one again
            error = f"fold {outcome.fold} ended {status} while its trial still ran"
            log.error("study %s trial %s: %s", self.study_id, trial.handle.number, error)
            await self.end_trial(trial, TrialStatus.FAILED, error=error)

    async def judge(self, trial: TrialProgress) -> None:
        """Complete a trial whose every fold finished; prune one the racing rule finds clearly
        worse than the incumbent on the same folds."""
        spec = self.spec
        folds = spec.fold_count
        if len(trial.values) >= folds:
            mean, std_error = aggregate([trial.values[k] for k in sorted(trial.values)])
            await self.end_trial(
                trial,
                TrialStatus.COMPLETED,
                value=mean,
                std_error=std_error,
                value_folds=len(trial.values),
                **scored_fields(spec, trial.metrics),
            )
            if spec.racing.rule != "off":
                await self._new_incumbent()
            return
        if spec.scored_metrics:
            reason = dominance_verdict(spec, trial.metrics, self.front)
        else:
            model = self.fold_model() if spec.racing.rule == "model" else None
            question = {"folds": folds, "maximize": spec.objective.maximize, "model": model}
            reason = race_verdict(spec.racing, trial.values, self.incumbent, **question)
            if reason is None and spec.racing.stepwise:
                trial.stepping = self._behind(trial, question)
        if reason is not None:
            await self._prune(trial, reason)

    def _behind(self, trial: TrialProgress, question: dict[str, Any]) -> bool:
        """Whether ``trial`` is behind the incumbent (``racing.stepwise``), or, before the
        study has one, behind another trial in flight on the folds both ran: only the trial
        ahead of all runs every fold at once, and becomes the first incumbent soonest."""
        if self.incumbent is None:
            peers = [t.values for t in self.trials.values() if t is not trial and t.values]
            return behind_a_peer(trial.values, peers, maximize=question["maximize"])
        return behind(self.spec.racing, trial.values, self.incumbent, **question)

    async def _new_incumbent(self) -> None:
        """Read the incumbent (or the front) again after a trial completed; trials in flight
        that are now clearly worse than a new incumbent (or dominated) are pruned at once."""
        before = (self.incumbent, self.front)
        await self.read_incumbent()
        if (self.incumbent, self.front) == before:
            return
        for trial in list(self.trials.values()):
            await self.judge(trial)

    async def _prune(
        self, trial: TrialProgress, reason: str, *, stopped_at: float | None = None
    ) -> None:
        """Store ``trial`` as pruned for ``reason`` with the mean of its finished folds' values
        and ``stopped_at``, the value of a fold the pruning rule stopped."""
        values = [trial.values[k] for k in sorted(trial.values)]
        if stopped_at is not None:
            values.append(stopped_at)
        spread = None
        if self.incumbent is not None and len(self.incumbent.values) >= 2:
            spread = statistics.stdev(self.incumbent.values.values())
        elif self.spec.scored_metrics:  # no incumbent: the front's spread on the objective
            spread = front_spread(self.front, self.spec.objective.metric)
        await self.end_trial(
            trial,
            TrialStatus.PRUNED,
            value=statistics.fmean(values),
            std_error=partial_std_error(values, spread),
            value_folds=len(values),
            pruned_reason=reason,
            **scored_fields(self.spec, trial.metrics, self.front),
        )

    async def end_trial(self, trial: TrialProgress, status: TrialStatus, **fields: Any) -> None:
        """Record how ``trial`` ended and stop its folds still running (their slots free up
        after the epoch they are in)."""
        if trial.handle.id not in self.trials:
            return
        fold_ends, self._fold_ends = self._fold_ends, []  # the one that decided it among them
        observation = await self.store.finish_trial(
            self.study_id,
            trial.handle.id,
            status,
            constraints=self.spec.constraints,
            fold_ends=fold_ends,
            **fields,
        )
        del self.trials[trial.handle.id]
        if self.spec.racing.rule == "model":
            if status in (TrialStatus.COMPLETED, TrialStatus.PRUNED) and trial.values:
                self.finished_folds[trial.handle.id] = dict(trial.values)
            self._table_version += 1
        if observation is not None:
            self.history.append(observation)
            failed = status is TrialStatus.FAILED
            self.recent_errors.append(without_fold(fields.get("error") or "") if failed else None)
        why = fields.get("pruned_reason") or fields.get("error") or f"the trial {status}"
        for fold_task in trial.running.values():
            fold_task.stop(f"trial {trial.handle.number} ended first ({status}): {why}")
