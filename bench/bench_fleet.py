"""Fleet simulator: routing policies side by side on one workload, one run.

    python bench/bench_fleet.py [--replicas 8] [--loads 0.3,0.5,0.7,0.9,1.1] [--seconds 300] [--seed 0]

A discrete-event model of N replicas. Each replica prefills one request at a time at
``--prefill-tps`` tokens/s (only the tokens its cache does not hold), then decodes it in one of
``--slots`` batch slots at ``--decode-tps`` tokens/s; a request waits (FCFS) for a slot and the
prefill unit. Each replica's KV cache holds ``--kv-blocks`` 64-token blocks with LRU eviction. TTFT
is arrival to the end of the prefill.

The workload (modelled on DeepSeek's disclosures): agent sessions of 20–50 turns that share one of a
few long tool-list prefixes and grow by tool results, with think-time gaps between turns; chat
requests on shared system prompts; and a hot 3,000-token prefix on 30% of all requests.

The router side is recipe's own code: every policy routes through a :class:`recipe.serve.pool.ReplicaPool`
over the same kind of prefix index ``recipe serve`` keeps (the routed-keys estimate: what was sent
where, never evicted). ``recipe-cost`` and ``longest-prefix`` are ``ReplicaPool.route`` itself with
``routing="cost"`` / ``"prefix"``; round-robin, least-loaded, SGLang's cache-aware policy (its
default thresholds: cache_threshold 0.3, balance_abs 64, balance_rel 1.5) and Dynamo's KV-router cost
(1.0 × uncached prefill blocks + active decode blocks) read the pool's index scores.

100% load is the arrival rate at which an ideal fleet — one infinite cache shared by all replicas,
perfectly balanced — would keep every prefill unit busy. Reported per policy and load: cache hit
rate (cached / prompt tokens), TTFT p50 / p99 (s), goodput (requests/s with TTFT within
``--slo`` s), and load spread (the busiest replica's request count over the mean).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import platform
import random
import statistics
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recipe.cache.index import namespace
from recipe.cache.keys import KeySpec, block_keys, cached_prompt_tokens
from recipe.serve.pool import ReplicaPool

BLOCK = 64
MODEL = "deepseek-v4-flash"
POLICIES = ("round-robin", "least-loaded", "longest-prefix", "sglang-cache-aware", "dynamo-kv", "recipe-cost")


class _Engine:
    """A stand-in engine (the simulator never generates)."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def aclose(self) -> None:
        pass


@dataclass
class Request:
    arrive: float
    ids: list[int]
    output: int
    keys: Sequence[bytes] = ()


def _piece(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 120000) for _ in range(n)]


def workload(seconds: float, rate: float, seed: int) -> list[Request]:
    """Requests over ``seconds`` at about ``rate`` per second (see the module docstring)."""
    rng = random.Random(seed)
    hot = _piece(1, 3000)
    tools = [_piece(100 + i, rng.randint(2000, 6000)) for i in range(6)]
    systems = [_piece(200 + i, rng.randint(300, 2000)) for i in range(40)]
    out: list[Request] = []
    uid = 10_000
    t = 0.0
    while t < seconds:
        t += rng.expovariate(rate)
        kind = rng.random()
        uid += 1
        if kind < 0.3:  # the hot prefix
            out.append(Request(t, hot + _piece(uid, rng.randint(100, 800)), rng.randint(50, 400)))
        elif kind < 0.55:  # chat on a shared system prompt
            out.append(Request(t, rng.choice(systems) + _piece(uid, rng.randint(50, 500)), rng.randint(100, 600)))
        else:  # an agent session: its turns arrive one by one (counted as one arrival of the rate)
            ids = rng.choice(tools) + _piece(uid, rng.randint(200, 1000))
            turn_t = t
            turns = rng.randint(20, 50)
            for k in range(turns):
                out.append(Request(turn_t, list(ids), rng.randint(50, 300)))
                ids += _piece(uid * 100 + k, rng.randint(100, 1500))
                turn_t += rng.expovariate(1 / 8.0)
                if turn_t > seconds:
                    break
            t += 0  # sessions overlap freely
    out.sort(key=lambda r: r.arrive)
    return out


@dataclass
class Replica:
    kv_blocks: int
    cache: OrderedDict = field(default_factory=OrderedDict)
    prefill_free: float = 0.0
    slot_free: list[float] = field(default_factory=list)
    active: list[tuple[float, int]] = field(default_factory=list)  # (decode end, blocks) of requests on it
    served: int = 0

    def hold(self, keys: Sequence[bytes]) -> int:
        """Blocks of ``keys`` cached (longest prefix), then all of them inserted (LRU)."""
        hit = 0
        for k in keys:
            if k in self.cache:
                hit += 1
            else:
                break
        for k in keys:
            self.cache[k] = None
            self.cache.move_to_end(k)
        while len(self.cache) > self.kv_blocks:
            self.cache.popitem(last=False)
        return hit


class Router:
    """One policy over a ReplicaPool (its index, its replicas' in-flight counts)."""

    def __init__(self, policy: str, n: int) -> None:
        self.policy = policy
        routing = "prefix" if policy == "longest-prefix" else "cost"
        self.pool = ReplicaPool([_Engine(f"r{i}") for i in range(n)], routing=routing)
        self.rr = 0

    async def route(self, req: Request, in_flight: list[int], decode_blocks: list[int]) -> int:
        pool = self.pool
        for r, f in zip(pool.replicas, in_flight):
            r.in_flight = f
        if self.policy in ("recipe-cost", "longest-prefix"):
            route = await pool.route(req.ids, None, MODEL)
            return pool.replicas.index(route.replica)
        spec = KeySpec(block_size=BLOCK, model=MODEL)
        ns = namespace(spec)
        scores = pool.index.scores(ns, req.keys)
        n = len(pool.replicas)
        matched = [scores.get(f"r{i}", 0) for i in range(n)]
        if self.policy == "round-robin":
            i = self.rr % n
            self.rr += 1
        elif self.policy == "least-loaded":
            i = min(range(n), key=lambda j: (in_flight[j], j))
        elif self.policy == "sglang-cache-aware":
            lo, hi = min(in_flight), max(in_flight)
            if hi - lo > 64 and hi > 1.5 * lo:
                i = min(range(n), key=lambda j: (in_flight[j], j))
            else:
                best = max(range(n), key=lambda j: (matched[j], -in_flight[j]))
                ratio = cached_prompt_tokens(len(req.ids), matched[best], BLOCK) / max(len(req.ids), 1)
                i = best if ratio > 0.3 else min(range(n), key=lambda j: (in_flight[j], j))
        else:  # dynamo-kv: overlap_weight 1.0 x prefill blocks + active decode blocks
            blocks = len(req.keys)
            i = min(range(n), key=lambda j: (blocks - matched[j] + decode_blocks[j], in_flight[j], j))
        pool.index.put(ns, req.keys, f"r{i}")
        return i


async def simulate(policy: str, reqs: list[Request], n: int, args: argparse.Namespace) -> dict[str, float]:
    router = Router(policy, n)
    reps = [Replica(args.kv_blocks, slot_free=[0.0] * args.slots) for _ in range(n)]
    prompt = cached = 0
    ttfts: list[float] = []
    for req in reqs:
        now = req.arrive
        in_flight, decode_blocks = [], []
        for r in reps:
            r.active = [(end, b) for end, b in r.active if end > now]
            in_flight.append(len(r.active))
            decode_blocks.append(sum(b for _, b in r.active))
        i = await router.route(req, in_flight, decode_blocks)
        rep = reps[i]
        rep.served += 1
        hit = rep.hold(req.keys)
        hit_tokens = cached_prompt_tokens(len(req.ids), hit, BLOCK)
        prompt += len(req.ids)
        cached += hit_tokens
        slot = min(range(args.slots), key=lambda s: rep.slot_free[s])
        start = max(now, rep.slot_free[slot], rep.prefill_free)
        done_prefill = start + (len(req.ids) - hit_tokens) / args.prefill_tps
        rep.prefill_free = done_prefill
        end = done_prefill + req.output / args.decode_tps
        rep.slot_free[slot] = end
        rep.active.append((end, len(req.keys)))
        ttfts.append(done_prefill - now)
    span = max(r.arrive for r in reqs) - min(r.arrive for r in reqs)
    served = [r.served for r in reps]
    ttfts.sort()
    return {
        "hit": cached / prompt,
        "p50": ttfts[len(ttfts) // 2],
        "p99": ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))],
        "goodput": sum(1 for x in ttfts if x <= args.slo) / span,
        "spread": max(served) / (sum(served) / len(served)),
    }


def ideal_uncached(reqs: list[Request]) -> float:
    """Mean uncached prompt tokens per request with one infinite shared cache."""
    seen: set[bytes] = set()
    total = 0
    for r in reqs:
        hit = 0
        for k in r.keys:
            if k in seen:
                hit += 1
            else:
                break
        seen.update(r.keys)
        total += len(r.ids) - cached_prompt_tokens(len(r.ids), hit, BLOCK)
    return total / len(reqs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--loads", default="0.3,0.5,0.7,0.9,1.1")
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefill-tps", type=float, default=20000.0)
    ap.add_argument("--decode-tps", type=float, default=40.0)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--kv-blocks", type=int, default=8000)
    ap.add_argument("--slo", type=float, default=2.0, help="TTFT target for goodput, seconds")
    ap.add_argument("--policies", default=",".join(POLICIES))
    args = ap.parse_args()
    spec = KeySpec(block_size=BLOCK, model=MODEL)
    probe = workload(args.seconds, 1.0, args.seed)
    for r in probe:
        r.keys = block_keys(r.ids, spec).keys
    per_req = ideal_uncached(probe)
    unit_rate = len(probe) / args.seconds  # requests/s per unit of the generator's rate
    capacity = args.replicas * args.prefill_tps / per_req  # requests/s an ideal fleet saturates at
    print(f"# bench_fleet: {args.replicas} replicas, {args.seconds:.0f} s, seed {args.seed}; "
          f"{platform.machine()} {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print(f"# ideal fleet: {per_req:.0f} uncached prompt tokens per request, capacity {capacity:.1f} requests/s")
    print("| load | policy | requests | hit rate | TTFT p50 s | TTFT p99 s | goodput req/s | spread |")
    print("|---|---|---|---|---|---|---|---|")
    for load in (float(x) for x in args.loads.split(",")):
        reqs = workload(args.seconds, load * capacity / unit_rate, args.seed)
        for r in reqs:
            r.keys = block_keys(r.ids, spec).keys
        for policy in args.policies.split(","):
            m = asyncio.run(simulate(policy, reqs, args.replicas, args))
            print(f"| {load:.0%} | {policy} | {len(reqs)} | {m['hit']:.3f} | {m['p50']:.2f} | {m['p99']:.2f} | "
                  f"{m['goodput']:.2f} | {m['spread']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
