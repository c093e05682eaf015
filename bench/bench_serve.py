"""``recipe serve`` against deepseek-recipe's own example server shape, over the same replay engine.

Run: ``python bench/bench_serve.py [--seconds S] [--reps N] [--points 1x1,16x1,64x1,1x16,16x16,64x16]``.

Two server processes (uvicorn, same settings, 127.0.0.1 port 0): recipe's app
(``recipe.serve.app(replay)``) and the anchor (bench/serve_anchor.py: FastAPI + deepseek-recipe's
``StreamProcessor`` + its Chat chunk generator, the shape of deepseek-recipe's ``server-py``), both
fed by a :class:`~recipe.serve.engines.replay.ReplayEngine` playing the same 256-token thinking-mode
answer. A third, trivial server (one SSE frame at once) is the HTTP baseline. The client is a small
asyncio HTTP/1.1 client (keep-alive, chunked decoding, no JSON parsing) in this process.

For each point (concurrent streams × ids per engine delta), interleaving the servers:

- **throughput**: the engine sends deltas back to back (no delay); output tokens per second of server
  CPU time (user + system, read from /proc), i.e. per server core;
- **latency**: the engine is paced (20 ms between deltas, as a decoding engine is) and ``streams - 1``
  streams run in the background while a probe sends fresh requests one after another: time to the
  first byte of the probe's stream, p50 / p99; "added" = recipe's p99 minus the p50 of the same probe
  against the baseline server (an HTTP round trip on a new connection).

Prints medians [min–max] over the repetitions and the ratio recipe/anchor (> 1: recipe does more
tokens per core). Targets (issue 13): ratio ≥ 2 at every point; recipe's added TTFT p99 ≤ 2 ms at 16
streams. The machine may be shared: the CPU-time ratio is robust to that, latencies are not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODEL = "deepseek-v4-pro"
REQUEST = {"model": MODEL, "stream": True, "messages": [
    {"role": "system", "content": "You are a helpful assistant. Answer precisely."},
    {"role": "user", "content": "Explain in a few sentences why the sky is blue."}]}
REASONING = " ".join(["The user asks about Rayleigh scattering and I should explain it simply."] * 11)
ANSWER = " ".join(["Sunlight scatters off air molecules, and blue light scatters the most."] * 7)
PACED_MS = 20.0


def _output_ids() -> list[int]:
    from recipe.tokenizer import load_tokenizer

    ids = load_tokenizer().encode_with_special_tokens(REASONING + "</think>" + ANSWER + "<｜end▁of▁sentence｜>")
    return ids


# ----------------------------------------------------------------------------- the server processes


def _control(engine: Any, ids: list[int]) -> Any:
    """``POST /bench/config {"chunk", "delay_ms"}``: what the replay plays next."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from recipe.serve.engines.replay import ReplayTurn

    async def config(request: Any) -> Any:
        c = await request.json()
        engine.turns = [ReplayTurn(tuple(ids), "stop", 0, int(c["chunk"]), float(c["delay_ms"]))]
        return JSONResponse({"ok": True})

    return Route("/bench/config", config, methods=["POST"])


def _baseline_app() -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                if m["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif m["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: {}\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    return app


def serve(kind: str) -> None:
    """Run one server (``recipe`` | ``anchor`` | ``baseline``) on 127.0.0.1:0; prints its URL."""
    import uvicorn

    from recipe.serve.engines.replay import ReplayEngine, ReplayTurn

    ids = _output_ids()
    if kind == "baseline":
        app = _baseline_app()
    elif kind == "recipe":
        import recipe.serve
        from recipe.store.conversations import MemoryStore

        engine = ReplayEngine([ReplayTurn(tuple(ids))], "bench-replay")
        app = recipe.serve.app(engine, store=MemoryStore())
        app.router.routes.append(_control(engine, ids))
    else:
        import serve_anchor

        app = serve_anchor.app([ReplayTurn(tuple(ids))])
        app.router.routes.append(_control(app.state.engine, ids))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    profile = os.environ.get("BENCH_SERVE_PROFILE")  # a file: cProfile the server until SIGTERM
    if profile:
        import cProfile
        import signal

        signal.signal(signal.SIGTERM, lambda *_: None)
        cProfile.runctx("server.run(sockets=[sock])", globals(), {"server": server, "sock": sock}, profile)
        return
    server.run(sockets=[sock])


class Server:
    """A server subprocess: its URL, PID and CPU seconds used."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", kind], stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        host, port = self.url.rsplit("/", 1)[1].split(":")
        self.addr = (host, int(port))
        for _ in range(300):
            try:
                with socket.create_connection(self.addr, timeout=1):
                    break
            except OSError:
                time.sleep(0.05)

    def cpu(self) -> float:
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ----------------------------------------------------------------------------- the client


class Conn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[float, int]:
        """POST and read the whole (chunked or sized) body; returns (seconds to first body byte, bytes)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(*self.addr)
        head = (f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        t0 = time.perf_counter()
        self.writer.write(head + body)
        r = self.reader
        headers = (await r.readuntil(b"\r\n\r\n")).lower()
        if not headers.startswith(b"http/1.1 200"):
            raise RuntimeError(headers[:200])
        ttfb, total = None, 0
        if b"transfer-encoding: chunked" in headers:
            while True:
                size = int((await r.readuntil(b"\r\n")).split(b";")[0], 16)
                data = await r.readexactly(size + 2)
                if ttfb is None:
                    ttfb = time.perf_counter() - t0
                if size == 0:
                    break
                total += size
        else:
            n = int(headers.split(b"content-length: ")[1].split(b"\r\n")[0])
            await r.readexactly(n)
            ttfb, total = time.perf_counter() - t0, n
        if b"connection: close" in headers:
            self.writer.close()
            self.writer = None
        return ttfb, total

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _load(addr: tuple[str, int], streams: int, seconds: float, body: bytes) -> tuple[int, list[float]]:
    """``streams`` workers posting back to back for ``seconds``; (completed requests, TTFBs)."""
    until = time.perf_counter() + seconds
    done, ttfb = [0], []

    async def worker() -> None:
        c = Conn(addr)
        try:
            while time.perf_counter() < until:
                t, _ = await c.post("/v1/chat/completions", body)
                ttfb.append(t)
                done[0] += 1
        finally:
            c.close()

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(streams))), seconds + 120)
    return done[0], ttfb


async def _first_byte(addr: tuple[str, int], body: bytes) -> float:
    """Seconds from sending a request on a fresh connection to the first byte of its body; then
    hangs up (the server aborts the rest)."""
    reader, writer = await asyncio.open_connection(*addr)
    try:
        t0 = time.perf_counter()
        writer.write((f"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        headers = await reader.readuntil(b"\r\n\r\n")
        if not headers.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(headers[:200])
        await reader.readuntil(b"\r\n")  # the first chunk's size line: its data is on the way
        return time.perf_counter() - t0
    finally:
        writer.close()


async def _latency(addr: tuple[str, int], streams: int, seconds: float, body: bytes) -> list[float]:
    """``streams - 1`` paced streams in the background, and one probe measuring time to first byte
    of fresh requests, one after another, for ``seconds``."""
    stop = time.perf_counter() + seconds
    ttfb: list[float] = []

    async def background() -> None:
        c = Conn(addr)
        try:
            while time.perf_counter() < stop:
                await c.post("/v1/chat/completions", body)
        finally:
            c.close()

    async def probe() -> None:
        await asyncio.sleep(min(0.5, seconds / 4))  # the background streams are under way
        while time.perf_counter() < stop:
            ttfb.append(await _first_byte(addr, body))
            await asyncio.sleep(0.01)

    await asyncio.wait_for(asyncio.gather(probe(), *(background() for _ in range(streams - 1))), seconds + 120)
    return ttfb


def _configure(server: Server, chunk: int, delay_ms: float) -> None:
    async def go() -> None:
        c = Conn(server.addr)
        await c.post("/bench/config", json.dumps({"chunk": chunk, "delay_ms": delay_ms}).encode())
        c.close()

    asyncio.run(go())


def _content(url: str) -> str:
    """The streamed answer text (a sanity check that both servers say the same)."""
    import httpx

    text = []
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=REQUEST, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                for ch in json.loads(line[6:]).get("choices") or ():
                    text.append((ch["delta"].get("reasoning_content") or "") + "|" + (ch["delta"].get("content") or ""))
    return "".join(text)


def _pct(xs: list[float], p: int) -> float:
    return statistics.quantiles(xs, n=100)[p - 1] if len(xs) >= 2 else xs[0]


def _fmt(xs: list[float], scale: float = 1.0, digits: int = 0) -> str:
    xs = [x * scale for x in xs]
    return f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f}–{max(xs):.{digits}f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", choices=("recipe", "anchor", "baseline"), help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--points", default="1x1,16x1,64x1,1x16,16x16,64x16", help="STREAMSxIDS_PER_DELTA,…")
    ns = ap.parse_args()
    if ns.serve:
        return serve(ns.serve)
    points = [tuple(int(x) for x in p.split("x")) for p in ns.points.split(",")]
    ids = _output_ids()
    body = json.dumps(REQUEST).encode()
    servers = {k: Server(k) for k in ("recipe", "anchor", "baseline")}
    try:
        ours, theirs = (_content(servers[k].url) for k in ("recipe", "anchor"))
        assert ours == theirs, "the two servers stream different text"
        print(f"output: {len(ids)} tokens per request; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
              f"{ns.reps} reps of {ns.seconds:.0f} s per measurement")
        print(f"{'streams':>7} {'ids/Δ':>5} | {'recipe tok/s/core':>22} {'anchor tok/s/core':>22} {'ratio':>17} | "
              f"{'recipe TTFT p50/p99 ms':>24} {'anchor TTFT p50/p99 ms':>24} {'recipe added p99 ms':>20}")
        for streams, chunk in points:
            tput: dict[str, list[float]] = {"recipe": [], "anchor": []}
            p50: dict[str, list[float]] = {"recipe": [], "anchor": [], "baseline": []}
            p99: dict[str, list[float]] = {"recipe": [], "anchor": [], "baseline": []}
            for rep in range(ns.reps):
                order = ["recipe", "anchor"] if rep % 2 == 0 else ["anchor", "recipe"]
                for k in order:
                    s = servers[k]
                    _configure(s, chunk, 0.0)
                    c0 = s.cpu()
                    n, _ = asyncio.run(_load(s.addr, streams, ns.seconds, body))
                    tput[k].append(n * len(ids) / max(s.cpu() - c0, 1e-9))
                for k in [*order, "baseline"]:
                    s = servers[k]
                    if k != "baseline":
                        _configure(s, chunk, PACED_MS)
                    t = asyncio.run(_latency(s.addr, streams if k != "baseline" else 1, ns.seconds, body))
                    p50[k].append(_pct(t, 50))
                    p99[k].append(_pct(t, 99))
            ratio = [a / b for a, b in zip(tput["recipe"], tput["anchor"])]
            added = [a - b for a, b in zip(p99["recipe"], p50["baseline"])]
            print(f"{streams:>7} {chunk:>5} | {_fmt(tput['recipe']):>22} {_fmt(tput['anchor']):>22} {_fmt(ratio, 1, 2):>17} | "
                  f"{_fmt(p50['recipe'], 1e3, 1) + ' / ' + _fmt(p99['recipe'], 1e3, 1):>24} "
                  f"{_fmt(p50['anchor'], 1e3, 1) + ' / ' + _fmt(p99['anchor'], 1e3, 1):>24} {_fmt(added, 1e3, 2):>20}")
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
