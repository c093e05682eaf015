"""How ``recipe serve`` runs uvicorn (recipe.serve.runner): its configuration answers every request
whole and in order on each of uvicorn's parsers and loops, a client that leaves stops its engine,
the access log is on only where its lines are printed, and the server's loop starts tasks eagerly
where the Python has ``asyncio.eager_task_factory`` (3.12 and newer).

The end-to-end tests run real uvicorn servers on 127.0.0.1 (port 0) and talk raw HTTP/1.1 over sockets.
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
from recipe.serve.runner import EAGER_TASKS, Server, use_eager_tasks, uvicorn_config


async def _echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Echoes the request body's length and first bytes; ``/stream`` answers in three chunks, the
    first in the same step as the head. (HTTP only: it is served with uvicorn's lifespan off.)"""
    path = scope["path"]
    body = b""
    while True:
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
    if path == "/block":  # holds the event loop: connections made meanwhile are accepted with data waiting
        time.sleep(0.3)
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
    """``running(app)`` with recipe's configuration over ``stack``'s parser, on its loop (no lifespan: the
    apps served here answer HTTP only)."""
    impl, loop = stack
    return running(app, config_of=lambda a, **kw: uvicorn_config(a, http=impl, **kw), loop=loop,
                   **{"lifespan": "off", **options})


def _while_the_loop_is_held(url: str) -> socket.socket:
    """A connection whose request holds the server's loop for 0.3 s (``/block``): a connection made
    and written to in the next 0.2 s is accepted with its bytes already there."""
    blocker = _connect(url)
    blocker.sendall(_post("/block", b""))
    time.sleep(0.1)
    return blocker


# ----------------------------------------------------------------------------- over real sockets


@pytest.mark.parametrize("stack", STACKS)
def test_a_stream_is_answered_intact_on_each_parser_and_loop(stack):
    with _serving(_echo_app, stack) as s:
        with _connect(s.url) as c:
            c.sendall(_post("/stream", b"x"))
            head, body, _ = _read_response(c)
            assert head.startswith(b"HTTP/1.1 200 OK") and body == b"one.two.three."
            (protocol,) = s.server.server_state.connections
            assert type(protocol.loop).__module__.split(".")[0] == stack[1]  # the loop the stack names


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


def test_uvicorn_config_passes_uvicorns_own_options_on_as_given():
    class Mine(asyncio.Protocol):
        pass

    bare = {"head_timeout": None, "max_client_connections": None}  # (without recipe serve's connection limits)
    assert uvicorn_config(_echo_app, **bare).http == "auto"  # uvicorn's default: its own protocol classes
    assert uvicorn_config(_echo_app, http=Mine, **bare).http is Mine
    assert uvicorn_config(_echo_app, http="h11", loop="asyncio").loop == "asyncio"
    # with them, uvicorn's protocol is wrapped (recipe.serve.admission), the one given inside
    assert uvicorn_config(_echo_app, http=Mine).http.inner_class is Mine


def test_the_access_log_is_on_only_where_its_lines_are_printed():
    on = {lv: uvicorn_config(_echo_app, log_level=lv).access_log for lv in ("debug", "info", "warning", "error", 20, 30)}
    assert on == {"debug": True, "info": True, "warning": False, "error": False, 20: True, 30: False}
    assert uvicorn_config(_echo_app).access_log is True  # uvicorn's own default level prints them
    assert uvicorn_config(_echo_app, log_level="warning", access_log=True).access_log is True


def test_the_servers_loop_starts_tasks_eagerly_where_python_has_the_factory():
    async def main() -> tuple[bool, list[str], bool]:
        loop = asyncio.get_running_loop()
        installed = use_eager_tasks(loop)
        order: list[str] = []

        async def step() -> None:
            order.append("task")

        task = asyncio.create_task(step())
        order.append("after create_task")
        await task
        loop.set_task_factory(None)
        mine = lambda lp, coro, **kw: asyncio.Task(coro, loop=lp, **kw)  # noqa: E731 - another factory
        loop.set_task_factory(mine)
        kept = not use_eager_tasks(loop) and loop.get_task_factory() is mine
        return installed, order, kept

    installed, order, kept = asyncio.run(main())
    assert installed is EAGER_TASKS and kept
    assert order == (["task", "after create_task"] if EAGER_TASKS else ["after create_task", "task"])


def test_the_server_class_runs_uvicorn_with_the_eager_factory_where_python_has_it():
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        factory = asyncio.get_running_loop().get_task_factory()
        body = b"eager" if factory is getattr(asyncio, "eager_task_factory", object()) else b"none"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    with running(app, config_of=uvicorn_config, server_of=Server, lifespan="off") as s:
        with _connect(s.url) as c:
            c.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            _, body, _ = _read_response(c)
    assert body == (b"eager" if EAGER_TASKS else b"none")


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
def test_tls_requests_are_answered_whole(stack, tls_files):
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
