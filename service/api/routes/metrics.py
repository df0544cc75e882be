"""``GET /metrics``: the service's Prometheus metrics (see ``service.metrics``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from foldwise.service.api.deps import DbDep
from foldwise.service.metrics import CONTENT_TYPE_LATEST, DatabaseState, exposition

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request, db: DbDep) -> Response:
    """Prometheus text format: studies by status, trials and fold runs in flight, whether this
    instance schedules, trials and fold runs ended by status, fold queue wait and suggestion
    seconds (histograms), and the process's own CPU and memory. Needs a token of any role."""
    state = await db.read(DatabaseState.read)
    scheduler = request.app.state.scheduler
    leader = None if scheduler is None else scheduler.lease.epoch is not None
    return Response(exposition(state, leader), media_type=CONTENT_TYPE_LATEST)
