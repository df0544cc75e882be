"""A handle on one study of the SDK: its latest data, and what it asks the service for (its
trials, its score on the test data, refits, the models it left)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr

from foldwise import schemas
from foldwise.errors import FoldwiseError, ServiceUnavailable
from foldwise.models import download_trial_models
from foldwise.trials_csv import read_trials_csv

if TYPE_CHECKING:
    import pandas

    from foldwise.client import Client

MAX_POLL_SECONDS = 3600.0
"""The longest wait between two polls of ``Study.wait`` (and the CLI's ``--interval``)."""
PAGE_SIZE = 1000
"""The API's largest page."""


class Study:
    """A handle on one study: its latest data, and methods that ask the service for more.

    ``data``, ``name`` and ``status`` are as of the last read (creation, ``refresh()``,
    ``wait()``); ``best_trial``, ``trials()`` and ``trial()`` always ask the service.
    """

    def __init__(self, client: Client, data: schemas.Study) -> None:
        self.client = client
        self.data = data

    def __repr__(self) -> str:
        progress = self.data.progress
        return (
            f"<Study {self.id} {self.name!r} {self.status.value} "
            f"{progress.finished}/{progress.budget} trials>"
        )

    @property
    def id(self) -> int:
        return self.data.id

    @property
    def name(self) -> str:
        return self.data.name

    @property
    def status(self) -> schemas.StudyStatus:
        return self.data.status

    def refresh(self) -> Study:
        """Re-read the study from the service."""
        self.data = self.client.fetch_study(self.id)
        return self

    def wait(
        self,
        timeout: float | None = None,
        poll: float = 2.0,
        on_update: Callable[[Study], None] | None = None,
        outage: float = 60.0,
    ) -> Study:
        """Poll every ``poll`` seconds until the study is completed, stopped or failed.

        ``on_update`` is called with this handle after every poll (to drive a progress bar).
        Raises ``TimeoutError`` if the study is still going after ``timeout`` seconds. The
        service may restart under a long study (it resumes the study from its database), so
        ``ServiceUnavailable`` is raised only once it has been unreachable for ``outage``
        seconds in a row.
        """
        check_wait(poll, timeout, outage)
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        down_since: float | None = None
        while True:
            try:
                self.refresh()
            except ServiceUnavailable:
                down_since = time.monotonic() if down_since is None else down_since
                if time.monotonic() - down_since >= outage:
                    raise
            else:
                down_since = None
                if on_update is not None:
                    on_update(self)
                if self.status.finished:
                    return self
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                progress = self.data.progress
                raise TimeoutError(
                    f"study {self.id} is still {self.status.value} after {timeout:g} s "
                    f"({progress.finished}/{progress.budget} trials finished)"
                )
            time.sleep(min(poll, remaining))

    @property
    def best_trial(self) -> StudyTrial | None:
        """The best completed trial so far (read fresh), or ``None`` if there is none yet; its
        ``download_models(dir)`` fetches its fold (and refit) models."""
        best = self.refresh().data.best_trial
        return None if best is None else StudyTrial.of(self, best)

    @property
    def warnings(self) -> list[schemas.StudyWarning]:
        """What the study's fold runs knew was suspect about their results (read fresh): each
        warning once, with the trials it concerns (``kind``, ``message``, ``trials``)."""
        return self.refresh().data.warnings

    @property
    def pareto_front(self) -> list[StudyTrial]:
        """The trials no other feasible completed trial beats on every objective, and that
        respect every constraint (read fresh), in trial order; with one objective, the best
        trial. Each trial's ``objective_values`` follow the spec's ``objectives``."""
        front = self.client.fetch_pareto(self.id)
        return [StudyTrial.of(self, summary) for summary in front.data]

    def holdout(
        self,
        *,
        score: str | None = None,
        trial: int | None = None,
        epochs: int | None = None,
        wait: bool = True,
        timeout: float | None = None,
        poll: float = 2.0,
    ) -> schemas.Holdout:
        """Score the ended study's best (or ``trial``) on the task's test data: ``ensemble``
        (its fold models' mean prediction), ``refit`` (a model trained on all the training
        data) or ``both``; default the spec's ``holdout.score``. With ``wait``, returns once
        the score has ended (``FoldwiseError`` when it failed, ``TimeoutError`` after
        ``timeout``); never part of the optimisation."""
        check_wait(poll, timeout)
        self.data = self.client.request_holdout(self.id, score=score, trial=trial, epochs=epochs)
        holdout = self.data.holdout
        assert holdout is not None, "the service answered without the score it was asked"
        return self.wait_for_holdout(timeout=timeout, poll=poll) if wait else holdout

    def wait_for_holdout(
        self, *, timeout: float | None = None, poll: float = 2.0
    ) -> schemas.Holdout:
        """Poll until the study's hold-out score has ended; the score."""
        check_wait(poll, timeout)
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while True:
            holdout = self.refresh().data.holdout
            if holdout is None:
                raise FoldwiseError(f"study {self.id} was not asked for a hold-out score")
            if holdout.status is schemas.JobStatus.FAILED:
                raise FoldwiseError(f"study {self.id}'s hold-out score failed: {holdout.error}")
            if holdout.status is schemas.JobStatus.COMPLETED:
                return holdout
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"study {self.id}'s hold-out score is still {holdout.status} after "
                    f"{timeout:g} s"
                )
            time.sleep(min(poll, max(deadline - time.monotonic(), 0.0)))

    def refit(
        self,
        *,
        trial: int | None = None,
        epochs: int | None = None,
        wait: bool = True,
        timeout: float | None = None,
        poll: float = 2.0,
    ) -> schemas.Refit:
        """Train the ended study's best (or ``trial``) params on all its training data,
        through the fold path, for ``epochs`` (default: the median of its folds' best
        epochs). With ``wait``, returns once it has ended (``FoldwiseError`` when it
        failed); its model downloads with ``download_models``."""
        check_wait(poll, timeout)
        refit = self.client.request_refit(self.id, trial=trial, epochs=epochs)
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while wait and not refit.status.finished:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"refit {refit.number} of study {self.id} is still {refit.status} after "
                    f"{timeout:g} s"
                )
            time.sleep(min(poll, max(deadline - time.monotonic(), 0.0)))
            refit = self.client.fetch_refit(self.id, refit.number)
        if refit.status is schemas.JobStatus.FAILED:
            raise FoldwiseError(f"refit {refit.number} of study {self.id} failed: {refit.error}")
        return refit

    def refits(self) -> list[schemas.Refit]:
        """The study's refits, oldest first."""
        return self.client.fetch_refits(self.id)

    def download_models(
        self, directory: str | Path, *, trial: int | None = None, refits: bool = True
    ) -> list[Path]:
        """The fold models of ``trial`` (default: the best) and, with ``refits``, its refits'
        models, written to ``directory``; ``foldwise.trainers.load_model`` rebuilds one."""
        if trial is None:
            best = self.best_trial
            if best is None and self.data.spec.objectives:
                raise FoldwiseError(
                    f"study {self.id} has several objectives and so no single best trial: "
                    "pass trial=, one of study.pareto_front"
                )
            if best is None:
                raise FoldwiseError(f"study {self.id} has no completed (and feasible) trial")
            trial = best.number
        return download_trial_models(self, trial, directory, refits=refits)

    def trials(
        self, status: schemas.TrialStatus | str | None = None, sort: str = "number"
    ) -> list[schemas.TrialSummary]:
        """Every trial (optionally only those in ``status``), read page by page."""
        return all_pages(
            lambda offset: self.client.fetch_trials(
                self.id, status=status, sort=sort, limit=PAGE_SIZE, offset=offset
            )
        )

    def trial(self, number: int) -> schemas.Trial:
        """One trial with its fold runs and their per-epoch metrics."""
        return self.client.fetch_trial(self.id, number)

    def stop(self, *, wait: bool = True, timeout: float = 300.0) -> Study:
        """Stop launching trials and cancel the running ones; a finished study stays as it is.

        The service's scheduler carries the stop out; with ``wait`` this returns once it has
        (``TimeoutError`` after ``timeout`` seconds), else at once with ``stop_requested``."""
        if wait:
            check_wait(0.5, timeout)  # before the stop is sent
        self.data = self.client.stop_study(self.id)
        if wait and not self.status.finished:
            self.wait(timeout=timeout, poll=0.5)
        return self

    def delete(self) -> None:
        """Delete the study and everything recorded for it (the service's scheduler removes
        it; the study is gone to every reader at once)."""
        self.client.delete_study(self.id)

    def to_dataframe(
        self, status: schemas.TrialStatus | str | None = None, sort: str = "number"
    ) -> pandas.DataFrame:
        """Every trial (optionally only those in ``status``, in the order of ``sort``) as a
        pandas DataFrame with the columns of ``GET /studies/{id}/trials.csv``, which it reads:
        one ``params_<name>`` per parameter, ``fold_0`` .. ``fold_{K-1}`` the value of each
        fold, ``value_folds`` and ``pruned_reason`` to tell a pruned trial's partial mean
        apart, and the times (``pip install 'foldwise[pandas]'``)."""
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(
                "Study.to_dataframe() needs pandas: pip install 'foldwise[pandas]'"
            ) from exc
        text = self.client.fetch_trials_csv(self.id, status=status, sort=sort)
        rows, columns = read_trials_csv(text, self.data.spec.space)
        return pandas.DataFrame(rows, columns=columns)


def check_wait(poll: float, timeout: float | None, outage: float = 60.0) -> None:
    """``ValueError`` unless ``poll`` is in (0, ``MAX_POLL_SECONDS``] and ``timeout`` (or
    None) and ``outage`` are seconds, at least 0: ``time.sleep`` raised on the rest only after
    a first poll, and a NaN ``outage`` waited for ever."""
    if not (math.isfinite(poll) and 0 < poll <= MAX_POLL_SECONDS):
        raise ValueError(f"poll must be seconds above 0, at most {MAX_POLL_SECONDS:g}: {poll}")
    if timeout is not None and not timeout >= 0:  # NaN too
        raise ValueError(f"timeout must be seconds, at least 0, or None: {timeout}")
    if not outage >= 0:
        raise ValueError(f"outage must be seconds, at least 0: {outage}")


def all_pages(fetch: Callable[[int], schemas.Page[Any]]) -> list[Any]:
    rows: list[Any] = []
    while True:
        page = fetch(len(rows))
        rows.extend(page.data)
        if not page.data or len(rows) >= page.count:
            return rows


class StudyTrial(schemas.TrialSummary):
    """A trial of a study as the SDK hands it out: its summary, and the models it left."""

    _study: Any = PrivateAttr(default=None)

    @classmethod
    def of(cls, study: Study, summary: schemas.TrialSummary) -> StudyTrial:
        trial = cls.model_validate(summary.model_dump())
        trial._study = study
        return trial

    def download_models(self, directory: str | Path, *, refits: bool = True) -> list[Path]:
        """This trial's fold models (and, with ``refits``, its refits' models) written to
        ``directory``; ``foldwise.trainers.load_model`` rebuilds one."""
        return download_trial_models(self._study, self.number, directory, refits=refits)
