"""Hostile connections: a request head sent slowly (slowloris) is cut at the head deadline with a
408, one client cannot hold more than its share of connections, and neither limit touches a request
whose head is in (a long stream) or a well-behaved client. Real uvicorn on 127.0.0.1, raw sockets;
bounded in count and time."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from serve_support import EOS, MODEL, running

import recipe.serve
from recipe.serve.engines.replay import ReplayEngine, load_turns

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none"}


def _app(**turn):
    return recipe.serve.app(ReplayEngine(load_turns([{"text": "Fine, thanks for asking." + EOS, **turn}])))


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


def test_a_slowly_sent_request_head_is_cut_at_the_deadline():
    """300 connections each sending one header line every 4 s stayed open (there was no deadline
    for a request head); now each is answered 408 and closed once ``head_timeout`` passes, while a
    normal request is answered at once."""
    with running(_app(), head_timeout=1.0) as s:
        socks = [socket.create_connection(("127.0.0.1", _port(s.url)), timeout=5) for _ in range(20)]
        stop = threading.Event()

        def trickle() -> None:
            n = 0
            while not stop.is_set():
                for k in socks:
                    try:
                        k.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n" if n == 0 else b"x-slow-%d: 1\r\n" % n)
                    except OSError:
                        pass
                n += 1
                stop.wait(0.25)

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            start = time.monotonic()
            assert httpx.post(f"{s.url}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
            answers = [_read_all(k, 5) for k in socks]
            took = time.monotonic() - start
        finally:
            stop.set()
            t.join(5)
            for k in socks:
                k.close()
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[:2]
    assert took < 4.0


def test_a_long_stream_and_keep_alive_requests_are_not_cut_by_the_head_deadline():
    with running(_app(chunk=1, delay_ms=100), head_timeout=0.5) as s:
        with httpx.Client(timeout=20) as client:
            for _ in range(2):  # one connection, two requests, each longer than the deadline
                r = client.post(f"{s.url}/v1/chat/completions", json={**CHAT, "stream": True})
                assert r.status_code == 200 and r.text.rstrip().endswith("data: [DONE]")
            time.sleep(0.2)
            r = client.post(f"{s.url}/v1/chat/completions", json=CHAT)  # the same connection, idle less than 0.5 s
            assert r.status_code == 200


def test_one_client_cannot_hold_more_than_its_connections():
    with running(_app(), max_client_connections=5, head_timeout=None) as s:
        held = [socket.create_connection(("127.0.0.1", _port(s.url)), timeout=5) for _ in range(5)]
        try:
            extra = socket.create_connection(("127.0.0.1", _port(s.url)), timeout=5)
            answer = _read_all(extra, 5)
            extra.close()
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            held.pop().close()
            time.sleep(0.2)  # the server has seen it close
            assert httpx.post(f"{s.url}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        finally:
            for k in held:
                k.close()


def test_the_limits_are_flags_of_recipe_serve():
    from recipe.cli.common import Usage
    from recipe.cli.main import build_parser

    ns = build_parser(["serve"]).parse_args(["serve", "--head-timeout", "3", "--max-client-connections", "0"])
    assert ns.head_timeout == 3.0 and ns.max_client_connections is None
    ns = build_parser(["serve"]).parse_args(["serve"])
    assert ns.head_timeout == 10.0 and ns.max_client_connections == 256
    with pytest.raises(Usage, match="want an integer >= 1"):
        build_parser(["serve"]).parse_args(["serve", "--max-client-connections", "-1"])
