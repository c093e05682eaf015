"""The engines' own cache state: each vLLM replica's KV events, kept as an exact per-replica index.

vLLM started with ``--kv-events-config`` publishes what its prefix cache holds on a ZeroMQ PUB
socket, one batch per scheduler step with a sequence number (the format: :mod:`recipe.serve.kv_wire`).
Its ROUTER replay socket answers a request ``(b"", start seq as 8 bytes big-endian)`` with every
batch it still buffers from that sequence number on, as ``(b"", topic, seq, payload)``, then
``(b"", b"", -1 as 8 bytes, b"")``. Source: vLLM 0.32 ``vllm/distributed/kv_events.py``.

:class:`KVEventSubscriber` follows one replica: a SUB socket (``zmq.asyncio``, no thread), a
DEALER to the replay socket, and a socket monitor for (re)connections. The replica's blocks are
written to the prefix index (memory or Redis, so every frontend sees them) under
:data:`EVENTS_NAMESPACE`, keyed by the event hash's 8 bytes (:func:`block_key`), exactly as the
engine holds them:

- a sequence gap is filled from the replay socket; a gap it cannot fill, a malformed batch, an
  ``AllBlocksCleared`` or a (re)connection drops every entry of the replica (a *resync*) and the
  index follows the events from there on. Applying any unbroken suffix of the event history to an
  empty index gives a subset of what the engine holds, so the index under-reports after a resync
  and never claims a block the engine does not hold;
- on connecting it asks the replay socket for everything from sequence 0, so a subscriber that
  joins a young engine (its replay buffer, vLLM's ``buffer_steps``, still holds the whole history)
  starts exact;
- only blocks of the engine's prefix cache count: medium ``GPU`` (or none) and the first KV-cache
  group; at most ``max_blocks`` per replica are indexed (past it new blocks are not, and counted);
- a large batch (over 64 KiB of msgpack: tens of thousands of blocks) is decoded and applied to the
  replica's block set in a worker thread, and any batch's index writes go in slices of 2,048 keys
  (the drops first), so no batch holds the event loop for long.

A replica running vLLM's data parallelism (``--data-parallel-size N``) has one cache per rank, and
each rank publishes its own on the configured ports plus its rank, its batches naming the rank
(``data_parallel_rank``). Its spec says so (``dp_size=N``, :attr:`KVEventsSource.ranks`): the pool
follows each rank with a subscriber of its own (index field ``<replica>@dp<rank>``) and sends a
request to the rank that holds its longest prefix (vLLM's ``X-data-parallel-rank`` header). A batch
naming another rank than its socket's, or an engine whose ``/metrics`` show more ranks than its spec
names, leaves the replica on the estimate (logged once): the events followed would be only some of
the caches the engine might run a request on.

The root blocks an engine reports are checked against recipe's vLLM-identical keys
(:mod:`recipe.cache.keys`, scheme ``vllm`` with the source's hash seed and vLLM 0.32's tagged extra
keys: ``("cache_salt", salt)``): a replica whose hashes do not match (another
``--prefix-caching-hash-algo`` than ``sha256_cbor``, another ``PYTHONHASHSEED``) is logged once and
routed on the estimate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from recipe.cache.keys import KeySpec, block_keys
from recipe.serve.kv_wire import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventBatch,
    MalformedBatch,
    ReplicaBlocks,
    block_key,
    decode_batch,
)

# The event batch's wire types and decoder live in recipe.serve.kv_wire.
__all__ = [
    "EVENTS_NAMESPACE",
    "DEFAULT_HASH_SEED",
    "KVEventsSource",
    "offset_endpoint",
    "BlockSink",
    "MemorySink",
    "RedisSink",
    "sink_for",
    "KVEventSubscriber",
    "require_fleet",
]

_log = logging.getLogger(__name__)

#: The prefix-index namespace of event-fed entries (field: replica name; key: :func:`block_key`).
EVENTS_NAMESPACE = "recipe:kv:vllm-events/1"

#: vLLM's ``NONE_HASH`` seed for ``sha256`` / ``sha256_cbor`` when ``PYTHONHASHSEED`` is unset (0.32).
DEFAULT_HASH_SEED = "vllm-none-hash"

_END_SEQ = -1

#: Payloads longer than this (bytes) are decoded, and applied to the replica's block set, in a worker
#: thread: a batch of tens of thousands of blocks takes a large part of a second in Python.
_LARGE_PAYLOAD = 64 * 1024
#: Index writes of one batch go in slices of this many keys, the event loop free between them.
_SLICE = 2048


@dataclass(frozen=True, slots=True)
class KVEventsSource:
    """Where a replica publishes its KV events (an engine spec's ``kv_events=`` and friends).

    Attributes:
        endpoint: the PUB socket, ``tcp://HOST:PORT`` (vLLM's ``endpoint``, bound there as ``tcp://*:PORT``).
        replay: the ROUTER replay socket (vLLM's ``replay_endpoint``), or None: gaps then resync.
        topic: the topic the engine publishes under (vLLM's ``topic``; default ``""``).
        hash_seed: the engine's ``PYTHONHASHSEED`` (vLLM 0.32 without it: ``vllm-none-hash``),
            for recipe's vLLM keys of a prompt.
        ranks: the replica's data-parallel ranks (vLLM's ``--data-parallel-size``): rank r publishes
            its own cache on the endpoints offset by r (:meth:`for_rank`).

    Raises:
        ValueError: an endpoint that is not ``tcp://``, ``ipc://`` or ``inproc://``; ``ranks`` below 1,
            or above 1 with an ``ipc://`` endpoint (vLLM cannot offset one per rank).
    """

    endpoint: str
    replay: str | None = None
    topic: str = ""
    hash_seed: str = DEFAULT_HASH_SEED
    ranks: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise ValueError(f"data-parallel ranks must be an int >= 1, got {self.ranks!r}")
        for name in ("endpoint", "replay"):
            value = getattr(self, name)
            if value is not None and not value.startswith(("tcp://", "ipc://", "inproc://")):
                raise ValueError(f"kv events {name} {value!r}: want tcp://HOST:PORT (or ipc:// / inproc://)")
            if value is not None and self.ranks > 1 and value.startswith("ipc://"):
                raise ValueError(f"kv events {name} {value!r}: a replica of {self.ranks} data-parallel ranks publishes "
                                 "on one tcp:// port per rank (vLLM offsets the port by the rank), not on ipc://")

    def for_rank(self, rank: int) -> KVEventsSource:
        """The source of data-parallel rank ``rank`` alone: both endpoints offset as vLLM 0.32's
        ``ZmqEventPublisher.offset_endpoint_port`` offsets the ones it binds — a ``tcp://`` port plus
        ``rank`` (a port of 0 unchanged), an ``inproc://`` name with ``_dp<rank>`` appended; rank 0
        the endpoints themselves."""
        return replace(self, endpoint=offset_endpoint(self.endpoint, rank),
                       replay=None if self.replay is None else offset_endpoint(self.replay, rank), ranks=1)


def offset_endpoint(endpoint: str, rank: int) -> str:
    """``endpoint`` of data-parallel rank ``rank`` (see :meth:`KVEventsSource.for_rank`)."""
    if rank == 0:
        return endpoint
    if endpoint.startswith("inproc://"):
        return f"{endpoint}_dp{rank}"
    head, _, port = endpoint.rpartition(":")
    if endpoint.startswith("tcp://") and port.isdigit() and int(port) != 0:
        return f"{head}:{int(port) + rank}"
    return endpoint


def require_fleet() -> None:
    """Check that pyzmq and msgpack are installed.

    Raises:
        ImportError: one is missing; the message names the ``dsrecipe[fleet]`` extra.
    """
    try:
        import msgpack  # noqa: F401
        import zmq  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"KV events need pyzmq and msgpack ({exc.name} is missing): "
                          "pip install 'dsrecipe[fleet]' (or 'pyzmq msgpack')") from exc


# --------------------------------------------------------------------------- where the blocks go


class BlockSink(Protocol):
    """Where a subscriber writes a replica's blocks (blocking calls: run in a worker thread for Redis)."""

    blocking: bool

    def update(self, replica: str, added: Sequence[bytes], dropped: Sequence[bytes]) -> None:
        """The replica now also holds ``added`` and no longer holds ``dropped``."""

    def clear(self, replica: str, held: Sequence[bytes]) -> None:
        """The replica holds nothing (``held``: what this process knew it held)."""


class MemorySink:
    """Blocks into a :class:`~recipe.cache.index.MemoryPrefixIndex` (this process's routing only).
    Entries never expire; the index's own LRU bound may drop some (an under-report, never a wrong hit)."""

    blocking = False

    def __init__(self, index: Any, ns: str = EVENTS_NAMESPACE) -> None:
        self.index, self.ns = index, ns

    def update(self, replica: str, added: Sequence[bytes], dropped: Sequence[bytes]) -> None:
        """See :class:`BlockSink`."""
        if dropped:
            self.index.evict(self.ns, dropped, replica)
        if added:
            self.index.put(self.ns, added, replica, ttl=math.inf)

    def clear(self, replica: str, held: Sequence[bytes]) -> None:
        """See :class:`BlockSink`."""
        if held:
            self.index.evict(self.ns, held, replica)


class RedisSink:
    """Blocks into a :class:`~recipe.cache.index.RedisPrefixIndex`, shared by every frontend: each
    block is the index's hash ``<ns>:<key>`` with the field replica (value ``inf``: no expiry), and
    the replica's keys are also a Redis set ``<ns>|held|<replica>``, so any frontend's resync drops
    every entry of the replica, including those written by a frontend that has since stopped.
    Frontends that follow the same replica write the same entries (idempotent). Every command names
    one key, so a Redis Cluster (``redis+cluster://``) takes them.

    Raises:
        PrefixIndexUnavailable: from both methods when Redis fails.
    """

    blocking = True

    def __init__(self, index: Any, ns: str = EVENTS_NAMESPACE) -> None:
        self.index, self.ns = index, ns

    def _held(self, replica: str) -> bytes:
        return self.ns.encode("utf-8") + b"|held|" + replica.encode("utf-8")

    def _run(self, fill: Callable[[Any], None]) -> list[Any]:
        from recipe.cache.index import PrefixIndexUnavailable
        from recipe.cache.redis_client import redis_errors

        try:
            pipe = self.index.client.pipeline(transaction=False)
            fill(pipe)
            return pipe.execute()
        except redis_errors() as exc:
            raise PrefixIndexUnavailable(f"prefix index store unavailable: {type(exc).__name__}: {exc}") from exc

    def update(self, replica: str, added: Sequence[bytes], dropped: Sequence[bytes]) -> None:
        """See :class:`BlockSink` (one pipelined round trip)."""
        held = self._held(replica)
        entry = self.index.entry_name

        def fill(p: Any) -> None:
            for k in dropped:
                p.hdel(entry(self.ns, k), replica)
            if dropped:
                p.srem(held, *dropped)
            for k in added:
                p.hset(entry(self.ns, k), replica, "inf")
            if added:
                p.sadd(held, *added)

        if added or dropped:
            self._run(fill)

    def clear(self, replica: str, held: Sequence[bytes]) -> None:
        """See :class:`BlockSink`: every key in the replica's Redis set (and ``held``) loses the
        replica's field; the set is deleted."""
        name = self._held(replica)
        keys = set(held) | set(self._run(lambda p: p.smembers(name))[0])
        entry = self.index.entry_name
        batch = list(keys)

        def fill(p: Any) -> None:
            for k in batch:
                p.hdel(entry(self.ns, k), replica)
            p.delete(name)

        self._run(fill)


def sink_for(index: Any, ns: str = EVENTS_NAMESPACE) -> BlockSink:
    """The sink for a prefix index: :class:`RedisSink` for a ``RedisPrefixIndex``, else :class:`MemorySink`."""
    from recipe.cache.index import RedisPrefixIndex

    return RedisSink(index, ns) if isinstance(index, RedisPrefixIndex) else MemorySink(index, ns)


# --------------------------------------------------------------------------- the subscriber


class KVEventSubscriber:
    """Follows one replica's KV events into a :class:`BlockSink` (see the module docstring).

    Args:
        replica: the replica's name (the index field).
        source: where it publishes (:class:`KVEventsSource`).
        sink: where its blocks go (:func:`sink_for` the pool's index).
        max_blocks: blocks indexed at most for the replica.
        replay_timeout: seconds to wait for each replay answer before the gap counts as unfillable.
        hwm: the SUB socket's receive high-water mark (messages queued; past it ZeroMQ drops, and
            the sequence gap is filled from the replay socket).
        max_message_bytes: the largest message the SUB and replay sockets accept (ZeroMQ's
            ``MAXMSGSIZE``). ZeroMQ ends a connection that sends a larger one for good; the
            subscriber then starts its sockets over after ``retry_seconds`` (its batch a gap, as after
            any reconnect). With ``hwm`` it bounds what a publisher can make the subscriber queue:
            ``hwm`` x ``max_message_bytes``. vLLM's batches are one scheduler step's blocks:
            kilobytes, a megabyte or so for a very long prefill.
        on_state: called with the subscriber after its :attr:`exact` may have changed (metrics).
        rank: the data-parallel rank it follows (its batches must say so), or None: a replica
            without data-parallel ranks (rank 0's batches).

    Attributes:
        batches, resyncs: batches applied; resyncs by reason (``connect``, ``gap``, ``malformed``,
            ``cleared``, ``index``).
        mismatch: the engine's root-block hashes differ from recipe's vLLM keys (logged once).
        wrong_rank: a batch named another data-parallel rank than the one followed, or the engine
            runs more data-parallel ranks than its spec names (:meth:`engine_ranks`); logged once,
            and the replica's cache is then read from the estimate.
        index_stale: a write to the index failed; cleared by the next successful clear of the replica.
        retry_seconds: after a socket error, or that long disconnected, seconds before following
            the replica again with new sockets.
    """

    def __init__(self, replica: str, source: KVEventsSource, sink: BlockSink, *, max_blocks: int = 1 << 21,
                 replay_timeout: float = 2.0, hwm: int = 10_000, max_message_bytes: int = 16 << 20,
                 on_state: Callable[[KVEventSubscriber], None] | None = None, rank: int | None = None) -> None:
        self.replica, self.source, self.sink, self.rank = replica, source, sink, rank
        self.wrong_rank = False
        self.blocks = ReplicaBlocks(max_blocks)
        self.replay_timeout, self.hwm, self.on_state = replay_timeout, hwm, on_state
        self.max_message_bytes = max_message_bytes
        self.next_seq: int | None = None
        self.connected = False
        self.mismatch = False
        self.index_stale = False
        self.retry_seconds = 5.0
        self.verified = 0
        self.batches = 0
        self.resyncs: dict[str, int] = {}
        self._logged: set[str] = set()
        self._ctx: Any = None
        self._dealer: Any = None
        self._task: asyncio.Task[None] | None = None

    # ---- what routing reads

    @property
    def exact(self) -> bool:
        """Whether routing may read this replica's cache from the events: connected, its hashes not
        found to differ from recipe's keys, and the index not left unknown by a failed write."""
        return self.connected and not self.mismatch and not self.index_stale and not self.wrong_rank

    def engine_ranks(self, ranks: int, declared: int) -> None:
        """The engine reports ``ranks`` data-parallel engines (its ``/metrics``' ``engine`` labels) and
        its spec names ``declared``: more than declared means the events followed are only some
        ranks' caches while the engine may run a request on any rank, so the replica is read from the
        estimate (logged once: name them with ``dp_size=``)."""
        if ranks > declared and not self.wrong_rank:
            self.wrong_rank = True
            self._once("ranks", "kv events of %s: the engine runs %d data-parallel ranks, its spec names %d: add "
                       "dp_size=%d to it (recipe then follows every rank's events and sends each request to a "
                       "rank by X-data-parallel-rank); routing uses the estimate for it", self.replica, ranks,
                       declared, ranks)
            self._changed()

    @property
    def block_size(self) -> int | None:
        """The engine's tokens per block (None until its first ``BlockStored``)."""
        return self.blocks.block_size

    def lookup_keys(self, token_ids: Sequence[int], salt: str | None) -> list[bytes]:
        """The index keys of a prompt's blocks on this replica: recipe's vLLM keys (scheme ``vllm``
        with vLLM 0.32's tagged extras, the engine's block size, the source's hash seed, ``salt`` as
        ``cache_salt``), 8 bytes each; empty while the replica holds no block."""
        size = self.blocks.block_size
        if size is None or not self.blocks.held:
            return []
        spec = KeySpec("vllm", size, hash_seed=self.source.hash_seed, salt=salt, tagged_extras=True)
        return [k[-8:] for k in block_keys(token_ids, spec).keys]

    # ---- life cycle

    def start(self) -> None:
        """Start following the replica in a task of the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"kv-events {self.replica}")

    async def aclose(self) -> None:
        """Stop following (cancel the task, close the sockets); the index keeps what it holds."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._close_sockets()

    def _close_sockets(self) -> None:
        if self._dealer is not None:
            self._dealer.close(linger=0)
            self._dealer = None
        if self._ctx is not None:
            self._ctx.destroy(linger=0)
            self._ctx = None

    async def run(self) -> None:
        """Follow the replica until cancelled; never raises otherwise: a failure is logged (once
        per kind) and the replica resynced, and a socket error starts over after ``retry_seconds``."""
        while True:
            try:
                await self._follow()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # e.g. an endpoint zmq refuses: keep trying, the replica on the estimate
                self._close_sockets()
                if self.connected:
                    self.connected = False
                    self._changed()
                self._once("socket", "kv events of %s: %s: %s; retrying every %.0f s", self.replica,
                           self.source.endpoint, exc, self.retry_seconds)
                await asyncio.sleep(self.retry_seconds)

    async def _follow(self) -> None:
        import zmq
        import zmq.asyncio
        from zmq.utils.monitor import parse_monitor_message

        self._ctx = zmq.asyncio.Context()
        sub = self._ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, self.hwm)
        sub.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, self.source.topic.encode("utf-8"))
        monitor = sub.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        sub.connect(self.source.endpoint)
        poller = zmq.asyncio.Poller()
        poller.register(sub, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        lost: float | None = None  # when the connection went
        try:
            while True:
                wait = None if lost is None else max(0.0, lost + self.retry_seconds - time.monotonic())
                ready = dict(await poller.poll(None if wait is None else int(wait * 1000) + 1))
                if not ready and lost is not None and time.monotonic() >= lost + self.retry_seconds:
                    # ZeroMQ reconnects after a network error, never after a protocol error (a
                    # message over max_message_bytes): start over with new sockets
                    raise ConnectionError(f"not reconnected within {self.retry_seconds:.1f} s")
                if monitor in ready:
                    event = parse_monitor_message(await monitor.recv_multipart())["event"]
                    if event == zmq.EVENT_CONNECTED:
                        lost = None
                        await self._connected()
                    elif event == zmq.EVENT_DISCONNECTED and self.connected:
                        lost = time.monotonic()
                        self.connected = False
                        _log.warning("kv events of %s: disconnected from %s", self.replica, self.source.endpoint)
                        self._changed()
                if sub in ready:
                    await self._message(await sub.recv_multipart())
        finally:
            sub.disable_monitor()
            monitor.close(linger=0)
            sub.close(linger=0)
            self._close_sockets()

    # ---- events

    async def _connected(self) -> None:
        """(Re)connected: drop the replica's entries, then replay everything the engine still buffers."""
        _log.info("kv events of %s: connected to %s", self.replica, self.source.endpoint)
        await self._resync("connect")
        self.next_seq = None
        self.connected = True
        if self.source.replay is not None:
            await self._replay(0)
        self._changed()

    async def _message(self, frames: list[bytes]) -> None:
        if len(frames) != 3 or len(frames[1]) != 8:
            await self._bad_frames("frames", "kv events of %s: a message of %d frames (want topic, seq, payload): resynced",
                                   len(frames))
            return
        await self._batch(int.from_bytes(frames[1], "big"), frames[2], fill=True)

    async def _batch(self, seq: int, payload: bytes, fill: bool) -> None:
        """Apply batch ``seq`` in order: older ones are skipped, a gap filled from the replay socket
        (``fill``) or resynced."""
        expected = self.next_seq
        if expected is not None and seq < expected:
            return  # already applied (replayed, then received again)
        if expected is not None and seq > expected:
            if fill and self.source.replay is not None:
                await self._replay(expected)
                if self.next_seq is not None and seq < self.next_seq:
                    return
            if self.next_seq is not None and seq > self.next_seq:
                self._once("gap", "kv events of %s: batches %d..%d are lost (not in the replay buffer): resynced",
                           self.replica, self.next_seq, seq - 1)
                await self._resync("gap")
        self.next_seq = seq + 1
        large = len(payload) > _LARGE_PAYLOAD
        try:
            batch = await asyncio.to_thread(decode_batch, payload) if large else decode_batch(payload)
        except MalformedBatch as exc:
            self._once("malformed", "kv events of %s: malformed batch %d (%s): resynced", self.replica, seq, exc)
            await self._resync("malformed")
            return
        self._verify(batch)
        if batch.dp_rank is not None and batch.dp_rank != (self.rank or 0) and not self.wrong_rank:
            self.wrong_rank = True
            self._once("rank", "kv events of %s: %s publishes data-parallel rank %d's cache, not rank %d's: name the "
                       "replica's first endpoint (its rank 0) and its ranks (dp_size=N); routing uses the estimate "
                       "for it", self.replica, self.source.endpoint, batch.dp_rank, self.rank or 0)
            self._changed()
        if self.index_stale and not await self._write(self.sink.clear, self.replica, ()):
            return  # the index still cannot be cleared: nothing is applied (the state stays empty)
        self.index_stale = False
        if any(isinstance(e, AllBlocksCleared) for e in batch.events):
            self.resyncs["cleared"] = self.resyncs.get("cleared", 0) + 1
        # (the block set is this task's own: routing only reads whether it is empty and the block size)
        added, dropped = await asyncio.to_thread(self.blocks.apply, batch) if large else self.blocks.apply(batch)
        self.batches += 1
        if self.blocks.overflow:
            self._once("overflow", "kv events of %s: more than %d blocks held; the excess is not indexed",
                       self.replica, self.blocks.max_blocks)
        # a large change goes to the index in slices, the loop free between them: the drops first, so
        # the index never holds a block the engine reported gone once the adds begin
        for i in range(0, len(dropped), _SLICE):
            if not await self._write(self.sink.update, self.replica, (), dropped[i:i + _SLICE]):
                return
            if len(dropped) > _SLICE:
                await asyncio.sleep(0)
        for i in range(0, len(added), _SLICE):
            if not await self._write(self.sink.update, self.replica, added[i:i + _SLICE], ()):
                return
            if len(added) > _SLICE:
                await asyncio.sleep(0)

    async def _replay(self, start: int) -> None:
        """Ask the replay socket for every batch from ``start`` on and apply them in order; a
        request that is not answered within ``replay_timeout`` leaves the gap to :meth:`_batch`."""
        import zmq

        if self._dealer is None:
            self._dealer = self._ctx.socket(zmq.DEALER)
            self._dealer.setsockopt(zmq.LINGER, 0)
            self._dealer.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
            self._dealer.connect(self.source.replay)
        dealer = self._dealer
        await dealer.send_multipart([b"", start.to_bytes(8, "big")])
        while True:
            if not await dealer.poll(int(self.replay_timeout * 1000)):
                self._once("replay", "kv events of %s: the replay socket %s did not answer within %.1f s",
                           self.replica, self.source.replay, self.replay_timeout)
                dealer.close(linger=0)  # a late answer must not be read as the next one's
                self._dealer = None
                return
            frames = await dealer.recv_multipart()
            if len(frames) != 4 or len(frames[2]) != 8:
                await self._bad_frames("replay-frames", "kv events of %s: a replay answer of %d frames: resynced",
                                       len(frames))
                continue
            seq = int.from_bytes(frames[2], "big", signed=True)
            if seq == _END_SEQ:
                return
            if self.next_seq is None:  # the start of what the engine buffers
                self.next_seq = seq
            await self._batch(seq, frames[3], fill=False)

    async def _bad_frames(self, kind: str, msg: str, frames: int) -> None:
        """A message or replay answer of the wrong shape (``frames`` frames): logged once (``kind``,
        ``msg`` with the replica and the count), the replica resynced, and its batch sequence
        forgotten (the next batch starts it again)."""
        self._once(kind, msg, self.replica, frames)
        await self._resync("malformed")
        self.next_seq = None

    async def _resync(self, reason: str) -> None:
        """Drop every entry of the replica (see the module docstring)."""
        self.resyncs[reason] = self.resyncs.get(reason, 0) + 1
        held = self.blocks.clear()
        if self.sink.blocking or len(held) <= _SLICE:
            await self._write(self.sink.clear, self.replica, held)
            return
        for i in range(0, len(held), _SLICE):  # (a memory index, on the loop: in slices)
            if not await self._write(self.sink.clear, self.replica, held[i:i + _SLICE]):
                return
            await asyncio.sleep(0)

    async def _write(self, fn: Callable[..., None], *args: Any) -> bool:
        """Run a sink call (in a worker thread for a blocking sink); False when the index failed.
        Then what the index holds of the replica is unknown (more or less than the engine): the
        replica is not :attr:`exact` and its state is emptied until the index is cleared again."""
        from recipe.cache.index import PrefixIndexUnavailable

        try:
            if self.sink.blocking:
                await asyncio.to_thread(fn, *args)
            else:
                fn(*args)
            return True
        except PrefixIndexUnavailable as exc:
            self._once("index", "kv events of %s: the prefix index failed (%s); resyncing", self.replica, exc)
            if not self.index_stale:
                self.resyncs["index"] = self.resyncs.get("index", 0) + 1
                self.index_stale = True
                self._changed()
            self.blocks.clear()
            return False

    def _verify(self, batch: EventBatch) -> None:
        """Check root blocks without extras, or with only a cache salt, against recipe's vLLM keys."""
        if self.mismatch or self.verified >= 64:
            return
        for ev in batch.events:
            if not isinstance(ev, BlockStored) or ev.parent is not None or not ev.keys:
                continue
            extra = ev.extra_keys[0] if ev.extra_keys else None
            if extra is not None and not (len(extra) == 1 and isinstance(extra[0], str)):
                continue
            salt = extra[0] if extra else None
            spec = KeySpec("vllm", ev.block_size, hash_seed=self.source.hash_seed, salt=salt,
                           tagged_extras=True)
            ours = block_keys(ev.token_ids[: ev.block_size], spec).keys[0][-8:]
            self.verified += 1
            if ours != ev.keys[0]:
                self.mismatch = True
                self._once("mismatch", "kv events of %s: the engine's block hash %s is not recipe's %s for the same "
                           "ids: start vLLM with --prefix-caching-hash-algo sha256_cbor and the hash seed the "
                           "engine spec names (kv_hash_seed=, the engine's PYTHONHASHSEED); routing uses the "
                           "estimate for it", self.replica, ev.keys[0].hex(), ours.hex())
                self._changed()
                return

    def _changed(self) -> None:
        if self.on_state is not None:
            self.on_state(self)

    def _once(self, kind: str, msg: str, *args: Any) -> None:
        if kind not in self._logged:
            self._logged.add(kind)
            _log.warning(msg, *args)
