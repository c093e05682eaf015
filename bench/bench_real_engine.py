"""``recipe serve`` in front of real vLLM against vLLM's own chat frontend, on the same engine.

Run: ``RECIPE_VLLM_PYTHON=… python bench/bench_real_engine.py [--probes N] [--seconds S] [--reps R]
[--max-tokens T]`` (the vLLM environment of ``.ci/real_engine_setup``; the model is the tests' tiny
random-weight one with DeepSeek-V4's vocabulary, tests/real_engine.py).

One vLLM process (``--chat-template bench/deepseek_v4_chat.jinja``: DeepSeek-V4's non-thinking chat
format) serves both paths:

- **recipe**: ``recipe serve --engine vllm+…`` (its own process) → vLLM ``/v1/completions`` with token ids;
- **vLLM chat**: vLLM's own ``/v1/chat/completions`` (template, tokenizer and detokenizer in vLLM).

The same short streamed Chat request goes to both (one user message, greedy, ``max_tokens`` T,
``stream_options.include_usage``; recipe with thinking disabled, which renders the same prompt ids
as the template — the prompt counts are printed), interleaved request by request:

- **TTFT**: ``--probes`` sequential requests per path, alternating; the time from sending the
  request to the first content delta, p50 / p99;
- **throughput**: 8 and 32 concurrent streams, each posting back to back for ``--seconds``, the two
  paths alternating for ``--reps`` rounds; completion tokens (from the usage chunk) per second;
- **recipe's added time**, from its own ``/metrics`` over the TTFT probes: mean of
  ``recipe_time_to_first_token_seconds`` (arrival → first byte out) minus mean of
  ``recipe_engine_latency_seconds`` (engine request → its first delta).

It reports and asserts nothing; ratios are recipe / vLLM chat (TTFT: lower is better; tokens/s:
higher is better).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from real_engine import SERVED, VLLMServer, tiny_model, vllm_python  # noqa: E402
from serve_support import cli_server  # noqa: E402

PROMPT = [{"role": "user", "content": "Tell me a short story about a lighthouse keeper."}]


def _body(path: str, max_tokens: int) -> dict:
    body = {"messages": PROMPT, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if path == "recipe":
        return {**body, "model": "deepseek-v4-flash", "thinking": {"type": "disabled"}}
    return {**body, "model": SERVED}


async def one(client: httpx.AsyncClient, url: str, body: dict) -> tuple[float, int, int]:
    """One streamed request: (seconds to the first content delta, completion tokens, prompt tokens)."""
    t0 = time.perf_counter()
    ttft = None
    usage = {}
    async with client.stream("POST", url + "/v1/chat/completions", json=body,
                             headers={"authorization": "Bearer x"}) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            obj = orjson.loads(line[6:])
            if ttft is None and obj.get("choices") and obj["choices"][0].get("delta", {}).get("content"):
                ttft = time.perf_counter() - t0
            if obj.get("usage"):
                usage = obj["usage"]
    return (ttft if ttft is not None else float("nan")), usage.get("completion_tokens", 0), usage.get("prompt_tokens", 0)


def _pct(values: list[float], q: float) -> float:
    values = sorted(v for v in values if v == v)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _metric_sums(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        for name in ("recipe_time_to_first_token_seconds_sum", "recipe_time_to_first_token_seconds_count",
                     "recipe_engine_latency_seconds_sum", "recipe_engine_latency_seconds_count"):
            if line.startswith(name + "{") or line.startswith(name + " "):
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


async def throughput(url: str, body: dict, streams: int, seconds: float) -> float:
    """Completion tokens per second with ``streams`` clients posting back to back for ``seconds``."""
    tokens = 0
    limits = httpx.Limits(max_connections=streams + 4)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        t0 = time.perf_counter()
        end = t0 + seconds

        async def worker() -> None:
            nonlocal tokens
            while time.perf_counter() < end:
                _, n, _ = await one(client, url, body)
                tokens += n

        await asyncio.gather(*(worker() for _ in range(streams)))
        return tokens / (time.perf_counter() - t0)


async def bench(recipe_url: str, vllm_url: str, args: argparse.Namespace) -> None:
    paths = {"recipe": recipe_url, "vllm chat": vllm_url}
    keys = {"recipe": "recipe", "vllm chat": "vllm"}
    async with httpx.AsyncClient(timeout=120) as client:
        for name, url in paths.items():  # warm-up (and the prompt counts)
            for _ in range(3):
                _, n, p = await one(client, url, _body(keys[name], args.max_tokens))
            print(f"{name}: prompt {p} tokens, completion {n} tokens")
        before = _metric_sums((await client.get(recipe_url + "/metrics")).text)
        ttft: dict[str, list[float]] = {k: [] for k in paths}
        for _ in range(args.probes):
            for name, url in paths.items():
                t, _, _ = await one(client, url, _body(keys[name], args.max_tokens))
                ttft[name].append(t)
        after = _metric_sums((await client.get(recipe_url + "/metrics")).text)
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    added = (d["recipe_time_to_first_token_seconds_sum"] / d["recipe_time_to_first_token_seconds_count"]
             - d["recipe_engine_latency_seconds_sum"] / d["recipe_engine_latency_seconds_count"])
    tps: dict[tuple[str, int], list[float]] = {}
    for streams in (8, 32):
        for _ in range(args.reps):
            for name, url in paths.items():
                tps.setdefault((name, streams), []).append(
                    await throughput(url, _body(keys[name], args.max_tokens), streams, args.seconds))

    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} CPUs ({platform.processor() or platform.platform()}); "
          f"{time.strftime('%Y-%m-%d')}; {args.probes} TTFT probes per path, {args.reps} x {args.seconds:.0f} s per "
          f"throughput point, max_tokens {args.max_tokens}\n")
    print("| | recipe → vLLM | vLLM chat | ratio |")
    print("|---|---:|---:|---:|")
    for q, label in ((0.5, "TTFT p50 (ms)"), (0.99, "TTFT p99 (ms)")):
        r, v = _pct(ttft["recipe"], q) * 1000, _pct(ttft["vllm chat"], q) * 1000
        print(f"| {label} | {r:.1f} | {v:.1f} | {r / v:.2f} |")
    for streams in (8, 32):
        r, v = statistics.median(tps[("recipe", streams)]), statistics.median(tps[("vllm chat", streams)])
        print(f"| tokens/s, {streams} streams | {r:.0f} | {v:.0f} | {r / v:.2f} |")
    print(f"\nrecipe's added time (its /metrics, mean over the probes): {added * 1000:.2f} ms per request")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probes", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    py = vllm_python()
    if py is None:
        sys.exit("set RECIPE_VLLM_PYTHON to the python of a vLLM environment (.ci/real_engine_setup)")
    engine = VLLMServer(py, tiny_model(py), ("--chat-template", str(ROOT / "bench" / "deepseek_v4_chat.jinja")),
                        compiled=True, fleet=False)
    try:
        engine.wait_ready()
        print(f"vLLM ready in {engine.start_seconds:.0f} s")
        with cli_server("--engine", f"vllm+{engine.url}?model={SERVED}", "--log-level", "error") as (url, _):
            asyncio.run(bench(url, engine.url, args))
    finally:
        engine.stop()


if __name__ == "__main__":
    main()
