"""KV events: the wire format, one replica's blocks, and the subscriber against a real ZeroMQ
publisher made here (a PUB socket and a ROUTER replay socket speaking vLLM 0.32's protocol):
sequence gaps filled by replay, gaps replay cannot fill, malformed batches, AllBlocksCleared and
reconnection all end in an index that holds exactly (or, after a resync, a subset of) what the
engine holds — in memory and in a real Redis — and routing reads it."""

from __future__ import annotations

import asyncio
from array import array
import logging
import time
from typing import Any

import pytest

zmq = pytest.importorskip("zmq")
msgpack = pytest.importorskip("msgpack")
cbor2 = pytest.importorskip("cbor2")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from recipe.cache.index import MemoryPrefixIndex, RedisPrefixIndex  # noqa: E402
from recipe.serve.engines import engine_from_spec  # noqa: E402
from recipe.serve.kv_events import EVENTS_NAMESPACE, KVEventsSource, KVEventSubscriber, MemorySink, RedisSink  # noqa: E402
from recipe.serve.kv_wire import AllBlocksCleared, BlockRemoved, BlockStored, MalformedBatch, ReplicaBlocks  # noqa: E402
from recipe.serve.kv_wire import block_key, decode_batch  # noqa: E402
from recipe.serve.pool import ReplicaPool  # noqa: E402
from serve_support import until  # noqa: E402

from kv_publisher import CLEARED, SEED, DPPublishers, Publisher, removed, stored, vllm_hashes  # noqa: E402

BS = 16  # (kv_publisher.stored's default block size)


PROMPT = [1000 + (i * 7919) % 50000 for i in range(4 * BS + 5)]  # 4 full blocks
HASHES = vllm_hashes(PROMPT)
LONG = PROMPT + [5] * (2 * BS)  # 6 full blocks
LONG_HASHES = vllm_hashes(LONG)
OTHER = [7 + i for i in range(2 * BS)]
OTHER_HASHES = vllm_hashes(OTHER)


def held_blocks(index: Any, replica: str, hashes: list[int]) -> int:
    """Leading blocks of ``hashes`` the index says ``replica`` holds."""
    return index.scores(EVENTS_NAMESPACE, [h.to_bytes(8, "big") for h in hashes]).get(replica, 0)


async def connected(pub: Publisher, index: Any, **kw: Any) -> KVEventSubscriber:
    from recipe.serve.kv_events import sink_for

    sub = KVEventSubscriber("r0", pub.source, sink_for(index), replay_timeout=1.0, **kw)
    sub.start()
    await until(lambda: sub.connected)
    # PUB drops what it sends before the subscription reaches it; a probe batch shows it has
    for _ in range(200):
        pub.publish()
        await asyncio.sleep(0.02)
        if sub.next_seq is not None and sub.next_seq >= pub.seq:
            break
    await until(lambda: sub.next_seq == pub.seq)
    return sub


# --------------------------------------------------------------------------- the wire format


def test_decode_reads_vllms_map_form_and_the_array_form():
    payload = msgpack.packb([1.5, [stored(PROMPT[:4 * BS], HASHES), removed(HASHES[3:]), CLEARED,
                                   {"type": "SomethingNew", "x": 1}], 0])
    batch = decode_batch(payload)
    assert batch.ts == 1.5 and batch.dp_rank == 0
    assert batch.events[0] == BlockStored(tuple(h.to_bytes(8, "big") for h in HASHES), None, array("Q", PROMPT[:4 * BS]), BS,
                                          "GPU", None, None)
    assert batch.events[1] == BlockRemoved((HASHES[3].to_bytes(8, "big"),), "GPU", None)
    assert batch.events[2] == AllBlocksCleared()
    assert len(batch.events) == 3  # an unknown kind is skipped
    # msgspec's array_like form: the tag, then the fields in order; bytes hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0)
    digest = bytes(range(32))
    arr = msgpack.packb([2.0, [["BlockStored", [digest], 5, list(range(BS)), BS, None, "GPU"],
                               ["BlockRemoved", [digest], None], ["AllBlocksCleared"]]])
    batch = decode_batch(arr)
    assert batch.events[0] == BlockStored((digest[-8:],), (5).to_bytes(8, "big"), array("Q", range(BS)), BS, "GPU")
    assert batch.events[1] == BlockRemoved((digest[-8:],)) and batch.dp_rank is None
    assert block_key(int.from_bytes(digest[-8:], "big")) == digest[-8:]


@pytest.mark.parametrize("payload", [
    b"\xc1", b"", msgpack.packb({"a": 1}), msgpack.packb([1.0]), msgpack.packb(["x", []]),
    msgpack.packb([1.0, [{"type": "BlockStored", "block_hashes": [1], "parent_block_hash": None,
                          "token_ids": [1, 2], "block_size": BS}]]),  # 2 ids for a block of 16
    msgpack.packb([1.0, [{"type": "BlockStored", "block_hashes": [-1], "parent_block_hash": None,
                          "token_ids": list(range(BS)), "block_size": BS}]]),
    msgpack.packb([1.0, [{"type": "BlockRemoved", "block_hashes": "nope"}]]),
    msgpack.packb([1.0, [{"type": "BlockRemoved", "block_hashes": [2 ** 64 - 1, 1.5]}]]),
    msgpack.packb([1.0, [["BlockStored", [1], None, [1.5] * BS, BS]]]),
    msgpack.packb([1.0, [7]]),
])
def test_decode_refuses_malformed_batches(payload):
    with pytest.raises(MalformedBatch):
        decode_batch(payload)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 64 - 1) | st.floats() | st.text(max_size=5)
    | st.binary(max_size=40) | st.sampled_from(["BlockStored", "BlockRemoved", "AllBlocksCleared", "GPU"]),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from(
        ["type", "block_hashes", "token_ids", "block_size", "parent_block_hash", "medium", "ts", "events"]), inner,
        max_size=5), max_leaves=30).map(lambda v: msgpack.packb(v, use_bin_type=True)))
def test_decode_any_bytes_is_a_batch_or_malformed_never_another_error(payload):
    try:
        decode_batch(payload)
    except MalformedBatch:
        pass


# --------------------------------------------------------------------------- one replica's blocks


def _batch(*events: dict[str, Any]):
    return decode_batch(msgpack.packb([0.0, list(events), 0]))


def test_replica_blocks_net_changes_medium_and_cap():
    b = ReplicaBlocks(max_blocks=5)
    k = [h.to_bytes(8, "big") for h in HASHES]
    added, dropped = b.apply(_batch(stored(PROMPT[:4 * BS], HASHES)))
    assert added == k and dropped == [] and b.block_size == BS
    # stored then removed in one batch: no net change for that block
    added, dropped = b.apply(_batch(stored(OTHER, OTHER_HASHES), removed(OTHER_HASHES[1:]), removed(HASHES[2:])))
    assert added == [OTHER_HASHES[0].to_bytes(8, "big")] and sorted(dropped) == sorted(k[2:])
    # the CPU tier is not the prefix cache
    assert b.apply(_batch(stored(OTHER, OTHER_HASHES, medium="CPU"))) == ([], [])
    assert b.apply(_batch(removed(HASHES[:1]) | {"medium": "CPU"})) == ([], [])
    # the cap (one block of OTHER already did not fit above): 3 held, room for 2 more
    added, _ = b.apply(_batch(stored(list(range(3 * BS)), [901, 902, 903])))
    assert len(added) == 2 and b.overflow == 2 and len(b.held) == 5
    added, dropped = b.apply(_batch(CLEARED, stored(OTHER[:BS], OTHER_HASHES[:1])))
    assert added == [] and len(dropped) == 4 and b.held == {OTHER_HASHES[0].to_bytes(8, "big")}


# --------------------------------------------------------------------------- the subscriber


@pytest.fixture
def pub():
    p = Publisher()
    yield p
    p.close()


def test_stored_removed_and_cleared_reach_the_index(pub):
    async def main():
        index = MemoryPrefixIndex()
        sub = await connected(pub, index)
        pub.publish(stored(PROMPT[:4 * BS], HASHES))
        await until(lambda: held_blocks(index, "r0", HASHES) == 4)
        assert sub.exact and sub.block_size == BS and sub.verified == 1 and not sub.mismatch
        # the keys recipe computes for the prompt are the ones the engine published
        assert sub.lookup_keys(PROMPT, None) == [h.to_bytes(8, "big") for h in HASHES]
        pub.publish(removed(HASHES[2:]))
        await until(lambda: held_blocks(index, "r0", HASHES) == 2)
        pub.publish(CLEARED)
        await until(lambda: held_blocks(index, "r0", HASHES) == 0)
        assert sub.resyncs.get("cleared") == 1 and not sub.blocks.held
        await sub.aclose()

    asyncio.run(main())


def test_a_gap_is_filled_from_the_replay_socket(pub):
    async def main():
        index = MemoryPrefixIndex()
        sub = await connected(pub, index)
        lost = pub.publish(stored(PROMPT[:4 * BS], HASHES), send=False)  # its PUB frame never arrives
        pub.publish(removed(HASHES[3:]))
        await until(lambda: sub.next_seq == pub.seq)
        assert lost in pub.replays
        assert held_blocks(index, "r0", HASHES) == 3 and not sub.resyncs.get("gap")
        await sub.aclose()

    asyncio.run(main())


def test_a_gap_the_replay_buffer_no_longer_holds_resyncs(caplog):
    pub = Publisher(buffer=2)
    try:
        async def main():
            index = MemoryPrefixIndex()
            sub = await connected(pub, index)
            pub.publish(stored(OTHER, OTHER_HASHES))
            await until(lambda: held_blocks(index, "r0", OTHER_HASHES) == 2)
            pub.publish(removed(OTHER_HASHES), send=False)  # lost, and pushed out of the buffer by:
            pub.publish(send=False)
            pub.publish(stored(PROMPT[:2 * BS], HASHES[:2]), send=False)
            pub.publish(stored(PROMPT[:3 * BS], HASHES[:3]))
            await until(lambda: sub.next_seq == pub.seq)
            # dropped, then what the buffer still had applied: never the removed OTHER blocks
            assert held_blocks(index, "r0", OTHER_HASHES) == 0
            assert held_blocks(index, "r0", HASHES) == 3
            assert sub.resyncs["gap"] == 1
            await sub.aclose()

        with caplog.at_level(logging.WARNING, "recipe.serve.kv_events"):
            asyncio.run(main())
        assert any("not in the replay buffer" in r.getMessage() for r in caplog.records)
    finally:
        pub.close()


def test_a_malformed_replay_answer_resyncs_and_the_replay_goes_on(pub, caplog):
    async def main():
        index = MemoryPrefixIndex()
        sub = await connected(pub, index)
        pub.publish(stored(OTHER, OTHER_HASHES))
        await until(lambda: held_blocks(index, "r0", OTHER_HASHES) == 2)
        pub.bad_answers = 1
        pub.publish(stored(PROMPT[:2 * BS], HASHES[:2]), send=False)  # lost: the gap asks the replay socket
        pub.publish(stored(PROMPT[:3 * BS], HASHES[:3]))
        await until(lambda: sub.next_seq == pub.seq)
        # the bad entry dropped the replica's blocks and its sequence; the replay's batches after it
        # were applied from the first one on
        assert held_blocks(index, "r0", OTHER_HASHES) == 0
        assert held_blocks(index, "r0", HASHES) == 3
        assert sub.resyncs.get("malformed") == 1 and not sub.resyncs.get("gap")
        await sub.aclose()

    with caplog.at_level(logging.WARNING, "recipe.serve.kv_events"):
        asyncio.run(main())
    assert sum("a replay answer of 4 frames: resynced" in r.getMessage() for r in caplog.records) == 1


def test_without_a_replay_socket_a_gap_resyncs():
    pub = Publisher(replay=False)
    try:
        async def main():
            index = MemoryPrefixIndex()
            sub = await connected(pub, index)
            pub.publish(stored(OTHER, OTHER_HASHES))
            await until(lambda: held_blocks(index, "r0", OTHER_HASHES) == 2)
            pub.publish(removed(OTHER_HASHES), send=False)
            pub.publish(stored(PROMPT[:BS], HASHES[:1]))
            await until(lambda: held_blocks(index, "r0", HASHES) == 1)
            assert held_blocks(index, "r0", OTHER_HASHES) == 0 and sub.resyncs["gap"] == 1
            await sub.aclose()

        asyncio.run(main())
    finally:
        pub.close()


def test_malformed_batches_are_logged_once_and_resync(pub, caplog):
    async def main():
        index = MemoryPrefixIndex()
        sub = await connected(pub, index)
        pub.publish(stored(OTHER, OTHER_HASHES))
        await until(lambda: held_blocks(index, "r0", OTHER_HASHES) == 2)
        pub.publish(payload=b"\xc1 not msgpack")
        pub.publish(payload=msgpack.packb([1.0, [{"type": "BlockStored", "block_hashes": "x"}]]))
        pub.pub.send_multipart([b"kv", b"short", b""])  # not vLLM's frames
        await until(lambda: sub.resyncs.get("malformed", 0) >= 3)
        assert held_blocks(index, "r0", OTHER_HASHES) == 0
        pub.publish(stored(PROMPT[:4 * BS], HASHES))  # and it goes on
        await until(lambda: held_blocks(index, "r0", HASHES) == 4)
        assert sub.exact
        await sub.aclose()

    with caplog.at_level(logging.WARNING, "recipe.serve.kv_events"):
        asyncio.run(main())
    malformed = [r for r in caplog.records if "malformed batch" in r.getMessage()]
    assert len(malformed) == 1


def test_a_restarted_publisher_is_a_reconnect_and_resyncs():
    pub = Publisher()
    port = pub.port
    try:
        async def main():
            nonlocal pub
            index = MemoryPrefixIndex()
            sub = await connected(pub, index)
            pub.publish(stored(OTHER, OTHER_HASHES))
            await until(lambda: held_blocks(index, "r0", OTHER_HASHES) == 2)
            pub.close()  # the engine restarts: its cache is empty, its sequence starts at 0 again
            await until(lambda: not sub.connected)
            assert not sub.exact
            pub = Publisher(port=port)
            sub.source = pub.source  # (its replay socket moved; the PUB endpoint is the same)
            await until(lambda: sub.connected)
            await until(lambda: held_blocks(index, "r0", OTHER_HASHES) == 0)
            assert sub.resyncs["connect"] == 2
            for _ in range(200):  # seq 0, 1 … of the new process are applied, not skipped as old
                pub.publish(stored(PROMPT[:BS], HASHES[:1]))
                await asyncio.sleep(0.02)
                if held_blocks(index, "r0", HASHES):
                    break
            assert held_blocks(index, "r0", HASHES) == 1
            await sub.aclose()

        asyncio.run(main())
    finally:
        pub.close()


def test_a_batch_over_the_message_limit_is_never_read_and_the_replica_goes_on(caplog):
    pub = Publisher()
    try:
        async def main():
            index = MemoryPrefixIndex()
            sub = await connected(pub, index, max_message_bytes=64 << 10)
            sub.retry_seconds = 0.3
            # ~360 KB: ZeroMQ ends the connection for good, in the live stream and in the replay
            big = pub.publish(stored(OTHER, OTHER_HASHES), removed([2**63 + 1] * 40_000))
            deadline = time.monotonic() + 30
            while held_blocks(index, "r0", HASHES) < 2 and time.monotonic() < deadline:
                pub.publish(stored(PROMPT[:2 * BS], HASHES[:2]))  # what a reconnected subscriber reads
                await asyncio.sleep(0.2)
            assert held_blocks(index, "r0", HASHES) == 2  # new sockets, the replica followed again
            assert held_blocks(index, "r0", OTHER_HASHES) == 0  # the oversized batch was never applied
            assert sub.connected and sub.next_seq is not None and sub.next_seq > big
            assert "not reconnected within 0.3 s" in caplog.text
            await sub.aclose()

        asyncio.run(main())
    finally:
        pub.close()


def test_the_message_limit_defaults_to_16_mib(pub):
    from recipe.serve.kv_events import sink_for

    assert KVEventSubscriber("r0", pub.source, sink_for(MemoryPrefixIndex())).max_message_bytes == 16 << 20


def test_a_joining_subscriber_replays_the_history(pub):
    pub.publish(stored(PROMPT[:4 * BS], HASHES))
    pub.publish(removed(HASHES[3:]))

    async def main():
        index = MemoryPrefixIndex()
        sub = await connected(pub, index)
        assert 0 in pub.replays and held_blocks(index, "r0", HASHES) == 3
        await sub.aclose()

    asyncio.run(main())


def test_hashes_that_are_not_recipes_keys_are_flagged(pub, caplog):
    async def main():
        index = MemoryPrefixIndex()
        sub = await connected(pub, index)
        pub.publish(stored(PROMPT[:BS], [12345]))  # e.g. vLLM's default pickle-based sha256
        await until(lambda: sub.mismatch)
        assert not sub.exact
        await sub.aclose()

    with caplog.at_level(logging.WARNING, "recipe.serve.kv_events"):
        asyncio.run(main())
    assert any("sha256_cbor" in r.getMessage() for r in caplog.records)


def test_close_stops_the_task_and_sockets(pub):
    async def main():
        sub = await connected(pub, MemoryPrefixIndex())
        task = sub._task
        await sub.aclose()
        assert task is not None and task.done() and sub._ctx is None

    asyncio.run(main())


# --------------------------------------------------------------------------- Redis, shared by frontends


def test_redis_sink_is_shared_and_a_resync_drops_another_frontends_entries(pub):
    from serve_support import redis_server

    with redis_server() as url:
        async def main():
            a = RedisPrefixIndex.from_url(url)
            b = RedisPrefixIndex.from_url(url)  # a second frontend's index
            sub = await connected(pub, a)
            assert isinstance(sub.sink, RedisSink)
            pub.publish(stored(PROMPT[:4 * BS], HASHES))
            await until(lambda: held_blocks(b, "r0", HASHES) == 4)
            pub.publish(removed(HASHES[1:]))
            await until(lambda: held_blocks(b, "r0", HASHES) == 1)
            await sub.aclose()
            # a frontend that starts later resyncs on connect: the blocks written before are dropped
            # from the shared index even though this process never saw them
            pub.publish(stored(OTHER, OTHER_HASHES))
            sub2 = await connected(pub, b)
            await until(lambda: held_blocks(a, "r0", OTHER_HASHES) == 2)
            assert held_blocks(a, "r0", HASHES) == 1  # replayed from the publisher's history
            pub.publish(CLEARED)
            await until(lambda: held_blocks(a, "r0", OTHER_HASHES) == 0 and held_blocks(a, "r0", HASHES) == 0)
            assert not a.client.exists(EVENTS_NAMESPACE.encode() + b"|held|r0")
            await sub2.aclose()

        asyncio.run(main())


def test_an_index_that_fails_makes_the_replica_inexact_until_it_is_cleared_again(pub):
    import shutil
    import subprocess

    from serve_support import free_port

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not on PATH")
    port = free_port()
    index = RedisPrefixIndex.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=0.5, socket_timeout=0.5)

    async def main():
        sub = KVEventSubscriber("r0", pub.source, RedisSink(index), replay_timeout=1.0)
        sub.start()
        await until(lambda: sub.connected)
        assert sub.index_stale and not sub.exact and sub.resyncs["index"] == 1  # its connect resync failed
        pub.publish(stored(OTHER, OTHER_HASHES))
        await until(lambda: sub.next_seq == pub.seq, 20)
        assert not sub.blocks.held and not sub.exact  # nothing applied while the index cannot be cleared
        proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                pub.publish(stored(PROMPT[:4 * BS], HASHES))
                await asyncio.sleep(0.05)
                if sub.exact:
                    break
            await until(lambda: held_blocks(index, "r0", HASHES) == 4)
            assert sub.exact and held_blocks(index, "r0", OTHER_HASHES) == 0
            await sub.aclose()
        finally:
            proc.terminate()
            proc.wait(10)

    asyncio.run(main())


def test_an_endpoint_zmq_refuses_is_retried_not_raised(caplog):
    async def main():
        sub = KVEventSubscriber("r0", KVEventsSource("tcp://127.0.0.1:notaport"), MemorySink(MemoryPrefixIndex()))
        sub.retry_seconds = 0.05
        sub.start()
        await asyncio.sleep(0.3)
        assert sub._task is not None and not sub._task.done() and not sub.exact
        await sub.aclose()

    with caplog.at_level(logging.WARNING, "recipe.serve.kv_events"):
        asyncio.run(main())
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 1


def test_memory_sink_entries_do_not_expire():
    now = [0.0]
    index = MemoryPrefixIndex(ttl=10, clock=lambda: now[0])
    MemorySink(index).update("r0", [b"\0" * 8], [])
    now[0] = 1e9
    assert index.scores(EVENTS_NAMESPACE, [b"\0" * 8]) == {"r0": 1}


# --------------------------------------------------------------------------- routing and the spec


class _Engine:
    def __init__(self, name: str) -> None:
        self.name = name

    async def generate(self, request):  # pragma: no cover - routing only
        yield None

    async def aclose(self) -> None:
        pass


def test_routing_reads_the_exact_index_for_a_replica_with_events(pub):
    async def main():
        pool = ReplicaPool([_Engine("a"), _Engine("b")])
        a, b = pool.replicas
        b.events = await connected(pub, pool.index)
        b.events.replica = "b"
        b.events.blocks.clear()
        # the estimate says a holds the prompt's first 64 tokens (it was routed there); b's events say
        # b holds 96
        first = await pool.route(LONG, None)
        assert first.replica is a and first.cached_tokens == 0
        pub.publish(stored(LONG[:6 * BS], LONG_HASHES))
        await until(lambda: held_blocks(pool.index, "b", LONG_HASHES) == 6)
        route = await pool.route(LONG, None)
        assert route.replica is b and route.cached_tokens == 6 * BS
        # evicted on b: b holds nothing, a (estimate) is preferred again
        pub.publish(removed(LONG_HASHES))
        await until(lambda: held_blocks(pool.index, "b", LONG_HASHES) == 0)
        route = await pool.route(LONG, None)
        assert route.replica is a and route.cached_tokens == 64
        # a salted prompt has other keys: b's blocks are not its cache
        pub.publish(stored(LONG[:6 * BS], LONG_HASHES))
        await until(lambda: held_blocks(pool.index, "b", LONG_HASHES) == 6)
        assert b.events.lookup_keys(LONG, "t1") == [h.to_bytes(8, "big") for h in vllm_hashes(LONG, salt="t1")]
        route = await pool.route(LONG, "t1")
        assert route.cached_tokens == 0
        await pool.aclose()

    asyncio.run(main())


def test_metrics_label_each_replicas_view(pub):
    from recipe.serve.metrics import Metrics

    async def main():
        pool = ReplicaPool([_Engine("a"), _Engine("b")])
        m = Metrics()
        m.watch_pool(pool)
        pool.replicas[1].events = await connected(pub, pool.index)
        text = m.render().decode()
        assert 'recipe_replica_cache_view{replica="a",view="estimate"} 1.0' in text
        assert 'recipe_replica_cache_view{replica="b",view="events"} 1.0' in text
        assert 'recipe_kv_event_resyncs_total{reason="connect",replica="b"} 1.0' in text
        await pool.aclose()
        assert 'recipe_replica_cache_view{replica="b",view="estimate"} 0.0' in text

    asyncio.run(main())


def test_engine_specs_name_the_event_source():
    e = engine_from_spec("vllm+http://h:8000?kv_events=tcp://h:5557&kv_replay=tcp://h:5558&kv_topic=kv&kv_hash_seed=0")
    assert e.kv_events == KVEventsSource("tcp://h:5557", "tcp://h:5558", "kv", "0")
    assert engine_from_spec("generate+http://h:8000?kv_events=tcp://h:5557").kv_events == KVEventsSource("tcp://h:5557")
    assert engine_from_spec("vllm+http://h:8000").kv_events is None
    with pytest.raises(ValueError, match="unknown parameter 'kv_events'"):
        engine_from_spec("sglang+http://h:8000?kv_events=tcp://h:5557")
    with pytest.raises(ValueError, match="kv_replay needs kv_events"):
        engine_from_spec("vllm+http://h:8000?kv_replay=tcp://h:5558")
    with pytest.raises(ValueError, match="want tcp://"):
        engine_from_spec("vllm+http://h:8000?kv_events=h:5557")


# --------------------------------------------------------------------------- data-parallel ranks


def test_each_rank_publishes_on_the_endpoints_offset_by_its_rank_as_vllm_offsets_them():
    from recipe.serve.kv_events import offset_endpoint

    # vLLM 0.32 ZmqEventPublisher.offset_endpoint_port: tcp port + rank (0 left to the OS), inproc _dp<rank>
    assert offset_endpoint("tcp://10.0.0.1:5557", 3) == "tcp://10.0.0.1:5560"
    assert offset_endpoint("tcp://10.0.0.1:5557", 0) == "tcp://10.0.0.1:5557"
    assert offset_endpoint("tcp://10.0.0.1:0", 2) == "tcp://10.0.0.1:0"
    assert offset_endpoint("inproc://cache", 1) == "inproc://cache_dp1"
    src = engine_from_spec("vllm+http://h:8000?kv_events=tcp://h:5557&kv_replay=tcp://h:5600&dp_size=4").kv_events
    assert src.ranks == 4
    assert src.for_rank(2) == KVEventsSource("tcp://h:5559", "tcp://h:5602", "", src.hash_seed, 1)
    for bad in ("0", "x", "1025"):
        with pytest.raises(ValueError, match="dp_size"):
            engine_from_spec(f"vllm+http://h:8000?kv_events=tcp://h:5557&dp_size={bad}")
    with pytest.raises(ValueError, match="dp_size needs kv_events"):
        engine_from_spec("vllm+http://h:8000?dp_size=2")
    with pytest.raises(ValueError, match="ipc://"):
        engine_from_spec("vllm+http://h:8000?kv_events=ipc:///tmp/kv&dp_size=2")


async def caught_up(pub: Publisher, sub: KVEventSubscriber) -> None:
    """Until ``sub`` has applied everything ``pub`` published (a probe batch each try: a PUB drops what
    it sends before the subscription reaches it, and the gap is replayed)."""
    await until(lambda: sub.connected)
    for _ in range(200):
        pub.publish()
        await asyncio.sleep(0.02)
        if sub.next_seq is not None and sub.next_seq >= pub.seq:
            return
    raise AssertionError("the subscriber did not catch up")


def test_a_replica_with_data_parallel_ranks_is_routed_to_the_rank_holding_the_prefix():
    dp = DPPublishers(2)
    try:
        async def main():
            a, b = _Engine("a"), _Engine("b")
            b.kv_events = engine_from_spec(f"vllm+http://127.0.0.1:1?{dp.spec}").kv_events
            pool = ReplicaPool([a, b])
            subs = pool.follow_events()
            rb = pool.replicas[1]
            assert [s.replica for s in subs] == ["b@dp0", "b@dp1"] and rb.ranks == tuple(subs) and rb.events is None
            for pub, sub in zip(dp.pubs, subs):
                await caught_up(pub, sub)
            assert rb.exact
            cold = await pool.route(OTHER, None)
            assert cold.dp_rank is None  # no rank holds it: the engine picks
            dp.pubs[1].publish(stored(LONG[:6 * BS], LONG_HASHES))
            await until(lambda: held_blocks(pool.index, "b@dp1", LONG_HASHES) == 6)
            route = await pool.route(LONG, None)
            assert (route.replica.name, route.cached_tokens, route.dp_rank) == ("b", 6 * BS, 1)
            # rank 1 evicts it, rank 0 holds its first 4 blocks: rank 0
            dp.pubs[1].publish(removed(LONG_HASHES))
            dp.pubs[0].publish(stored(PROMPT[:4 * BS], HASHES))
            await until(lambda: held_blocks(pool.index, "b@dp0", HASHES) == 4
                        and held_blocks(pool.index, "b@dp1", LONG_HASHES) == 0)
            route = await pool.route(LONG, None)
            assert (route.replica.name, route.cached_tokens, route.dp_rank) == ("b", 4 * BS, 0)
            # a rank whose socket is lost leaves the others exact
            subs[1].connected = False
            assert rb.exact and (await pool.route(LONG, None)).dp_rank == 0
            await pool.aclose()

        asyncio.run(main())
    finally:
        dp.close()


def test_batches_of_another_rank_or_more_ranks_than_named_leave_the_replica_on_the_estimate(caplog):
    async def main():
        pub = Publisher(rank=1)  # rank 1's publisher named as a replica's only one
        try:
            pool = ReplicaPool([_Engine("a"), _Engine("b")])
            sub = KVEventSubscriber("b", pub.source, MemorySink(pool.index), replay_timeout=1.0)
            pool.replicas[1].events = sub
            sub.start()
            await caught_up(pub, sub)
            assert sub.wrong_rank and not sub.exact and not pool.replicas[1].exact
            await sub.aclose()
        finally:
            pub.close()
        # an engine whose /metrics name two data-parallel engines, its spec one publisher
        from recipe.serve.routing import parse_engine_metrics

        load = parse_engine_metrics('vllm:num_requests_running{engine="0"} 1\nvllm:num_requests_running{engine="1"} 2\n', 0.0)
        assert (load.running, load.engines) == (3.0, 2)
        other = KVEventSubscriber("c", KVEventsSource("tcp://127.0.0.1:1"), MemorySink(MemoryPrefixIndex()))
        other.connected = True
        assert other.exact
        other.engine_ranks(load.engines, 1)
        other.engine_ranks(load.engines, 1)
        assert other.wrong_rank and not other.exact

    with caplog.at_level(logging.WARNING, "recipe.serve.kv_events"):
        asyncio.run(main())
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "publishes data-parallel rank 1's cache, not rank 0's" in m]) == 1
    assert len([m for m in messages if "runs 2 data-parallel ranks, its spec names 1: add dp_size=2" in m]) == 1


def test_recipe_serve_sends_a_request_to_the_rank_holding_its_prefix():
    import httpx
    from fake_engines import Script, Seen, vllm_app
    from serve_support import running

    import recipe
    import recipe.serve
    from recipe.serve.config import ServeConfig

    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "A shared prompt. " * 30}],
            "max_tokens": 5, "thinking": {"type": "disabled"}}
    ids = list(recipe.prepare(body).token_ids)
    n = len(ids) // BS
    dp = DPPublishers(2)
    seen = {"A": Seen(), "B": Seen()}
    try:
        with running(vllm_app(Script([5, 1]), seen["A"])) as fa, running(vllm_app(Script([5, 1]), seen["B"])) as fb:
            specs = [f"vllm+{fb.url}?name=B", f"vllm+{fa.url}?name=A&{dp.spec}"]
            app = recipe.serve.app(engines=specs, config=ServeConfig(warm=False, gc_freeze=False, probe_seconds=None,
                                                                     metrics_interval=0))
            with running(app) as srv:
                subs = srv.state.pool.get("A").ranks

                def caught_up() -> bool:
                    for pub, sub in zip(dp.pubs, subs):
                        pub.publish()
                    return all(s.exact and s.next_seq == p.seq for p, s in zip(dp.pubs, subs))

                deadline = time.monotonic() + 10
                while not caught_up():
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                dp.pubs[1].publish(stored(ids[:n * BS], vllm_hashes(ids)))
                while len(subs[1].blocks.held) != n:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
                with httpx.Client(base_url=srv.url, timeout=30) as c:
                    r = c.post("/v1/chat/completions", json=body)
                    assert r.status_code == 200 and r.headers["x-recipe-replica"] == "A"
                    assert r.json()["usage"]["prompt_tokens"] == len(ids)
                    cold = c.post("/v1/chat/completions", json={**body, "messages": [{"role": "user", "content": "Hi"}]})
                    assert cold.status_code == 200
                    cold_on = cold.headers["x-recipe-replica"]
        assert seen["A"].ranks[0] == "1"  # vLLM's header: the rank whose cache holds the prompt
        assert seen[cold_on].ranks[-1] is None  # a prompt no rank holds: the engine picks
        assert len(seen["A"].ranks) + len(seen["B"].ranks) == 2
    finally:
        dp.close()
