"""``GET /metrics``: the server's counters and histograms in the Prometheus text format.

One registry per app (prometheus_client), so two apps in one process never share counts.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The server's metrics (names prefixed ``recipe_``).

    Attributes:
        requests: ``recipe_requests_total{api, status}`` — generation requests answered, by HTTP status
            (200 for a stream that started, whatever happened later).
        errors: ``recipe_errors_total{api, type}`` — errors by kind (``invalid_request``, ``timeout``,
            ``engine_failed`` …, ``disconnect`` for clients that left mid-generation), before or
            during a stream.
        prompt_tokens, cached_tokens, completion_tokens: ``recipe_*_tokens_total{api}``.
        ttft: ``recipe_time_to_first_token_seconds{api}`` — request arrival to the first output
            byte (a stream's first frame, or the whole response when not streamed).
        engine_latency: ``recipe_engine_latency_seconds{replica}`` — engine request to its first delta.
        generation: ``recipe_generation_seconds{api}`` — request arrival to the end of the answer.
        in_flight: ``recipe_in_flight_requests`` — generation requests being served.
        routed: ``recipe_routed_requests_total{replica}``; index_errors: ``recipe_prefix_index_errors_total``;
        store_errors: ``recipe_store_errors_total``; shared_load_errors:
        ``recipe_shared_load_errors_total`` (syncs of the fleet's shared in-flight counts that failed).

    Once :meth:`watch_pool` is called, each scrape also reads the replica pool:
    ``recipe_replica_cache_view{replica, view}`` — 1 for the view routing reads a replica's cache
    from: ``events`` (its KV events, exact) or ``estimate`` (the requests routed to it), 0 for the
    other; and for each replica that publishes KV events ``recipe_kv_event_batches_total{replica}``,
    ``recipe_kv_event_resyncs_total{replica, reason}`` (``connect``, ``gap``, ``malformed``,
    ``cleared``, ``index``), ``recipe_kv_event_blocks{replica}`` (blocks indexed) and
    ``recipe_kv_event_hash_mismatch{replica}`` (1: its block hashes are not recipe's vLLM keys);
    a replica with data-parallel ranks has these per rank, labelled ``<replica>@dp<rank>``.
    """

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("recipe_requests", "Generation requests answered", ["api", "status"], registry=r)
        self.errors = Counter("recipe_errors", "Errors by type", ["api", "type"], registry=r)
        self.prompt_tokens = Counter("recipe_prompt_tokens", "Prompt tokens", ["api"], registry=r)
        self.cached_tokens = Counter("recipe_cached_tokens", "Prompt tokens served from the prefix cache", ["api"], registry=r)
        self.completion_tokens = Counter("recipe_completion_tokens", "Completion tokens", ["api"], registry=r)
        self.ttft = Histogram("recipe_time_to_first_token_seconds", "Request arrival to the first output byte",
                              ["api"], buckets=_LATENCY_BUCKETS, registry=r)
        self.engine_latency = Histogram("recipe_engine_latency_seconds", "Engine request to its first delta",
                                        ["replica"], buckets=_LATENCY_BUCKETS, registry=r)
        self.generation = Histogram("recipe_generation_seconds", "Request arrival to the end of the answer",
                                    ["api"], buckets=_LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("recipe_in_flight_requests", "Generation requests being served", registry=r)
        self.routed = Counter("recipe_routed_requests", "Requests routed to each replica", ["replica"], registry=r)
        self.index_errors = Counter("recipe_prefix_index_errors", "Prefix index lookups that failed (routed by load)", registry=r)
        self.store_errors = Counter("recipe_store_errors", "Conversation store operations that failed", registry=r)
        self.shared_load_errors = Counter("recipe_shared_load_errors", "Syncs of the in-flight counts shared with "
                                          "other frontends that failed", registry=r)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def watch_pool(self, pool: Any) -> None:
        """Report ``pool``'s replicas (a :class:`~recipe.serve.pool.ReplicaPool`) at each scrape (see above)."""
        self.registry.register(_PoolCollector(pool))

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, memoised (prometheus_client's lookup takes a lock each time)."""
        key = (id(metric), labels)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*labels)
        return c

    def render(self) -> bytes:
        """The exposition text (``text/plain; version=0.0.4``)."""
        return generate_latest(self.registry)


class _PoolCollector:
    """Reads a replica pool's cache views and KV-event subscribers when ``/metrics`` is scraped."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def describe(self) -> list[Any]:
        return []  # (read at scrape time only)

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        view = GaugeMetricFamily("recipe_replica_cache_view", "Where routing reads each replica's cache from: its KV "
                                 "events (exact) or the requests routed to it (an estimate)", labels=["replica", "view"])
        batches = CounterMetricFamily("recipe_kv_event_batches", "KV-event batches applied", labels=["replica"])
        resyncs = CounterMetricFamily("recipe_kv_event_resyncs", "Times a replica's event-fed entries were dropped",
                                      labels=["replica", "reason"])
        blocks = GaugeMetricFamily("recipe_kv_event_blocks", "Blocks indexed from a replica's KV events", labels=["replica"])
        mismatch = GaugeMetricFamily("recipe_kv_event_hash_mismatch", "1 when a replica's block hashes are not "
                                     "recipe's vLLM keys for the same ids", labels=["replica"])
        for r in self.pool.replicas:
            exact = r.exact
            view.add_metric([r.name, "events"], 1.0 if exact else 0.0)
            view.add_metric([r.name, "estimate"], 0.0 if exact else 1.0)
            for sub in r.subscribers:  # (a data-parallel rank's: labelled <replica>@dp<rank>)
                label = sub.replica if r.ranks else r.name
                batches.add_metric([label], float(sub.batches))
                for reason, n in sorted(sub.resyncs.items()):
                    resyncs.add_metric([label, reason], float(n))
                blocks.add_metric([label], float(len(sub.blocks.held)))
                mismatch.add_metric([label], 1.0 if sub.mismatch else 0.0)
        return [view, batches, resyncs, blocks, mismatch]
