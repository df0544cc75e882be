"""The Python SDK: a synchronous client of the foldwise REST API (DESIGN §4, §9).

``Client`` speaks HTTP and turns failures into ``foldwise.errors``; ``Study``
(``foldwise.study``) is a handle on one study that re-reads it from the service on demand.
Nothing here talks to the database.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from foldwise import schemas
from foldwise.credentials import find_token, token_problem
from foldwise.errors import (
    ApiError,
    FoldwiseError,
    Forbidden,
    InvalidSpec,
    NotAuthenticated,
    NotFound,
    ServiceUnavailable,
)
from foldwise.held_responses import HeldResponses
from foldwise.limits import SUBMIT_TIMEOUT_S
from foldwise.spec import STORED, StudySpec
from foldwise.spec_text import SpecTextError, parse_spec_text
from foldwise.strict_json import StrictJSONError, loads_strict
from foldwise.study import PAGE_SIZE, Study, all_pages

DEFAULT_URL = "http://127.0.0.1:8000"
TRIAL_SORT = re.compile(r"best|-?(number|value|duration|params\.\S+)")
"""Orders of a trial list: `best`, or number, value, duration or params.<name>, `-` descending.
The service checks that a named parameter is in the study's space."""
_GATEWAY_ERRORS = (502, 503, 504)

M = TypeVar("M", bound=BaseModel)
SpecSource = StudySpec | Mapping[str, Any] | str | Path


def load_spec(source: SpecSource) -> StudySpec:
    """Validate a spec given as a model, a mapping, or the path of a YAML/JSON file.

    Raises ``InvalidSpec`` for an unreadable file, a document that does not parse, or one that
    ``StudySpec`` rejects, so mistakes surface before anything is sent.
    """
    if isinstance(source, StudySpec):
        return source
    document = source if isinstance(source, Mapping) else _read_document(Path(source))
    try:
        return StudySpec.model_validate(document)
    except ValidationError as exc:
        raise InvalidSpec.from_validation_error(exc) from exc


def _read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidSpec([f"cannot read {path}: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        message = f"it is not UTF-8 text (byte {byte:#04x} at offset {exc.start})"
        raise InvalidSpec([f"cannot read {path}: {message}"]) from exc
    try:
        if path.suffix == ".json":
            document = loads_strict(text)
        else:
            document, _lines = parse_spec_text(text, str(path))
    except json.JSONDecodeError as exc:
        raise InvalidSpec([f"cannot parse {path}: {exc}"]) from exc
    except StrictJSONError as exc:  # a key given twice, an integer too long, deep nesting
        steps = exc.path
        while exc.kind == "too_deep" and steps and isinstance(steps[-1], int):
            steps = steps[:-1]  # the field holding the deep lists, not each of their levels
        where = ".".join(map(str, steps))  # the document's own keys, none dropped
        detail = f"{where}: {exc}" if steps else f"it {exc}"  # "it is nested more than ..."
        raise InvalidSpec([f"cannot parse {path}: {detail}"]) from exc
    except SpecTextError as exc:
        raise InvalidSpec([" ".join(str(exc).split())]) from exc
    if not isinstance(document, dict):
        raise InvalidSpec([f"{path} must hold a mapping (name, space, budget, ...)"])
    return document


class Client:
    """A connection to a foldwise service; use it as a context manager to close it."""

    def __init__(
        self, url: str | None = None, *, token: str | None = None, timeout: float = 10.0
    ) -> None:
        """``token``: else ``FOLDWISE_TOKEN``, else the one saved for ``url`` (see
        ``foldwise.credentials``)."""
        self.url = _normalise_url(url or os.environ.get("FOLDWISE_URL") or DEFAULT_URL)
        secret = find_token(self.url, token)
        if secret and (problem := token_problem(secret)):
            raise FoldwiseError(problem)
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)
        self._held = HeldResponses()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def close(self) -> None:
        self._http.close()

    def create_study(self, spec: SpecSource) -> Study:
        """Validate ``spec`` locally, then create the study; raises ``InvalidSpec`` if rejected."""
        body = load_spec(spec).model_dump(mode="json", by_alias=True, exclude_unset=True)
        wait = max(self.timeout, SUBMIT_TIMEOUT_S)  # a user task is loaded on the cluster first
        data = self._request("POST", "/studies", json=body, spec=True, timeout=wait)
        return Study(self, _parse(schemas.Study, data))

    def get_study(self, study_id: int) -> Study:
        return Study(self, self.fetch_study(study_id))

    def list_studies(self, status: schemas.StudyStatus | str | None = None) -> list[Study]:
        """Every study (optionally only those in ``status``), read page by page."""
        pages = all_pages(lambda at: self.fetch_studies(status, limit=PAGE_SIZE, offset=at))
        return [Study(self, data) for data in pages]

    def fetch_study(self, study_id: int) -> schemas.Study:
        """The study's current data, as the API returns it."""
        data = self._request("GET", f"/studies/{study_id}", missing=f"study {study_id} not found")
        return _parse(schemas.Study, data)

    def fetch_studies(
        self, status: schemas.StudyStatus | str | None = None, *, limit: int = 100, offset: int = 0
    ) -> schemas.Page[schemas.Study]:
        """One page of studies and the total ``count`` that match."""
        params = _query(status=status, limit=limit, offset=offset)
        data = self._request("GET", "/studies", params=params)
        return _parse(schemas.Page[schemas.Study], data)

    def fetch_trials(
        self,
        study_id: int,
        *,
        status: schemas.TrialStatus | str | None = None,
        sort: str = "number",
        limit: int = 100,
        offset: int = 0,
    ) -> schemas.Page[schemas.TrialSummary]:
        """One page of a study's trials; ``sort`` matches ``TRIAL_SORT``."""
        params = _query(status=status, sort=_trial_sort(sort), limit=limit, offset=offset)
        path = f"/studies/{study_id}/trials"
        data = self._request("GET", path, params=params, missing=f"study {study_id} not found")
        return _parse(schemas.Page[schemas.TrialSummary], data)

    def iter_trials_csv(
        self,
        study_id: int,
        *,
        status: schemas.TrialStatus | str | None = None,
        sort: str = "number",
    ) -> Iterator[bytes]:
        """Every trial of the study (or those in ``status``) as CSV, in chunks as they arrive
        (``GET /studies/{id}/trials.csv``; ``foldwise.trials_csv`` says what it holds)."""
        params = _query(status=status, sort=_trial_sort(sort))
        return self._stream(
            f"/studies/{study_id}/trials.csv", params, f"study {study_id} not found"
        )

    def fetch_trials_csv(
        self,
        study_id: int,
        *,
        status: schemas.TrialStatus | str | None = None,
        sort: str = "number",
    ) -> str:
        """The whole CSV of ``iter_trials_csv`` as text."""
        chunks = self.iter_trials_csv(study_id, status=status, sort=sort)
        return b"".join(chunks).decode("utf-8")

    def fetch_trial(self, study_id: int, number: int) -> schemas.Trial:
        missing = f"trial {number} of study {study_id} not found"
        data = self._request("GET", f"/studies/{study_id}/trials/{number}", missing=missing)
        return _parse(schemas.Trial, data)

    def fetch_top_folds(self, study_id: int, top: int = 10) -> schemas.TopFolds:
        """Each fold's value for the best ``top`` trials, and the best trial's value beside
        its selection-corrected estimate (``selection``)."""
        data = self._request(
            "GET",
            f"/studies/{study_id}/insights/folds",
            params={"top": top},
            missing=f"study {study_id} not found",
        )
        return _parse(schemas.TopFolds, data)

    def fetch_pareto(self, study_id: int) -> schemas.ParetoFront:
        """The study's Pareto front: its feasible, non-dominated completed trials."""
        data = self._request(
            "GET", f"/studies/{study_id}/pareto", missing=f"study {study_id} not found"
        )
        return _parse(schemas.ParetoFront, data)

    def stop_study(self, study_id: int) -> schemas.Study:
        """Ask the service to stop launching trials and cancel the running ones: the study as
        it is now, with ``stop_requested`` until the scheduler has stopped it."""
        path = f"/studies/{study_id}/stop"
        data = self._request("POST", path, missing=f"study {study_id} not found")
        return _parse(schemas.Study, data)

    def request_holdout(
        self,
        study_id: int,
        *,
        score: str | None = None,
        trial: int | None = None,
        epochs: int | None = None,
    ) -> schemas.Study:
        """Ask for an ended study's score on the task's test data (``POST .../holdout``): the
        study, whose ``holdout`` says how far the score is."""
        body = _body(score=score, trial=trial, epochs=epochs)
        path = f"/studies/{study_id}/holdout"
        data = self._request("POST", path, json=body, missing=f"study {study_id} not found")
        return _parse(schemas.Study, data)

    def request_refit(
        self, study_id: int, *, trial: int | None = None, epochs: int | None = None
    ) -> schemas.Refit:
        """Ask for a refit of an ended study's best (or named) trial on all its training data."""
        body = _body(trial=trial, epochs=epochs)
        path = f"/studies/{study_id}/refits"
        data = self._request("POST", path, json=body, missing=f"study {study_id} not found")
        return _parse(schemas.Refit, data)

    def fetch_refits(self, study_id: int) -> list[schemas.Refit]:
        path = f"/studies/{study_id}/refits"
        data = self._request("GET", path, missing=f"study {study_id} not found")
        return _parse(schemas.Page[schemas.Refit], data).data

    def fetch_refit(self, study_id: int, number: int) -> schemas.Refit:
        missing = f"refit {number} of study {study_id} not found"
        data = self._request("GET", f"/studies/{study_id}/refits/{number}", missing=missing)
        return _parse(schemas.Refit, data)

    def download(self, path: str, target: str | os.PathLike[str], *, missing: str) -> Path:
        """The file at ``path`` of the API (a model) written to ``target``, whole or not at
        all (a partial download never stays behind)."""
        target = Path(target)
        partial = target.with_name(f".{target.name}.part")
        try:
            with partial.open("wb") as out:
                for chunk in self._stream(path, {}, missing):
                    out.write(chunk)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        return target

    def delete_study(self, study_id: int) -> None:
        self._request("DELETE", f"/studies/{study_id}", missing=f"study {study_id} not found")

    def health(self) -> dict[str, Any]:
        """``GET /health``: ``{"status": "ok"|"degraded", "database": {"ok", ...},
        "ray": {"ok", ...}, "scheduler": {"leader", ...}}``."""
        return self._request("GET", "/health")

    def _stream(self, path: str, params: dict[str, Any], missing: str) -> Iterator[bytes]:
        """A GET whose body is read in chunks as they arrive, not as JSON."""
        try:
            with self._http.stream("GET", path, params=params) as response:
                if not response.is_success:
                    response.read()
                    self._raise_error(response, "GET", path, missing=missing, spec=False)
                yield from response.iter_bytes()
        except httpx.TransportError as exc:
            raise ServiceUnavailable(self.url, _transport_reason(exc)) from exc

    def _request(
        self, method: str, path: str, *, missing: str | None = None, spec: bool = False, **kw: Any
    ) -> Any:
        key = str(httpx.URL(path, params=kw.get("params"))) if method == "GET" else ""
        headers = self._held.headers(key) if key else {}
        try:
            response = self._http.request(method, path, headers=headers, **kw)
        except httpx.TransportError as exc:
            raise ServiceUnavailable(self.url, _transport_reason(exc)) from exc
        if response.status_code == 304 and key:
            return self._held.recall(key)
        if not response.is_success:
            self._raise_error(response, method, path, missing=missing, spec=spec)
        if response.status_code == 204 or not response.content:
            return None
        body = _json_body(response, self.url)
        if key:
            self._held.remember(key, response, body)
        return body

    def _raise_error(
        self, response: httpx.Response, method: str, path: str, *, missing: str | None, spec: bool
    ) -> NoReturn:
        """The SDK's error for an unsuccessful answer (its body read)."""
        detail = _error_detail(response)
        if response.status_code == 401:
            raise NotAuthenticated(self.url, _detail_text(detail))
        if response.status_code == 403:
            raise Forbidden(_detail_text(detail))
        if response.status_code == 404 and missing:
            raise NotFound(missing)
        if response.status_code == 422 and spec:
            raise InvalidSpec.from_detail(detail)
        if response.status_code in _GATEWAY_ERRORS:
            raise ServiceUnavailable(self.url, f"HTTP {response.status_code} {detail}")
        raise ApiError(
            f"{method} {path} failed with HTTP {response.status_code}: {_detail_text(detail)}",
            status_code=response.status_code,
            detail=detail,
        )


def _normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise FoldwiseError(f"invalid service URL {url!r}: {exc}") from exc
    return url


def _body(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _query(**params: Any) -> dict[str, Any]:
    return {key: str(value) for key, value in params.items() if value is not None}


def _trial_sort(sort: str) -> str:
    if not TRIAL_SORT.fullmatch(sort):
        raise ValueError(
            "sort must be best, or number, value, duration or params.<name> "
            f"with an optional leading '-', not {sort!r}"
        )
    return sort


def _transport_reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    return str(exc) or type(exc).__name__


def _json_body(response: httpx.Response, url: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise ApiError(
            f"unexpected non-JSON answer from {url}{response.request.url.path}",
            status_code=response.status_code,
        ) from exc


def _error_detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200] or response.reason_phrase
    return body.get("detail", body) if isinstance(body, dict) else body


def _detail_text(detail: Any) -> str:
    if isinstance(detail, list) and all(isinstance(item, Mapping) for item in detail):
        return "; ".join(InvalidSpec.from_detail(detail).problems)
    return str(detail)


def _parse(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data, context={STORED: True})  # a spec as stored
    except ValidationError as exc:
        raise FoldwiseError(
            f"unexpected answer from the service ({exc.error_count()} fields do not match "
            f"{model.__name__}); is it a foldwise service of the same version?"
        ) from exc
