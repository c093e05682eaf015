"""Running recipe's server for tests: uvicorn on 127.0.0.1 port 0 (in a thread, or ``recipe serve``
as a subprocess), replay scripts, a Redis server, and an SSE reader for raw streams.

Everything binds loopback only, uses port 0, and stops by itself at the end of its ``with`` block.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from recipe.serve import uvicorn_config

EOS = "<｜end▁of▁sentence｜>"
MODEL = "deepseek-v4-pro"


def dsml_call(name: str, **params: Any) -> str:
    """A DeepSeek-V4 DSML tool-call block (strings raw, other values as JSON)."""
    body = "".join(f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                   f'{v if isinstance(v, str) else json.dumps(v)}</｜DSML｜parameter>\n' for k, v in params.items())
    return f'\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="{name}">\n{body}</｜DSML｜invoke>\n</｜DSML｜tool_calls>'


#: Thinking-mode turns of an agent loop: call get_weather, then answer.
TOOL_TURN = "I need the weather first.</think>" + dsml_call("get_weather", city="Paris") + EOS
ANSWER_TURN = "The tool answered.</think>It is sunny in Paris, 21 degrees." + EOS
ANSWER_TEXT = "It is sunny in Paris, 21 degrees."


def write_replay(path: Path, turns: list[dict[str, Any]]) -> Path:
    """Write a replay JSONL file."""
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in turns), encoding="utf-8")
    return path


class Running:
    """A running server: ``url`` (no trailing slash) and its ASGI ``app``."""

    def __init__(self, url: str, app: Any, server: uvicorn.Server) -> None:
        self.url, self.app, self.server = url, app, server

    @property
    def state(self) -> Any:
        return self.app.state.recipe


@contextmanager
def running(app: Any, graceful: float = 2.0, config_of: Any = uvicorn_config, loop: str | None = None,
            server_of: Any = uvicorn.Server, **options: Any) -> Iterator[Running]:
    """Serve ``app`` with uvicorn on 127.0.0.1, port 0, in a thread, for the ``with`` block (with
    ``recipe serve``'s own uvicorn settings, :func:`recipe.serve.uvicorn_config`, unless another
    ``config_of``, e.g. ``uvicorn.Config``, is given; ``server_of`` makes the server from it). The
    loop is asyncio's own unless ``loop`` names
    uvicorn's (``"uvloop"``, ``"asyncio"``, ``"auto"``); ``options`` go to ``config_of`` (uvicorn options)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options = {"log_level": "error", "lifespan": "on", "timeout_graceful_shutdown": graceful, **options}
    config = config_of(app, **options, **({"loop": loop} if loop else {}))
    server = server_of(config)
    if loop:  # uvicorn's own runner, on the loop the config names (as ``recipe serve`` runs)
        thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    else:
        thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        scheme = "https" if options.get("ssl_certfile") else "http"
        yield Running(f"{scheme}://127.0.0.1:{port}", app, server)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@contextmanager
def serve_process(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
                  timeout: float = 30.0) -> Iterator[tuple[str, subprocess.Popen, str]]:
    """``cmd``, a ``recipe serve`` command line on port 0, as a subprocess; yields (url, process, its
    first line: "listening on URL …"). RuntimeError with its stderr when it does not start. Stopped
    with SIGTERM (then killed) at the end of the block."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env={**os.environ, **(env or {})})
    try:
        line = ""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line or proc.poll() is not None:
                break
        m = re.search(r"listening on (http://\S+)", line)
        if m is None:
            proc.kill()
            out, err = proc.communicate(timeout=10)
            raise RuntimeError(f"recipe serve did not start: {line!r} {err[-2000:]!r}")
        yield m.group(1), proc, line
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@contextmanager
def cli_server(*args: str, env: dict[str, str] | None = None, timeout: float = 30.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m recipe serve --port 0 ARGS…`` as a subprocess (:func:`serve_process`); yields
    (url, process)."""
    cmd = [sys.executable, "-m", "recipe", "serve", "--host", "127.0.0.1", "--port", "0", *args]
    with serve_process(cmd, env=env, timeout=timeout) as (url, proc, _):
        yield url, proc


def wait_until(check: Any, within: float, step: float = 0.02) -> bool:
    """Poll ``check()`` until it is true or ``within`` seconds pass; whether it became true."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


async def until(check: Any, within: float = 10.0, step: float = 0.02) -> None:
    """Poll ``check()`` on the running loop until it is true; AssertionError after ``within`` seconds."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > within:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(step)


def refuses_connections(url: str) -> bool:
    """Whether nothing listens at ``url``'s host and port any more (a connection is refused)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def tcp_sockets() -> Iterator[tuple[int, int, str, int]]:
    """This machine's IPv4 and IPv6 TCP sockets from ``/proc/net/tcp{,6}``: (local port, remote port,
    state as the kernel's two hex digits — ``01`` ESTABLISHED, ``0A`` LISTEN, …, bytes received and
    not yet read by the owning process)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            yield int(f[1].rsplit(":", 1)[1], 16), int(f[2].rsplit(":", 1)[1], 16), f[3], int(f[4].split(":")[1], 16)


def open_sockets(port: int) -> int:
    """TCP sockets of this machine connected to or from ``port`` that are still open at either end
    (ESTABLISHED, CLOSE_WAIT, FIN_WAIT1/2, LAST_ACK; TIME_WAIT and listeners are closed / not
    connections)."""
    return sum(port in (local, remote) and state in ("01", "08", "04", "05", "09")
               for local, remote, state, _ in tcp_sockets())


def unread_by_server(client: socket.socket) -> int | None:
    """Bytes the other end of ``client``'s loopback TCP connection (a server on this machine) has
    received but its process has not read yet (its receive queue: a connection still waiting to be
    accepted has all it was sent there); None while that end is not found."""
    mine, theirs = client.getsockname()[1], client.getpeername()[1]
    return next((unread for local, remote, state, unread in tcp_sockets()
                 if local == theirs and remote == mine and state == "01"), None)


def sse_events(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) of each SSE event in ``raw``."""
    out = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        out.append((event, "\n".join(data)))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def redis_process(exe: str, *args: str, port: int | None = None, within: float = 10.0) -> Iterator[int]:
    """``redis-server`` (the program at ``exe``) on 127.0.0.1, on ``port`` or a free one, with no
    persistence, in a temporary directory, ``args`` added (e.g. cluster options); yields its port once
    it answers PING; stopped (SIGTERM) at the end of the block.

    Raises:
        RuntimeError: it does not answer within ``within`` seconds (it is stopped).
    """
    import redis

    port = free_port() if port is None else port
    with tempfile.TemporaryDirectory() as workdir:
        proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                 "--dir", workdir, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = redis.Redis(port=port)
            deadline = time.monotonic() + within
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"redis-server did not start on port {port}") from None
                    time.sleep(0.05)
            client.close()
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def redis_program(*names: str) -> str:
    """The path of ``redis-server`` (and of the other programs ``names``: e.g. ``redis-cli``); skips
    the test without them (fails under CI=true, where .ci/run installs them)."""
    paths = [shutil.which(n) for n in ("redis-server", *names)]
    if None in paths:
        missing = " / ".join(n for n, p in zip(("redis-server", *names), paths) if p is None)
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} not on PATH but CI=true: install redis-server (apt-get install -y redis-server)")
        pytest.skip(f"{missing} not on PATH")
    return paths[0]  # type: ignore[return-value]


@contextmanager
def redis_server() -> Iterator[str]:
    """A real ``redis-server`` on 127.0.0.1 (no persistence); yields its URL. Skips without one
    (fails under CI=true, where .ci/run installs it)."""
    with redis_process(redis_program()) as port:
        yield f"redis://127.0.0.1:{port}/0"
