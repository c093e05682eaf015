"""Prefix-cache keys: chained block hashes over prompt token ids, and cached-token accounting.

A prompt's ids are cut into full blocks of ``block_size`` tokens (a trailing partial block gets no
key) and each block is keyed by ``h_i = H(h_{i-1}, block_i, extra_i)`` from a root ``h_{-1}``, so a
key names the whole prefix up to its block and the longest cached prefix is the number of leading
keys a store holds. Two schemes (byte layouts in ``docs/cache-keys.md``):

* ``native`` (default) — SHA-256 over ``parent ‖ uint32-LE ids ‖ uint32-LE len(x) ‖ x`` with ``x``
  the canonical CBOR of the block's extra keys (empty when none); the root binds the scheme version,
  model, tokenizer fingerprint, block size and tenant salt. ``native-xxh3`` is the same layout under
  XXH3-128 (16-byte keys), for routing only.
* ``vllm`` — vLLM v1 ``sha256_cbor``: ``sha256(cbor((parent, tuple(ids), extra_keys)))`` with the
  root ``sha256(cbor(PYTHONHASHSEED))`` and vLLM's extra keys (LoRA name on every block,
  ``(mm identifier, offset in block)`` for multimodal items overlapping the block, ``cache_salt`` on
  the first block only, prompt-embeds digests), built without cbor2 and byte-identical to it
  (long prompts are encoded with numpy when it is installed; optional, same bytes without it).

Keys are computed incrementally with :class:`KeyChain` (append ids, get the new full-block keys).
The SHA-256 chains (``native`` and ``vllm``) run in C (``recipe.cache._chainhash``, OpenSSL's SHA-256)
when that optional extension was compiled at install, else in the Python chains below: same keys
either way (:data:`ACCELERATED` tells which is in use).
"""

from __future__ import annotations

import functools
import hashlib
import operator
import struct
import sys
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Callable

import xxhash

from recipe.cache.usage import PromptUsage, cached_prompt_tokens  # accounting, re-exported here

try:
    from recipe.cache import _chainhash
except ImportError:  # not compiled (no C compiler or OpenSSL headers at install): Python chains
    _chainhash = None

__all__ = [
    "ACCELERATED",
    "DEFAULT_BLOCK_SIZE",
    "SCHEMES",
    "KeySpec",
    "BlockExtras",
    "MultimodalItem",
    "KeySet",
    "KeyChain",
    "block_keys",
    "event_hash",
    "cbor_encode",
    "cached_prompt_tokens",
    "PromptUsage",
]

#: DeepSeek's caching unit (tokens per block); vLLM's own default is 16.
DEFAULT_BLOCK_SIZE = 64

#: True when the ``native`` and ``vllm`` chains run in the C extension ``recipe.cache._chainhash``.
ACCELERATED = _chainhash is not None

_BIG_ENDIAN = sys.byteorder == "big"
_F6 = b"\xf6"  # CBOR null: vLLM's extra_keys=None
_NO_EXTRAS = b"\x00\x00\x00\x00"  # native: uint32-LE length 0 of the extras field
_PARENT_HEAD = b"\x83\x58\x20"  # CBOR array(3), then byte string(32): the parent digest


# --------------------------------------------------------------------------- canonical CBOR


def _cbor_head(major: int, n: int) -> bytes:
    """CBOR initial byte(s) for ``major`` type with argument ``n`` in its shortest form (RFC 8949 §4.2.1)."""
    m = major << 5
    if n < 24:
        return bytes((m | n,))
    if n < 0x100:
        return bytes((m | 24, n))
    if n < 0x10000:
        return bytes((m | 25,)) + n.to_bytes(2, "big")
    if n < 0x100000000:
        return bytes((m | 26,)) + n.to_bytes(4, "big")
    if n < 1 << 64:
        return bytes((m | 27,)) + n.to_bytes(8, "big")
    raise ValueError(f"integer {n} does not fit CBOR's 64-bit argument")


def cbor_encode(obj: Any) -> bytes:
    """Canonical CBOR (RFC 8949 §4.2.1, as ``cbor2.dumps(obj, canonical=True)``) of a small value subset.

    Supports None, bool, int in ``[-2**64, 2**64)``, str (UTF-8 text), bytes/bytearray (byte string)
    and tuple/list (array) of those. Raises TypeError for other types, ValueError for larger ints.
    """
    if obj is None:
        return _F6
    if obj is True:
        return b"\xf5"
    if obj is False:
        return b"\xf4"
    if isinstance(obj, int):
        return _cbor_head(0, obj) if obj >= 0 else _cbor_head(1, -1 - obj)
    if isinstance(obj, str):
        raw = obj.encode("utf-8")
        return _cbor_head(3, len(raw)) + raw
    if isinstance(obj, (bytes, bytearray)):
        return _cbor_head(2, len(obj)) + bytes(obj)
    if isinstance(obj, (tuple, list)):
        return b"".join([_cbor_head(4, len(obj)), *map(cbor_encode, obj)])
    raise TypeError(f"cannot encode {type(obj).__name__} as a cache-key extra")


@functools.cache
def _uint_table() -> list[bytes]:
    """CBOR encodings of 0 .. 2**17-1 (covers the 129,280-id V4 vocabulary), built once (~30 ms)."""
    return (
        [bytes((i,)) for i in range(24)]
        + [bytes((0x18, i)) for i in range(24, 0x100)]
        + [b"\x19" + i.to_bytes(2, "big") for i in range(0x100, 0x10000)]
        + [b"\x1a" + i.to_bytes(4, "big") for i in range(0x10000, 1 << 17)]
    )


def _cbor_uints(ids: Sequence[int]) -> tuple[bytes, ...]:
    """Per-id CBOR encodings of non-negative ids (validated by the caller), table-driven."""
    table = _uint_table()
    try:
        if len(ids) == 1:
            return (table[ids[0]],)
        return operator.itemgetter(*ids)(table) if ids else ()
    except IndexError:  # an id beyond the table: the general (slower) encoder
        return tuple(_cbor_head(0, i) for i in ids)


# --------------------------------------------------------------------------- key parameters


@dataclass(frozen=True, slots=True)
class MultimodalItem:
    """A multimodal input occupying prompt positions ``[offset, offset + length)``.

    ``identifier`` is the engine's content hash (vLLM ``mm_feature.identifier``); every block the
    item overlaps gets the extra key ``(identifier, offset - block_start)`` (vLLM v1 order).
    """

    identifier: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class BlockExtras:
    """Per-request inputs besides token ids that change the KV cache (vLLM ``extra_keys`` sources).

    Attributes:
        lora: LoRA adapter name (vLLM >= 0.10; older releases used the int id), on every block.
        mm: multimodal items sorted by offset.
        prompt_embeds: one digest per block (index = block number) when prompt embeddings are used.
        lora_path: the LoRA adapter's path (vLLM 0.32 hashes it with the name: ``KeySpec.tagged_extras``).
    """

    lora: str | int | None = None
    mm: tuple[MultimodalItem, ...] = ()
    prompt_embeds: tuple[bytes, ...] = ()
    lora_path: str | None = None


@dataclass(frozen=True, slots=True)
class KeySpec:
    """Everything that selects a key space: scheme, block size and what the root binds.

    Attributes:
        scheme: ``"native"`` (SHA-256), ``"native-xxh3"`` (XXH3-128, routing only) or ``"vllm"``.
        block_size: tokens per block (>= 1).
        model, tokenizer: model name and tokenizer fingerprint, bound into the native root.
        salt: tenant salt: in the native root; vLLM's ``cache_salt`` (first-block extra key) in vllm
            mode. Derive it server-side from the authenticated principal. ``""`` means no salt.
        hash_seed: vllm only: the engine's ``PYTHONHASHSEED`` string (required in vllm mode; vLLM
            0.32 with ``sha256_cbor`` and no ``PYTHONHASHSEED`` uses ``"vllm-none-hash"``).
        tagged_extras: vllm only: hash each extra key tagged with its source, as vLLM 0.32 does —
            ``("lora", name, path)``, ``("mm", identifier, offset)``, ``("cache_salt", salt)``,
            ``("prompt_embeds", digest)``; False (default): bare, as earlier releases did. Without
            extras (no salt, LoRA, multimodal item or embeddings) both give the same keys.
    """

    scheme: str = "native"
    block_size: int = DEFAULT_BLOCK_SIZE
    model: str = ""
    tokenizer: str = ""
    salt: str | None = None
    hash_seed: str | None = None
    tagged_extras: bool = False

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown cache-key scheme {self.scheme!r} (choose from {', '.join(SCHEMES)})")
        if not isinstance(self.block_size, int) or not 1 <= self.block_size < 1 << 31:
            raise ValueError(f"block_size must be an int in [1, 2**31), got {self.block_size!r}")
        if self.scheme == "vllm" and self.hash_seed is None:
            raise ValueError("the vllm scheme needs hash_seed: the engine's PYTHONHASHSEED string")

    @property
    def version(self) -> str:
        """Versioned scheme name stored with every key set, e.g. ``"native-sha256/1"``."""
        return SCHEMES[self.scheme].version

    def root(self) -> bytes:
        """The parent digest of block 0 (``h_{-1}``)."""
        return SCHEMES[self.scheme].root(self)


def _lp(text: str | None) -> bytes:
    raw = (text or "").encode("utf-8")
    return struct.pack("<I", len(raw)) + raw


def _native_root(spec: KeySpec, size: int) -> bytes:
    """SHA-256 of the domain tag and length-prefixed (version, model, tokenizer, block size, salt)."""
    data = b"".join(
        (b"recipe/prefix-cache\x00", _lp(spec.version), _lp(spec.model), _lp(spec.tokenizer),
         struct.pack("<I", spec.block_size), _lp(spec.salt))
    )
    return hashlib.sha256(data).digest()[:size]


def _vllm_root(spec: KeySpec) -> bytes:
    """vLLM ``NONE_HASH = sha256_cbor(PYTHONHASHSEED)``; seed "0" gives 4e1195df…1c3e."""
    return hashlib.sha256(cbor_encode(spec.hash_seed)).digest()


# --------------------------------------------------------------------------- block chains
#
# Every chain is one Python loop of ``h = H(parent ‖ h ‖ body_i)`` over bodies prepared in bulk;
# the per-block SHA-256 call (~0.35 µs in CPython + OpenSSL 3) is the floor at small blocks, and
# turning the ids into bytes (~6 ns per id) at large ones (docs/cache-keys.md, "Measurements").


def _native_chain(new: Callable[[bytes], Any], one_shot: bool) -> Callable[..., list[bytes]]:
    """Chain runner for a native scheme: ``new(msg)`` is the digest (one_shot) or a hash object."""

    def run(parent: bytes, ids: array, block_size: int, tails: Iterable[bytes]) -> list[bytes]:
        """Chain over ``ids`` (uint32 array, whole blocks); tails = per-block extras fields."""
        if _BIG_ENDIAN:
            ids = array("I", ids)
            ids.byteswap()
        mv = memoryview(ids).cast("B")
        step = 4 * block_size
        out: list[bytes] = []
        append = out.append
        h = parent
        if one_shot:
            for off, tail in zip(range(0, len(mv), step), tails):
                h = new(h + mv[off : off + step] + tail)
                append(h)
        else:
            for off, tail in zip(range(0, len(mv), step), tails):
                h = new(h + mv[off : off + step] + tail).digest()
                append(h)
        return out

    return run


#: Prompts of at least this many ids take the numpy encoder (when numpy is installed): below it
#: numpy's fixed cost (~60 µs a call) outweighs its per-id savings (bench: crossover 4-8k ids).
NUMPY_MIN_TOKENS = 4096


@functools.cache
def _numpy() -> Any:
    """numpy if importable (imported on first use: ~0.1 s), else None (the pure encoder is used)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _vllm_chain(parent: bytes, arr: array, block_size: int, tails: list[bytes]) -> list[bytes]:
    """vLLM ``hash_block_tokens`` with ``sha256_cbor`` over whole blocks of the ids in ``arr`` (an
    array('I') or array('Q')): ``h_i = sha256(array(3) ‖ bytes(32) h_{i-1} ‖ body_i)``."""
    sha = hashlib.sha256
    out: list[bytes] = []
    append = out.append
    h = parent
    np = _numpy() if len(arr) >= NUMPY_MIN_TOKENS else None
    if np is not None:
        stream, ends = _vllm_bodies_numpy(np, arr, block_size, tails)
        start = 0
        for end in ends:
            h = sha(_PARENT_HEAD + h + stream[start:end]).digest()
            append(h)
            start = end
        return out
    it = iter(_cbor_uints(arr.tolist()))  # plain ints, whatever int-likes the caller passed
    # zip pulls block_size encodings per block from one iterator: (array head, *ids, extras).
    for body in map(b"".join, zip(repeat(_cbor_head(4, block_size)), *[it] * block_size, tails)):
        h = sha(_PARENT_HEAD + h + body).digest()
        append(h)
    return out


def _vllm_bodies_numpy(np: Any, arr: array, block_size: int, tails: list[bytes]) -> tuple[memoryview, list[int]]:
    """Every block's CBOR body (array head ‖ ids ‖ extras), concatenated, and each body's end offset.

    Vectorised: an id's encoding is ``[head byte] ‖ its big-endian value in 0/1/2/4/8 bytes`` (RFC
    8949 §4.2.1) ending at a cumulative sum of lengths, so each byte rank is one scatter into a
    zeroed buffer: value ranks from high to low, then low bytes, then head bytes (a tiny id's head
    byte is its value). A short id's "higher ranks" are zeros landing on earlier bytes that a later
    pass writes again, and ranks that are zero for every id are skipped.
    """
    nb = len(tails)
    v = np.frombuffer(arr, dtype=np.uint32 if arr.itemsize == 4 else np.uint64)
    top = int(v.max())
    ge8, ge16 = v >= 0x100, v >= 0x10000
    vbytes = ge8.view(np.uint8) + ge16.view(np.uint8)  # value bytes after the head: 0 / 1 / 2 / 4 / 8
    heads = vbytes + 0x18
    vbytes += ge16
    vbytes += 1
    if top >> 32:
        ge32 = (v >= 1 << 32).view(np.uint8)
        heads += ge32
        vbytes += 4 * ge32
    tiny = v < 24
    if tiny.any():
        vbytes -= tiny.view(np.uint8)
        np.copyto(heads, v, casting="unsafe", where=tiny)
    head = _cbor_head(4, block_size)
    hl = len(head)
    rest = tails[-1]
    tl = np.full(nb, len(rest), np.int64)
    odd = [b for b in range(nb) if tails[b] is not rest] if tails.count(rest) < nb else []
    tl[odd] = [len(tails[b]) for b in odd]
    pad = 8  # stray zeros of block 0's first ids land here, not at negative indices
    at = np.add(vbytes, 1, dtype=np.int64)  # bytes per id, plus each block's array head and the
    at[::block_size] += hl  # previous block's extras before its first id: the cumulative sum
    at[block_size::block_size] += tl[:-1]  # is then the end offset of every id's encoding
    at[0] += pad
    np.cumsum(at, out=at)
    block_end = at[block_size - 1 :: block_size] + tl
    out = np.zeros(int(block_end[-1]), np.uint8)
    byte = np.empty(len(v), np.uint8)
    back = 0  # at = end - back
    for r in range(7, 0, -1):  # byte r (bits 8r..8r+7) goes to end - 1 - r
        if top >> (8 * r):  # else it is 0 for every id: already there
            at -= 1 + r - back
            back = 1 + r
            np.right_shift(v, 8 * r, out=byte, casting="unsafe")
            out[at] = byte
    at -= 1 - back
    np.copyto(byte, v, casting="unsafe")  # the low byte
    out[at] = byte
    at -= vbytes
    out[at] = heads
    starts = block_end - tl
    starts[1:] = block_end[:-1]
    starts[0] = pad
    out[starts[:, None] + np.arange(hl)] = np.frombuffer(head, np.uint8)
    if rest:  # the common extras, only at the end of the blocks that carry them
        ends = block_end if not odd else np.delete(block_end, odd)
        out[(ends - len(rest))[:, None] + np.arange(len(rest))] = np.frombuffer(rest, np.uint8)
    for b in odd:  # blocks whose extras differ (salt, multimodal, embeds)
        out[block_end[b] - tl[b] : block_end[b]] = np.frombuffer(tails[b], np.uint8)
    return memoryview(out)[pad:], (block_end - pad).tolist()


def _native_tail(extra: tuple[Any, ...] | None) -> bytes:
    if extra is None:
        return _NO_EXTRAS
    x = cbor_encode(extra)
    return struct.pack("<I", len(x)) + x


def _vllm_tail(extra: tuple[Any, ...] | None) -> bytes:
    return cbor_encode(extra)


@dataclass(frozen=True, slots=True)
class _Scheme:
    version: str
    root: Callable[[KeySpec], bytes]
    chain: Callable[..., list[bytes]]
    tail: Callable[[tuple[Any, ...] | None], bytes]
    typecode: str  # array typecode validating ids: "I" (uint32) or "Q" (uint64, tried as "I" first)
    salt_in_root: bool
    c_chain: str | None = None  # the recipe.cache._chainhash function computing the same chain, if any


#: Scheme name -> how its keys are made.
SCHEMES: dict[str, _Scheme] = {
    "native": _Scheme("native-sha256/1", lambda s: _native_root(s, 32), _native_chain(hashlib.sha256, False),
                      _native_tail, "I", True, "native"),
    "native-xxh3": _Scheme("native-xxh3-128/1", lambda s: _native_root(s, 16),
                           _native_chain(xxhash.xxh3_128_digest, True), _native_tail, "I", True),
    "vllm": _Scheme("vllm-sha256-cbor/1", _vllm_root, _vllm_chain, _vllm_tail, "Q", False, "vllm"),
}


def _bad_ids(scheme: _Scheme, exc: Exception) -> ValueError:
    """The error for ids outside the scheme's range or not ints (``exc``: what array or C raised)."""
    return ValueError(f"token ids must be ints in [0, {'2**32' if scheme.typecode == 'I' else '2**64'}): {exc}")


def _id_array(scheme: _Scheme, ids: Sequence[int]) -> array:
    """``ids`` as an array of the scheme's typecode (uint32 first for vllm: half the memory).

    Raises:
        ValueError: an id is not an int in the scheme's range, or an id's ``__index__`` shrank the list.
    """
    try:
        try:
            return array("I", ids)
        except OverflowError:
            if scheme.typecode == "I":
                raise
            return array("Q", ids)
    except (OverflowError, TypeError) as exc:
        raise _bad_ids(scheme, exc) from None
    except IndexError:  # array() read past the end of a list an __index__ shrank
        raise ValueError("the ids changed size while being read") from None


def _block_extra(extras: BlockExtras | None, salt: str | None, start: int, end: int, index: int,
                 tagged: bool = False) -> tuple | None:
    """vLLM ``generate_block_hash_extra_keys`` order: LoRA, multimodal, cache_salt (block 0), embeds;
    ``tagged``: each with its source's tag first (vLLM 0.32)."""
    keys: list[Any] = []
    if extras is not None:
        if extras.lora is not None:
            keys.append(("lora", extras.lora, extras.lora_path) if tagged else extras.lora)
        keys.extend(("mm", m.identifier, m.offset - start) if tagged else (m.identifier, m.offset - start)
                    for m in extras.mm if m.offset < end and m.offset + m.length > start)
    if salt and start == 0:
        keys.append(("cache_salt", salt) if tagged else salt)
    if extras is not None and index < len(extras.prompt_embeds):
        keys.append(("prompt_embeds", extras.prompt_embeds[index]) if tagged else extras.prompt_embeds[index])
    return tuple(keys) if keys else None


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True, slots=True)
class KeySet:
    """Keys of a prompt's full blocks, with the scheme version and block size they belong to."""

    scheme: str
    block_size: int
    keys: tuple[bytes, ...]

    def hex(self) -> list[str]:
        """The keys as lowercase hex digests."""
        return [k.hex() for k in self.keys]

    def to_json(self) -> dict[str, Any]:
        """``{"scheme", "block_size", "keys": [hex, ...]}``."""
        return {"scheme": self.scheme, "block_size": self.block_size, "keys": self.hex()}


@dataclass(slots=True)
class KeyChain:
    """Incremental block keys of one request: :meth:`extend` with ids, get the new full-block keys.

    Feeding a prompt at once or token by token during decode gives the same keys. Calls from
    several threads are serialised (the keys are those of some serial order of the calls).
    """

    spec: KeySpec
    extras: BlockExtras | None = None
    keys: list[bytes] = field(default_factory=list)
    _pending: list[int] = field(default_factory=list, repr=False)
    _parent: bytes = field(default=b"", repr=False)
    _lock: Any = field(default_factory=threading.RLock, repr=False, compare=False)
    _extending: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._parent = self.spec.root()

    @property
    def num_tokens(self) -> int:
        """Ids fed so far (keyed blocks plus the pending partial block)."""
        return len(self.keys) * self.spec.block_size + len(self._pending)

    def extend(self, token_ids: Iterable[int]) -> list[bytes]:
        """Append ids; returns the keys of the blocks they complete (possibly none).

        Raises:
            ValueError: an id is not an int in ``[0, 2**32)`` (native) / ``[0, 2**64)`` (vllm), or the
                list was resized while being read (by an id's ``__index__``); the chain is unchanged.
            RuntimeError: an id's ``__index__`` called ``extend`` on this same chain.
        """
        with self._lock:  # one extend at a time: each builds on the previous one's last key
            if self._extending:
                raise RuntimeError("KeyChain.extend was called again from inside itself (an id's __index__)")
            self._extending = True
            try:
                return self._extend(token_ids)
            finally:
                self._extending = False

    def _extend(self, token_ids: Iterable[int]) -> list[bytes]:
        scheme = SCHEMES[self.spec.scheme]
        # read-only from here on: a caller's list is used as it is (a subclass is copied)
        ids = token_ids if type(token_ids) is list else list(token_ids)
        b = self.spec.block_size
        if len(self._pending) + len(ids) < b:  # no block completes (decode): check the new ids only
            self._pending += _id_array(scheme, ids).tolist()
            return []
        if self._pending:
            ids = self._pending + ids
        n_full = len(ids) // b * b  # >= b here
        tails = self._tails(scheme, len(self.keys), n_full // b)
        c_chain = getattr(_chainhash, scheme.c_chain) if _chainhash is not None and scheme.c_chain else None
        if c_chain is not None:  # validates (and reads) the full blocks' ids itself
            try:
                new = c_chain(self._parent, ids, b, tails)
            except (OverflowError, TypeError) as exc:
                raise _bad_ids(scheme, exc) from None
            # checked after the chain: an id's __index__ may have changed the partial block meanwhile
            pending = _id_array(scheme, ids[n_full:]).tolist()
        else:
            arr = _id_array(scheme, ids)
            pending = arr[n_full:].tolist()
            new = scheme.chain(self._parent, arr[:n_full] if n_full < len(arr) else arr, b, tails)
        self._pending = pending
        self._parent = new[-1]
        self.keys.extend(new)
        return new

    def _tails(self, scheme: _Scheme, first: int, count: int) -> list[bytes]:
        salt = None if scheme.salt_in_root else self.spec.salt
        b = self.spec.block_size
        ex = self.extras
        tag = self.spec.tagged_extras
        if ex is None or (not ex.mm and not ex.prompt_embeds):  # constant after block 0
            head = scheme.tail(_block_extra(ex, salt, first * b, first * b + b, first, tag))
            rest = scheme.tail(_block_extra(ex, None, b, 2 * b, 1, tag))
            return [head] + [rest] * (count - 1)
        return [scheme.tail(_block_extra(ex, salt, i * b, i * b + b, i, tag)) for i in range(first, first + count)]


def block_keys(token_ids: Sequence[int], spec: KeySpec = KeySpec(), extras: BlockExtras | None = None) -> KeySet:
    """Keys of every full block of ``token_ids`` under ``spec`` (see :class:`KeyChain` for errors)."""
    kc = KeyChain(spec, extras)
    kc.extend(token_ids)
    return KeySet(spec.version, spec.block_size, tuple(kc.keys))


def event_hash(key: bytes) -> int:
    """vLLM KV-event block hash: the low 64 bits of the digest, read big-endian (its last 8 bytes)."""
    return int.from_bytes(key[-8:], "big")
