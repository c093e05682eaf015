"""Fleet simulator: routing policies side by side on one workload, at 8 and 64 replicas, one run.

    python bench/bench_fleet.py [--replicas 8,64] [--loads 0.3,0.5,0.7,0.9,1.1] [--seconds 60]
                                [--plots docs/fleet-sim] [--json out.json]

A discrete-event model of N replicas. Each replica prefills one request at a time (FCFS) at
``--prefill-tps`` tokens/s — only the tokens its cache does not hold — then decodes it in one of
``--slots`` batch slots at ``--decode-tps`` tokens/s. Its KV cache holds ``--kv-blocks`` 64-token
blocks with LRU eviction; a request's prompt and output blocks enter it when the request is routed.
TTFT is arrival to the end of the prefill.

The workload is generated once per load point and replayed under every policy (closed loop: an
agent's next turn arrives a think time after its previous answer ended, so a slower policy sees
fewer turns). Half the requests are agent turns: sessions of 20–50 turns on one of a few long tool
lists (2,000–8,000 tokens, Zipf popularity), each turn adding the previous answer and a tool result
(100–2,000 tokens), think-time gaps of ``--think`` s on average; 20% are chat requests on shared
system prompts (300–2,500 tokens, Zipf over 50); 30% carry one hot 3,000-token prefix. Caches keep
everything until evicted (the retention of days that DeepSeek reports: no TTL).

Blocks are named by synthetic chained ids (each distinct prefix of 64-token blocks gets one id, the
structure vLLM's block hashes have), not by hashing token ids: hashing the tens of millions of
tokens a 64-replica sweep sends would dominate the run. The router side is recipe's own code:
``recipe-cost`` and ``longest-prefix`` are :meth:`recipe.serve.pool.ReplicaPool.route` itself
(``routing="cost"`` with ``--weights`` / ``"prefix"``), over the same in-memory prefix index
``recipe serve`` keeps (the routed-keys estimate), with the replicas' in-flight counts and their
engine load (running + waiting, KV usage) "scraped" every ``--scrape`` simulated seconds.
``recipe-events`` is the same rule reading each replica's cache exactly, as ``recipe serve`` does
for a vLLM replica that publishes KV events: every change of a replica's LRU cache is a batch of
``BlockStored`` / ``BlockRemoved`` events applied by its :class:`recipe.serve.kv_events.KVEventSubscriber`
(its block set, then its sink into the pool's index), and the pool looks the prompt up in the
events' namespace. The other policies:

- round-robin; least-loaded (fewest requests in flight, ties to the fewest served);
- SGLang's router, cache-aware policy with its defaults (``cache_threshold`` 0.3,
  ``balance_abs_threshold`` 64, ``balance_rel_threshold`` 1.5; ``sgl-model-gateway``
  ``policies/cache_aware.rs``, ``router_args.py``): when ``max - min > 64`` and ``max > 1.5 × min``
  requests in flight, the least loaded; else the replica with the longest prefix match in its
  approximate tree of routed prompts if the match covers more than 30% of the prompt (of the
  replicas holding that match, the first in an order fixed per tree node, as the node's first
  tenant is), otherwise the least loaded, ties at random (the implementation's choice; the file's
  header still describes an older "smallest tree" rule);
- Dynamo's KV router with its defaults (``overlap_score_credit`` 1.0, ``prefill_load_scale`` 1.0,
  ``decode_active_request_weight`` 0, temperature 0, KV events on; ``lib/kv-router``
  ``scheduling/selector.rs``, ``config.rs``): the lowest ``(active prefill tokens + prompt tokens) /
  64 − overlap blocks + potential decode blocks``, where the potential decode blocks are the distinct
  blocks of the requests in flight there plus the prompt's blocks not among them (Dynamo's
  ``active_decode_blocks + additional_active_blocks``), its overlap read from the replicas' real
  cache contents.

100% load is the request rate at which an ideal fleet — one infinite cache shared by all replicas,
perfectly balanced — would keep every prefill unit busy: the most any policy could serve, the same
for every policy. Per-replica caches of this size can reach it (recipe's rule keeps 99–100% of the
shared cache's hit rate at every point), so it is the capacity of a well-routed fleet, and 110% is
past it. A cache-blind policy has a far lower capacity of its own (round-robin and least-loaded
prefill seven to eleven times the tokens per request), so they are past theirs at every point shown.
Reported per fleet size, load and policy over the requests that arrive after ``--warmup`` s: cache
hit rate (cached / prompt tokens) and its ratio to the infinite shared cache's on the same
requests, TTFT p50 / p99 (s), goodput (requests/s with TTFT within ``--slo`` s), load spread (the
busiest replica's requests in flight, running or waiting, averaged over time, over the fleet's
mean: the load an engine reports) and requests spread (the busiest replica's count of requests
served over the mean; an agent turn's short answer frees its slot sooner than a chat answer, so a
replica of agent sessions serves more requests at the same load).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import heapq
import itertools
import json
import math
import platform
import random
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import recipe.serve.kv_events as kv_events_module
import recipe.serve.pool as pool_module
from recipe.cache.keys import KeySet, block_keys, cached_prompt_tokens
from recipe.serve.kv_events import KVEventsSource, KVEventSubscriber, MemorySink
from recipe.serve.kv_wire import BlockRemoved, BlockStored, EventBatch
from recipe.serve.pool import ReplicaPool
from recipe.serve.routing import EngineLoad, RoutingWeights

BLOCK = 64
MODEL = "deepseek-v4-flash"
POLICIES = ("round-robin", "least-loaded", "longest-prefix", "sglang-cache-aware", "dynamo-kv", "recipe-cost")
SGLANG = {"cache_threshold": 0.3, "balance_abs_threshold": 64, "balance_rel_threshold": 1.5}
DYNAMO = {"overlap_score_credit": 1.0, "prefill_load_scale": 1.0}


# ---------------------------------------------------------------------------------------------
# Workload
# ---------------------------------------------------------------------------------------------

_ids = itertools.count(1)


def _fresh(n: int) -> list[int]:
    """``n`` new block ids (blocks whose content no other prefix has)."""
    start = next(_ids)
    for _ in range(n - 1):
        next(_ids)
    return list(range(start, start + n))


@dataclass
class Shared:
    """A shared prefix: its length in tokens and the ids of its full blocks."""

    tokens: int
    keys: list[int]

    @classmethod
    def make(cls, tokens: int) -> Shared:
        return cls(tokens, _fresh(tokens // BLOCK))


@dataclass
class Turn:
    """One request of a source: prompt length, output length, think time before the next turn."""

    prompt: int
    output: int
    think: float


@dataclass
class Source:
    """A chat request, a hot-prefix request or an agent session (its turns in order).

    ``keys`` are the block ids of its longest sequence (last prompt plus last output); turn k's
    prompt holds the first ``turns[k].prompt // 64`` of them.
    """

    start: float
    kind: str
    turns: list[Turn]
    keys: list[int]
    first: int = 0  # a session already under way at time 0 starts at this turn


def _zipf(rng: random.Random, n: int, s: float = 1.1) -> int:
    weights = [1 / (i + 1) ** s for i in range(n)]
    return rng.choices(range(n), weights)[0]


class Workload:
    """Sources for one load point: agent sessions, chat and hot-prefix requests (see the module docstring)."""

    def __init__(self, rate: float, seconds: float, seed: int, think: float, decode_tps: float) -> None:
        rng = random.Random(seed)
        self.hot = Shared.make(3000)
        self.tools = [Shared.make(rng.randint(2000, 8000)) for _ in range(8)]
        self.systems = [Shared.make(rng.randint(300, 2500)) for _ in range(50)]
        self.think = think
        self.sources: list[Source] = []
        mean_turns = 35.0
        session_rate = 0.5 * rate / mean_turns
        # the sessions under way at time 0 (steady state: rate x lifetime), each at a turn drawn
        # uniformly over its life (longer sessions proportionally likelier), its next turn due
        # within one turn's cycle
        cycle = think + 140 / decode_tps
        srng = random.Random(f"{seed}-ongoing")
        for _ in range(round(session_rate * mean_turns * cycle)):
            while True:
                src = self._agent(srng.uniform(0, cycle), srng)
                if srng.random() < len(src.turns) / 50:
                    break
            src.first = srng.randrange(1, len(src.turns))
            self.sources.append(src)
        kinds = (("agent", session_rate), ("chat", 0.2 * rate), ("hot", 0.3 * rate))
        for kind, r in kinds:
            t = 0.0
            krng = random.Random(f"{seed}-{kind}")
            while True:
                t += krng.expovariate(r)
                if t >= seconds:
                    break
                self.sources.append(getattr(self, "_" + kind)(t, krng))
        self.sources.sort(key=lambda s: s.start)

    def _tail(self, prefix: Shared, tokens: int) -> list[int]:
        """Keys of ``prefix`` followed by ``tokens`` tokens of new content."""
        total = prefix.tokens + tokens
        return prefix.keys + _fresh(total // BLOCK - len(prefix.keys))

    def _hot(self, t: float, rng: random.Random) -> Source:
        prompt = self.hot.tokens + rng.randint(100, 800)
        out = rng.randint(50, 400)
        return Source(t, "hot", [Turn(prompt, out, 0.0)], self._tail(self.hot, prompt + out - self.hot.tokens))

    def _chat(self, t: float, rng: random.Random) -> Source:
        system = self.systems[_zipf(rng, len(self.systems))]
        prompt = system.tokens + rng.randint(50, 500)
        out = rng.randint(100, 600)
        return Source(t, "chat", [Turn(prompt, out, 0.0)], self._tail(system, prompt + out - system.tokens))

    def _agent(self, t: float, rng: random.Random) -> Source:
        tools = self.tools[_zipf(rng, len(self.tools))]
        prompt = tools.tokens + rng.randint(200, 1000)
        turns = []
        for _ in range(rng.randint(20, 50)):
            out = rng.randint(30, 250)
            turns.append(Turn(prompt, out, rng.expovariate(1 / self.think)))
            prompt += out + rng.randint(100, 2000)
        last = turns[-1]
        return Source(t, "agent", turns, self._tail(tools, last.prompt + last.output - tools.tokens))


def ideal_uncached(wl: Workload) -> float:
    """Mean uncached prompt tokens per request with one infinite cache shared by all replicas
    (every request of every source, sources in start order, a session's turns in order)."""
    seen: set[int] = set()
    total = n = 0
    for src in wl.sources:
        for turn in src.turns:
            keys = src.keys[: turn.prompt // BLOCK]
            hit = 0
            for k in keys:
                if k not in seen:
                    break
                hit += 1
            total += turn.prompt - cached_prompt_tokens(turn.prompt, hit, BLOCK)
            n += 1
            seen.update(src.keys[: (turn.prompt + turn.output) // BLOCK])
    return total / max(n, 1)


# ---------------------------------------------------------------------------------------------
# The pool's view of a prompt (no token ids: the keys are the synthetic block ids)
# ---------------------------------------------------------------------------------------------


class Prompt(Sequence[int]):
    """A prompt as :meth:`ReplicaPool.route` sees it: its length and (through :func:`_keys`) its
    block keys. It has no token ids; indexing it is an error."""

    __slots__ = ("n", "keyset", "ids")

    def __init__(self, n: int, keys: Sequence[int]) -> None:
        self.n = n
        self.ids = keys
        self.keyset = KeySet("sim", BLOCK, tuple(keys))  # type: ignore[arg-type]

    def event_keys(self) -> KeySet:
        """The keys as a KV-event subscriber looks them up (8 bytes each, as vLLM publishes them)."""
        return KeySet("vllm", BLOCK, tuple(_event_key(k) for k in self.ids))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: Any) -> Any:
        raise TypeError("a simulated prompt has no token ids")


def _event_key(k: int) -> bytes:
    return k.to_bytes(8, "big")


def _keys(token_ids: Any, spec: Any, extras: Any = None) -> KeySet:
    if isinstance(token_ids, Prompt):
        return token_ids.event_keys() if spec.scheme == "vllm" else token_ids.keyset
    return block_keys(token_ids, spec, extras)


pool_module.block_keys = _keys  # the pool hashes nothing in the simulator: the keys come with the prompt
kv_events_module.block_keys = _keys  # and so do a KV-event subscriber's lookup keys


class _Engine:
    """A stand-in engine: the simulator never generates."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def aclose(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# Replicas
# ---------------------------------------------------------------------------------------------


class Holders:
    """Which replicas hold each block id, and how many leading ids of a prompt each one holds."""

    def __init__(self, n: int) -> None:
        self.by_key: dict[int, set[int]] = {}
        self.size = [0] * n

    def add(self, keys: Sequence[int], r: int) -> None:
        by_key = self.by_key
        for k in keys:
            held = by_key.get(k)
            if held is None:
                by_key[k] = {r}
                self.size[r] += 1
            elif r not in held:
                held.add(r)
                self.size[r] += 1

    def drop(self, k: int, r: int) -> None:
        held = self.by_key.get(k)
        if held is not None and r in held:
            held.discard(r)
            self.size[r] -= 1
            if not held:
                del self.by_key[k]

    def match(self, keys: Sequence[int]) -> dict[int, int]:
        """Replica -> leading ids of ``keys`` it holds (replicas holding the first one only)."""
        if not keys:
            return {}
        by_key = self.by_key
        alive = by_key.get(keys[0])
        if not alive:
            return {}
        alive = set(alive)
        out: dict[int, int] = {}
        for i in range(1, len(keys)):
            here = by_key.get(keys[i], ())
            if len(alive) == 1:
                (r,) = alive
                if r in here:
                    continue
            for r in [r for r in alive if r not in here]:
                out[r] = i
                alive.discard(r)
            if not alive:
                return out
        for r in alive:
            out[r] = len(keys)
        return out


@dataclass
class Replica:
    """One simulated engine: a prefill unit, decode slots, an LRU block cache."""

    index: int
    kv_blocks: int
    slots: list[float]
    cache: OrderedDict = field(default_factory=OrderedDict)
    prefill_free: float = 0.0
    in_flight: int = 0
    waiting: int = 0  # routed, prefill not finished
    prefill_tokens: int = 0  # uncached tokens routed and not yet prefilled (Dynamo's active prefill)
    active: dict[int, int] = field(default_factory=dict)  # block id -> its requests in flight (KV in use)
    served: int = 0

    feed: Any = None  # its KV-event publisher (recipe-events): called with (stored, removed) block ids

    def hold(self, prompt_keys: Sequence[int], all_keys: Sequence[int], exact: Holders | None) -> int:
        """Leading ``prompt_keys`` cached; then ``all_keys`` are inserted (LRU), evicting the least
        recently used beyond capacity (``exact`` and ``feed`` follow both)."""
        cache = self.cache
        hit = 0
        for k in prompt_keys:
            if k not in cache:
                break
            hit += 1
        move = cache.move_to_end
        new = []
        for k in all_keys:
            if k in cache:
                move(k)
            else:
                cache[k] = None
                new.append(k)
        if exact is not None:
            exact.add(new, self.index)
        removed = []
        while len(cache) > self.kv_blocks:
            k, _ = cache.popitem(last=False)
            removed.append(k)
            if exact is not None:
                exact.drop(k, self.index)
        if self.feed is not None and (new or removed):
            self.feed(new, removed)
        return hit


# ---------------------------------------------------------------------------------------------
# Policies
# ---------------------------------------------------------------------------------------------


class Router:
    """One policy: picks a replica index for a prompt, given the replicas' state."""

    def __init__(self, policy: str, reps: list[Replica], weights: RoutingWeights) -> None:
        self.policy, self.reps, self.n = policy, reps, len(reps)
        self.rr = 0
        self.rng = random.Random(0)  # SGLang's random tie-break among the least loaded
        self.pool: ReplicaPool | None = None
        if policy in ("recipe-cost", "recipe-events", "longest-prefix"):
            routing = "prefix" if policy == "longest-prefix" else "cost"
            self.pool = ReplicaPool([_Engine(f"r{i}") for i in range(self.n)], routing=routing, weights=weights)
        self.exact = Holders(self.n) if policy == "dynamo-kv" else None
        self.tree = Holders(self.n) if policy == "sglang-cache-aware" else None
        if policy == "recipe-events":
            assert self.pool is not None
            for r, rep in zip(self.pool.replicas, reps):
                r.events = KVEventSubscriber(r.name, KVEventsSource("inproc://sim"), MemorySink(self.pool.index))
                r.events.connected = True  # following its (simulated) publisher
                rep.feed = _publisher(r.events)

    def scrape(self, now: float) -> None:
        """The engines' own load, as ``recipe serve`` scrapes it from ``/metrics``."""
        if self.pool is None:
            return
        at = time.monotonic()
        for r, rep in zip(self.pool.replicas, self.reps):
            kv = min(len(rep.active) / rep.kv_blocks, 1.0)  # distinct blocks of the requests in flight
            r.load = EngineLoad(rep.in_flight - rep.waiting, rep.waiting, kv, at)

    def route(self, prompt: Prompt, keys: Sequence[int]) -> int:
        reps, n = self.reps, self.n
        p = self.policy
        if self.pool is not None:
            for r, rep in zip(self.pool.replicas, reps):
                r.in_flight, r.served = rep.in_flight, rep.served
            route = _run(self.pool.route(prompt, None, MODEL))
            return int(route.replica.name[1:])
        if p == "round-robin":
            self.rr += 1
            return self.rr % n
        if p == "least-loaded":
            return min(range(n), key=lambda j: (reps[j].in_flight, reps[j].served))
        if p == "sglang-cache-aware":
            assert self.tree is not None
            loads = [rep.in_flight for rep in reps]
            lo, hi = min(loads), max(loads)
            if hi - lo > SGLANG["balance_abs_threshold"] and hi > lo * SGLANG["balance_rel_threshold"]:
                i = min(range(n), key=lambda j: (loads[j], j))
            else:
                matched = self.tree.match(keys)
                best = max(matched.values(), default=0)
                rate = best * BLOCK / max(len(prompt), 1)
                if rate > SGLANG["cache_threshold"]:  # the matched node's first tenant: an order fixed per node
                    node = keys[best - 1]
                    i = min((j for j in matched if matched[j] == best), key=lambda j: hash((node, j)))
                else:  # the least loaded, ties at random
                    i = self.rng.choice([j for j in range(n) if loads[j] == lo])
            self.tree.add(keys, i)
            return i
        # dynamo-kv
        assert self.exact is not None
        matched = self.exact.match(keys)
        credit, scale = DYNAMO["overlap_score_credit"], DYNAMO["prefill_load_scale"]

        def logit(j: int) -> tuple[float, int, int]:
            rep = reps[j]
            cached = credit * cached_prompt_tokens(len(prompt), matched.get(j, 0), BLOCK)
            prefill = scale * max(rep.prefill_tokens + len(prompt) - cached, 0) / BLOCK
            return (prefill + len(rep.active) + _unshared(keys, rep.active), rep.in_flight, j)

        return min(range(n), key=logit)


def _unshared(keys: Sequence[int], active: dict[int, int]) -> int:
    """How many of a prompt's blocks ``keys`` are not among a replica's ``active`` ones: the blocks the
    request adds to its active set (Dynamo's ``additional_active_blocks``). The active set is
    closed under prefixes (each request's blocks are a chain from its first), so the shared ones
    are a leading run, found by bisection."""
    lo, hi = 0, len(keys)
    while lo < hi:  # the longest leading run of keys in ``active``
        mid = (lo + hi + 1) // 2
        if keys[mid - 1] in active:
            lo = mid
        else:
            hi = mid - 1
    return len(keys) - lo


def _publisher(sub: Any) -> Any:
    """A replica's KV-event stream into its subscriber: each change of its cache is one batch of
    ``BlockStored`` (the new blocks) and ``BlockRemoved`` (the evicted ones), applied as the
    subscriber applies a decoded batch (its blocks, then its sink: the pool's index)."""

    def feed(stored: Sequence[int], removed: Sequence[int]) -> None:
        events = []
        if stored:
            events.append(BlockStored(tuple(_event_key(k) for k in stored), None, (), BLOCK))
        if removed:
            events.append(BlockRemoved(tuple(_event_key(k) for k in removed)))
        added, dropped = sub.blocks.apply(EventBatch(0.0, tuple(events)))
        sub.sink.update(sub.replica, added, dropped)

    return feed


def _run(coro: Any) -> Any:
    """Run a coroutine that never awaits anything real (the in-memory pool) to completion."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("the simulated pool awaited something")


# ---------------------------------------------------------------------------------------------
# The simulation
# ---------------------------------------------------------------------------------------------

ARRIVE, PREFILLED, DONE, SCRAPE = 0, 1, 2, 3


@dataclass
class Result:
    policy: str
    requests: int
    hit: float
    shared_hit: float
    p50: float
    p99: float
    goodput: float
    spread: float
    load_spread: float
    seconds: float

    @property
    def hit_ratio(self) -> float:
        return self.hit / self.shared_hit if self.shared_hit else 1.0


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def simulate(policy: str, wl: Workload, n: int, args: argparse.Namespace, weights: RoutingWeights) -> Result:
    """Replay ``wl`` on ``n`` replicas under ``policy``."""
    t0 = time.perf_counter()
    reps = [Replica(i, args.kv_blocks, [0.0] * args.slots) for i in range(n)]
    router = Router(policy, reps, weights)
    exact = router.exact
    seq = itertools.count()
    heap: list[tuple[float, int, int, Any, Any]] = [(s.start, next(seq), ARRIVE, s, s.first) for s in wl.sources]
    heapq.heapify(heap)
    heapq.heappush(heap, (0.0, next(seq), SCRAPE, None, None))
    shared: set[int] = set()
    # warm start: the sessions under way had their previous turn routed (by this policy, each
    # counted in flight while the others are placed) and cached; then the fleet is idle
    for src in wl.sources:
        if src.first:
            turn = src.turns[src.first - 1]
            pkeys = src.keys[: turn.prompt // BLOCK]
            akeys = src.keys[: (turn.prompt + turn.output) // BLOCK]
            rep = reps[router.route(Prompt(turn.prompt, pkeys), pkeys)]
            rep.hold(pkeys, akeys, exact)
            rep.in_flight += 1
            shared.update(akeys)
    for rep in reps:
        rep.in_flight = 0
    warm, end = args.warmup, args.seconds
    prompt_tokens = cached_tokens = shared_tokens = 0
    ttfts: list[float] = []
    counts = [0] * n
    area, last = [0.0] * n, [warm] * n  # requests in flight x seconds, per replica, over [warm, end]

    def touch(i: int, now: float) -> None:  # before replica i's count in flight changes
        t = min(max(now, warm), end)
        area[i] += reps[i].in_flight * (t - last[i])
        last[i] = t

    decode = args.decode_tps
    while heap:
        now, _, kind, a, b = heapq.heappop(heap)
        if kind == DONE:
            rep, keys = a, b
            touch(rep.index, now)
            rep.in_flight -= 1
            active = rep.active
            for k in keys:
                c = active[k] - 1
                if c:
                    active[k] = c
                else:
                    del active[k]
            continue
        if kind == PREFILLED:
            a.waiting -= 1
            a.prefill_tokens -= b
            continue
        if now > end:
            if kind == SCRAPE:
                continue
            continue
        if kind == SCRAPE:
            router.scrape(now)
            heapq.heappush(heap, (now + args.scrape, next(seq), SCRAPE, None, None))
            continue
        src, k = a, b
        turn = src.turns[k]
        pkeys = src.keys[: turn.prompt // BLOCK]
        akeys = src.keys[: (turn.prompt + turn.output) // BLOCK]
        prompt = Prompt(turn.prompt, pkeys)
        i = router.route(prompt, pkeys)
        rep = reps[i]
        hit = rep.hold(pkeys, akeys, exact)
        cached = cached_prompt_tokens(turn.prompt, hit, BLOCK)
        # the infinite shared cache on the same requests
        shit = 0
        for key in pkeys:
            if key not in shared:
                break
            shit += 1
        shared.update(akeys)
        uncached = turn.prompt - cached
        slot = heapq.heappop(rep.slots)
        start = max(now, slot, rep.prefill_free)
        prefilled = start + uncached / args.prefill_tps
        rep.prefill_free = prefilled
        finish = prefilled + turn.output / decode
        heapq.heappush(rep.slots, finish)
        touch(i, now)
        rep.in_flight += 1
        rep.waiting += 1
        rep.prefill_tokens += uncached
        rep.served += 1
        active = rep.active
        for key in akeys:
            active[key] = active.get(key, 0) + 1
        heapq.heappush(heap, (prefilled, next(seq), PREFILLED, rep, uncached))
        heapq.heappush(heap, (finish, next(seq), DONE, rep, akeys))
        if k + 1 < len(src.turns):
            heapq.heappush(heap, (finish + turn.think, next(seq), ARRIVE, src, k + 1))
        if now >= warm:
            prompt_tokens += turn.prompt
            cached_tokens += cached
            shared_tokens += cached_prompt_tokens(turn.prompt, shit, BLOCK)
            ttfts.append(prefilled - now)
            counts[i] += 1
    span = end - warm
    good = sum(1 for x in ttfts if x <= args.slo)
    ttfts.sort()
    mean = sum(counts) / n
    for i in range(n):
        touch(i, end)
    mean_area = sum(area) / n
    return Result(policy, len(ttfts), cached_tokens / max(prompt_tokens, 1), shared_tokens / max(prompt_tokens, 1),
                  _pct(ttfts, 0.5), _pct(ttfts, 0.99), good / span, max(counts) / mean if mean else math.nan,
                  max(area) / mean_area if mean_area else math.nan, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# Targets, output, plots
# ---------------------------------------------------------------------------------------------


def targets(rows: list[Result], ours: str = "recipe-cost") -> list[str]:
    """The targets recipe's policy misses at one load point (empty: all met)."""
    by = {r.policy: r for r in rows}
    me = by.get(ours)
    if me is None:
        return []
    misses = []
    others = [r for r in rows if r.policy not in (ours, "recipe-events", "recipe-cost")]
    best = max((r.goodput for r in others), default=0.0)
    if me.goodput < best - 1e-9:
        misses.append(f"goodput {me.goodput:.1f} < best other {best:.1f}")
    if me.hit_ratio < 0.9:
        misses.append(f"hit rate {me.hit_ratio:.2f} of the shared cache's < 0.90")
    ll = by.get("least-loaded")
    if ll is not None and me.p99 > 1.2 * ll.p99:
        misses.append(f"p99 {me.p99:.2f} s > 1.2 x least-loaded's {ll.p99:.2f} s")
    if me.load_spread > 1.3:
        misses.append(f"load spread {me.load_spread:.2f} > 1.3")
    return misses


def plot(results: dict[int, dict[float, list[Result]]], prefix: str) -> list[str]:
    """One PNG per fleet size: hit rate / shared, TTFT p50 and p99, goodput, load and requests spread
    against load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    panels = (("hit rate (of the infinite shared cache's)", lambda r: r.hit_ratio, False),
              ("TTFT p50 (s)", lambda r: r.p50, True),
              ("TTFT p99 (s)", lambda r: r.p99, True),
              ("goodput (requests/s within the TTFT SLO)", lambda r: r.goodput, False),
              ("busiest replica / mean (requests in flight, time-averaged)", lambda r: r.load_spread, False),
              ("busiest replica / mean (requests served)", lambda r: r.spread, False))
    for n, by_load in results.items():
        fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
        loads = sorted(by_load)
        policies = [r.policy for r in by_load[loads[0]]]
        for ax, (title, get, log) in zip(axes.flat, panels):
            for p in policies:
                ys = [get(next(r for r in by_load[ld] if r.policy == p)) for ld in loads]
                style = dict(lw=2.5, color="black") if p == "recipe-cost" else dict(lw=1.2)
                ax.plot([ld * 100 for ld in loads], ys, marker="o", ms=3, label=p, **style)
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("load (% of the ideal fleet's capacity)", fontsize=8)
            if log:
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"{n} replicas", fontsize=12)
        fig.tight_layout()
        path = f"{prefix}-{n}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def _weights(text: str) -> RoutingWeights:
    if not text:
        return RoutingWeights()
    kw = {k: float(v) for k, v in (part.split("=") for part in text.split(","))}
    return RoutingWeights(**kw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", default="8,64", help="fleet sizes, comma-separated")
    ap.add_argument("--loads", default="0.3,0.5,0.7,0.9,1.1")
    ap.add_argument("--seconds", default="100,60", help="simulated seconds of arrivals, per fleet size (or one for all)")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefill-tps", type=float, default=4000.0)
    ap.add_argument("--decode-tps", type=float, default=50.0)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--kv-blocks", type=int, default=8000)
    ap.add_argument("--think", type=float, default=2.0, help="mean think time between agent turns, s")
    ap.add_argument("--scrape", type=float, default=2.0, help="seconds between engine-load scrapes")
    ap.add_argument("--slo", type=float, default=2.0, help="TTFT target for goodput, seconds")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--weights", default="", help="recipe's weights, e.g. request_tokens=1024,kv_tokens=4096")
    ap.add_argument("--plots", default="", help="write PREFIX-N.png per fleet size")
    ap.add_argument("--json", default="", help="write the results as JSON")
    args = ap.parse_args(argv)
    weights = _weights(args.weights)
    policies = args.policies.split(",")
    sizes = [int(x) for x in args.replicas.split(",")]
    spans = [float(x) for x in args.seconds.split(",")]
    spans = (spans * len(sizes))[: len(sizes)] if len(spans) == 1 else spans
    if len(spans) != len(sizes):
        ap.error("--seconds: one value, or one per fleet size")
    loads = [float(x) for x in args.loads.split(",")]
    probe = Workload(50.0, 200.0, args.seed, args.think, args.decode_tps)
    per_req = ideal_uncached(probe)
    print(f"# bench_fleet: replicas {args.replicas}, {args.seconds} s ({args.warmup:.0f} s warm-up), "
          f"seed {args.seed}; {platform.machine()} Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    print(f"# replica: {args.prefill_tps:.0f} prefill tokens/s, {args.slots} decode slots at {args.decode_tps:.0f} "
          f"tokens/s, {args.kv_blocks} cached blocks; SLO {args.slo:.1f} s; recipe weights {weights}")
    print(f"# ideal fleet: {per_req:.0f} uncached prompt tokens per request")
    results: dict[int, dict[float, list[Result]]] = {}
    misses_all: list[str] = []
    t_start = time.perf_counter()
    for n, span in zip(sizes, spans):
        args.seconds = span
        capacity = n * args.prefill_tps / per_req
        print(f"\n## {n} replicas, {span:.0f} s: 100% = {capacity:.1f} requests/s\n")
        print("| load | policy | requests | hit rate | of shared | TTFT p50 s | TTFT p99 s | goodput req/s | load spread "
              "| requests spread |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        results[n] = {}
        for load in loads:
            wl = Workload(load * capacity, span, args.seed, args.think, args.decode_tps)
            rows = []
            for policy in policies:
                r = simulate(policy, wl, n, args, weights)
                rows.append(r)
                print(f"| {load:.0%} | {policy} | {r.requests} | {r.hit:.3f} | {r.hit_ratio:.2f} | {r.p50:.2f} | "
                      f"{r.p99:.2f} | {r.goodput:.1f} | {r.load_spread:.2f} | {r.spread:.2f} |", flush=True)
                print(f"#   {policy}: {r.seconds:.1f} s", file=sys.stderr, flush=True)
            results[n][load] = rows
            for m in targets(rows):
                misses_all.append(f"{n} replicas, {load:.0%}: {m}")
    print(f"\n# recipe-cost targets: {'all met' if not misses_all else 'missed:'}")
    for m in misses_all:
        print(f"#   {m}")
    print(f"# run time {time.perf_counter() - t_start:.0f} s")
    if args.plots:
        for path in plot(results, args.plots):
            print(f"# wrote {path}")
    if args.json:
        Path(args.json).write_text(json.dumps({str(n): {str(ld): [r.__dict__ for r in rows] for ld, rows in by.items()}
                                               for n, by in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
