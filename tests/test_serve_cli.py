"""``recipe serve`` as a command: flags, bad flag values (exit 2) and bad or unreadable files (exit 1:
README's rule, unreadable input exits 1, usage errors exit 2), aliases, the body-size limit, unknown
routes, and graceful shutdown (SIGTERM drains in-flight streams, then the process exits 0)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from serve_support import EOS, MODEL, cli_server, refuses_connections, unread_by_server, wait_until, write_replay


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recipe", "serve", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, why", [
    (["--engine", "nope"], "unknown engine"),
    (["--engine", "replay:"], "replay:FILE"),
    (["--store", "mysql://x"], "--store"),
    (["--store", "redis://:notaport/0"], "--store redis://:notaport/0: Port"),
    (["--index", "etcd://x"], "--index"),
    (["--index", "redis://:notaport/0"], "--index redis://:notaport/0: Port"),
    (["--alias", "x=gpt-4o"], "unknown target"),
    (["--alias", "broken"], "NAME=TARGET"),
    (["--max-concurrency", "0"], "integer >= 1"),
    (["--idle-timeout", "-1"], "seconds"),
    (["--schema-limit", "max_nodes=5"], "NAME one of max_schema_nodes"),
    (["--schema-limit", "max_enum_values"], "want NAME=N"),
    (["--schema-limit", "max_enum_values=0"], "integer >= 1"),
])
def test_bad_flags_exit_2_with_one_line(args, why, capsys):
    from recipe.cli.main import main

    base = ["serve", "--port", "0"] + ([] if "--store" in args else ["--store", "memory"])
    assert main(base + args) == 2
    err = capsys.readouterr().err
    assert why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _bad_files(tmp: Path) -> list[tuple[list[str], str]]:
    (tmp / "dir").mkdir()
    (tmp / "keys-dup.txt").write_text("# key tenant\nk1 t1\nk2 t2\nk1 t2\n")
    (tmp / "keys-same.txt").write_text("k1 t1\nk1 t1\n")
    (tmp / "keys-dup.json").write_text('{"k1": "t1", "k2": "t2", "k1": {"tenant": "t3"}}')
    (tmp / "keys-bad.txt").write_text("k1\n")
    (tmp / "bad.jsonl").write_text('{"text": "Hi."}\n{"ids": [1, 2]\n')
    (tmp / "not-a-db").write_bytes(b"x" * 200)
    (tmp / "tok.json").write_text("{}")
    return [
        (["--api-keys", str(tmp / "keys-dup.txt")], "keys-dup.txt:4: this key was first listed on line 2"),
        (["--api-keys", str(tmp / "keys-same.txt")], "keys-same.txt:2: this key was first listed on line 1"),
        (["--api-keys", str(tmp / "keys-dup.json")], "entries 1 and 3"),
        (["--api-keys", str(tmp / "keys-bad.txt")], "keys-bad.txt:1: want KEY TENANT [SALT]"),
        (["--api-keys", str(tmp / "missing.txt")], "api keys file"),
        (["--api-keys", str(tmp / "dir")], "api keys file"),
        (["--engine", f"replay:{tmp / 'missing.jsonl'}"], "replay file"),
        (["--engine", f"replay:{tmp / 'bad.jsonl'}"], "bad.jsonl:2:"),
        (["--engine", f"replay:{tmp / 'dir'}"], "replay file"),
        (["--store", f"sqlite:{tmp / 'dir'}"], "--store"),
        (["--store", f"sqlite:{tmp / 'not-a-db'}"], "not a database"),
        (["--tokenizer", str(tmp / "missing.json")], "missing.json"),
        (["--tokenizer", str(tmp / "tok.json")], "not a HF tokenizer.json"),
    ]


def test_bad_or_unreadable_files_exit_1_with_one_line(tmp_path, capsys):
    from recipe.cli.main import build_parser, main
    from recipe.cli.serve import _Bad, build

    for args, why in _bad_files(tmp_path):
        base = ["serve", "--port", "0"] + ([] if "--store" in args else ["--store", "memory"])
        with pytest.raises(_Bad) as info:  # (checked first: a server that started would serve forever)
            build(build_parser(["serve"]).parse_args(base + args))
        assert info.value.status == 1, args
        assert main(base + args) == 1, args
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
        assert err.startswith("recipe serve: "), err


def test_the_command_exits_1_on_a_duplicate_key_and_2_on_a_bad_flag(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("k1 t1\nk1 t2\n")
    bad = subprocess.run([sys.executable, "-m", "recipe", "serve", "--port", "0", "--store", "memory", "--api-keys", str(keys)],
                         capture_output=True, text=True, timeout=20)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == f"recipe serve: api keys file {keys}:2: this key was first listed on line 1; list each key once\n"
    usage = _run("--port", "0", "--store", "memory", "--index", "etcd://x")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and "Traceback" not in usage.stderr


def test_aliases_body_limit_and_unknown_routes(tmp_path):
    script = write_replay(tmp_path / "r.jsonl", [{"text": "Hi." + EOS}])
    with cli_server("--engine", f"replay:{script}", "--store", "memory", "--alias", "house=deepseek-v4-pro:chat",
                    "--max-body-bytes", "4000") as (url, _):
        with httpx.Client(base_url=url, timeout=10) as c:
            r = c.post("/v1/chat/completions", json={"model": "house", "messages": [{"role": "user", "content": "x"}]})
            assert r.status_code == 200 and r.json()["model"] == "house"
            assert r.json()["choices"][0]["message"].get("reasoning_content") is None  # :chat, thinking off
            assert "house" in {m["id"] for m in c.get("/v1/models").json()["data"]}
            big = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 5000}]}
            r = c.post("/v1/chat/completions", json=big)
            assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
            r = c.post("/v1/messages", json={**big, "max_tokens": 5})
            assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
            r = c.post("/v1/chat/completions", content=b"{not json")
            assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
            r = c.get("/v1/nothing")
            assert r.status_code == 404 and "Unknown route" in r.json()["error"]["message"]
            assert c.get("/health").json()["status"] == "ok"


def test_schema_limit_flags_set_the_servers_bounds(tmp_path):
    """``--schema-limit max_enum_values=3``: a tool whose enum has 4 values is the API's 400 naming
    the limit and the field; 3 values are served. The other limits keep their defaults."""
    script = write_replay(tmp_path / "r.jsonl", [{"text": "Hi." + EOS}] * 2)

    def body(n: int) -> dict:
        params = {"type": "object", "properties": {"a": {"enum": list(range(n))}}}
        return {"model": MODEL, "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]}

    with cli_server("--engine", f"replay:{script}", "--store", "memory", "--schema-limit", "max_enum_values=3") as (url, _):
        with httpx.Client(base_url=url, timeout=30) as c:
            r = c.post("/v1/chat/completions", json=body(4))
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert "max_enum_values" in err["message"] and err["param"] == "tools[0].function.parameters.properties.a.enum"
            r = c.post("/v1/chat/completions", json=body(3))
            assert r.status_code == 200, r.text


def test_sigterm_drains_in_flight_streams_then_exits_0(tmp_path):
    words = " ".join(f"w{i}" for i in range(200))  # 15 ms per word: 3 s
    script = write_replay(tmp_path / "slow.jsonl", [{"text": words + EOS, "delay_ms": 15}])
    with cli_server("--engine", f"replay:{script}", "--store", "memory", "--drain-seconds", "10") as (url, proc):
        got: dict = {}

        def stream() -> None:
            with httpx.Client(base_url=url, timeout=60) as c:
                with c.stream("POST", "/v1/chat/completions", json={
                        "model": MODEL, "messages": [{"role": "user", "content": "go"}], "reasoning_effort": "none",
                        "stream": True}) as r:
                    text = []
                    for line in r.iter_lines():
                        if line.startswith("data: {"):
                            got.setdefault("first", time.perf_counter())
                            for ch in json.loads(line[6:])["choices"]:
                                text.append(ch["delta"].get("content") or "")
                        elif line == "data: [DONE]":
                            got["done"] = True
                    got["text"] = "".join(text)

        def guarded() -> None:
            try:
                stream()
            except Exception as exc:  # shown by the assertion below
                got["error"] = repr(exc)

        t = threading.Thread(target=guarded)
        t.start()
        deadline = time.monotonic() + 60  # a loaded machine: the first request warms the vocabulary
        while "first" not in got and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.01)
        assert "first" in got, f"the stream did not start: {got.get('error')}"
        proc.send_signal(signal.SIGTERM)
        # no new connections once draining, while the stream still runs
        assert wait_until(lambda: refuses_connections(url), 20)
        assert "done" not in got and t.is_alive()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)
        t.join(20)
        assert proc.wait(timeout=20) == 0
    assert got.get("done") and got["text"] == words


def _chat_frames_cut_at_shutdown(text: str) -> list[str]:
    """The ``data:`` payloads of a Chat stream, asserting it ends with the shutdown error then ``[DONE]``."""
    frames = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]" and json.loads(frames[-2])["error"]["code"] == "server_shutting_down", text[-300:]
    return frames


def _messages_cut_at_shutdown(text: str) -> None:
    """Assert a Messages stream ends with the shutdown error (``event: error``, ``overloaded_error``)."""
    last = [b for b in text.split("\n\n") if b.strip()][-1]
    assert last.startswith("event: error") and json.loads(last.split("data: ", 1)[1])["error"]["type"] == "overloaded_error"


def _stop_cleanly(proc: subprocess.Popen, threads: list[threading.Thread], sig: int) -> float:
    """Send ``sig`` to the server, wait for the client threads, then :func:`_exited_cleanly`.
    Returns ``perf_counter()`` at the signal."""
    t0 = time.perf_counter()
    proc.send_signal(sig)
    for t in threads:
        t.join(30)
    _exited_cleanly(proc)
    return t0


def _exited_cleanly(proc: subprocess.Popen) -> None:
    """Assert the server exits 0 with nothing on stderr that looks like a crash."""
    assert proc.wait(timeout=30) == 0
    err = proc.stderr.read()
    assert "Traceback" not in err and "Exception in ASGI application" not in err, err[-2000:]


def _post_into(got: dict, url: str, name: str, path: str, body: dict) -> None:
    """POST ``body`` to ``url + path``, reading the answer as it comes (``got[name + " so far"]``:
    the bytes received yet); at the end ``got[name]`` = (status, text, perf_counter at the end), or
    (None, the exception's repr, …) when the request failed (shown by the caller's assertions)."""
    so_far = got.setdefault(name + " so far", bytearray())
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            with c.stream("POST", path, json=body) as r:
                for chunk in r.iter_bytes():
                    so_far += chunk
            got[name] = (r.status_code, so_far.decode("utf-8"), time.perf_counter())
    except Exception as exc:
        got[name] = (None, repr(exc), time.perf_counter())


#: The replayed answer's first token ("w" of "w0") as each stream's frame spells it.
FIRST_TOKEN = {"chat": b'"content":"w"', "messages": b'"text":"w"'}


def _generating(url: str, got: dict, streams: tuple[str, ...], requests: int) -> None:
    """Wait (60 s at most: a loaded machine's first request warms the vocabulary) until each of
    ``streams`` has streamed its first token and the server counts ``requests`` generation requests
    in flight (``/health``), so that all of them are generating when the test stops the server."""
    def ready() -> bool:
        if not all(FIRST_TOKEN[name] in got.get(name + " so far", b"") for name in streams):
            return False
        return httpx.get(f"{url}/health", timeout=10).json()["in_flight"] == requests

    assert wait_until(ready, 60), {k: v for k, v in got.items() if not k.endswith(" so far")}


def test_streams_still_generating_at_the_drain_deadline_end_with_the_apis_own_error_and_no_traceback(tmp_path):
    words = " ".join(f"w{i}" for i in range(400))  # 20 ms per word: 8 s, far past the 0.6 s drain
    script = write_replay(tmp_path / "long.jsonl", [{"text": words + EOS, "delay_ms": 20}])
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "reasoning_effort": "none"}
    msgs = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "max_tokens": 4000,
            "thinking": {"type": "disabled"}}
    with cli_server("--engine", f"replay:{script}", "--store", "memory", "--drain-seconds", "0.6") as (url, proc):
        got: dict = {}
        threads = [threading.Thread(target=_post_into, args=(got, url, *a)) for a in (
            ("chat", "/v1/chat/completions", {**chat, "stream": True}),
            ("messages", "/v1/messages", {**msgs, "stream": True}),
            ("whole", "/v1/chat/completions", chat))]
        for t in threads:
            t.start()
        _generating(url, got, ("chat", "messages"), 3)
        t0 = _stop_cleanly(proc, threads, signal.SIGTERM)
    status, text, at = got["chat"]
    assert status == 200 and at - t0 < 5, text[-300:]
    frames = _chat_frames_cut_at_shutdown(text)
    streamed = "".join(ch["delta"].get("content") or "" for f in frames[:-2] for ch in json.loads(f)["choices"])
    assert streamed and words.startswith(streamed) and streamed != words
    status, text, at = got["messages"]
    assert status == 200 and at - t0 < 5
    _messages_cut_at_shutdown(text)
    status, text, at = got["whole"]
    assert status == 503 and json.loads(text)["error"]["code"] == "server_shutting_down" and at - t0 < 5


def test_a_second_sigint_during_the_drain_cuts_the_streams_at_once_with_the_apis_own_error_and_no_traceback(tmp_path):
    # uvicorn's force quit used to skip the drain: each stream lost its last chunk (the client saw
    # an incomplete chunked body), each handler logged a CancelledError traceback, and the app's
    # lifespan shutdown (engines, store) was cancelled with a traceback of its own
    words = " ".join(f"w{i}" for i in range(400))  # 20 ms per word: 8 s, far inside the 30 s drain
    script = write_replay(tmp_path / "long.jsonl", [{"text": words + EOS, "delay_ms": 20}])
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "reasoning_effort": "none", "stream": True}
    msgs = {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "max_tokens": 4000,
            "thinking": {"type": "disabled"}, "stream": True}
    with cli_server("--engine", f"replay:{script}", "--drain-seconds", "30") as (url, proc):
        got: dict = {}
        threads = [threading.Thread(target=_post_into, args=(got, url, *a)) for a in (
            ("chat", "/v1/chat/completions", chat), ("messages", "/v1/messages", msgs))]
        for t in threads:
            t.start()
        _generating(url, got, ("chat", "messages"), 2)
        proc.send_signal(signal.SIGINT)
        assert wait_until(lambda: refuses_connections(url), 20)  # draining (the listener is closed) …
        assert all(t.is_alive() for t in threads) and "chat" not in got and "messages" not in got  # … the streams go on
        t0 = _stop_cleanly(proc, threads, signal.SIGINT)  # force quit
    status, text, at = got["chat"]
    assert status == 200 and at - t0 < 3, text[-300:]
    frames = _chat_frames_cut_at_shutdown(text)
    status, text, at = got["messages"]
    assert status == 200 and at - t0 < 3, text[-300:]
    _messages_cut_at_shutdown(text)


def test_a_request_still_sending_its_body_at_shutdown_gets_the_apis_shutdown_error_not_a_500(tmp_path):
    # uvicorn's grace period (--drain-seconds + 2 s) cancels a handler still reading its body: that
    # was uvicorn's plain-text 500 and an "Exception in ASGI application" traceback
    script = write_replay(tmp_path / "r.jsonl", [{"text": "hi" + EOS}])
    with cli_server("--engine", f"replay:{script}", "--drain-seconds", "0.3") as (url, proc):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port))) as k:
            k.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: 100\r\n\r\n{\"mod")  # 5 of its 100 bytes
            # the server has read all of it: the handler is waiting for the rest of the body
            assert wait_until(lambda: unread_by_server(k) == 0, 30)
            proc.send_signal(signal.SIGTERM)
            k.settimeout(20)
            data = b""
            while chunk := k.recv(65536):
                data += chunk
        _exited_cleanly(proc)
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 529 "), head
    assert b"content-type: application/json" in head.lower() and b"request-id: msg_" in head.lower()
    assert json.loads(body)["error"]["type"] == "overloaded_error"
