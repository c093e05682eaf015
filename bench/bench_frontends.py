"""Many frontends: what sharing the requests in flight through Redis costs a request, and how fresh the
shared counts are.

Run: ``python bench/bench_frontends.py [--requests 300] [--rounds 5] [--trials 20]``.

Starts one ``redis-server`` and three ``recipe serve`` processes (127.0.0.1, port 0), each over the
same three replay replicas (a short answer, no delay): A and B share their counts
(``--shared-load``, the default interval 0.1 s), C does not; then two sharing frontends over slow
replicas (a long answer, 50 ms between deltas) for the staleness. It measures:

- **a Redis round trip** from an event loop (``redis.asyncio``, ``GET``, one after another): what
  reading the shared counts on every request would add to it, and the same with the synchronous
  client in a worker thread (how the prefix index is read);
- **request latency**: non-streamed Chat Completions requests one after another over one keep-alive
  connection, to A (sharing) and to C (not sharing), alternating in ``--rounds`` rounds of
  ``--requests`` each: p50 / p99 of each server, pooled over the rounds. Sharing puts no Redis call
  on a request's path, so the two should agree within the machine's noise;
- **staleness**: A starts a stream; the time until B's ``GET /health`` shows it on that replica,
  over ``--trials`` trials (p50 / max): about one interval of A's publishing plus one of B's reading.

The machine may be shared: latencies carry its noise; compare A and C, measured interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

import httpx

EOS = "<｜end▁of▁sentence｜>"
MODEL = "deepseek-v4-pro"

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serve_support import redis_process  # noqa: E402


@contextmanager
def redis_server() -> Iterator[str]:
    """A ``redis-server`` on 127.0.0.1 for the run (tests/serve_support.py's ``redis_process``); its URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        sys.exit("bench_frontends: redis-server is not on PATH")
    with redis_process(exe) as port:
        yield f"redis://127.0.0.1:{port}/0"


@contextmanager
def serve(*arg_lists: list[str]) -> Iterator[list[str]]:
    """``recipe serve`` processes, one per argument list, started at once; yields their URLs."""
    cmd = [sys.executable, "-m", "recipe", "serve", "--host", "127.0.0.1", "--port", "0", "--store", "memory"]
    procs = [subprocess.Popen(cmd + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for args in arg_lists]
    try:
        urls = []
        for proc in procs:
            line = proc.stdout.readline()
            m = re.search(r"listening on (http://\S+)", line)
            if m is None:
                raise RuntimeError(f"recipe serve did not start: {line!r}")
            urls.append(m.group(1))
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
            proc.stdout.close()


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def redis_round_trips(url: str, n: int) -> tuple[list[float], list[float]]:
    import redis
    import redis.asyncio as aredis

    async def on_loop() -> list[float]:
        c = aredis.Redis.from_url(url)
        await c.set("bench:k", "{}")
        out = []
        for _ in range(n):
            t = time.perf_counter()
            await c.get("bench:k")
            out.append(time.perf_counter() - t)
        await c.aclose()
        return out

    async def in_thread() -> list[float]:
        c = redis.Redis.from_url(url)
        out = []
        for _ in range(n):
            t = time.perf_counter()
            await asyncio.to_thread(c.get, "bench:k")
            out.append(time.perf_counter() - t)
        c.close()
        return out

    return asyncio.run(on_loop()), asyncio.run(in_thread())


def latencies(client: httpx.Client, url: str, n: int) -> list[float]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there."}], "max_tokens": 1}
    out = []
    for _ in range(n):
        t = time.perf_counter()
        r = client.post(url + "/v1/chat/completions", json=body)
        out.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
    return out


def staleness(url_a: str, url_b: str, trials: int) -> list[float]:
    out = []
    with httpx.Client(timeout=30) as client:
        for i in range(trials):
            body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": f"Stream {i}."}]}
            with client.stream("POST", url_a + "/v1/chat/completions", json=body) as r:
                t = time.perf_counter()
                replica = r.headers["x-recipe-replica"]
                while True:
                    health = client.get(url_b + "/health").json()
                    if any(x["name"] == replica and x["in_flight_others"] for x in health["replicas"]):
                        break
                    if time.perf_counter() - t > 10:
                        raise RuntimeError("B never saw A's stream")
                out.append(time.perf_counter() - t)
            while any(x["in_flight_others"] for x in client.get(url_b + "/health").json()["replicas"]):
                time.sleep(0.01)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=20)
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        quick = Path(d) / "quick.jsonl"
        quick.write_text(json.dumps({"text": "Hi.</think>Hello." + EOS}, ensure_ascii=False) + "\n", encoding="utf-8")
        redis_url = stack.enter_context(redis_server())
        on_loop, in_thread = redis_round_trips(redis_url, 2000)
        print(f"Redis GET round trip, redis.asyncio on the loop: p50 {_pct(on_loop, .5) * 1e6:.0f} µs, "
              f"p99 {_pct(on_loop, .99) * 1e6:.0f} µs")
        print(f"Redis GET round trip, sync client in a worker thread: p50 {_pct(in_thread, .5) * 1e6:.0f} µs, "
              f"p99 {_pct(in_thread, .99) * 1e6:.0f} µs")

        engines = [a for i in range(3) for a in ("--engine", f"replay:{quick}")]
        shared = ["--shared-load", redis_url]
        url_a, _, plain = stack.enter_context(serve(engines + shared, engines + shared, engines))
        a_times: list[float] = []
        c_times: list[float] = []
        with httpx.Client(timeout=30) as client:
            latencies(client, url_a, 50)
            latencies(client, plain, 50)
            for _ in range(ns.rounds):
                a_times += latencies(client, url_a, ns.requests)
                c_times += latencies(client, plain, ns.requests)
        n = len(a_times)
        print(f"request latency, shared counts (A):  p50 {_pct(a_times, .5) * 1e3:.2f} ms, p99 {_pct(a_times, .99) * 1e3:.2f} ms (N={n})")
        print(f"request latency, own counts only (C): p50 {_pct(c_times, .5) * 1e3:.2f} ms, p99 {_pct(c_times, .99) * 1e3:.2f} ms (N={n})")

    with tempfile.TemporaryDirectory() as d, ExitStack() as stack:
        slow = Path(d) / "slow.jsonl"
        slow.write_text(json.dumps({"text": "Hm.</think>" + " ".join(["word"] * 60) + EOS, "delay_ms": 50},
                                   ensure_ascii=False) + "\n", encoding="utf-8")
        redis_url = stack.enter_context(redis_server())
        engines = [a for i in range(3) for a in ("--engine", f"replay:{slow}")]
        url_a, url_b = stack.enter_context(serve(engines + ["--shared-load", redis_url], engines + ["--shared-load", redis_url]))
        lag = staleness(url_a, url_b, ns.trials)
        print(f"staleness (A's stream seen by B, interval 0.1 s): p50 {statistics.median(lag) * 1e3:.0f} ms, "
              f"max {max(lag) * 1e3:.0f} ms (N={len(lag)})")


if __name__ == "__main__":
    main()
