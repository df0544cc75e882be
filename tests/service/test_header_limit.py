"""A request's head is bounded as it arrives: a real uvicorn server with the protocol
``foldwise serve`` uses, spoken to over raw sockets."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from foldwise.service.hardening.header_limit import bounded_head_protocol
from tests.live_service import free_port

BOUND = 16 * 1024


async def _echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers how many header bytes and body bytes it was given."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    header_bytes = sum(len(k) + len(v) for k, v in scope["headers"])
    text = f"{header_bytes} {len(body)}".encode()
    headers = [(b"content-length", str(len(text)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": text})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(
        _echo_app,
        host="127.0.0.1",
        port=port,
        http=bounded_head_protocol(BOUND),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def _request(header_bytes: int, body: bytes = b"", method: str = "GET") -> bytes:
    head = f"{method} /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: {'a' * header_bytes}\r\n"
    return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _read_responses(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` responses (fewer when the server closes first), each head and body."""
    data, responses = b"", []
    sock.settimeout(20)
    while len(responses) < count:
        head_end = data.find(b"\r\n\r\n")
        if head_end >= 0:
            head = data[:head_end].lower()
            length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
            if len(data) >= head_end + 4 + length:
                responses.append(data[: head_end + 4 + length])
                data = data[head_end + 4 + length :]
                continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return responses


def test_a_head_within_the_bound_is_served(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_request(BOUND - 1000))
        [response] = _read_responses(sock, 1)
    assert response.startswith(b"HTTP/1.1 200") and response.endswith(b" 0")


def test_a_head_past_the_bound_is_431_and_the_connection_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_request(BOUND + 10))
        responses = _read_responses(sock, 1)
        assert sock.recv(1) == b""  # closed
    assert len(responses) == 1 and responses[0].startswith(b"HTTP/1.1 431")
    assert b"Request Header Fields Too Large" in responses[0]


def test_a_huge_head_is_refused_before_it_is_all_sent(port: int) -> None:
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
        try:
            for _ in range(1600):  # 100 MB, were it all read
                sock.sendall(b"a" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        responses = []
        with contextlib.suppress(ConnectionResetError):  # bytes left unread reset the socket
            responses = _read_responses(sock, 1)
    assert sent < 100 * 2**20  # the service closed the connection long before
    assert all(r.startswith(b"HTTP/1.1 431") for r in responses), responses
    with socket.create_connection(("127.0.0.1", port)) as sock:  # still serving
        sock.sendall(_request(10))
        assert _read_responses(sock, 1)[0].startswith(b"HTTP/1.1 200")


def test_each_request_on_a_connection_has_its_own_bound(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(3):  # together past the bound, each within it
            sock.sendall(_request(BOUND // 2))
            [response] = _read_responses(sock, 1)
            assert response.startswith(b"HTTP/1.1 200")
        sock.sendall(_request(BOUND // 2) + _request(BOUND // 2))  # pipelined
        responses = _read_responses(sock, 2)
    assert [r[:12] for r in responses] == [b"HTTP/1.1 200"] * 2


def test_a_body_is_not_counted_in_the_head(port: int) -> None:
    body = b"x" * (BOUND * 8)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(_request(100, body, method="POST"))
        [response] = _read_responses(sock, 1)
    assert response.startswith(b"HTTP/1.1 200") and response.endswith(f" {len(body)}".encode())
