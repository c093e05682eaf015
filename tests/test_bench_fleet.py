"""bench/bench_fleet.py's simulator on a small fleet: every policy serves the same workload, no
policy's hit rate beats the infinite shared cache computed in the same run, the replica caches are
LRU-bounded and the exact index follows their evictions, recipe's policies are ReplicaPool's own
routes, and the SGLang and Dynamo policies follow their implementations (their default settings)."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import pytest

from recipe.cache.index import MemoryPrefixIndex
from recipe.cache.keys import KeySpec, block_keys
from recipe.serve.pool import ReplicaPool
from recipe.serve.routing import RoutingWeights

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_fleet  # noqa: E402

ARGS = argparse.Namespace(prefill_tps=4000.0, decode_tps=50.0, slots=16, kv_blocks=3000, slo=2.0, seconds=12.0,
                          warmup=2.0, scrape=2.0)


@pytest.fixture(scope="module")
def wl():
    return bench_fleet.Workload(rate=3.0, seconds=ARGS.seconds, seed=3, think=2.0, decode_tps=ARGS.decode_tps)


def test_the_workload_mixes_agent_sessions_chat_and_the_hot_prefix(wl):
    kinds = {s.kind for s in wl.sources}
    assert kinds == {"agent", "chat", "hot"}
    for s in wl.sources:
        if s.kind == "agent":
            assert 20 <= len(s.turns) <= 50
            assert all(a.prompt + a.output < b.prompt for a, b in zip(s.turns, s.turns[1:]))  # each turn extends the last
        if s.kind == "hot":
            assert s.keys[: 3000 // 64] == wl.hot.keys
    assert any(s.first > 0 for s in wl.sources)  # sessions already under way at time 0


def test_every_policy_serves_the_workload_and_none_beats_the_shared_cache(wl):
    results = {p: bench_fleet.simulate(p, wl, 3, ARGS, RoutingWeights()) for p in (*bench_fleet.POLICIES, "recipe-events")}
    for p, r in results.items():
        assert r.requests > 20, p
        assert 0.0 < r.hit <= r.shared_hit + 1e-9 < 1.0, p
        assert r.p50 <= r.p99 and r.spread >= 1.0 and r.load_spread >= 1.0 and r.goodput >= 0, p
    # the cache-aware policies keep more of the prefixes than round-robin on the same requests
    assert results["recipe-cost"].hit > results["round-robin"].hit + 0.1
    assert results["longest-prefix"].hit > results["round-robin"].hit + 0.1


def test_a_replica_cache_evicts_the_least_recently_used_block_and_the_exact_index_follows():
    exact = bench_fleet.Holders(1)
    rep = bench_fleet.Replica(0, kv_blocks=2, slots=[0.0])
    assert rep.hold([1, 2], [1, 2], exact) == 0
    assert rep.hold([1, 2], [1, 2], exact) == 2
    rep.hold([3], [3], exact)  # evicts 1 (2 was touched after it)
    assert list(rep.cache) == [2, 3]
    assert exact.match([1, 2]) == {} and exact.match([2, 3]) == {0: 2}
    assert rep.hold([1, 2], [1, 2], exact) == 0


def test_holders_match_counts_leading_blocks_as_the_prefix_index_does():
    rng = random.Random(7)
    holders, index = bench_fleet.Holders(4), MemoryPrefixIndex()
    for _ in range(60):
        r = rng.randrange(4)
        keys = [rng.randrange(6) for _ in range(rng.randint(1, 5))]
        holders.add(keys, r)
        index.put("ns", keys, f"r{r}")
        probe = [rng.randrange(6) for _ in range(rng.randint(1, 6))]
        assert {f"r{k}": v for k, v in holders.match(probe).items()} == index.scores("ns", probe)


def test_recipes_policy_is_the_pools_own_route(wl):
    reps = [bench_fleet.Replica(i, 600, [0.0]) for i in range(3)]
    router = bench_fleet.Router("recipe-cost", reps, RoutingWeights())
    twin = ReplicaPool([bench_fleet._Engine(f"r{i}") for i in range(3)], routing="cost")
    rng = random.Random(1)
    for src in wl.sources[:60]:
        turn = src.turns[0]
        keys = src.keys[: turn.prompt // 64]
        for rep, tw in zip(reps, twin.replicas):
            rep.in_flight = tw.in_flight = rng.randrange(4)
        got = router.route(bench_fleet.Prompt(turn.prompt, keys), keys)
        want = bench_fleet._run(twin.route(bench_fleet.Prompt(turn.prompt, keys), None, bench_fleet.MODEL))
        assert f"r{got}" == want.replica.name


def test_the_pool_still_hashes_real_token_ids():
    ids = list(range(1000, 1200))
    spec = KeySpec(block_size=64, model=bench_fleet.MODEL)
    assert bench_fleet._keys(ids, spec) == block_keys(ids, spec)


def test_sglang_switches_to_the_least_loaded_only_past_both_balance_thresholds():
    reps = [bench_fleet.Replica(i, 600, [0.0]) for i in range(2)]
    router = bench_fleet.Router("sglang-cache-aware", reps, RoutingWeights())
    keys = list(range(100, 150))  # 3,200 tokens
    router.tree.add(keys, 0)
    router.tree.add(list(range(500, 520)), 0)  # r0's tree: 70 blocks, r1's: none
    route = lambda ks: router.route(bench_fleet.Prompt(len(ks) * 64, ks), ks)  # noqa: E731
    reps[0].in_flight, reps[1].in_flight = 64, 0  # max - min = 64, not above 64: balanced, the match wins
    assert route(keys) == 0
    other = list(range(100, 110)) + list(range(900, 940))  # r0 matches 10 of 50 blocks, not above 30%
    assert route(other) == 1  # the least loaded
    reps[0].in_flight, reps[1].in_flight = 0, 5
    assert route(list(range(100, 110)) + list(range(960, 1000))) == 0  # the least loaded, whatever its tree's size
    reps[0].in_flight, reps[1].in_flight = 200, 135  # 65 apart but 200 < 1.5 x 135: balanced
    assert route(keys) == 0
    reps[0].in_flight, reps[1].in_flight = 65, 0  # 65 - 0 > 64 and 65 > 1.5 x 0: imbalanced
    assert route(keys) == 1  # the least loaded, whatever the match


def test_dynamo_scores_prefill_blocks_plus_potential_decode_blocks():
    reps = [bench_fleet.Replica(i, 600, [0.0]) for i in range(2)]
    router = bench_fleet.Router("dynamo-kv", reps, RoutingWeights())
    keys = list(range(100, 150))  # 3,200 tokens
    route = lambda: router.route(bench_fleet.Prompt(3200, keys), keys)  # noqa: E731
    reps[0].hold(keys, keys, router.exact)  # r0 holds the whole prompt: ~0 prefill blocks against 50
    assert route() == 0  # 0 + 50 new active blocks < 50 + 50
    reps[0].active = {k: 1 for k in range(1000, 1060)}  # 60 unrelated blocks in flight on r0
    assert route() == 1  # 0 + 60 + 50 > 50 + 0 + 50
    reps[0].active = {k: 1 for k in [*keys[:40], *range(1000, 1020)]}  # its first 40 blocks are in flight there
    assert route() == 0  # 0 + 60 + 10 (shared blocks count once) < 100
    assert bench_fleet._unshared(keys, reps[0].active) == 10 and bench_fleet._unshared(keys, {}) == 50


def test_recipe_events_reads_what_each_replica_holds_through_its_kv_events():
    from recipe.serve.kv_events import EVENTS_NAMESPACE

    reps = [bench_fleet.Replica(i, kv_blocks=60, slots=[0.0]) for i in range(2)]
    router = bench_fleet.Router("recipe-events", reps, RoutingWeights())
    index = router.pool.index
    a, b = list(range(100, 150)), list(range(500, 550))
    route = lambda ks: router.route(bench_fleet.Prompt(len(ks) * 64, ks), ks)  # noqa: E731
    ev = lambda ks: [bench_fleet._event_key(k) for k in ks]  # noqa: E731
    reps[0].hold(a, a, None)
    assert index.scores(EVENTS_NAMESPACE, ev(a)) == {"r0": 50}
    reps[0].in_flight = 1
    assert route(a) == 0  # it holds the whole prompt: cheaper than a cold replica by far more than a request
    reps[0].hold(b, b, None)  # 100 blocks in a 60-block cache: a's first 40 evicted, and published as removed
    assert index.scores(EVENTS_NAMESPACE, ev(a)) == {} and index.scores(EVENTS_NAMESPACE, ev(b)) == {"r0": 50}
    assert route(a) == 1  # r0 no longer holds a's prefix (the routed-keys estimate would still say it does)
