"""A vocabulary's merged BPE ranks: read from a HF ``tokenizer.json`` (:func:`parse`) and cached on
disk, keyed by the SHA-256 of that file (:func:`load`, :func:`store`).

Turning a 6 MB ``tokenizer.json`` into tiktoken ranks takes about 0.3–0.5 s (JSON parse, byte-level
decoding of 128k pieces); reading the ranks back from this cache takes a few tens of ms. tiktoken
caches its own encodings the same way (a file per source, named by a hash, in a user cache
directory). This module knows bytes and ints only; :mod:`recipe.tokenizer` builds the vocabulary.

**Where** (:func:`cache_dir`): ``$RECIPE_CACHE_DIR`` if set (the empty string disables the cache),
else ``$XDG_CACHE_HOME/recipe``, else ``~/.cache/recipe``. One file per vocabulary:
``ranks-v1-<sha256 of tokenizer.json>.bin``.

**File format** (version 1, little-endian)::

    b"RCPRANK1" | sha256(body) (32 bytes) | body
    body   = u32 header length | header (JSON) | one section per token length
    header = {"source_sha256": hex, "n_vocab": int, "special_tokens": {spelling: id},
              "groups": [[length, count], ...]}
    section (length L, count n) = n u32 ids | n * L token bytes, sorted (the i-th token has the i-th id)

**Never a wrong vocabulary**: a file whose magic, checksum, header, sizes or source digest do not
match is :class:`CacheCorrupt` and is rebuilt by the caller; a cache file is written to a temporary
file in the same directory and moved into place with ``os.replace``, so a reader sees the old file,
the new one or none — never half of one; a cache directory that cannot be created or written only
costs the rebuild (:func:`store` returns None).

**A file's digest without reading it** (:func:`known_digest`, :func:`record_digest`): reading and
hashing a 6 MB ``tokenizer.json`` costs a new process about 12 ms, more than reading its ranks back.
So the cache also remembers, per file path, the digest of the file as it was: ``source-v1-<sha256
of the path>.json`` holds the path, its stat signature (size, modification and status-change times
in ns, inode, device — what git's index compares to skip re-hashing) and the digest. The digest is
used only while the file's signature is unchanged; any write to the file changes its status-change
time (which no user call can set back), so a changed file is read and hashed again. A digest is
not recorded for a file changed in the last :data:`RACY_SECONDS` (a write in the same clock tick
could leave the times unchanged), nor when the cache is disabled.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import struct
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

__all__ = ["TokenizerError", "parse", "piece_chunks", "lookups", "ranks_inside", "FORMAT", "CacheCorrupt", "RankTable", "cache_dir", "cache_path", "encode",
           "decode", "load", "store"]

class TokenizerError(ValueError):
    """A ``tokenizer.json`` that cannot be turned into an exact tiktoken encoding."""


def _byte_decoder() -> dict[str, int]:
    """GPT-2 byte-level alphabet: printable stand-in character -> byte value."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@functools.cache
def _byte_table() -> dict[int, str]:
    """``str.translate`` table: byte-level character -> the byte it stands for (as a latin-1 char);
    code points below 256 that are not in the alphabet map to a character latin-1 cannot encode."""
    table = {c: "\U0010ffff" for c in range(256)}
    table.update({ord(c): chr(b) for c, b in _byte_decoder().items()})
    return table


def _is_byte_level(piece: Any) -> bool:
    alphabet = _byte_decoder()
    return isinstance(piece, str) and all(c in alphabet for c in piece)


def parse(data: bytes, name: str = "tokenizer") -> tuple[dict[bytes, int], dict[str, int]]:
    """``tokenizer.json`` bytes -> (merged ranks: token bytes -> id, added tokens: spelling -> id).

    Every vocab entry that is not an added token is a byte-level BPE piece (GPT-2 alphabet) whose
    id is its merge rank. About 0.3 s for DeepSeek-V4's 128k pieces: the step the cache skips.

    Raises:
        TokenizerError: not a HF ``tokenizer.json`` with a byte-level BPE model and distinct ids.
    """
    try:
        spec = orjson.loads(data)
        model = spec["model"]
        vocab: dict[str, int] = model["vocab"]
        added = spec.get("added_tokens") or []
        if model.get("type") != "BPE":
            raise TokenizerError(f"{name}: model type {model.get('type')!r} is not BPE")
        special_tokens = {a["content"]: int(a["id"]) for a in added}
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, TokenizerError):
            raise
        raise TokenizerError(f"{name}: not a HF tokenizer.json with a BPE model ({exc})") from exc
    special_ids = set(special_tokens.values())
    table = _byte_table()
    ranks: dict[bytes, int] = {}
    try:
        for piece, tid in vocab.items():
            if tid not in special_ids:
                ranks[piece.translate(table).encode("latin-1")] = tid
    except (UnicodeEncodeError, AttributeError, TypeError):
        bad = next(p for p, t in vocab.items() if t not in special_ids and not _is_byte_level(p))
        raise TokenizerError(f"{name}: vocab entry {bad!r} (id {vocab[bad]}) is not a byte-level string") from None
    if any(type(t) is not int or t < 0 for t in ranks.values()) or len(set(ranks.values())) != len(ranks):
        raise TokenizerError(f"{name}: vocab ids must be distinct non-negative integers")
    return ranks, special_tokens


# --------------------------------------------------------------------------------------------
# The ranks a text can use (the tokenizer's small-text path)
# --------------------------------------------------------------------------------------------

#: Unicode White_Space: what ``\\s`` matches in tiktoken's regex engine.
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: Before a space that follows a character outside White_Space: a boundary of every piece of
#: DeepSeek's pre-tokenizer pattern (``recipe.tokenizer.V4_PAT_STR``), where whitespace is only a
#: piece's optional first character or the whole piece. A vocabulary with another pattern must show
#: the same property before it uses :func:`piece_chunks`.
_CHUNK_SPLIT = re.compile(f"(?<![{_WHITE_SPACE}])(?= )")


def piece_chunks(texts: Iterable[str]) -> set[bytes]:
    """UTF-8 chunks of ``texts`` that each hold whole pre-tokenizer pieces (split before a space that
    follows a non-space character). Lone surrogates are first replaced as tiktoken replaces them."""
    out: set[bytes] = set()
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        out.update(c.encode("utf-8") for c in _CHUNK_SPLIT.split(text) if c)
    return out


def lookups(chunks: Iterable[bytes], longest: int) -> int:
    """How many substrings :func:`ranks_inside` looks up for ``chunks`` (tokens up to ``longest`` bytes)."""
    return sum(len(c) * min(len(c), longest) for c in chunks)


def ranks_inside(chunks: Iterable[bytes], longest: int, get: Callable[[bytes], int | None]) -> dict[bytes, int]:
    """Every rank (``get(token)``: its id or None) that is a substring of a chunk.

    Byte-level BPE looks up only substrings of one pre-tokenized piece (the whole piece, then merges
    of adjacent parts), so an encoding with these ranks and the same pattern gives the full
    vocabulary's ids for any text whose chunks were given.
    """
    found: dict[bytes, int] = {}
    for chunk in chunks:
        n = len(chunk)
        for i in range(n):
            for j in range(i + 1, min(n, i + longest) + 1):
                rank = get(chunk[i:j])
                if rank is not None:
                    found[chunk[i:j]] = rank
    return found


# --------------------------------------------------------------------------------------------
# The cache
# --------------------------------------------------------------------------------------------

#: File format version; part of the file name, so a new format never reads an old file.
FORMAT = 1
_MAGIC = b"RCPRANK1"
_HEAD = len(_MAGIC) + 32


class CacheCorrupt(ValueError):
    """A cache file that is not a complete, intact cache of the expected vocabulary."""


def cache_dir() -> Path | None:
    """The cache directory (not created here), or None when caching is disabled.

    ``$RECIPE_CACHE_DIR`` (empty: disabled) > ``$XDG_CACHE_HOME/recipe`` > ``~/.cache/recipe``.
    Read from the environment on every call (it is called once per vocabulary and process).
    """
    explicit = os.environ.get("RECIPE_CACHE_DIR")
    if explicit is not None:
        return Path(explicit).expanduser() if explicit else None
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "recipe"
    return Path.home() / ".cache" / "recipe"


def cache_path(source_sha256: str, directory: Path) -> Path:
    """The file that caches the vocabulary whose ``tokenizer.json`` has digest ``source_sha256``."""
    return directory / f"ranks-v{FORMAT}-{source_sha256}.bin"


def _u32(values: list[int]) -> bytes:
    a = array("I", values)
    if a.itemsize != 4:  # pragma: no cover - every supported platform has a 4-byte unsigned int
        a = array("L", values)
    if sys.byteorder == "big":  # pragma: no cover
        a.byteswap()
    return a.tobytes()


def _from_u32(data: bytes) -> list[int]:
    a = array("I")
    a.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover
        a.byteswap()
    return a.tolist()


def encode(source_sha256: str, ranks: Mapping[bytes, int], special_tokens: Mapping[str, int]) -> bytes:
    """The cache file's bytes for ``ranks`` (token bytes -> id) and ``special_tokens`` (checked
    by the caller: distinct ids, ``n_vocab`` = largest id + 1)."""
    groups: dict[int, list[bytes]] = {}
    for token in ranks:
        groups.setdefault(len(token), []).append(token)
    lengths = sorted(groups)
    n_vocab = max(max(ranks.values(), default=-1), max(special_tokens.values(), default=-1)) + 1
    header = orjson.dumps({
        "source_sha256": source_sha256,
        "n_vocab": n_vocab,
        "special_tokens": dict(special_tokens),
        "groups": [[n, len(groups[n])] for n in lengths],
    })
    parts = [len(header).to_bytes(4, "little"), header]
    for n in lengths:
        tokens = sorted(groups[n])  # sorted: looked up in place by binary search (RankTable.get)
        parts.append(_u32([ranks[t] for t in tokens]))
        parts.append(b"".join(tokens))
    body = b"".join(parts)
    return _MAGIC + hashlib.sha256(body).digest() + body


class RankTable:
    """The merged ranks of a verified cache file, read in place.

    :meth:`get` looks one token up by binary search in its length's sorted section (a few µs, no
    dict built: a short-lived process that encodes a few short texts needs a few dozen lookups);
    :meth:`to_dict` builds the whole ``bytes -> id`` dict (≈ 40 ms for 128k ranks) for tiktoken.

    Attributes:
        special_tokens: added-token spelling -> id.
        n_vocab: number of ids (largest id + 1), as recorded when the file was written.
        n_ranks: number of ranks.
        max_len: length of the longest token, in bytes.
    """

    __slots__ = ("_data", "_sections", "special_tokens", "n_vocab", "n_ranks", "max_len")

    def __init__(self, data: bytes, sections: dict[int, tuple[int, int]], special_tokens: dict[str, int],
                 n_vocab: int) -> None:
        self._data = data
        self._sections = sections  # token length -> (offset of its ids, count); tokens follow the ids
        self.special_tokens = special_tokens
        self.n_vocab = n_vocab
        self.n_ranks = sum(count for _, count in sections.values())
        self.max_len = max(sections, default=0)

    def count(self, length: int) -> int:
        """Number of tokens of ``length`` bytes."""
        return self._sections.get(length, (0, 0))[1]

    def get(self, token: bytes) -> int | None:
        """The id of ``token``, or None if it is not a rank."""
        n = len(token)
        section = self._sections.get(n)
        if section is None:
            return None
        ids, count = section
        data, base = self._data, ids + 4 * count
        lo, hi = 0, count
        while lo < hi:
            mid = (lo + hi) // 2
            at = base + mid * n
            probe = data[at:at + n]
            if probe < token:
                lo = mid + 1
            elif probe > token:
                hi = mid
            else:
                return int.from_bytes(data[ids + 4 * mid:ids + 4 * mid + 4], "little")
        return None

    def to_dict(self) -> dict[bytes, int]:
        """Every rank as a ``bytes -> id`` dict (tiktoken's ``mergeable_ranks``)."""
        data = self._data
        ranks: dict[bytes, int] = {}
        for length, (ids, count) in self._sections.items():
            base = ids + 4 * count
            # one C-level split of the section into its fixed-length tokens
            ranks.update(zip(struct.unpack_from(f"{length}s" * count, data, base), _from_u32(data[ids:base])))
        return ranks


def decode(data: bytes, source_sha256: str) -> RankTable:
    """The :class:`RankTable` of a cache file's bytes (verified whole, read lazily).

    Raises:
        CacheCorrupt: wrong magic, checksum mismatch (corrupt or truncated), a malformed header,
            sizes that do not add up, or a cache of another ``tokenizer.json`` (stale).
    """
    if len(data) < _HEAD + 4 or not data.startswith(_MAGIC):
        raise CacheCorrupt("not a rank cache file (bad magic or too short)")
    body = memoryview(data)[_HEAD:]
    if hashlib.sha256(body).digest() != data[len(_MAGIC):_HEAD]:
        raise CacheCorrupt("checksum mismatch (corrupt or truncated)")
    size = int.from_bytes(body[:4], "little")
    try:
        header = orjson.loads(body[4:4 + size])
        source, n_vocab = header["source_sha256"], header["n_vocab"]
        special_tokens, groups = header["special_tokens"], header["groups"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise CacheCorrupt(f"malformed header ({exc})") from None
    if source != source_sha256:
        raise CacheCorrupt(f"cache of another tokenizer.json ({source!r})")
    if not isinstance(special_tokens, dict) or not isinstance(groups, list) or type(n_vocab) is not int:
        raise CacheCorrupt("malformed header")
    pos = _HEAD + 4 + size
    sections: dict[int, tuple[int, int]] = {}
    for group in groups:
        if not (isinstance(group, list) and len(group) == 2 and all(type(x) is int and x >= 0 for x in group)):
            raise CacheCorrupt("malformed header")
        length, count = group
        end = pos + (4 + length) * count
        if length < 1 or length in sections or end > len(data):
            raise CacheCorrupt("section sizes exceed the file")
        sections[length] = (pos, count)
        pos = end
    if pos != len(data):
        raise CacheCorrupt("section sizes do not add up")
    return RankTable(bytes(data), sections, special_tokens, n_vocab)


def load(source_sha256: str, directory: Path | None) -> RankTable | None:
    """The cached :class:`RankTable` of the ``tokenizer.json`` with digest ``source_sha256``, or
    None when there is no cache (disabled, no file, unreadable).

    Raises:
        CacheCorrupt: the file exists but is not an intact cache of that vocabulary.
    """
    if directory is None:
        return None
    try:
        data = cache_path(source_sha256, directory).read_bytes()
    except OSError:
        return None
    return decode(data, source_sha256)


def store(source_sha256: str, ranks: Mapping[bytes, int], special_tokens: Mapping[str, int],
          directory: Path | None) -> Path | None:
    """Write the cache file atomically (temporary file + ``os.replace``); the path written, or None
    when caching is disabled or the directory cannot be created or written (never raises OSError)."""
    if directory is None:
        return None
    return _write(cache_path(source_sha256, directory), encode(source_sha256, ranks, special_tokens))


def _write(target: Path, data: bytes) -> Path | None:
    """``data`` into ``target`` atomically (temporary file in the same directory + ``os.replace``),
    creating the directory; None when that fails (never raises OSError)."""
    import tempfile  # only a process that writes the cache

    directory = target.parent
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
        return target
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None


# --------------------------------------------------------------------------------------------
# Source digests: a file's SHA-256 without reading it, while the file is unchanged
# --------------------------------------------------------------------------------------------

#: A file changed less than this many seconds ago gets no recorded digest (see the module doc).
RACY_SECONDS = 2.0


def digest_path(source: str, directory: Path) -> Path:
    """The file that remembers the digest of the file at the absolute path ``source``."""
    key = hashlib.sha256(os.fsencode(source)).hexdigest()[:32]
    return directory / f"source-v{FORMAT}-{key}.json"


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def known_digest(source: str, st: os.stat_result, directory: Path | None) -> str | None:
    """The SHA-256 (hex) recorded for the file at absolute path ``source`` whose ``os.stat`` is ``st``,
    or None: nothing recorded, the cache disabled or unreadable, or a record of the file as it was
    before (another size, time, inode or device). A damaged record counts as none."""
    if directory is None:
        return None
    try:
        record = orjson.loads(digest_path(source, directory).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("path") != source or record.get("stat") != _signature(st):
        return None
    digest = record.get("sha256")
    if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
        return None
    return digest


def record_digest(source: str, st: os.stat_result, digest: str, directory: Path | None) -> Path | None:
    """Remember that the file at absolute path ``source``, with ``os.stat`` ``st`` (taken before its
    bytes were read), has SHA-256 ``digest``. Returns the record's path, or None when nothing was
    written: the cache disabled or unwritable, or the file changed in the last :data:`RACY_SECONDS`."""
    if directory is None or time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_SECONDS * 1e9:
        return None
    record = {"path": source, "stat": _signature(st), "sha256": digest}
    return _write(digest_path(source, directory), orjson.dumps(record))
