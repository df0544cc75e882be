"""``GET /health``: whether the database and the Ray executor answer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import text

router = APIRouter(tags=["health"])


@router.get("/health")
def health(request: Request) -> dict[str, Any]:
    database = _database_health(request)
    scheduler = request.app.state.scheduler
    ray = scheduler.executor_health() if scheduler is not None else {"ok": None, "detail": "off"}
    ok = database["ok"] and ray["ok"] is not False
    return {"status": "ok" if ok else "degraded", "database": database, "ray": ray}


def _database_health(request: Request) -> dict[str, Any]:
    engine = request.app.state.engine
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means the database is unreachable
        return {"ok": False, "backend": engine.url.get_backend_name(), "detail": str(exc)}
    return {"ok": True, "backend": engine.url.get_backend_name()}
