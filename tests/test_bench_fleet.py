"""bench/bench_fleet.py's simulator on a small fleet: every policy serves every request, the replica
caches are LRU-bounded, and the recipe-cost policy is ReplicaPool's own routing (its routes are the
ones a ReplicaPool with ``routing="cost"`` picks for the same requests and loads)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest

from recipe.cache.keys import KeySpec, block_keys

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_fleet  # noqa: E402

ARGS = argparse.Namespace(prefill_tps=20000.0, decode_tps=40.0, slots=8, kv_blocks=200, slo=2.0)


@pytest.fixture(scope="module")
def reqs():
    out = bench_fleet.workload(6.0, 3.0, seed=3)
    spec = KeySpec(block_size=bench_fleet.BLOCK, model=bench_fleet.MODEL)
    for r in out:
        r.keys = block_keys(r.ids, spec).keys
    return out


def test_every_policy_serves_the_whole_workload(reqs):
    for policy in bench_fleet.POLICIES:
        m = asyncio.run(bench_fleet.simulate(policy, reqs, 3, ARGS))
        assert 0.0 <= m["hit"] < 1.0 and m["p50"] <= m["p99"] and m["spread"] >= 1.0, policy
    rr = asyncio.run(bench_fleet.simulate("round-robin", reqs, 3, ARGS))
    assert rr["spread"] <= (len(reqs) // 3 + 1) / (len(reqs) / 3)  # round-robin counts differ by at most one


def test_a_replica_cache_evicts_the_least_recently_used_block():
    rep = bench_fleet.Replica(kv_blocks=2)
    assert rep.hold([b"a", b"b"]) == 0
    assert rep.hold([b"a", b"b"]) == 2
    rep.hold([b"c"])  # evicts a (b was touched after a)
    assert list(rep.cache) == [b"b", b"c"]
    assert rep.hold([b"a", b"b"]) == 0


def test_the_cost_policy_is_the_pools_own_route(reqs):
    router = bench_fleet.Router("recipe-cost", 3)
    from recipe.serve.pool import ReplicaPool

    twin = ReplicaPool([bench_fleet._Engine(f"r{i}") for i in range(3)], routing="cost")

    async def go() -> None:
        for k, r in enumerate(reqs[:40]):
            load = [k % 3, 0, 2]
            got = await router.route(r, load, [0, 0, 0])
            for rep, f in zip(twin.replicas, load):
                rep.in_flight = f
            want = await twin.route(r.ids, None, bench_fleet.MODEL)
            assert f"r{got}" == want.replica.name

    asyncio.run(go())
