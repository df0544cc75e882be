"""What the SDK last read at each URL, with its ETag, so a poller asks "changed?" not "send all".

The service tags study reads with an ETag from the study's revision; sent back in
``If-None-Match``, an unchanged answer is a bodiless 304 and the client reuses what it holds.
``Study.wait()`` and ``foldwise watch`` poll this way.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import httpx

MAX_HELD = 64
"""URLs remembered at once, least recently read forgotten first."""


class HeldResponses:
    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[str, Any]] = OrderedDict()

    def headers(self, key: str) -> dict[str, str]:
        """``If-None-Match`` with the ETag held for ``key``, if any."""
        held = self._held.get(key)
        return {"If-None-Match": held[0]} if held else {}

    def remember(self, key: str, response: httpx.Response, body: Any) -> None:
        etag = response.headers.get("etag")
        if etag is None:
            return
        self._held[key] = (etag, body)
        self._held.move_to_end(key)
        while len(self._held) > MAX_HELD:
            self._held.popitem(last=False)

    def recall(self, key: str) -> Any:
        """The body held for ``key`` (after a 304 for it)."""
        self._held.move_to_end(key)
        return self._held[key][1]
