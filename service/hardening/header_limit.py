"""A bound on a request's head (request line and headers), enforced as its bytes arrive.

uvicorn's httptools protocol has no limit of its own: a huge header would be read in full,
holding up every other client on the event loop meanwhile. Here the head's bytes are counted
as they come, and past the bound the client gets
``431 Request Header Fields Too Large`` and the connection is closed, before the parser has
buffered more than the bound. A body is not counted (``FOLDWISE_MAX_BODY_BYTES`` bounds it).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol answering 431 to a head longer than ``max_head_bytes``."""

    def __init__(self, *args: Any, max_head_bytes: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = max_head_bytes
        self._head_bytes = 0  # of the request being read, up to the end of its headers
        self._in_head = True

    def data_received(self, data: bytes) -> None:
        while data and self._in_head:  # fed no further than the bound, a piece at a time
            room = self.max_head_bytes - self._head_bytes
            if room <= 0:
                self._refuse()
                return
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return
        if data:
            super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_bytes, self._in_head = 0, True  # the next request on this connection

    def _refuse(self) -> None:
        detail = f"Request Header Fields Too Large: more than {self.max_head_bytes} bytes"
        body = json.dumps({"detail": detail}).encode()
        self.logger.warning("refused a request whose head is past %d bytes", self.max_head_bytes)
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()


def bounded_head_protocol(max_head_bytes: int) -> Any:
    """What uvicorn's ``Config(http=...)`` takes: the protocol with this bound."""
    return functools.partial(BoundedHeadProtocol, max_head_bytes=max_head_bytes)
