"""``recipe serve``'s HTTP protocol (recipe.serve.transport): a response's head and first body bytes in
one write, a new connection's request read at once, and nothing lost or reordered on the way.

The end-to-end tests run real uvicorn servers on 127.0.0.1 (port 0) with the protocol and talk raw
HTTP/1.1 over sockets; the write-count tests wrap a real asyncio socket transport.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
from serve_support import MODEL, running

import recipe.serve
from recipe.serve.engines.base import EngineDelta
from recipe.serve.transport import HeadHoldingTransport, _read_now, http_protocol, uvicorn_config


async def _echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echoes the request body's length and first bytes; ``/stream`` answers in three chunks, the
    first in the same step as the head; ``/head-only`` sends a head, waits, then the body. (HTTP only:
    it is served with uvicorn's lifespan off.)"""
    path = scope["path"]
    body = b""
    while path != "/slow-unread":
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"one.", "more_body": True})
        await asyncio.sleep(0.05)
        await send({"type": "http.response.body", "body": b"two.", "more_body": True})
        await send({"type": "http.response.body", "body": b"three."})
        return
    if path == "/head-only":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await asyncio.sleep(0.2)
        await send({"type": "http.response.body", "body": b"done"})
        return
    if path == "/block":  # holds the event loop: connections made meanwhile are accepted with data waiting
        time.sleep(0.3)
    if path == "/slow-unread":  # answers after 2 s without reading its body
        await asyncio.sleep(2)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    if path == "/no-content":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    out = b"%d:%s" % (len(body), body[:16])
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})


def _read_response(s: socket.socket, buf: bytes = b"") -> tuple[bytes, bytes, bytes]:
    """(head, body, what follows) of one response (Content-Length or chunked)."""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    low = head.lower()
    if b"transfer-encoding: chunked" in low:
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += s.recv(65536)
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line, 16)
            while len(rest) < size + 2:
                rest += s.recv(65536)
            body, rest = body + rest[:size], rest[size + 2:]
            if size == 0:
                return head, body, rest
    n = int(low.split(b"content-length: ")[1].split(b"\r\n")[0]) if b"content-length: " in low else 0
    while len(rest) < n:
        rest += s.recv(65536)
    return head, rest[:n], rest[n:]


def _connect(url: str) -> socket.socket:
    host, port = url.rsplit("/", 1)[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def CHAT_BODY(**extra: Any) -> bytes:
    """A Chat request body for the demo engine."""
    import json

    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Hello"}], **extra}).encode()


def _post(path: str, body: bytes) -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % (path.encode(), len(body)) + body


#: uvicorn's two HTTP parsers under its two loops: ``recipe serve`` runs httptools on uvloop, and
#: falls back to h11 (no httptools) or asyncio's loop (no uvloop) as uvicorn does.
STACKS = [("httptools", "uvloop"), ("httptools", "asyncio"), ("h11", "uvloop"), ("h11", "asyncio")]


def _serving(app: Any, stack: tuple[str, str], **options: Any) -> Any:
    """``running(app)`` with recipe's protocol over ``stack``'s parser, on its loop (no lifespan: the
    apps served here answer HTTP only)."""
    impl, loop = stack
    return running(app, config_of=lambda a, **kw: uvicorn_config(a, http=impl, **kw), loop=loop,
                   **{"lifespan": "off", **options})


def _while_the_loop_is_held(url: str) -> socket.socket:
    """A connection whose request holds the server's loop for 0.3 s (``/block``): a connection made
    and written to in the next 0.2 s is accepted with its bytes already there (the eager read's case)."""
    blocker = _connect(url)
    blocker.sendall(_post("/block", b""))
    time.sleep(0.1)
    return blocker


# ----------------------------------------------------------------------------- over real sockets


@pytest.mark.parametrize("stack", STACKS)
def test_the_server_writes_through_the_head_holding_transport_and_answers_intact(stack):
    with _serving(_echo_app, stack) as s:
        with _connect(s.url) as c:
            c.sendall(_post("/stream", b"x"))
            head, body, _ = _read_response(c)
            assert head.startswith(b"HTTP/1.1 200 OK") and body == b"one.two.three."
            protocols = list(s.server.server_state.connections)
            assert protocols and all(isinstance(p.transport, HeadHoldingTransport) for p in protocols)
            assert type(protocols[0]) is http_protocol(stack[0])
            assert type(protocols[0].loop).__module__.split(".")[0] == stack[1]  # the loop the stack names


@pytest.mark.parametrize("stack", STACKS)
def test_a_request_sent_with_the_connection_is_read_whole_past_the_first_read(stack):
    # 200 kB, there when the server accepts: the connection's first read takes 64 kB at most; the
    # rest comes through the transport
    body = bytes(range(256)) * 800
    with _serving(_echo_app, stack) as s:
        with _while_the_loop_is_held(s.url) as blocker, _connect(s.url) as c:
            c.sendall(_post("/echo", body))
            _, got, _ = _read_response(c)
            _read_response(blocker)
        assert got == b"204800:" + body[:16]


@pytest.mark.parametrize("stack", STACKS)
def test_a_connection_accepted_with_its_request_waiting_is_answered(stack):
    # the loop is held while a second client connects and sends: when the server accepts it, the
    # request is already there and is read in the same step (recipe.serve.transport._read_now)
    with _serving(_echo_app, stack) as s:
        with _while_the_loop_is_held(s.url) as blocker:
            with _connect(s.url) as c:
                c.sendall(_post("/echo", b"waiting"))
                _, got, _ = _read_response(c)
            _read_response(blocker)
    assert got == b"7:waiting"


@pytest.mark.parametrize("stack", STACKS)
def test_pipelined_requests_in_the_first_read_are_answered_in_order(stack):
    with _serving(_echo_app, stack) as s:
        with _while_the_loop_is_held(s.url) as blocker, _connect(s.url) as c:
            c.sendall(_post("/echo", b"first") + _post("/echo", b"second!") + _post("/no-content", b""))
            h1, b1, rest = _read_response(c)
            h2, b2, rest = _read_response(c, rest)
            h3, b3, _ = _read_response(c, rest)
            _read_response(blocker)
        assert (b1, b2) == (b"5:first", b"7:second!")
        assert h3.startswith(b"HTTP/1.1 204") and b3 == b""


@pytest.mark.parametrize("stack", STACKS)
def test_a_head_with_no_body_yet_goes_out_on_its_own(stack):
    # the head is held only until the end of the loop's round: a client sees it before the body
    with _serving(_echo_app, stack) as s:
        with _connect(s.url) as c:
            c.sendall(_post("/head-only", b""))
            t0 = time.monotonic()
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            assert time.monotonic() - t0 < 0.15 and buf.endswith(b"\r\n\r\n"), buf
            _, body, _ = _read_response(c, buf)
        assert body == b"done"


def test_a_recipe_stream_and_a_whole_response_are_byte_equal_through_the_protocol_and_without():
    # the same app under uvicorn's own protocol and under recipe's: the same bytes after the head
    import uvicorn

    def run(config_of: Any) -> list[bytes]:
        app = recipe.serve.app("demo")
        out = []
        with running(app, config_of=config_of) as s:
            for stream in (True, False):
                with _connect(s.url) as c:
                    c.sendall(_post("/v1/chat/completions", CHAT_BODY(stream=stream, seed=7)))
                    _, body, _ = _read_response(c)
                    out.append(body)
        return out

    ours = run(uvicorn_config)
    theirs = run(uvicorn.Config)
    assert [_masked(b) for b in ours] == [_masked(b) for b in theirs]
    assert ours[0].startswith(b"data: {") and ours[0].endswith(b"data: [DONE]\n\n")


def _masked(body: bytes) -> bytes:
    import re

    return re.sub(rb'"(id|created)":\s*("[^"]*"|\d+)', b'"\\1":0', body)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("stack", STACKS)
def test_a_client_leaving_before_the_first_token_closes_the_engine_promptly(stack, stream):
    # the disconnect watcher starts in the loop's next round, not before the engine is asked
    state: dict[str, float] = {}

    async def engine(req: Any) -> Any:
        try:
            await asyncio.sleep(10)  # a long prefill
            yield EngineDelta((1,))
        finally:
            state["closed"] = time.perf_counter()

    with _serving(recipe.serve.app(engine), stack) as s:
        with _connect(s.url) as c:
            c.sendall(_post("/v1/chat/completions", CHAT_BODY(stream=stream)))
            time.sleep(0.3)
        left = time.perf_counter()
        deadline = time.monotonic() + 3
        while "closed" not in state and time.monotonic() < deadline:
            time.sleep(0.005)
    assert state["closed"] - left < 0.5


# ----------------------------------------------------------------------------- the transport itself


class _Counting(asyncio.Protocol):
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)


async def _pair() -> tuple[Any, socket.socket, list[bytes]]:
    """A real loop transport over one end of a socket pair, its writes counted."""
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    b.setblocking(False)
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
    writes: list[bytes] = []
    real = transport.write

    def counted(data: Any) -> None:
        writes.append(bytes(data))
        real(data)

    transport.write = counted  # the real transport still writes; only the calls are recorded
    return transport, b, writes


def test_a_head_and_the_next_write_are_one_write():
    async def go() -> tuple[list[bytes], bytes]:
        transport, peer, writes = await _pair()
        t = HeadHoldingTransport(transport, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        assert writes == [] and t.get_write_buffer_size() > 0
        t.write(b"5\r\nhello\r\n")
        t.write(b"0\r\n\r\n")
        await asyncio.sleep(0.05)
        got = peer.recv(65536)
        t.close()
        peer.close()
        return writes, got

    writes, got = asyncio.run(go())
    assert writes == [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n5\r\nhello\r\n", b"0\r\n\r\n"]
    assert got == b"".join(writes)


def test_a_held_head_goes_out_at_the_end_of_the_round_or_before_a_close():
    async def go() -> tuple[list[bytes], list[bytes]]:
        transport, peer, writes = await _pair()
        t = HeadHoldingTransport(transport, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        first = list(writes)
        t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        t.close()  # the head goes out before the close
        await asyncio.sleep(0.05)
        peer.close()
        return first, writes

    first, writes = asyncio.run(go())
    assert first == [b"HTTP/1.1 204 No Content\r\n\r\n"]
    assert writes == [b"HTTP/1.1 204 No Content\r\n\r\n", b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"]


def test_continue_and_bodies_are_not_held():
    async def go() -> list[bytes]:
        transport, peer, writes = await _pair()
        t = HeadHoldingTransport(transport, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        t.write(b"HTTP/1.0-like text in a body")
        t.write(memoryview(b"abc"))
        out = list(writes)
        t.abort()
        peer.close()
        return out

    assert asyncio.run(go()) == [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.0-like text in a body", b"abc"]


def test_read_now_takes_what_the_client_sent_and_nothing_else():
    async def go() -> tuple[bytes, bytes]:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
        transport.pause_reading()  # the transport's own reads wait: this test reads first
        empty = _read_now(transport)
        b.sendall(b"GET / HTTP/1.1\r\n\r\n")
        await asyncio.sleep(0.02)
        got = _read_now(transport)
        transport.close()
        b.close()
        return empty, got

    empty, got = asyncio.run(go())
    assert (empty, got) == (b"", b"GET / HTTP/1.1\r\n\r\n")


def test_uvicorn_config_keeps_a_given_protocol():
    class Mine(asyncio.Protocol):
        pass

    assert uvicorn_config(_echo_app).http is http_protocol()
    assert uvicorn_config(_echo_app, http=Mine).http is Mine


def test_the_access_log_is_on_only_where_its_lines_are_printed():
    on = {lv: uvicorn_config(_echo_app, log_level=lv).access_log for lv in ("debug", "info", "warning", "error", 20, 30)}
    assert on == {"debug": True, "info": True, "warning": False, "error": False, 20: True, 30: False}
    assert uvicorn_config(_echo_app).access_log is True  # uvicorn's own default level prints them
    assert uvicorn_config(_echo_app, log_level="warning", access_log=True).access_log is True


def test_a_parser_named_as_uvicorn_names_it_gets_recipes_protocol_over_it():
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert issubclass(http_protocol("h11"), H11Protocol) and issubclass(http_protocol("httptools"), HttpToolsProtocol)
    assert http_protocol("h11") is http_protocol("h11") is not http_protocol("httptools")
    assert uvicorn_config(_echo_app, http="h11").http is http_protocol("h11")
    assert uvicorn_config(_echo_app, http="auto").http is http_protocol()
    with pytest.raises(ValueError, match="unknown HTTP implementation 'h2'"):
        uvicorn_config(_echo_app, http="h2")


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("n", [1, 64])
def test_concurrent_new_connections_each_get_their_own_answer(n, stack):
    with _serving(_echo_app, stack) as s:
        conns = [_connect(s.url) for _ in range(n)]
        try:
            for i, c in enumerate(conns):
                c.sendall(_post("/echo", b"request-%d" % i))
            got = [_read_response(c)[1] for c in conns]
        finally:
            for c in conns:
                c.close()
    assert got == [b"%d:request-%d" % (len(b"request-%d" % i), i) for i in range(n)]


@pytest.mark.parametrize("stack", STACKS)
def test_a_pipelined_request_read_at_accept_keeps_its_body_waiting_in_the_socket(stack):
    # uvicorn pauses reading while a pipelined request waits for the one before it; a pause asked
    # for during the accept-time read must hold once the loop starts reading the connection (uvloop
    # starts it after connection_made whatever was asked): the next request's body stays in the
    # socket, not in the server's memory
    with _serving(_echo_app, stack) as s:
        with _while_the_loop_is_held(s.url) as blocker, _connect(s.url) as c:
            c.sendall(_post("/slow-unread", b"") + b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 33554432\r\n\r\n")
            _read_response(blocker)  # the loop ran on: the pipelined request was read at accept
            c.settimeout(0.5)
            sent, chunk = 0, b"x" * 65536
            try:
                while sent < 32 << 20:
                    sent += c.send(chunk)
            except socket.timeout:  # the server stopped reading: the socket buffers are full
                pass
            (protocol,) = [p for p in s.server.server_state.connections if p.cycle is not None
                           and p.cycle.scope["path"] != "/block"]
            assert protocol.flow.read_paused
            buffered = len(protocol.cycle.body) + len(getattr(getattr(protocol, "conn", None), "trailing_data", (b"",))[0])
            assert sent < 32 << 20 and buffered < 1 << 20, (sent, buffered)


@pytest.mark.parametrize("stack", STACKS)
def test_a_request_expecting_100_continue_gets_it_before_it_sends_its_body(stack):
    # the interim 100 goes out at once (it is not a head to hold); the client sends the body only
    # after it, and the final head is whole after it
    with _serving(_echo_app, stack) as s:
        with _while_the_loop_is_held(s.url) as blocker, _connect(s.url) as c:
            c.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            _read_response(blocker)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            assert buf == b"HTTP/1.1 100 Continue\r\n\r\n"
            c.sendall(b"hello")
            head, body, _ = _read_response(c)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and body == b"5:hello"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: Any) -> tuple[Path, Path]:
    """(key file, certificate file) of a self-signed certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    d = tmp_path_factory.mktemp("tls")
    (d / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return d / "key.pem", d / "cert.pem"


@pytest.mark.parametrize("stack", STACKS)
def test_tls_requests_are_answered_and_the_accept_time_read_takes_no_ciphertext(stack, tls_files):
    # over TLS the protocol's connection_made comes after the handshake, with the client's
    # encrypted request possibly in the socket: the accept-time read must leave it to the TLS layer
    # (reading it there cut records: uvicorn answered "Invalid HTTP request" to a 1 MB POST)
    import httpx

    key, cert = tls_files
    context = ssl.create_default_context(cafile=str(cert))
    big = bytes(range(256)) * 4096
    with _serving(_echo_app, stack, ssl_keyfile=str(key), ssl_certfile=str(cert)) as s:
        assert s.url.startswith("https://")
        got = []
        for body in (b"hello", big, big):  # a fresh connection each
            with httpx.Client(verify=context, timeout=10) as client:
                r = client.post(s.url + "/echo", content=body)
                got.append((r.status_code, r.content))
        with context.wrap_socket(socket.create_connection(("127.0.0.1", int(s.url.rsplit(":", 1)[1])), timeout=10),
                                 server_hostname="127.0.0.1") as c:
            c.sendall(_post("/stream", b"") + _post("/echo", b"second"))
            h1, b1, rest = _read_response(c)
            _, b2, _ = _read_response(c, rest)
    assert got == [(200, b"5:hello"), (200, b"1048576:" + big[:16]), (200, b"1048576:" + big[:16])]
    assert h1.startswith(b"HTTP/1.1 200 OK") and (b1, b2) == (b"one.two.three.", b"6:second")
