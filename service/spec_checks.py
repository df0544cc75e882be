"""Checks of a submitted spec that need the server side: the task and optimizer must load."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, status

from foldwise.spec import StudySpec
from service.study_optimizer import build_optimizer


def check_runnable(spec: StudySpec) -> None:
    """Raise a 422 naming the field when the task cannot be found or the optimizer refuses."""
    from trainers.task import TaskNotFound, resolve_task

    try:
        resolve_task(spec.trainer.task)
    except TaskNotFound as exc:
        raise _invalid(("trainer", "task"), str(exc), spec.trainer.task) from exc
    try:
        build_optimizer(spec)
    except (ValueError, TypeError) as exc:
        raise _invalid(("optimizer", "options"), str(exc), spec.optimizer.options) from exc


def _invalid(loc: tuple[str, ...], message: str, value: Any) -> HTTPException:
    detail = [{"type": "value_error", "loc": ["body", *loc], "msg": message, "input": value}]
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)
