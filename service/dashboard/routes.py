"""Dashboard pages: server-rendered shells whose scripts read the JSON API the SDK uses."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request, status
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from foldwise.json_values import find_unsafe
from foldwise.service.api.auth import Principal, get_principal
from foldwise.service.dashboard.sign_in import SignedInDep
from foldwise.service.hardening.input_rules import StudyId, TrialNumber
from foldwise.service.hardening.security_headers import page_policy
from foldwise.service.hardening.strict_json import StrictJSONRoute
from foldwise.spec_text import SpecTextError, parse_spec_text

HERE = Path(__file__).parent
PLOTLY = "plotly-basic-4.1.1.min.js"
"""Vendored from the npm package plotly.js-basic-dist-min (MIT, static/plotly-LICENSE.txt): every
plot here is an SVG ``scatter``, and this is the smallest bundle that has it (1.2 MB)."""

templates = Jinja2Templates(directory=HERE / "templates")
templates.env.globals["plotly_js"] = f"/dashboard/static/{PLOTLY}"
static_files = StaticFiles(directory=HERE / "static")

MAX_SPEC_TEXT_BYTES = 256 * 1024
"""A spec pasted into the dashboard: a 100-parameter spec is under 20 kB."""

router = APIRouter(
    prefix="/dashboard",
    tags=["dashboard"],
    include_in_schema=False,
    max_body_size=MAX_SPEC_TEXT_BYTES,
    route_class=StrictJSONRoute,
)


@router.get("", response_class=HTMLResponse)
async def studies_page(request: Request, who: SignedInDep) -> HTMLResponse:
    return _page(request, who, "studies.html", title="Studies")


@router.get("/studies/{study_id}", response_class=HTMLResponse)
async def study_page(request: Request, study_id: StudyId, who: SignedInDep) -> HTMLResponse:
    return _page(request, who, "study.html", title=f"Study {study_id}", study_id=study_id)


@router.get("/studies/{study_id}/trials/{number}", response_class=HTMLResponse)
async def trial_page(
    request: Request, study_id: StudyId, number: TrialNumber, who: SignedInDep
) -> HTMLResponse:
    title = f"Trial {number} · study {study_id}"
    return _page(request, who, "trial.html", title=title, study_id=study_id, number=number)


@router.get("/sign-in", response_class=HTMLResponse)
async def sign_in_page(request: Request) -> HTMLResponse:
    return _page(request, None, "sign_in.html", title="Sign in")


def _page(request: Request, who: Principal | None, template: str, **context: Any) -> HTMLResponse:
    nonce, headers = page_policy()
    context = {"who": who, "csp_nonce": nonce, **context}
    return templates.TemplateResponse(request, template, context, headers=headers)


@router.post("/spec", dependencies=[Depends(get_principal)])
def parse_spec(text: Annotated[str, Body(media_type="text/plain")]) -> dict[str, Any]:
    """YAML or JSON text to ``{spec, lines}``; the page then posts ``spec`` to ``/studies``."""
    try:
        spec, lines = parse_spec_text(text, "the text")
    except SpecTextError as exc:
        detail = [{"type": "yaml_error", "loc": ["body"], "msg": str(exc), "line": exc.line}]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail) from exc
    if not isinstance(spec, dict):
        detail = [{"type": "yaml_error", "loc": ["body"], "msg": "a spec is a mapping of fields"}]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)
    # what JSON cannot carry back (a date, NaN, nesting past the limit) is named here, at its line
    if problems := list(itertools.islice(find_unsafe(spec), 20)):
        detail = [
            {
                "type": p.kind,
                "loc": ["body", *p.loc],
                "msg": p.message,
                "line": lines.get(".".join(map(str, p.loc))),
            }
            for p in problems
        ]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)
    return {"spec": spec, "lines": lines}
