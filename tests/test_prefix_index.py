"""Prefix index: in-memory and Redis backends (a real redis-server started here), simulation."""

from __future__ import annotations

import random
import socket

import pytest
from serve_support import redis_server

from recipe.cache.keys import KeySpec, block_keys
from recipe.cache.index import (
    MemoryPrefixIndex,
    PrefixIndexUnavailable,
    RedisPrefixIndex,
    TraceRequest,
    best_replica,
    namespace,
    simulate,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture
def redis_index(redis_url):
    clock = Clock()
    index = RedisPrefixIndex.from_url(redis_url, clock=clock)
    index.client.flushdb()
    return index, clock


def _keys(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


# ---------------------------------------------------------------- behaviour shared by both backends


@pytest.fixture(params=["memory", "redis"])
def index(request):
    if request.param == "memory":
        clock = Clock()
        return MemoryPrefixIndex(clock=clock), clock
    return request.getfixturevalue("redis_index")


def test_scores_count_leading_keys_per_replica(index):
    idx, _ = index
    k = _keys("k", 6)
    idx.put("ns", k[:4], "a")
    idx.put("ns", k[:2], "b")
    idx.put("ns", k[3:6], "c")  # holds later blocks but not block 0: no prefix at all
    assert idx.scores("ns", k) == {"a": 4, "b": 2}
    assert idx.longest_prefix("ns", k) == 4
    assert best_replica(idx.scores("ns", k)) == ("a", 4)
    assert idx.longest_prefix("other-ns", k) == 0
    assert idx.scores("ns", []) == {}


def test_ttl_is_per_entry_with_an_injected_clock(index):
    idx, clock = index
    k = _keys("t", 4)
    idx.put("ns", k[:2], "a", ttl=100)
    clock.now += 50
    idx.put("ns", k, "a", ttl=100)  # refreshes blocks 0-1, adds 2-3, all until now+100
    idx.put("ns", k[:1], "b", ttl=10)
    assert idx.scores("ns", k) == {"a": 4, "b": 1}
    clock.now += 20
    assert idx.scores("ns", k) == {"a": 4}
    clock.now += 81
    assert idx.scores("ns", k) == {}


def test_evict_one_replica_or_all(index):
    idx, _ = index
    k = _keys("e", 3)
    idx.put("ns", k, "a")
    idx.put("ns", k, "b")
    assert idx.evict("ns", k[1:2], "a") == 1
    assert idx.scores("ns", k) == {"a": 1, "b": 3}
    assert idx.evict("ns", k) == 5
    assert idx.scores("ns", k) == {}


def test_a_salt_isolates_tenants_in_the_index(index):
    idx, _ = index
    ids = list(range(1000))
    for scheme in ("native", "vllm"):
        a = KeySpec(scheme, 64, "m", salt="tenant-a", hash_seed="0")
        b = KeySpec(scheme, 64, "m", salt="tenant-b", hash_seed="0")
        ka, kb = block_keys(ids, a).keys, block_keys(ids, b).keys
        idx.put(namespace(a), ka)
        assert idx.longest_prefix(namespace(a), ka) == 15
        assert idx.longest_prefix(namespace(b), kb) == 0
        assert idx.longest_prefix(namespace(a), kb) == 0  # the keys themselves differ too
        assert idx.longest_prefix(namespace(b), ka) == 0  # and so do the namespaces


def test_namespace_binds_scheme_block_size_model_and_tenant_digest():
    spec = KeySpec("vllm", 16, "deepseek:v4", salt="secret", hash_seed="0")
    ns = namespace(spec)
    assert ns.startswith("recipe:pc:vllm-sha256-cbor/1:16:deepseek%3Av4:")
    assert "secret" not in ns
    others = {namespace(KeySpec("vllm", 16, "deepseek:v4", salt=s, hash_seed="0")) for s in ("a", "b", None)}
    assert len(others | {ns}) == 4


# ---------------------------------------------------------------- in-memory LRU


def test_memory_lru_is_bounded_and_matches_refresh_recency():
    idx = MemoryPrefixIndex(max_entries=4)
    a, b = _keys("a", 2), _keys("b", 2)
    idx.put("ns", a)
    idx.put("ns", b)
    assert idx.longest_prefix("ns", a) == 2  # a becomes most recently used
    idx.put("ns", _keys("c", 2))  # evicts b, the least recently used
    assert len(idx) == 4
    assert idx.longest_prefix("ns", a) == 2
    assert idx.longest_prefix("ns", b) == 0


def test_memory_rejects_a_zero_bound():
    with pytest.raises(ValueError):
        MemoryPrefixIndex(max_entries=0)


# ---------------------------------------------------------------- Redis specifics


def test_redis_and_memory_agree_on_a_generated_workload(redis_index):
    ridx, rclock = redis_index
    mclock = Clock()
    midx = MemoryPrefixIndex(clock=mclock)
    rng = random.Random(11)
    spec = KeySpec(block_size=8, model="m")
    prompts = [[rng.randrange(50) for _ in range(rng.randrange(8, 200))] for _ in range(12)]
    prompts += [p[: rng.randrange(len(p) + 1)] + [rng.randrange(50) for _ in range(40)] for p in prompts]
    for step in range(120):
        ids = rng.choice(prompts)
        keys = block_keys(ids, KeySpec(block_size=8, model="m", salt=rng.choice([None, "t"]))).keys
        ns = namespace(spec)
        assert ridx.scores(ns, keys) == midx.scores(ns, keys)
        if rng.random() < 0.6:
            replica, ttl = rng.choice("xyz"), rng.choice([None, 30.0, 300.0])
            cut = rng.randrange(len(keys) + 1)
            ridx.put(ns, keys[:cut], replica, ttl)
            midx.put(ns, keys[:cut], replica, ttl)
        elif rng.random() < 0.2:
            replica = rng.choice(["x", None])
            assert ridx.evict(ns, keys[2:5], replica) == midx.evict(ns, keys[2:5], replica)
        rclock.now = mclock.now = mclock.now + rng.choice([0, 1, 10])


def test_redis_sets_a_physical_expiry_covering_the_longest_field(redis_index):
    idx, _ = redis_index
    idx.put("ns", [b"k"], "a", ttl=500)
    idx.put("ns", [b"k"], "b", ttl=100)  # shorter: must not cut a's lifetime
    assert 490_000 < idx.client.pttl(b"ns:k") <= 500_000
    idx.put("ns", [b"k"], "c")  # no ttl: the hash persists
    assert idx.client.pttl(b"ns:k") == -1


def test_redis_lookup_is_one_round_trip(redis_index, monkeypatch):
    idx, _ = redis_index
    keys = _keys("r", 50)
    idx.put("ns", keys, "a")
    calls = []
    real = idx.client.pipeline

    def counting_pipeline(*args, **kwargs):
        pipe = real(*args, **kwargs)
        orig = pipe.execute
        pipe.execute = lambda *a, **k: calls.append(1) or orig(*a, **k)
        return pipe

    monkeypatch.setattr(idx.client, "pipeline", counting_pipeline)
    assert idx.longest_prefix("ns", keys) == 50
    assert len(calls) == 1


def test_redis_unavailable_raises_a_clear_error_not_a_miss():
    redis = pytest.importorskip("redis")
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis(port=_free_port(), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    idx = RedisPrefixIndex(client)
    with pytest.raises(PrefixIndexUnavailable, match="unavailable"):
        idx.longest_prefix("ns", [b"k"])
    with pytest.raises(PrefixIndexUnavailable):
        idx.put("ns", [b"k"])


# ---------------------------------------------------------------- simulation


def _agent_trace(turns: int, rng: random.Random) -> tuple[list[TraceRequest], int]:
    """A multi-turn agent: each prompt = previous prompt + completion + tool result. Returns the
    trace and the expected hit tokens, computed from the lengths alone."""
    prompt = [rng.randrange(129_280) for _ in range(rng.randrange(300, 3000))]  # system + tools + task
    trace, hits, prev_len = [], 0, None
    for t in range(turns):
        trace.append(TraceRequest(list(prompt), "deepseek-v4", "tenant", time=float(t * 30)))
        if prev_len is not None:
            hits += min(prev_len // 64, (len(prompt) - 1) // 64) * 64
        prev_len = len(prompt)
        prompt += [rng.randrange(129_280) for _ in range(rng.randrange(20, 400) + rng.randrange(10, 2000))]
    return trace, hits


def test_simulate_reports_the_hit_rate_of_an_agent_trace():
    trace, expected_hits = _agent_trace(20, random.Random(5))
    total = sum(len(r.token_ids) for r in trace)
    report = simulate(trace, KeySpec(block_size=64))
    assert (report.requests, report.prompt_tokens, report.hit_tokens) == (20, total, expected_hits)
    assert report.miss_tokens == total - expected_hits
    assert report.hit_rate == pytest.approx(expected_hits / total)
    assert report.hit_rate > 0.8
    assert report.cost == pytest.approx((expected_hits * 0.14 + (total - expected_hits) * 0.55) / 1e6)
    assert report.cost_without_cache == pytest.approx(total * 0.55 / 1e6)


def test_simulate_honours_ttl_and_tenants():
    trace, _ = _agent_trace(3, random.Random(9))
    spaced = [TraceRequest(r.token_ids, r.model, r.salt, time=i * 10_000.0) for i, r in enumerate(trace)]
    assert simulate(spaced, ttl=5_000).hit_tokens == 0
    tenants = [TraceRequest(r.token_ids, r.model, f"t{i}") for i, r in enumerate(trace)]
    assert simulate(tenants).hit_tokens == 0
