"""``GET /health``: whether the database and the Ray executor answer."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request
from sqlalchemy import text
from sqlalchemy.orm import Session

from foldwise.service.api.deps import DbDep

router = APIRouter(tags=["health"])


@router.get("/health")
async def health(request: Request, db: DbDep) -> dict[str, Any]:
    database = await _database_health(db)
    scheduler = request.app.state.scheduler
    if scheduler is None:
        ray: dict[str, Any] = {"ok": None, "detail": "off"}
        lease: dict[str, Any] = {"leader": False, "detail": "off"}
    else:  # Ray's status calls block: keep them off the event loop
        ray = await anyio.to_thread.run_sync(scheduler.executor_health)
        lease = await scheduler.lease_status()
    ok = database["ok"] and ray["ok"] is not False
    return {
        "status": "ok" if ok else "degraded",
        "database": database,
        "ray": ray,
        "scheduler": lease,
    }


async def _database_health(db: DbDep) -> dict[str, Any]:
    backend = db.engine.url.get_backend_name()
    try:
        await db.read(_select_one)
    except Exception as exc:  # any driver error means the database is unreachable
        return {"ok": False, "backend": backend, "detail": str(exc)}
    return {"ok": True, "backend": backend}


def _select_one(session: Session) -> None:
    session.execute(text("SELECT 1"))
