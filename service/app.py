"""The FastAPI application: routes, database, and the scheduler with its Ray executor."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from service.api.routes import artifacts, health, insights, studies, trials
from service.config import Settings, get_settings
from service.dashboard.routes import router as dashboard_router
from service.dashboard.routes import static_files
from service.db.engine import make_engine, make_session_factory
from service.db.schema import prepare_database
from service.scheduler.scheduler import Scheduler
from service.scheduler.store import SchedulerStore

log = logging.getLogger("foldwise")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; ``uvicorn --factory service.app:create_app`` serves it."""
    settings = settings or get_settings()
    app = FastAPI(
        title="foldwise",
        version="0.1.0",
        summary="Hyperparameter and architecture search with K-fold cross-validation",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.scheduler = None
    app.include_router(studies.router)
    app.include_router(trials.router)
    app.include_router(artifacts.router)
    app.include_router(insights.router)
    app.include_router(health.router)
    app.include_router(dashboard_router)
    app.mount("/dashboard/static", static_files, name="dashboard-static")
    app.add_api_route("/", _to_dashboard, include_in_schema=False)
    return app


def _to_dashboard() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    prepare_database(settings.database_url, upgrade=settings.upgrade_db)
    engine = make_engine(settings.database_url)
    app.state.engine = engine
    app.state.sessions = make_session_factory(engine)
    executor = None
    if settings.scheduler_enabled:
        executor, app.state.scheduler = await _start_scheduler(app, settings)
    try:
        yield
    finally:
        if app.state.scheduler is not None:
            await app.state.scheduler.close()
        if executor is not None:
            await executor.shutdown()
        engine.dispose()


async def _start_scheduler(app: FastAPI, settings: Settings) -> tuple[object, Scheduler]:
    from service.executor import RayExecutor

    executor = RayExecutor(
        address=settings.ray_address,
        num_cpus=settings.ray_num_cpus,
        max_idle_groups=settings.max_idle_worker_groups,
    )
    await executor.start()
    store = SchedulerStore(app.state.sessions, artifact_dir=settings.artifact_dir)
    scheduler = Scheduler(store, executor, poll_seconds=settings.poll_seconds)
    scheduler.start()
    log.info("scheduler started (Ray at %s)", settings.ray_address or "a local Ray")
    return executor, scheduler
