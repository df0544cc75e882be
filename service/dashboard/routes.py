"""Dashboard pages: server-rendered shells whose scripts read the JSON API the SDK uses."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
static_files = StaticFiles(directory=HERE / "static")

router = APIRouter(prefix="/dashboard", tags=["dashboard"], include_in_schema=False)


@router.get("", response_class=HTMLResponse)
def studies_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(request, "studies.html", {"title": "Studies"})
