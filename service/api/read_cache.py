"""Reads for pollers: an ETag from the study's revision, 304s, and cached serialised answers.

Every change to a study (its status, trials, fold runs, epochs) bumps ``studies.revision`` in the
same transaction (``service.db.studies.touch_study``), and a change to the study or a trial
also ``studies.trials_revision``: reads of summaries, trial lists and history depend only on
that one, so they stay current while folds report epochs. A study-scoped read therefore starts
with one primary-key lookup of the revision it depends on: a client that sends the ETag it holds in
``If-None-Match`` gets ``304 Not Modified``, and any other client gets the bytes already
serialised for this URL at this revision. Only a read after a change queries and serialises
again. The revision is read in the same session as the answer, so a cached answer is never older
than its revision, and every instance of the service sees the same revisions. An ETag names
the URL as well as the revision, so it answers a 304 only where it was given out.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from cachetools import LRUCache
from fastapi import Depends, HTTPException, Request, Response, status
from pydantic import BaseModel
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from foldwise.service.api.deps import DbDep
from foldwise.service.db import studies as study_repo
from foldwise.service.db.engine import SessionRunner
from foldwise.service.hardening.errors import documented

T = TypeVar("T")

BOOT = secrets.token_hex(4)
"""Part of every ETag: a restarted service (perhaps a newer version) never answers 304 to an
ETag an earlier process gave out."""

NOT_MODIFIED = {
    status.HTTP_304_NOT_MODIFIED: {
        "description": "Not Modified: the ETag sent in If-None-Match is still current"
    }
}


ENTRY_OVERHEAD = 240
"""Bytes an entry costs beyond its key's and body's lengths (the objects that hold them)."""


class ReadCache:
    """Serialised answers keyed by (URL, ETag), least recently used evicted past ``max_bytes``.
    An entry's size counts its key: a URL may be far longer than its answer (a long query
    string answering a 22-byte body grew the service by 90 MB in 1,500 requests)."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: LRUCache[tuple[str, str], tuple[bytes, int]] = LRUCache(
            max_bytes, getsizeof=lambda entry: entry[1]
        )
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> bytes | None:
        with self._lock:
            entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: tuple[str, str], body: bytes) -> None:
        size = len(body) + len(key[0]) + len(key[1]) + ENTRY_OVERHEAD
        if size > self._entries.maxsize:
            return
        with self._lock:
            self._entries[key] = (body, size)

    @property
    def bytes_held(self) -> int:
        """What the entries count, keys included."""
        with self._lock:
            return int(self._entries.currsize)


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison)."""
    if not if_none_match:
        return False
    opaque = etag.removeprefix("W/")
    tags = [tag.strip() for tag in if_none_match.split(",")]
    return any(tag.removeprefix("W/") == opaque for tag in tags)


def names_any(if_none_match: str | None) -> bool:
    """Whether ``If-None-Match`` is ``*``: a 304 when any answer exists, so only after the
    read found one (RFC 9110 13.1.2), never for a trial that does not exist or a bad query."""
    return bool(if_none_match) and "*" in (tag.strip() for tag in if_none_match.split(","))


class ConditionalReads:
    """Answers one request's read from the cache or with a 304 when its version is unchanged."""

    def __init__(self, request: Request, db: SessionRunner, cache: ReadCache) -> None:
        self._request = request
        self._db = db
        self._cache = cache
        url = request.url
        self._url = f"{url.path}?{url.query}"
        self._held = request.headers.get("if-none-match")

    async def study(
        self, study_id: int, work: Callable[[Session], BaseModel], *, folds: bool = False
    ) -> Response:
        """A read of one study's data that changes with the study and its trials, or with
        ``folds`` also with its fold runs and epochs (a trial's detail, learning curves)."""
        return await self._respond(lambda c: _study_version(c, study_id, folds=folds), work)

    async def study_export(
        self, study_id: int, work: Callable[[Session], T]
    ) -> tuple[dict[str, str], T | None]:
        """A read of everything about one study's trials, folds included, too large to cache
        (an export, read rarely: it would evict the small answers pollers repeat): the ETag
        headers, and what ``work`` read at that revision, or None when ``If-None-Match``
        still holds (answer ``not_modified``)."""

        def unit(connection: Connection) -> tuple[str, T | None]:
            etag = self._etag(_study_version(connection, study_id, folds=True))
            if etag_matches(self._held, etag):
                return etag, None
            with Session(bind=connection) as session:
                result = work(session)
            return etag, None if names_any(self._held) else result

        etag, result = await self._db.connect(unit)
        return {"ETag": etag, "Cache-Control": "no-cache"}, result

    async def catalog(self, work: Callable[[Session], BaseModel]) -> Response:
        """A read over all studies: it changes when any study is created, changed or deleted."""

        def version(connection: Connection) -> str:
            return "c" + ".".join(map(str, study_repo.catalog_fingerprint(connection)))

        return await self._respond(version, work)

    async def _respond(
        self, version: Callable[[Connection], str], work: Callable[[Session], BaseModel]
    ) -> Response:
        def unit(connection: Connection) -> tuple[str, bytes | None]:
            etag = self._etag(version(connection))
            if etag_matches(self._held, etag):
                return etag, None
            body = self._cache.get((self._url, etag))
            if body is None:  # read on the same connection: the revision's snapshot
                with Session(bind=connection) as session:
                    body = work(session).model_dump_json(by_alias=True).encode()
                self._cache.put((self._url, etag), body)
            return etag, None if names_any(self._held) else body

        etag, body = await self._db.connect(unit)
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if body is None:
            return not_modified(headers)
        return Response(body, media_type="application/json", headers=headers)

    def _etag(self, version: str) -> str:
        """The ETag of this URL's answer at ``version``: it names the URL too, so one URL's
        ETag never answers a 304 for another (a trial that does not exist, a bad query)."""
        url = hashlib.blake2b(self._url.encode("utf-8", "surrogatepass"), digest_size=6)
        return f'W/"{BOOT}-{version}-{url.hexdigest()}"'


def _study_version(connection: Connection, study_id: int, *, folds: bool) -> str:
    """The study's revision as an ETag's version; a 404 when there is no such study."""
    revision = study_repo.study_revision(connection, study_id, folds=folds)
    if revision is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"study {study_id} not found")
    return f"s{study_id}.{'f' if folds else 't'}{revision}"


def not_modified(headers: dict[str, str]) -> Response:
    return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)


async def get_reads(request: Request, db: DbDep) -> ConditionalReads:
    return ConditionalReads(request, db, request.app.state.read_cache)


ReadsDep = Annotated[ConditionalReads, Depends(get_reads)]


def conditional(model: Any, *, errors: tuple[int, ...] = ()) -> dict[str, Any]:
    """Route keyword arguments of a conditional read: its model, the 304 and ``errors``."""
    return {"response_model": model, "responses": {**NOT_MODIFIED, **documented(*errors)}}
