"""Exports of a study: its trials as CSV, one row per trial with the value of each fold, for a
spreadsheet or pandas; ``Study.to_dataframe()`` and ``foldwise trials --csv`` read it too."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from foldwise.schemas import TrialStatus
from foldwise.trials_csv import TrialRecord, csv_chunks
from service.api.conditional import NOT_MODIFIED, ReadsDep, not_modified
from service.api.deps import (
    StudyId,
    TrialSortQuery,
    check_trial_sort,
    study_or_404,
    trial_sort_options,
)
from service.api.errors import documented
from service.db import trials as trial_repo

router = APIRouter(prefix="/studies/{study_id}", tags=["trials"], responses=documented(404))


CSV_RESPONSES = {
    200: {
        "description": "The trials as CSV (docs/api.md, Exports), streamed",
        "content": {"text/csv": {"schema": {"type": "string"}}},
    },
    **NOT_MODIFIED,
}


# No media type on the response class: FastAPI would document the JSON errors as CSV too.
@router.get("/trials.csv", response_class=StreamingResponse, responses=CSV_RESPONSES)
async def export_trials_csv(
    study_id: StudyId,
    reads: ReadsDep,
    status_: Annotated[TrialStatus | None, Query(alias="status")] = None,
    sort: TrialSortQuery = "number",
) -> Response:
    """Every trial (or those in ``status``) in the order of ``sort``, as the trial list sorts:
    number, status, value, std_error, value_folds, ``params_<name>`` per parameter,
    ``fold_0`` .. ``fold_{K-1}``, started_at, finished_at, duration_s, error, pruned_reason.
    Text that a spreadsheet would run as a formula starts with ``'``."""

    def work(session: Session) -> tuple[list[TrialRecord], list[str], int]:
        study = study_or_404(session, study_id)
        space = study.spec["space"]
        check_trial_sort(sort, space)
        records = trial_repo.export_trials(
            session,
            study.id,
            status=status_,
            sort=sort,
            **trial_sort_options(study),
        )
        return records, list(space), int(study.spec["parallel"]["folds"])

    headers, export = await reads.study_export(study_id, work)
    if export is None:
        return not_modified(headers)
    records, names, folds = export
    headers["Content-Disposition"] = f'attachment; filename="study-{study_id}-trials.csv"'
    chunks = csv_chunks(records, names, folds)
    return StreamingResponse(chunks, media_type="text/csv", headers=headers)  # charset=utf-8
