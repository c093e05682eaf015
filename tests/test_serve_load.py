"""A bounded load test: 64 concurrent streams against ``recipe serve --engine replay:…`` (a separate
process, loopback only), for ``RECIPE_LOAD_SECONDS`` seconds (3 by default; the acceptance run is
``RECIPE_LOAD_SECONDS=20``). Every stream must finish without error, and its deltas must add up to
exactly the replayed text — numbered words, so a lost or reordered delta shows. Prints req/s, tok/s
and time-to-first-token percentiles (``pytest -s`` shows them)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time

import httpx
import pytest
from serve_support import EOS, MODEL, cli_server, write_replay

STREAMS = 64
SECONDS = float(os.environ.get("RECIPE_LOAD_SECONDS", "3"))
WORDS = " ".join(f"w{i}" for i in range(200))
APIS = {
    "chat": ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "go"}], "reasoning_effort": "none"}),
    "messages": ("/v1/messages", {"model": MODEL, "max_tokens": 1000, "messages": [{"role": "user", "content": "go"}],
                                  "thinking": {"type": "disabled"}}),
    "responses": ("/v1/responses", {"model": MODEL, "input": "go", "reasoning": {"effort": "none"}, "store": False}),
}


def _text(api: str, event: dict) -> str:
    if api == "chat":
        return "".join(c["delta"].get("content") or "" for c in event.get("choices") or ())
    if api == "messages":
        return event["delta"].get("text", "") if event.get("type") == "content_block_delta" else ""
    return event.get("delta", "") if event.get("type") == "response.output_text.delta" else ""


def _ended(api: str, event: dict | None, line: str) -> bool:
    if api == "chat":
        return line == "data: [DONE]"
    return event is not None and event.get("type") in ("message_stop", "response.completed")


async def _worker(client: httpx.AsyncClient, n: int, until: float, stats: dict) -> None:
    k = 0
    while time.perf_counter() < until:
        api = list(APIS)[(n + k) % 3]
        k += 1
        path, body = APIS[api]
        t0 = time.perf_counter()
        first = None
        parts: list[str] = []
        done = False
        async with client.stream("POST", path, json={**body, "stream": True}) as r:
            if r.status_code != 200:
                stats["errors"].append(f"{api}: HTTP {r.status_code}")
                continue
            async for line in r.aiter_lines():
                event = json.loads(line[6:]) if line.startswith("data: {") else None
                if event is not None:
                    if "error" in event or event.get("type") in ("error", "response.failed"):
                        stats["errors"].append(f"{api}: {line[:200]}")
                    piece = _text(api, event)
                    if piece and first is None:
                        first = time.perf_counter() - t0
                    parts.append(piece)
                done = done or _ended(api, event, line)
        text = "".join(parts)
        if not done or text != WORDS:
            stats["errors"].append(f"{api}: incomplete or out of order ({len(text)} chars, done={done})")
            continue
        stats["ttft"].append(first)
        stats["streams"] += 1


def test_64_concurrent_streams_lose_and_reorder_nothing(tmp_path):
    script = write_replay(tmp_path / "load.jsonl", [{"text": WORDS + EOS, "chunk": 1, "delay_ms": 2}])
    with cli_server("--engine", f"replay:{script}", "--store", "memory") as (url, proc):
        stats: dict = {"errors": [], "ttft": [], "streams": 0}

        async def go() -> float:
            limits = httpx.Limits(max_connections=STREAMS, max_keepalive_connections=STREAMS)
            async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
                t0 = time.perf_counter()
                until = t0 + SECONDS
                await asyncio.wait_for(asyncio.gather(*(_worker(client, n, until, stats) for n in range(STREAMS))),
                                       SECONDS + 120)
                return time.perf_counter() - t0

        elapsed = asyncio.run(go())
        health = httpx.get(f"{url}/health").json()
        assert proc.poll() is None  # the worker survived
    assert stats["errors"] == [] and stats["streams"] >= STREAMS
    assert health["in_flight"] == 0
    tokens = stats["streams"] * 201
    q = statistics.quantiles(stats["ttft"], n=100)
    print(f"\nload: {STREAMS} streams, {elapsed:.1f} s: {stats['streams']} streams ({stats['streams'] / elapsed:.1f}/s), "
          f"{tokens / elapsed:.0f} tok/s, TTFT p50 {q[49] * 1000:.1f} ms p99 {q[98] * 1000:.1f} ms")
