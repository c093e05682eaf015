"""vLLM's KV-event wire format and the blocks one replica holds (pure: no sockets, no index).

A published message is three frames ``(topic, seq, payload)``: ``seq`` an unsigned 64-bit big-endian
counter from 0 and ``payload`` a msgpack ``KVEventBatch`` ``[ts, events, data_parallel_rank]`` whose
events are ``BlockStored``, ``BlockRemoved`` and ``AllBlocksCleared``: msgspec's tagged map form
(``{"type": "BlockStored", "block_hashes": …}``, what vLLM 0.32 sends) or its array form
(``["BlockStored", …fields in order]``). Source: vLLM 0.32 ``vllm/distributed/kv_events.py``.
:func:`decode_batch` reads a payload; :class:`ReplicaBlocks` applies batches to the set of blocks a
replica holds. The subscriber is :mod:`recipe.serve.kv_events`.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BlockStored",
    "BlockRemoved",
    "AllBlocksCleared",
    "EventBatch",
    "MalformedBatch",
    "decode_batch",
    "block_key",
    "ReplicaBlocks",
]

_UINT64 = 1 << 64


# --------------------------------------------------------------------------- the wire format


class MalformedBatch(ValueError):
    """A message or batch that does not have vLLM's KV-event shape."""


@dataclass(frozen=True, slots=True)
class BlockStored:
    """Blocks the engine added to its prefix cache, in prompt order.

    Attributes:
        keys: each block's :func:`block_key` (8 bytes).
        parent: the key of the block before the first one, or None (the first is a root block).
        token_ids: the blocks' ids, ``block_size`` per block (an ``array('Q')``).
        block_size: tokens per block.
        medium: ``GPU``, ``CPU`` … or None; group: the KV-cache group index, or None.
        extra_keys: per block, the untagged extra keys vLLM publishes (LoRA name, ``(mm id,
            offset)``, cache salt, prompt-embeds digest), or None.
    """

    keys: tuple[bytes, ...]
    parent: bytes | None
    token_ids: Sequence[int]
    block_size: int
    medium: str | None = None
    group: int | None = None
    extra_keys: tuple[Any, ...] | None = None


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    """Blocks the engine evicted from its prefix cache (``keys``: :func:`block_key` each)."""

    keys: tuple[bytes, ...]
    medium: str | None = None
    group: int | None = None


@dataclass(frozen=True, slots=True)
class AllBlocksCleared:
    """The engine dropped its whole prefix cache (``/reset_prefix_cache``)."""


Event = BlockStored | BlockRemoved | AllBlocksCleared


@dataclass(frozen=True, slots=True)
class EventBatch:
    """One published batch: its time (s since the epoch), events in order, data-parallel rank."""

    ts: float
    events: tuple[Event, ...]
    dp_rank: int | None = None


def block_key(value: Any) -> bytes:
    """A published block hash as an index key: 8 bytes, big-endian — an int hash (vLLM's default,
    ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``: the digest's low 64 bits) as itself, a bytes hash
    (the full digest) as its last 8 bytes; equal to ``event_hash(key).to_bytes(8, "big")`` of
    recipe's vLLM key (:func:`recipe.cache.keys.event_hash`).

    Raises:
        MalformedBatch: neither an int in ``[0, 2**64)`` nor at least 8 bytes.
    """
    if isinstance(value, bool):
        raise MalformedBatch("a block hash is a bool")
    if isinstance(value, int):
        if not 0 <= value < _UINT64:
            raise MalformedBatch(f"block hash {value} is not a 64-bit unsigned int")
        return value.to_bytes(8, "big")
    if isinstance(value, (bytes, bytearray)) and len(value) >= 8:
        return bytes(value[-8:])
    raise MalformedBatch(f"block hash of type {type(value).__name__} (want an int or bytes)")


def _keys(value: Any) -> tuple[bytes, ...]:
    if not isinstance(value, (list, tuple)):
        raise MalformedBatch("block_hashes is not a list")
    if len(value) > 16 and bool not in set(map(type, value)):
        try:  # int hashes (vLLM's default) in C: each checked in [0, 2**64) by the array, then big-endian bytes
            packed = array("Q", value)
        except (TypeError, OverflowError):
            pass  # bytes hashes, or a malformed one: checked one by one below
        else:
            if sys.byteorder == "little":
                packed.byteswap()
            raw = packed.tobytes()
            return tuple(raw[i:i + 8] for i in range(0, len(raw), 8))
    return tuple(block_key(v) for v in value)


def _opt_str(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MalformedBatch(f"{name} is not a string")
    return value


def _opt_int(value: Any, name: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise MalformedBatch(f"{name} is not an int")
    return value


#: Field order of each event's array form (msgspec ``array_like`` with a tag first), vLLM 0.32.
_FIELDS = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
                    "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window", "locality",
                    "ownership", "session_id"),
    "BlockRemoved": ("block_hashes", "medium", "group_idx", "locality", "ownership"),
    "AllBlocksCleared": (),
}


def _fields(raw: Any) -> tuple[str, dict[str, Any]]:
    """An event's tag and fields, from its array or map form."""
    if isinstance(raw, (list, tuple)) and raw and isinstance(raw[0], str):
        tag, values = raw[0], raw[1:]
        names = _FIELDS.get(tag)
        if names is None:
            return tag, {}
        return tag, dict(zip(names, values))
    if isinstance(raw, dict) and isinstance(raw.get("type"), str):
        return raw["type"], raw
    raise MalformedBatch("an event is neither a tagged array nor a map with a type")


def _event(raw: Any) -> Event | None:
    tag, f = _fields(raw)
    if tag == "BlockStored":
        keys = _keys(f.get("block_hashes"))
        parent = f.get("parent_block_hash")
        ids = f.get("token_ids")
        size = f.get("block_size")
        try:  # (array checks each id in C: an int in [0, 2**64), or a TypeError / OverflowError)
            if not isinstance(ids, (list, tuple)):
                raise TypeError
            ids = array("Q", ids)
        except (TypeError, OverflowError):
            raise MalformedBatch("token_ids is not a list of non-negative ints") from None
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise MalformedBatch("block_size is not a positive int")
        if len(ids) != size * len(keys):
            raise MalformedBatch(f"{len(ids)} token ids for {len(keys)} blocks of {size}")
        extra = f.get("extra_keys")
        if extra is not None and (not isinstance(extra, (list, tuple)) or len(extra) != len(keys)
                                  or not all(e is None or isinstance(e, (list, tuple)) for e in extra)):
            raise MalformedBatch("extra_keys does not have one entry (a list or null) per block")
        return BlockStored(keys, None if parent is None else block_key(parent), ids, size,
                           _opt_str(f.get("medium"), "medium"), _opt_int(f.get("group_idx"), "group_idx"),
                           None if extra is None else tuple(extra))
    if tag == "BlockRemoved":
        return BlockRemoved(_keys(f.get("block_hashes")), _opt_str(f.get("medium"), "medium"),
                            _opt_int(f.get("group_idx"), "group_idx"))
    if tag == "AllBlocksCleared":
        return AllBlocksCleared()
    return None  # an event kind this version does not know: not about the prefix cache's blocks


def decode_batch(payload: bytes) -> EventBatch:
    """A msgpack ``KVEventBatch`` (``[ts, events, data_parallel_rank?]``) as an :class:`EventBatch`;
    events of kinds other than the three are skipped.

    Raises:
        MalformedBatch: not msgpack, or not that shape.
    """
    import msgpack

    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:  # ExtraData, FormatError, StackError …
        raise MalformedBatch(f"not msgpack: {type(exc).__name__}") from None
    if isinstance(raw, dict):  # a map-form batch (another encoder)
        raw = [raw.get("ts"), raw.get("events"), raw.get("data_parallel_rank")]
    if not isinstance(raw, (list, tuple)) or not 2 <= len(raw) <= 3:
        raise MalformedBatch("a batch is not [ts, events, data_parallel_rank]")
    ts, events = raw[0], raw[1]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not isinstance(events, (list, tuple)):
        raise MalformedBatch("a batch's ts is not a number or its events not a list")
    rank = _opt_int(raw[2] if len(raw) > 2 else None, "data_parallel_rank")
    out = tuple(e for e in map(_event, events) if e is not None)
    return EventBatch(float(ts), out, rank)


# --------------------------------------------------------------------------- one replica's blocks


@dataclass(slots=True)
class ReplicaBlocks:
    """The blocks one replica holds, as its events say (pure state, no I/O).

    Attributes:
        held: the :func:`block_key` of each block held.
        block_size: the engine's tokens per block (learned from ``BlockStored``; None before).
        max_blocks: at most this many blocks are held here; past it, new ones are not (and counted
            in ``overflow``).
    """

    max_blocks: int = 1 << 21
    held: set[bytes] = field(default_factory=set)
    block_size: int | None = None
    overflow: int = 0

    def apply(self, batch: EventBatch) -> tuple[list[bytes], list[bytes]]:
        """Apply a batch's events in order; returns the net change ``(added, dropped)`` keys."""
        held = self.held
        before: dict[bytes, bool] = {}
        for ev in batch.events:
            if isinstance(ev, AllBlocksCleared):
                for k in held:
                    before.setdefault(k, True)
                held.clear()
            elif not _counts(ev):
                continue
            elif isinstance(ev, BlockStored):
                self.block_size = ev.block_size
                for k in ev.keys:
                    if k not in held:
                        if len(held) >= self.max_blocks:
                            self.overflow += 1
                            continue
                        before.setdefault(k, False)
                        held.add(k)
            else:
                for k in ev.keys:
                    if k in held:
                        before.setdefault(k, True)
                        held.discard(k)
        added = [k for k, was in before.items() if not was and k in held]
        dropped = [k for k, was in before.items() if was and k not in held]
        return added, dropped

    def clear(self) -> list[bytes]:
        """Forget every block; returns the keys that were held."""
        keys = list(self.held)
        self.held.clear()
        return keys


def _counts(ev: BlockStored | BlockRemoved) -> bool:
    """Whether an event is about the engine's prefix cache: medium GPU (or none), the first group."""
    return ev.medium in (None, "GPU") and ev.group in (None, 0)
