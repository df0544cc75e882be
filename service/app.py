"""The FastAPI application: routes, database, and the scheduler with its Ray executor."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp

from foldwise.service.api.auth import TokenCache, get_principal
from foldwise.service.api.read_cache import ReadCache
from foldwise.service.api.routes import (
    artifacts,
    exports,
    health,
    holdout,
    insights,
    metrics,
    pareto,
    refits,
    studies,
    trials,
)
from foldwise.service.config import Settings, get_settings
from foldwise.service.dashboard import sign_in
from foldwise.service.dashboard.routes import router as dashboard_router
from foldwise.service.dashboard.routes import static_files
from foldwise.service.db.engine import SessionRunner
from foldwise.service.db.schema import prepare_database
from foldwise.service.executor.contract import Executor
from foldwise.service.hardening.errors import (
    documented,
    method_not_allowed_handler,
    validation_error_handler,
)
from foldwise.service.hardening.http_rules import ErrorsAsJson, HeadAsGet, HttpRules
from foldwise.service.hardening.input_rules import check_query_once
from foldwise.service.hardening.security_headers import SecurityHeaders
from foldwise.service.loop_lag import watch_loop_lag
from foldwise.service.scheduler.lease import SchedulerLease
from foldwise.service.scheduler.scheduler import Scheduler
from foldwise.service.scheduler.store import SchedulerStore

log = logging.getLogger("foldwise")


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; ``uvicorn --factory foldwise.service.app:create_app`` serves it."""
    settings = settings or get_settings()
    app = FastAPIOffline(  # /docs loads Swagger UI from here, not from a CDN
        redoc_url=None,  # ReDoc would still fetch its logo from cdn.redoc.ly
        title="foldwise",
        version="0.1.0",
        summary="Hyperparameter and architecture search with K-fold cross-validation",
        lifespan=_lifespan,
        max_body_size=settings.max_body_bytes,
        dependencies=[Depends(check_query_once)],
        separate_input_output_schemas=False,  # the spec a study returns is the one it takes
    )
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, method_not_allowed_handler)
    app.add_middleware(HttpRules)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_hosts)
    _wrap_outside(app)
    app.state.settings = settings
    app.state.scheduler = None
    app.state.token_cache = TokenCache()
    authenticated = {"dependencies": [Depends(get_principal)], "responses": documented(401, 403)}
    for router in (
        studies.router,
        trials.router,
        exports.router,
        artifacts.router,
        holdout.router,
        pareto.router,
        refits.router,
        insights.router,
        metrics.router,
    ):
        app.include_router(router, **authenticated)
    app.include_router(health.router)
    app.include_router(dashboard_router)
    app.include_router(sign_in.router)
    app.mount("/dashboard/static", static_files, name="dashboard-static")
    app.add_api_route("/", _to_dashboard, include_in_schema=False)
    return app


def _wrap_outside(app: FastAPI) -> None:
    """Put three wrappers outside the middleware stack FastAPI builds: its body limiter
    answers there (a text/plain 413), so only there is every answer seen (``ErrorsAsJson``,
    ``HeadAsGet``, ``SecurityHeaders``). FastAPIOffline makes a FastAPI, so the stack's
    builder is wrapped on the instance (Starlette builds the stack on the first request)."""
    build = app.build_middleware_stack

    def build_wrapped() -> ASGIApp:
        return SecurityHeaders(HeadAsGet(ErrorsAsJson(build())))

    app.build_middleware_stack = build_wrapped  # type: ignore[method-assign]


def _to_dashboard() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    prepare_database(settings.database_url, upgrade=settings.upgrade_db)
    runners = [SessionRunner(settings.database_url, settings.api_db_connections)]
    app.state.db = runners[0]
    app.state.engine, app.state.sessions = runners[0].engine, runners[0].sessions
    app.state.read_cache = ReadCache(settings.read_cache_bytes)
    executor = None
    if settings.scheduler_enabled:  # its own connections: readers never hold up the study
        url = settings.database_url
        runners.append(SessionRunner(url, settings.scheduler_db_connections, lane="scheduler"))
        runners.append(SessionRunner(url, 1, lane="lease"))  # the lease's heartbeat
        runners.append(SessionRunner(url, 1, lane="reports"))  # the batches of fold reports
        lease = SchedulerLease(runners[2], ttl_seconds=settings.scheduler_lease_seconds)
        store = SchedulerStore(
            runners[1],
            fence=lease.fence,
            artifact_dir=settings.artifact_dir,
            reports_db=runners[3],
            report_tick_seconds=settings.report_tick_seconds,
        )
        executor, app.state.scheduler = await _start_scheduler(store, lease, settings)
    _freeze_startup_objects()
    lag_watch = asyncio.create_task(watch_loop_lag(), name="loop-lag")
    try:
        yield
    finally:
        lag_watch.cancel()
        if app.state.scheduler is not None:
            await app.state.scheduler.close()
        if executor is not None:
            await executor.shutdown()
        for runner in runners:
            runner.engine.dispose()


def _freeze_startup_objects() -> None:
    """Move everything start-up made (torch, Ray, the app: long-lived) out of the collector's
    reach, so a full collection scans only what requests make: a collection that walks all of
    start-up's objects pauses every request at once (docs/api.md, the load figures)."""
    gc.collect()
    gc.freeze()


async def _start_scheduler(
    store: SchedulerStore, lease: SchedulerLease, settings: Settings
) -> tuple[Executor, Scheduler]:
    executor = _make_executor(settings)
    await executor.start()
    scheduler = Scheduler(store, executor, lease, poll_seconds=settings.poll_seconds)
    scheduler.start()
    return executor, scheduler


def _make_executor(settings: Settings) -> Executor:
    """Ray (local, or the cluster at ``ray_address``), or the simulated cluster a test or a
    benchmark asked for."""
    if settings.executor == "simulated":
        from foldwise.service.executor.simulated import SimulatedCluster, SimulatedExecutor

        cluster = SimulatedCluster.model_validate_json(settings.simulated_cluster)
        log.warning("fold runs are simulated (FOLDWISE_EXECUTOR=simulated): %s", cluster)
        return SimulatedExecutor(cluster)
    from foldwise.service.artifact_store import artifact_store
    from foldwise.service.executor import RayExecutor
    from foldwise.service.task_code import CodeCache

    log.info("scheduler runs fold runs on Ray at %s", settings.ray_address or "a local Ray")
    return RayExecutor(
        address=settings.ray_address,
        num_cpus=settings.ray_num_cpus,
        max_idle_groups=settings.max_idle_worker_groups,
        task_modules=settings.task_modules,
        artifacts=artifact_store(settings.artifact_dir),
        code_cache=CodeCache(settings.code_cache_dir),
    )
