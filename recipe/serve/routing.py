"""Routing by cost: each replica is scored by the work a request would cost it, and the cheapest wins.

    cost(replica) = uncached prompt tokens + request_tokens × requests on it + kv_tokens × its KV usage
                    + over_tokens × max(0, requests on it + 1 − max((1 + load_margin) × mean, mean + load_slack))

- *uncached prompt tokens*: the prompt's length less the prefix the replica holds (the prefix
  index's estimate, 64-token blocks): the prefill it would have to do;
- *requests on it*: the larger of the requests in flight there (this server's, plus the other
  frontends' when they share their counts through Redis) and the engine's own ``running + waiting``
  (scraped from its ``/metrics``, so other frontends' traffic counts too);
- *KV usage*: the engine's cache fill, 0 … 1 (``vllm:kv_cache_usage_perc``, SGLang's
  ``token_usage``), when scraped;
- *mean*: the mean of the candidates' requests. A replica that this request would take past
  ``1 + load_margin`` times the mean (and past the mean plus ``load_slack`` requests, so that a
  nearly idle pool is not split over one request) pays ``over_tokens`` per request beyond that.

Below the margin the cache wins: a replica holding a prefix keeps its requests while it is not
busier, by more than the prefix's prefill, than one that does not. Past the margin a replica is
passed over for the cheapest other one, counting the prefill that one would pay, unless the prefix
it holds is worth more than the excess (an agent's long conversation stays; a shared system prompt
or tool list moves). The margin is relative to the fleet's own load: at light load, when every
replica has spare prefill, a hot prefix or a popular tool list spreads once its holders are a few
requests above the mean; at heavy load the same margin is many requests wide, and the cache wins.
With no load anywhere the rule is the longest cached prefix. Ties go to fewer requests, then fewer
served.

The functions here are pure (numbers in, a choice out): the server's pool
(:mod:`recipe.serve.pool`) and the fleet simulator (``bench/bench_fleet.py``) run the same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RoutingWeights", "EngineLoad", "Candidate", "cost", "pick", "parse_engine_metrics", "ROUTING_POLICIES"]

#: ``cost`` (this module) or ``prefix`` (the longest cached prefix, ties and an imbalance guard by load).
ROUTING_POLICIES = ("cost", "prefix")


@dataclass(frozen=True, slots=True)
class RoutingWeights:
    """The exchange rates of the cost, in prompt tokens (``ServeConfig.routing_weights``). The
    defaults were chosen with the fleet simulator (``bench/bench_fleet.py``, docs/fleet.md).

    Attributes:
        request_tokens: what one request running or waiting on a replica costs a new one there, in
            prompt tokens to prefill: a replica holding a prefix of P tokens keeps a request while it
            has fewer than P / request_tokens more requests than a replica without it (within the load
            margin below).
        kv_tokens: what a full KV cache (usage 1.0) costs, in prompt tokens.
        load_margin: how far above the pool's mean requests a replica may go (0.25: to 1.25 × the
            mean) before each further request costs ``over_tokens``.
        load_slack: requests above the mean a replica may always have without that cost.
        over_tokens: what each request past that margin costs, in prompt tokens: a prefix longer
            than this keeps its request on a replica one request past the margin.
        max_age: seconds after which a scraped engine load is ignored (this server's counts only).

    Raises:
        ValueError: a negative or non-finite weight or margin, or max_age <= 0.
    """

    request_tokens: float = 512.0
    kv_tokens: float = 2048.0
    load_margin: float = 0.25
    load_slack: float = 2.0
    over_tokens: float = 2048.0
    max_age: float = 10.0

    def __post_init__(self) -> None:
        for name in ("request_tokens", "kv_tokens", "load_margin", "load_slack", "over_tokens"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"routing weight {name} must be a finite number >= 0, got {value!r}")
        if not (math.isfinite(self.max_age) and self.max_age > 0):
            raise ValueError(f"routing max_age must be > 0 seconds, got {self.max_age!r}")


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """An engine's own load, as scraped from its ``/metrics``.

    Attributes:
        running, waiting: requests it is running / has queued (all frontends').
        kv_usage: its KV cache fill, 0 … 1, or None when it does not report one.
        at: ``time.monotonic()`` of the scrape.
        engines: the engines its gauges name (vLLM's ``engine`` label: one per data-parallel rank).
    """

    running: float
    waiting: float
    kv_usage: float | None
    at: float
    engines: int = 1


@dataclass(frozen=True, slots=True)
class Candidate:
    """One replica as the cost sees it.

    Attributes:
        cached_tokens: prompt tokens it is expected to hold.
        in_flight: requests in flight on it now: this server's, plus the other frontends' when
            they share their counts (:mod:`recipe.serve.shared_load`).
        served: requests this server sent it so far (the last tie-break).
        load: its engine's scraped load, or None.
    """

    cached_tokens: int
    in_flight: int
    served: int = 0
    load: EngineLoad | None = None


def _requests(c: Candidate, now: float | None, max_age: float) -> float:
    if c.load is not None and now is not None and now - c.load.at <= max_age:
        return max(float(c.in_flight), c.load.running + c.load.waiting)
    return float(c.in_flight)


def cost(prompt_tokens: int, c: Candidate, weights: RoutingWeights = RoutingWeights(), now: float | None = None,
         mean_requests: float | None = None) -> float:
    """The cost of sending a prompt of ``prompt_tokens`` to ``c`` (see the module docstring), in
    prompt tokens. ``now`` (``time.monotonic()``) decides whether ``c.load`` is fresh; None ignores it.
    ``mean_requests``: the pool's mean requests per replica (None: no margin term, a pool of one)."""
    return _cost(prompt_tokens, c, weights, now, _requests(c, now, weights.max_age), mean_requests)


def _cost(prompt_tokens: int, c: Candidate, weights: RoutingWeights, now: float | None, requests: float,
          mean_requests: float | None) -> float:
    load = c.load
    kv = 0.0
    if load is not None and load.kv_usage is not None and now is not None and now - load.at <= weights.max_age:
        kv = min(max(load.kv_usage, 0.0), 1.0)
    total = max(prompt_tokens - c.cached_tokens, 0) + weights.request_tokens * requests + weights.kv_tokens * kv
    if mean_requests is not None:
        over = requests + 1 - max((1 + weights.load_margin) * mean_requests, mean_requests + weights.load_slack)
        if over > 0:
            total += weights.over_tokens * over
    return total


def pick(prompt_tokens: int, candidates: Sequence[Candidate], weights: RoutingWeights = RoutingWeights(),
         now: float | None = None) -> int:
    """The index of the cheapest candidate (ties: fewer requests, then fewer served, then the first);
    the margin term is measured against the candidates' mean requests.

    Raises:
        ValueError: no candidates.
    """
    if not candidates:
        raise ValueError("no replica to route to")
    requests = [_requests(c, now, weights.max_age) for c in candidates]
    mean = sum(requests) / len(requests)
    best, best_key = 0, None
    for i, c in enumerate(candidates):  # each candidate's cost once (a pool of 64 is routed per request)
        key = (_cost(prompt_tokens, c, weights, now, requests[i], mean), requests[i], c.served, i)
        if best_key is None or key < best_key:
            best, best_key = i, key
    return best


#: Metric names -> field, for vLLM and SGLang.
_GAUGES = {
    "vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage", "vllm:gpu_cache_usage_perc": "kv_usage",
    "sglang:num_running_reqs": "running", "sglang:num_queue_reqs": "waiting", "sglang:token_usage": "kv_usage",
}

_NAMES = tuple(_GAUGES)


def parse_engine_metrics(text: str, at: float) -> EngineLoad | None:
    """An engine's load from its Prometheus ``/metrics`` text (vLLM's ``vllm:num_requests_running``,
    ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``; SGLang's ``sglang:num_running_reqs``,
    ``sglang:num_queue_reqs``, ``sglang:token_usage``), summed over label sets (data-parallel ranks;
    KV usage averaged), with the number of ``engine`` labels (vLLM's data-parallel ranks); None when
    the text has no request gauge or its lines cannot be parsed. Only the lines of those gauges are
    parsed (their samples, without ``# TYPE`` lines, read as untyped)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    # only the gauges' sample lines are parsed: an engine's page holds hundreds of histogram lines
    # (and a hostile one any number), which Prometheus's pure-Python parser reads at ~1 s a megabyte
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(_NAMES)) + "\n"
    engines: set[str] = set()
    try:
        for family in text_string_to_metric_families(wanted):
            for s in family.samples:
                field = _GAUGES.get(s.name)
                if field is None or not math.isfinite(s.value):
                    continue
                sums[field] = sums.get(field, 0.0) + s.value
                counts[field] = counts.get(field, 0) + 1
                if "engine" in s.labels:
                    engines.add(s.labels["engine"])
    except (ValueError, TypeError, IndexError):  # not Prometheus text
        return None
    if "running" not in sums and "waiting" not in sums:
        return None
    kv = sums["kv_usage"] / counts["kv_usage"] if counts.get("kv_usage") else None
    return EngineLoad(max(sums.get("running", 0.0), 0.0), max(sums.get("waiting", 0.0), 0.0), kv, at,
                      max(len(engines), 1))
