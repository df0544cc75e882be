"""Exports of a study: its trials as CSV, one row per trial with the value of each fold, for a
spreadsheet or pandas; ``Study.to_dataframe()`` and ``foldwise trials --csv`` read it too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from foldwise.schemas import TrialStatus
from foldwise.service.api.deps import DbDep, check_trial_sort, study_or_404, trial_sort_options
from foldwise.service.api.read_cache import NOT_MODIFIED, ReadsDep, not_modified
from foldwise.service.db import trials as trial_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.hardening.errors import documented
from foldwise.service.hardening.input_rules import StudyId, TrialSortQuery
from foldwise.trials_csv import ScoredColumns, csv_header, csv_rows

router = APIRouter(prefix="/studies/{study_id}", tags=["trials"], responses=documented(404))


CSV_RESPONSES = {
    200: {
        "description": "The trials as CSV (docs/api.md, Exports), streamed",
        "content": {"text/csv": {"schema": {"type": "string"}}},
    },
    **NOT_MODIFIED,
}


EXPORT_PAGE = 1000
"""Trials an export reads at a time, each page in its own short read."""


# No media type on the response class: FastAPI would document the JSON errors as CSV too.
@router.get("/trials.csv", response_class=StreamingResponse, responses=CSV_RESPONSES)
async def export_trials_csv(
    study_id: StudyId,
    reads: ReadsDep,
    db: DbDep,
    status_: Annotated[TrialStatus | None, Query(alias="status")] = None,
    sort: TrialSortQuery = "number",
) -> Response:
    """Every trial (or those in ``status``) in the order of ``sort``, as the trial list sorts:
    number, status, value, std_error, value_folds, ``params_<name>`` per parameter,
    ``fold_0`` .. ``fold_{K-1}``, with several objectives or constraints their columns
    (``foldwise.trials_csv``), started_at, finished_at, duration_s, error, pruned_reason.
    Text that a spreadsheet would run as a formula starts with ``'``.

    Which trials, in which order, and the columns are read at the revision the ETag names;
    then ``EXPORT_PAGE`` trials at a time are read, written and sent, so neither the service
    nor a read holds the whole table."""

    def work(session: Session) -> tuple[list[int], list[str], int, ScoredColumns]:
        study = study_or_404(session, study_id)
        spec = study.spec
        space = list(spec.space)
        check_trial_sort(sort, study.spec.space)
        options = trial_sort_options(study)
        trial_ids = trial_repo.export_order(
            session, study.id, status=status_, sort=sort, **options
        )
        others = trial_repo.other_param_names(session, study.id, space, status=status_)
        scored = ScoredColumns(
            objectives=tuple(o.metric for o in spec.objectives or ()),
            constraints=tuple(c.metric for c in spec.constraints),
        )
        return trial_ids, [*space, *others], spec.fold_count, scored

    headers, export = await reads.study_export(study_id, work)
    if export is None:
        return not_modified(headers)
    trial_ids, names, folds, scored = export
    headers["Content-Disposition"] = f'attachment; filename="study-{study_id}-trials.csv"'
    chunks = _csv_pages(db, trial_ids, names, folds, scored)
    return StreamingResponse(chunks, media_type="text/csv", headers=headers)  # charset=utf-8


async def _csv_pages(
    db: SessionRunner, trial_ids: list[int], names: list[str], folds: int, scored: ScoredColumns
) -> AsyncIterator[str]:
    """The header, then each page of trials as it is read. A trial that changed since the
    export began (a running one finished) shows as it is now, in its place. Pages are written
    on a worker thread too (a thousand rows take milliseconds: on the event loop, twenty
    exports at once held up every other reader for seconds)."""
    yield csv_header(names, folds, scored)
    for start in range(0, len(trial_ids), EXPORT_PAGE):
        page = trial_ids[start : start + EXPORT_PAGE]
        records = await db.read(partial(trial_repo.export_records, trial_ids=page))
        yield await asyncio.to_thread(csv_rows, records, names, folds, scored)
