"""Many frontends: two ``recipe serve`` processes over the same three replay replicas and one real
``redis-server`` share the prefix index (``--index``), the requests in flight on each replica
(``--shared-load``) and the conversation store (``--store``); clients are the official openai SDK.

Frontend B routes a continuation to the replica frontend A routed its prefix to, avoids the replicas
where A has requests in flight, continues a conversation A stored, and forgets A's counts within the
TTL once A's process is killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from serve_support import EOS, MODEL, redis_server, write_replay

TTL = 1.0
#: a long answer (about 500 ids, one every 40 ms): a stream stays in flight for about 20 s, longer
#: than the test holds it (it is closed, or its frontend killed, before it ends)
LONG = "Let me think about this.</think>" + " ".join(f"word{i}" for i in range(250)) + EOS


@contextmanager
def frontends(n: int, args: list[str], timeout: float = 90.0) -> Iterator[list[tuple[str, subprocess.Popen]]]:
    """``n`` ``recipe serve --port 0 ARGS…`` processes started at once; yields (url, process) each.
    Each is stopped with SIGTERM (then killed) at the end of the block."""
    cmd = [sys.executable, "-m", "recipe", "serve", "--host", "127.0.0.1", "--port", "0", *args]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(n)]
    try:
        urls = []
        deadline = time.monotonic() + timeout
        for p in procs:
            line = ""
            while time.monotonic() < deadline and not line and p.poll() is None:
                line = p.stdout.readline()
            m = re.search(r"listening on (http://\S+)", line)
            assert m is not None, f"recipe serve did not start: {line!r}"
            urls.append(m.group(1))
        yield list(zip(urls, procs))
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
            p.stdout.close()


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)


def _wait(what: str, check: Any, seconds: float) -> float:
    """Poll ``check()`` until true; the seconds it took (fails after ``seconds``)."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, f"timed out waiting for {what}"
        time.sleep(0.02)
    return time.monotonic() - start


def _others(url: str) -> dict[str, int]:
    health = httpx.get(url + "/health", timeout=10).json()
    return {r["name"]: r["in_flight_others"] for r in health["replicas"]}


def _prompt(topic: str) -> str:
    """A user message of several hundred tokens (several 64-token blocks), distinct per topic."""
    return f"Topic {topic}. " + " ".join(f"{topic}-{i}" for i in range(200))


def test_two_frontends_share_prefixes_in_flight_counts_and_conversations(tmp_path: Path):
    replicas = [write_replay(tmp_path / f"r{i}.jsonl", [{"text": LONG, "delay_ms": 40}]) for i in range(3)]
    with redis_server() as redis_url, ExitStack() as stack:
        args = [a for r in replicas for a in ("--engine", f"replay:{r}")]
        args += ["--index", redis_url, "--store", redis_url, "--shared-load", redis_url, "--shared-load-interval", "0.05",
                 "--shared-load-ttl", str(TTL), "--metrics-interval", "0", "--probe-seconds", "0"]
        (url_a, proc_a), (url_b, _) = stack.enter_context(frontends(2, args))
        a, b = _client(url_a), _client(url_b)
        names = [f"replay:{r}" for r in replicas]

        def chat(client: openai.OpenAI, messages: list[dict[str, str]]) -> str:
            raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, max_tokens=1)
            assert raw.parse().choices[0].finish_reason == "length"
            return raw.headers["x-recipe-replica"]

        readers: list[Any] = []

        def hold(topic: str) -> tuple[Any, str]:
            """Open a long stream through A; (its response, its replica) once its first frame is in."""
            stream = a.chat.completions.with_streaming_response.create(
                model=MODEL, messages=[{"role": "user", "content": f"Tell me about {topic}."}], stream=True)
            response = stream.__enter__()
            stack.callback(stream.__exit__, None, None, None)
            lines = response.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            readers.append(lines)  # (a reader dropped would close the stream)
            return response, response.headers["x-recipe-replica"]

        # (a) the prefix index: with a stream held on the first replica, A routes a long prompt to
        # another one; once A is idle again B sends that prompt's next turn where A sent the prompt
        # (by B's own index and counts it would pick the first replica: all idle, none served)
        stream, on = hold("zeta")
        assert on == names[0]
        prompted = chat(a, [{"role": "user", "content": _prompt("alpha")}])
        assert prompted != names[0]
        stream.close()
        _wait("A to end its stream", lambda: _others(url_b) == dict.fromkeys(names, 0) and not any(
            r["in_flight"] for r in httpx.get(url_a + "/health", timeout=10).json()["replicas"]), 15)
        turn = [{"role": "user", "content": _prompt("alpha")}, {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "Go on."}]
        assert chat(b, turn) == prompted

        # (c) the conversation store: a response stored through A continues through B
        r1 = a.responses.create(model=MODEL, input="My name is Ada. Remember it.", max_output_tokens=16)
        r2 = b.responses.create(model=MODEL, input="What is my name?", previous_response_id=r1.id, max_output_tokens=16)
        assert r2.previous_response_id == r1.id
        assert r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens  # A's turn is in B's prompt
        assert b.responses.retrieve(r1.id).output_text == r1.output_text

        # (b) the in-flight counts: A holds two long streams on two replicas; B routes a new prompt
        # to the third (by its own counts it would pick one of the two, which hold the prompt's first
        # block: the template's opening, common to every prompt)
        held = [hold(t)[1] for t in ("delta", "epsilon")]
        assert len(set(held)) == 2
        busy = {n: int(n in held) for n in names}
        _wait("B to see A's streams", lambda: _others(url_b) == busy, 15)
        assert chat(b, [{"role": "user", "content": "Something new."}]) == next(n for n in names if n not in held)

        # a killed frontend's counts expire: B sees none within the TTL (plus a sync and slack)
        assert _others(url_b) == busy  # A's streams are still in flight when it dies
        os.kill(proc_a.pid, signal.SIGKILL)
        proc_a.wait(timeout=10)
        took = _wait("A's counts to expire", lambda: _others(url_b) == dict.fromkeys(names, 0), TTL + 10)
        assert took <= TTL + 10
        health = httpx.get(url_b + "/health", timeout=10).json()
        assert health["shared_load"]["other_frontends"] == 0 and health["shared_load"]["errors"] == 0
        import redis

        r = redis.Redis.from_url(redis_url)
        try:
            assert [k for k in r.keys("{recipe:load}:frontend:*")] == [f"{{recipe:load}}:frontend:{health['shared_load']['frontend']}".encode()]
            assert json.loads(r.get(f"{{recipe:load}}:frontend:{health['shared_load']['frontend']}")) == {}
        finally:
            r.close()


@pytest.mark.parametrize("args, why", [
    (["--shared-load", "memory"], "--shared-load 'memory': want redis://"),
    (["--shared-load", "redis://:notaport/0"], "Port"),
    (["--shared-load", "redis+cluster://:notaport"], "Port"),
    (["--shared-load", "redis://127.0.0.1:1/0", "--shared-load-interval", "0"], "interval must be > 0"),
    (["--shared-load", "redis://127.0.0.1:1/0", "--shared-load-ttl", "0.1"], "longer than its interval"),
    (["--index", "redis+cluster://:notaport"], "--index redis+cluster://:notaport: Port"),
    (["--store", "redis+cluster://:notaport"], "--store redis+cluster://:notaport: Port"),
])
def test_bad_shared_flags_exit_2_with_one_line(args, why, capsys):
    from recipe.cli.main import main

    assert main(["serve", "--port", "0", *([] if "--store" in args else ["--store", "memory"]), *args]) == 2
    err = capsys.readouterr().err
    assert why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_help_lists_the_shared_flags():
    out = subprocess.run([sys.executable, "-m", "recipe", "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    for flag in ("--shared-load URL", "--shared-load-interval S", "--shared-load-ttl S"):
        assert flag in out
    assert "redis+cluster://" in out
