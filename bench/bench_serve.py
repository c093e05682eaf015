"""``recipe serve`` against deepseek-recipe's own example server shape, over the same replay engine.

Run: ``python bench/bench_serve.py [--seconds S] [--probes N] [--reps R] [--points 1x1,16x1,64x1,1x16,16x16,64x16]``.

Two server processes (uvicorn, same settings, 127.0.0.1 port 0): recipe's app
(``recipe.serve.app(replay)``, run as ``recipe serve`` runs it: ``recipe.serve.uvicorn_config`` and
``recipe.serve.runner.Server``) and the anchor (bench/serve_anchor.py: FastAPI + deepseek-recipe's
``StreamProcessor`` + its Chat chunk generator, the shape of deepseek-recipe's ``server-py``), both
fed by a :class:`~recipe.serve.engines.replay.ReplayEngine` playing the same 256-token thinking-mode
answer. A third, trivial server (one SSE frame at once) is the HTTP baseline.

For each point (concurrent streams × ids per engine delta), interleaving the servers:

- **throughput**: the engine sends deltas back to back (no delay); ``streams`` clients (a small
  asyncio HTTP/1.1 client in this process: keep-alive, chunked decoding, no JSON parsing) post
  back to back for ``--seconds``; output tokens per second of server CPU time (user + system, read
  from /proc), i.e. per server core;
- **latency**: the engine is paced (20 ms between deltas, as a decoding engine is). ``streams - 1``
  paced streams run in the background — in a **separate client process** (``--background``), so
  their reads never queue the probe — each posting back to back. Their first requests are
  **staggered** evenly over one request's length (in whole 20 ms periods, so their deltas still come
  in the same phase of the cycle, as a batched engine's do): every replayed answer has the same
  length, so streams started together would end and restart together for ever, a herd of
  ``streams - 1`` new requests every answer's length (320 ms at 16 ids per delta) that real
  clients, whose answers differ in length, do not make; the probe's p99 then measures how long the
  server takes to admit that herd (``--herd`` measures that: all background streams start at
  once). Meanwhile a **probe** in this process sends ``--probes`` fresh
  requests one after another, each on a new connection (opened before the clock starts), with a
  blocking socket (no event loop on the probe's side) and a random 2–12 ms pause between requests
  (so the probes land at every phase of the background streams' 20 ms cycle). TTFT is the time from
  sending the request to reading the first body chunk's size line. Samples are taken after the
  background streams have all started and a few unrecorded warm-up probes. p50 / p99 per repetition
  (N = ``--probes``) and over all repetitions pooled (N = reps × probes). The same probe, with the
  same background, measures recipe and the anchor; the baseline is the probe alone against the
  trivial server: its p50 is an HTTP round trip on a new connection.
- **"added"** (the target's number) = the server's TTFT p99 under load minus the baseline's p50, per
  repetition: what the server adds to an HTTP round trip, the engine's (replay's) own time to its
  first delta included.
- **server side** (a second view, from the server's own timestamps; not the target's number): for
  the probe's requests only (marked with an ``x-bench-probe`` header, which an ASGI wrapper in the
  bench's server process reads; the other requests pass straight through), the time from the ASGI
  app being called (request head parsed) to the first body byte handed to the transport, minus the
  engine's time from ``generate`` to its first delta. It leaves out the kernel, uvicorn's parsing
  and the client, and so shows how much of "added" is the server's own work.

Prints medians [min–max] over the repetitions and the ratio recipe/anchor (> 1: recipe does more
tokens per core). Targets: ratio ≥ 2 at every point; recipe's added TTFT p99 ≤ 2 ms at 16
streams. The machine may be shared: the CPU-time ratio is robust to that, latencies are not (client,
background, engine and servers share the machine's cores). On Linux with autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled``), ``nice`` does not shield the bench from other
sessions' CPU-bound work (their waits of several milliseconds land on every server's p99, the
baseline's too); as root, ``echo -10 > /proc/self/autogroup`` in the bench's shell does (set it back
to 0 after): the baseline's p99 then stays near its p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
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

#: The probe's request: ``{"in", "call", "first", "out"}`` perf_counter stamps (None: not a probe).
_PROBE: Any = None
_TIMINGS: list[dict[str, float]] = []


def _probe_var() -> Any:
    global _PROBE
    if _PROBE is None:
        import contextvars

        _PROBE = contextvars.ContextVar("bench_probe", default=None)
    return _PROBE


def _timed_engine(cls: Any) -> Any:
    """``cls`` (a replay engine class) that stamps a probe request's ``generate`` call and first delta."""

    class Timed(cls):  # type: ignore[misc, valid-type]
        def generate(self, request: Any) -> Any:
            it = super().generate(request)
            rec = _probe_var().get()
            if rec is None:
                return it
            rec["call"] = time.perf_counter()
            return _stamp_first(it, rec)

    return Timed


async def _stamp_first(it: Any, rec: dict[str, float]) -> Any:
    try:
        async for d in it:
            if "first" not in rec:
                rec["first"] = time.perf_counter()
            yield d
    finally:
        await it.aclose()


def _timed_app(app: Any) -> Any:
    """``app`` with the probe's server-side stamps (module docstring); other requests pass through."""
    var = _probe_var()

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (b"x-bench-probe", b"1") not in scope["headers"]:
            return await app(scope, receive, send)
        rec = {"in": time.perf_counter()}
        var.set(rec)  # this request's task (and the tasks it starts) only

        async def timed_send(message: Any) -> None:
            await send(message)
            if "out" not in rec and message["type"] == "http.response.body" and message.get("body"):
                rec["out"] = time.perf_counter()
                _TIMINGS.append(rec)

        await app(scope, receive, timed_send)

    return wrapped


def _control(engine: Any, ids: list[int]) -> list[Any]:
    """``POST /bench/config {"chunk", "delay_ms"}``: what the replay plays next; ``POST /bench/timings``:
    the probes' server-side stamps since the last call."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from recipe.serve.engines.replay import ReplayTurn

    async def config(request: Any) -> Any:
        c = await request.json()
        engine.turns = [ReplayTurn(tuple(ids), "stop", 0, int(c["chunk"]), float(c["delay_ms"]))]
        return JSONResponse({"ok": True})

    async def timings(request: Any) -> Any:
        out = [r for r in _TIMINGS if "call" in r and "first" in r]
        _TIMINGS.clear()
        return JSONResponse([[r["in"], r["call"], r["first"], r["out"]] for r in out])

    return [Route("/bench/config", config, methods=["POST"]), Route("/bench/timings", timings, methods=["POST"])]


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


def _log_gc(kind: str) -> None:
    import gc

    started: list[float] = [0.0]

    def cb(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        elif (took := time.perf_counter() - started[0]) > 0.001 or info["generation"] == 2:
            print(f"{kind} gc gen{info['generation']}: {took * 1e3:.1f} ms, {info['collected']} collected", file=sys.stderr, flush=True)

    gc.callbacks.append(cb)


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

        engine = _timed_engine(ReplayEngine)([ReplayTurn(tuple(ids))], "bench-replay")
        app = recipe.serve.app(engine, store=MemoryStore())
        app.router.routes.extend(_control(engine, ids))
        app = _timed_app(app)
    else:
        import serve_anchor

        app = serve_anchor.app([ReplayTurn(tuple(ids))], engine_class=_timed_engine(ReplayEngine))
        app.router.routes.extend(_control(app.state.engine, ids))
        app = _timed_app(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    if kind == "recipe":  # as ``recipe serve`` runs it (recipe.serve.runner: eager task start on Python 3.12+)
        from recipe.serve.runner import Server as RecipeServer

        server = RecipeServer(recipe.serve.uvicorn_config(app, log_level="warning", lifespan="on"))
    else:
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    if os.environ.get("BENCH_SERVE_GC"):  # diagnostics: each collection over 1 ms, on stderr
        _log_gc(kind)
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

    async def post(self, path: str, body: bytes, on_first: Any = None) -> tuple[float, int]:
        """POST and read the whole (chunked or sized) body; returns (seconds to first body byte, bytes).
        ``on_first()`` is called at the first body byte."""
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
                    if on_first is not None:
                        on_first()
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


def _probe_once(addr: tuple[str, int], request: bytes) -> float:
    """Seconds from sending ``request`` on a new connection (opened first, off the clock) to reading
    the first body chunk's size line; then hangs up (the server aborts the rest). Blocking socket:
    the probe's side waits in the kernel, nothing else runs in its process."""
    s = socket.create_connection(addr)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        s.sendall(request)
        buf = b""
        while True:
            data = s.recv(65536)
            if not data:
                raise RuntimeError(f"the server closed the probe's connection: {buf[:200]!r}")
            buf += data
            head = buf.find(b"\r\n\r\n")
            if head >= 0 and buf.find(b"\r\n", head + 4) >= 0:  # the first chunk's size line
                t = time.perf_counter() - t0
                break
        if not buf.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(buf[:200])
        return t
    finally:
        s.close()


WARMUP_PROBES = 5


def _probe(addr: tuple[str, int], body: bytes, n: int, seed: int) -> list[float]:
    """``n`` probe TTFTs (after :data:`WARMUP_PROBES` unrecorded ones), 2–12 ms apart at random."""
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
               f"X-Bench-Probe: 1\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    rng = random.Random(seed)
    out: list[float] = []
    for i in range(n + WARMUP_PROBES):
        t = _probe_once(addr, request)
        if i >= WARMUP_PROBES:
            out.append(t)
        time.sleep(rng.uniform(0.002, 0.012))
    return out


async def _background(addr: tuple[str, int], streams: int, body: bytes, stagger: float = 0.0) -> None:
    """``streams`` paced streams posting back to back until stdin closes; prints ``ready`` once each
    has its first byte (the ``--background`` process: the probe's process runs nothing else).
    Stream ``i`` sends its first request ``i * stagger`` seconds after the first one's."""
    loop = asyncio.get_running_loop()
    stop = loop.run_in_executor(None, sys.stdin.read)
    started = 0
    ready = asyncio.Event()

    def first() -> None:
        nonlocal started
        started += 1
        if started == streams:
            ready.set()

    async def worker(i: int) -> None:
        c = Conn(addr)
        try:
            if i and stagger:
                await asyncio.sleep(i * stagger)
            await c.post("/v1/chat/completions", body, first)
            while True:
                await c.post("/v1/chat/completions", body)
        finally:
            c.close()

    tasks = [asyncio.ensure_future(worker(i)) for i in range(streams)]
    await asyncio.wait([asyncio.ensure_future(ready.wait()), *tasks], return_when=asyncio.FIRST_COMPLETED)
    print("ready" if ready.is_set() else "failed", flush=True)
    await asyncio.wait([stop, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _stagger(streams: int, deltas: int) -> float:
    """Seconds between the background streams' first requests: one request's length (``deltas``
    paced deltas) spread evenly over the ``streams`` streams, in whole delta periods (so their deltas
    still come in the same phase of the 20 ms cycle, as a batched engine's do); 0 without any."""
    return max(1, round(deltas / streams)) * PACED_MS / 1000 if streams > 0 else 0.0


def _latency(server: Server, streams: int, body: bytes, probes: int, seed: int, stagger: float = 0.0) -> list[float]:
    """The probe's TTFTs with ``streams - 1`` paced background streams in another process, their
    first requests ``stagger`` seconds apart."""
    bg = None
    if streams > 1:
        bg = subprocess.Popen([sys.executable, __file__, "--background", f"{server.addr[0]}:{server.addr[1]}",
                               "--streams", str(streams - 1), "--stagger", str(stagger)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if bg.stdout.readline().strip() != "ready":
            raise RuntimeError("the background streams did not start")
        time.sleep(0.2)
    try:
        return _probe(server.addr, body, probes, seed)
    finally:
        if bg is not None:
            bg.stdin.close()
            try:
                bg.wait(30)
            except subprocess.TimeoutExpired:
                bg.kill()


def _stamps(server: Server) -> list[list[float]]:
    """The probes' server-side stamps ``[in, call, first, out]`` since the last call."""
    import httpx

    return httpx.post(f"{server.url}/bench/timings", timeout=30).json()


def _server_side(server: Server) -> list[float]:
    """The probes' server-side added seconds since the last call (warm-up probes dropped): request
    head to first body byte, minus the engine's ``generate`` call to its first delta."""
    return [(out - t_in) - (first - call) for t_in, call, first, out in _stamps(server)[WARMUP_PROBES:]]


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


def _pooled(runs: list[list[float]], p: int) -> float:
    return _pct([x for r in runs for x in r], p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", choices=("recipe", "anchor", "baseline"), help=argparse.SUPPRESS)
    ap.add_argument("--background", help=argparse.SUPPRESS)  # HOST:PORT: the background streams' process
    ap.add_argument("--streams", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--stagger", type=float, default=0.0, help=argparse.SUPPRESS)  # the background's, seconds
    ap.add_argument("--herd", action="store_true",
                    help="start the background streams all at once (they then restart in lockstep: module docstring)")
    ap.add_argument("--seconds", type=float, default=4.0, help="per throughput measurement")
    ap.add_argument("--probes", type=int, default=400, help="TTFT samples per server, point and repetition")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--points", default="1x1,16x1,64x1,1x16,16x16,64x16", help="STREAMSxIDS_PER_DELTA,…")
    ns = ap.parse_args()
    body = json.dumps(REQUEST).encode()
    if ns.serve:
        return serve(ns.serve)
    if ns.background:
        host, port = ns.background.rsplit(":", 1)
        return asyncio.run(_background((host, int(port)), ns.streams, body, ns.stagger))
    points = [tuple(int(x) for x in p.split("x")) for p in ns.points.split(",")]
    ids = _output_ids()
    servers = {k: Server(k) for k in ("recipe", "anchor", "baseline")}
    rows_t, rows_l = [], []
    try:
        ours, theirs = (_content(servers[k].url) for k in ("recipe", "anchor"))
        assert ours == theirs, "the two servers stream different text"
        print(f"output: {len(ids)} tokens per request; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
              f"{ns.reps} reps: throughput {ns.seconds:.0f} s, latency {ns.probes} probes per server; background streams "
              f"{'started at once (--herd)' if ns.herd else 'staggered'}", flush=True)
        for streams, chunk in points:
            tput: dict[str, list[float]] = {"recipe": [], "anchor": []}
            ttft: dict[str, list[list[float]]] = {"recipe": [], "anchor": [], "baseline": []}
            side: dict[str, list[list[float]]] = {"recipe": [], "anchor": []}
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
                        _server_side(s)  # drop what earlier requests left
                    stagger = 0.0 if ns.herd else _stagger(streams - 1, -(-len(ids) // chunk))
                    ttft[k].append(_latency(s, streams if k != "baseline" else 1, body, ns.probes, rep, stagger))
                    if k != "baseline":
                        side[k].append(_server_side(s))
            ratio = [a / b for a, b in zip(tput["recipe"], tput["anchor"])]
            p50 = {k: [_pct(r, 50) for r in v] for k, v in ttft.items()}
            p99 = {k: [_pct(r, 99) for r in v] for k, v in ttft.items()}
            added = {k: [a - b for a, b in zip(p99[k], p50["baseline"])] for k in ("recipe", "anchor")}
            pooled = {k: _pooled(ttft[k], 99) - _pooled(ttft["baseline"], 50) for k in ("recipe", "anchor")}
            rows_t.append(f"{streams:>7} {chunk:>5} | {_fmt(tput['recipe']):>22} {_fmt(tput['anchor']):>22} {_fmt(ratio, 1, 2):>17}")
            ms = lambda xs: _fmt(xs, 1e3, 2)  # noqa: E731
            rows_l.append(
                f"{streams:>7} {chunk:>5} | {ms(p50['recipe']):>19} {ms(p99['recipe']):>19} | {ms(p50['anchor']):>19} "
                f"{ms(p99['anchor']):>19} | {ms(p50['baseline']):>19} {ms(p99['baseline']):>19} | {ms(added['recipe']):>19} {pooled['recipe'] * 1e3:>6.2f} | "
                f"{ms(added['anchor']):>19} {pooled['anchor'] * 1e3:>6.2f} | "
                f"{_pooled(side['recipe'], 50) * 1e3:>6.3f} {_pooled(side['recipe'], 99) * 1e3:>6.3f} | "
                f"{_pooled(side['anchor'], 50) * 1e3:>6.3f} {_pooled(side['anchor'], 99) * 1e3:>6.3f}")
            print(f"  {streams}x{chunk} done", file=sys.stderr, flush=True)
        print(f"\nthroughput (output tokens per second of server CPU; median [min–max] of {ns.reps})")
        print(f"{'streams':>7} {'ids/Δ':>5} | {'recipe tok/s/core':>22} {'anchor tok/s/core':>22} {'ratio':>17}")
        print("\n".join(rows_t))
        print(f"\nTTFT ms: per repetition median [min–max] of {ns.reps} (N = {ns.probes} probes each); \"pooled\": "
              f"over all {ns.reps * ns.probes}; server side: recipe's own time to first byte minus the engine's, pooled p50 p99")
        print(f"{'streams':>7} {'ids/Δ':>5} | {'recipe p50':>19} {'recipe p99':>19} | {'anchor p50':>19} {'anchor p99':>19} | "
              f"{'baseline p50':>19} {'baseline p99':>19} | {'recipe added p99':>19} {'pooled':>6} | {'anchor added p99':>19} {'pooled':>6} | "
              f"{'recipe server side':>13} | {'anchor server side':>13}")
        print("\n".join(rows_l))
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
