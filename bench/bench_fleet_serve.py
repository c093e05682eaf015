"""A hot prefix through real processes: ``recipe serve`` over four replay replicas, cost routing
against the longest-prefix rule.

    python bench/bench_fleet_serve.py [--clients 48] [--requests 8] [--hot 0.7] [--replicas 4]

For each routing rule (``--routing cost``, then ``--routing prefix``) it starts ``recipe serve`` as
its own process with ``--replicas`` ``replay:`` engines (each keeps its own simulated prefix cache of
the prompts it served and plays a short answer with ``--delay-ms`` between deltas), and runs
``--clients`` concurrent Chat Completions clients over HTTP, each sending ``--requests`` requests:
a share ``--hot`` of them on one system prompt of about 3,000 tokens, the others on a system prompt
of their own. It reports the requests each replica was routed (``recipe_routed_requests_total``
from the server's ``/metrics``) and the share of prompt tokens the answers report cached
(``usage.prompt_tokens_details.cached_tokens``), and checks the targets: requests per replica
within 1.3 × the mean with cost routing, and a cached share within 10% of the longest-prefix
rule's. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MODEL = "deepseek-v4-flash"
EOS = "<｜end▁of▁sentence｜>"
HOT = "You are the support agent of a large company. Follow the policy below exactly. " * 190  # ~3,000 tokens


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _clients(url: str, args: argparse.Namespace) -> tuple[int, int, int]:
    """Run the clients; returns (requests answered, prompt tokens, cached tokens)."""
    totals = [0, 0, 0]

    async def client(seed: int, http: httpx.AsyncClient) -> None:
        rng = random.Random(seed)
        for i in range(args.requests):
            system = HOT if rng.random() < args.hot else f"Session {seed}-{i}: " + "be concise. " * rng.randint(5, 40)
            body = {"model": MODEL, "reasoning_effort": "none", "messages": [
                {"role": "system", "content": system}, {"role": "user", "content": f"Question {seed}.{i}"}]}
            r = await http.post("/v1/chat/completions", json=body)
            r.raise_for_status()
            usage = r.json()["usage"]
            totals[0] += 1
            totals[1] += usage["prompt_tokens"]
            totals[2] += usage["prompt_tokens_details"]["cached_tokens"]

    limits = httpx.Limits(max_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        await asyncio.gather(*(client(s, http) for s in range(args.clients)))
    return totals[0], totals[1], totals[2]


def run(routing: str, args: argparse.Namespace, turns: Path) -> dict[str, object]:
    """One ``recipe serve`` process under ``routing``: per-replica requests and the cached share."""
    port = _free_port()
    cmd = [sys.executable, "-m", "recipe", "serve", "--port", str(port), "--routing", routing,
           "--metrics-interval", "0", "--log-level", "error"]
    for _ in range(args.replicas):
        cmd += ["--engine", f"replay:{turns}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"recipe serve did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
            time.sleep(0.1)
        t0 = time.perf_counter()
        n, prompt, cached = asyncio.run(_clients(url, args))
        wall = time.perf_counter() - t0
        metrics = httpx.get(url + "/metrics", timeout=5).text
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    routed = {m.group(1): int(float(m.group(2)))
              for m in re.finditer(r'recipe_routed_requests_total\{replica="([^"]+)"\} ([0-9.e+]+)', metrics)}
    return {"routing": routing, "requests": n, "routed": routed, "cached_share": cached / max(prompt, 1), "seconds": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=48)
    ap.add_argument("--requests", type=int, default=8, help="requests per client")
    ap.add_argument("--hot", type=float, default=0.7, help="share of requests on the hot prefix")
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--delay-ms", type=float, default=20.0, help="replay pause between deltas")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        turns = Path(tmp) / "turns.jsonl"
        turns.write_text(json.dumps({"text": "Sure, done." + EOS, "chunk": 1, "delay_ms": args.delay_ms}) + "\n")
        results = [run(routing, args, turns) for routing in ("cost", "prefix")]
    print(f"# bench_fleet_serve: recipe serve over {args.replicas} replay replicas, {args.clients} clients x "
          f"{args.requests} requests, {args.hot:.0%} on a ~3,000-token prefix; {platform.machine()} "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}")
    print("| routing | requests per replica | busiest / mean | cached share | wall s |")
    print("|---|---|---|---|---|")
    for r in results:
        counts = list(r["routed"].values())  # type: ignore[union-attr]
        mean = sum(counts) / max(len(counts), 1)
        r["spread"] = max(counts) / mean if mean else float("nan")
        print(f"| {r['routing']} | {' / '.join(str(c) for c in counts)} | {r['spread']:.2f} | "
              f"{r['cached_share']:.3f} | {r['seconds']:.1f} |")
    cost, prefix = results
    ok_spread = cost["spread"] <= 1.3  # type: ignore[operator]
    ok_cache = cost["cached_share"] >= 0.9 * prefix["cached_share"]  # type: ignore[operator]
    print(f"# targets: requests per replica within 1.3 x the mean: {'met' if ok_spread else 'MISSED'}; "
          f"cached share within 10% of longest-prefix's "
          f"({cost['cached_share']:.3f} vs {prefix['cached_share']:.3f}): {'met' if ok_cache else 'MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if ok_spread and ok_cache else 1


if __name__ == "__main__":
    raise SystemExit(main())
