"""Constrained decoding for a prepared request: its output grammar, a token-mask matcher, a check.

* :func:`output_grammar` — the :class:`~recipe.schema.turn.OutputGrammar` of the turn the model is
  about to write (Lark, structural tag, engine fields), built by the request's model family and
  cached by its key;
* :class:`OutputMatcher` — a token-mask matcher on recipe's own vocabulary (llguidance, the
  optional extra ``dsrecipe[constrain]``), for a caller without a constraining engine;
* :func:`check_output` — is a completion (token ids) inside the grammar, and if not, where not.

The prepared request is read by attribute (``encoding``, ``conversation``, ``parsing``), as every
layer below the API adapters does. The llguidance tokenizer is built from the
:class:`~recipe.tokenizer.Tokenizer` once per process and vocabulary (about 1–4 s, +84 MiB).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from recipe.conversation import Conversation, ParsingOptions
from recipe.encodings.base import Encoding
from recipe.encodings.table import get_encoding
from recipe.schema.grammar_ir import to_lark, to_structural_tag
from recipe.schema.turn import Args, OutputGrammar, turn_spec
from recipe.tokenizer import MissingSpecialTokenError, Tokenizer

if TYPE_CHECKING:
    import numpy

__all__ = ["GRAMMAR_VERSION", "GrammarCompileError", "OutputCheck", "OutputMatcher", "check_output", "grammar_for", "output_grammar"]

#: Bumped when the grammar a spec produces changes (part of every cache key).
GRAMMAR_VERSION = "3"
#: Grammars and compiled matchers kept per process (least recently used dropped first).
CACHE_SIZE = 256

_lock = threading.Lock()
_grammars: OrderedDict[str, OutputGrammar] = OrderedDict()
_compiled: OrderedDict[str, Any] = OrderedDict()
_ll_tokenizers: dict[str, Any] = {}
_default_toks: dict[str, Tokenizer] = {}


def _lru_get(cache: OrderedDict[str, Any], key: str) -> Any:
    with _lock:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
        return hit


def _lru_put(cache: OrderedDict[str, Any], key: str, value: Any) -> None:
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)


def grammar_for(
    encoding: Encoding, conversation: Conversation, parsing: ParsingOptions, tokenizer: Tokenizer, args: Args = "auto"
) -> OutputGrammar:
    """The output grammar of ``conversation``'s next turn in ``encoding``'s format (cached by key).

    Raises:
        ValueError: the encoding has no grammar builder, or ``args`` is unknown.
    """
    if encoding.grammar is None:
        raise ValueError(f"the {encoding.name} encoding has no output grammar")
    spec = turn_spec(conversation, parsing, args)
    digest = hashlib.sha256()
    for part in (GRAMMAR_VERSION, encoding.name, tokenizer.fingerprint, args):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(spec.canonical())
    key = digest.hexdigest()
    hit = _lru_get(_grammars, key)
    if hit is not None:
        return hit
    parts = encoding.grammar(spec, tokenizer)
    grammar = OutputGrammar(
        lark=to_lark(parts.grammar),
        structural_tag=orjson.dumps(to_structural_tag(parts.grammar)).decode(),
        mode=spec.mode,
        starts_in=spec.starts_in,
        key=key,
        encoding=encoding.name,
        args=args,
        tool_names=tuple(t.name for t in spec.tools),
        stop_token_ids=encoding.stop_ids(tokenizer),
        unenforced=parts.unenforced,
    )
    _lru_put(_grammars, key, grammar)
    return grammar


def output_grammar(prep: Any, args: Args = "auto", *, tokenizer: Tokenizer | None = None) -> OutputGrammar:
    """The grammar of the assistant turn ``prep``'s model is about to write, starting exactly where
    the prompt ends (inside ``<think>``, after it, or inside a tool block the prompt opened).

    Args:
        prep: a :class:`~recipe.api.prepared.PreparedRequest`.
        args: tool arguments per each tool's JSON Schema (``schema``), any well-formed parameters
            (``syntax``), or schema for ``strict`` tools and syntax for the others (``auto``).
        tokenizer: the vocabulary (default: the encoding's).

    Raises:
        ValueError: unknown ``args``; the request's encoding has no grammar builder.
    """
    enc = get_encoding(prep.encoding)
    return grammar_for(enc, prep.conversation, prep.parsing, tokenizer or _default_tokenizer(enc), args)


def _default_tokenizer(enc: Encoding) -> Tokenizer:
    """The encoding's default vocabulary, looked up once per process (``load_tokenizer`` checks the
    file on every call, which costs more than a cached grammar)."""
    hit = _default_toks.get(enc.name)
    if hit is None:
        hit = _default_toks[enc.name] = enc.tokenizer()
    return hit


# ---------------------------------------------------------------------------------------------
# llguidance
# ---------------------------------------------------------------------------------------------


def _llguidance() -> Any:
    try:
        import llguidance
    except ImportError:  # pragma: no cover - exercised where the extra is not installed
        raise ImportError("the token-mask matcher needs llguidance: pip install 'dsrecipe[constrain]' (or 'llguidance>=1.9,<2')") from None
    return llguidance


def ll_tokenizer(tokenizer: Tokenizer) -> Any:
    """The llguidance tokenizer of ``tokenizer`` (built once per process and vocabulary; EOS = the
    ``<｜end▁of▁sentence｜>`` id when the vocabulary has it)."""
    hit = _ll_tokenizers.get(tokenizer.fingerprint)
    if hit is not None:
        return hit
    _llguidance()
    from llguidance.tiktoken import lltokenizer_from_encoding

    eos = tokenizer.special_tokens.get("<｜end▁of▁sentence｜>", 1)
    with _lock:
        hit = _ll_tokenizers.get(tokenizer.fingerprint)
        if hit is None:
            hit = _ll_tokenizers[tokenizer.fingerprint] = lltokenizer_from_encoding(
                tokenizer.encoding, n_vocab=tokenizer.n_vocab, eos_token=eos
            )
    return hit


class GrammarCompileError(ValueError):
    """The request's output grammar does not compile (llguidance's first error line): a request
    value the grammar cannot express, e.g. an invalid ``response_format`` regex or schema ``pattern``
    (the request itself is accepted, as deepseek-recipe accepts it; only constraining fails)."""


def _new_matcher(grammar: OutputGrammar, tokenizer: Tokenizer) -> Any:
    """A fresh llguidance matcher (a copy of the cached compiled one)."""
    proto = _lru_get(_compiled, grammar.key)
    if proto is None:
        llg = _llguidance()
        proto = llg.LLMatcher(ll_tokenizer(tokenizer), llg.LLMatcher.grammar_from_lark(grammar.lark), log_level=0)
        if proto.is_error():
            raise GrammarCompileError(f"grammar does not compile: {_first_line(proto.get_error())}")
        _lru_put(_compiled, grammar.key, proto)
    return proto.deep_copy()


def _first_line(error: str) -> str:
    line = error.strip().splitlines()[0] if error.strip() else ""
    return line.split("; byte", 1)[0]


class OutputMatcher:
    """A token-mask matcher for one completion of ``prep`` on recipe's vocabulary (llguidance).

    Feed it the ids the model samples; ask it which ids may come next. One per completion; not
    thread-safe. ``OutputMatcher(prep)`` compiles the grammar once per key (cached), then copies it.

    Args:
        prep: the prepared request.
        args: as :func:`output_grammar`.
        tokenizer: the vocabulary (default: the encoding's).
        grammar: an :class:`OutputGrammar` to use instead of ``output_grammar(prep, args)``.

    Raises:
        ImportError: llguidance is not installed (``pip install 'dsrecipe[constrain]'``).
        ValueError: as :func:`output_grammar`; :class:`GrammarCompileError` (a ValueError) for a
            grammar that does not compile.
        MissingSpecialTokenError: the vocabulary is not the model family's (it lacks a special token
            the family's template emits: DeepSeek-V4.1 with the embedded DeepSeek-V4 vocabulary), so
            its ids and masks would not be the model's; the message says how to supply it.
    """

    __slots__ = ("_m", "_stops", "_ended", "grammar", "n_vocab", "_words")

    def __init__(self, prep: Any, args: Args = "auto", *, tokenizer: Tokenizer | None = None,
                 grammar: OutputGrammar | None = None) -> None:
        enc = get_encoding(prep.encoding)
        tok = tokenizer or _default_tokenizer(enc)
        missing = enc.missing_special(tok)
        if missing is not None:
            raise MissingSpecialTokenError(missing, enc.name, enc.vocabulary_hint)
        self.grammar = grammar or output_grammar(prep, args, tokenizer=tok)
        self._m = _new_matcher(self.grammar, tok)
        self._stops = frozenset(self.grammar.stop_token_ids)
        self._ended = False  # a stop id (EOS) was accepted
        self.n_vocab = tok.n_vocab
        self._words = (tok.n_vocab + 31) // 32

    def accept(self, token_id: int) -> bool:
        """Consume ``token_id`` if the grammar allows it; False (state unchanged) if not. A stop id
        (EOS) is allowed where the turn is complete, and ends it."""
        if self._ended:
            return False
        m = self._m
        if token_id in self._stops:
            if m.is_accepting() and not m.is_error() and m.consume_token(token_id):
                self._ended = True
                return True
            return False
        return m.try_consume_tokens([token_id]) == 1

    def accept_many(self, token_ids: Sequence[int]) -> int:
        """Consume the longest allowed prefix of ``token_ids``; returns its length."""
        if self._ended:
            return 0
        ids = list(token_ids)
        cut = next((k for k, t in enumerate(ids) if t in self._stops), len(ids))
        n = self._m.try_consume_tokens(ids[:cut])
        if n == cut < len(ids) and self.accept(ids[n]):
            n += 1
        return n

    def mask(self, out: numpy.ndarray | None = None) -> numpy.ndarray:
        """The ids allowed next as a bitmask: ``int32[ceil(n_vocab / 32)]``, bit ``i % 32`` of word
        ``i // 32`` set when id ``i`` is allowed (the llguidance / vLLM / xgrammar layout).

        Args:
            out: a C-contiguous int32 array of that length to fill (returned).
        """
        import numpy as np

        if out is None:
            out = np.empty(self._words, dtype=np.int32)
        elif out.dtype != np.int32 or out.size != self._words or not out.flags["C_CONTIGUOUS"]:
            raise ValueError(f"out must be a C-contiguous int32 array of {self._words} words")
        self._m.unsafe_compute_mask_ptr(out.ctypes.data, out.nbytes)
        return out

    def allowed(self, mask: numpy.ndarray | None = None) -> numpy.ndarray:
        """The allowed ids (sorted int array), from ``mask`` (default: a fresh :meth:`mask`)."""
        import numpy as np

        if mask is None:
            mask = self.mask()
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.n_vocab]
        return np.flatnonzero(bits)

    def forced(self) -> list[int]:
        """Ids the grammar forces next, in order (empty when there is a choice)."""
        return list(self._m.compute_ff_tokens())

    def rollback(self, n: int) -> None:
        """Undo the last ``n`` accepted ids.

        Raises:
            ValueError: more ids than were accepted.
        """
        if n and not self._m.rollback(n):
            raise ValueError(f"cannot roll back {n} tokens: {_first_line(self._m.get_error())}")
        if n:
            self._ended = False

    def reset(self) -> None:
        """Back to the start of the turn."""
        self._m.reset()
        self._ended = False

    @property
    def finished(self) -> bool:
        """True once the turn has ended (its EOS was accepted): nothing more is allowed."""
        return self._ended

    @property
    def accepting(self) -> bool:
        """True when the ids so far form a complete turn: its EOS was accepted or may come next (an
        engine that strips the EOS id reports such an output)."""
        return bool(self._m.is_accepting())

    @property
    def error(self) -> str | None:
        """Why the matcher failed (it then allows nothing), or None."""
        return _first_line(self._m.get_error()) if self._m.is_error() else None


@dataclass(frozen=True, slots=True)
class OutputCheck:
    """The result of :func:`check_output`.

    Attributes:
        ok: every id allowed and the turn complete.
        index: the first rejected id's position, or None.
        reason: why (empty when ``ok``).
        complete: the ids accepted so far end the turn.
    """

    ok: bool
    index: int | None
    reason: str
    complete: bool


def check_output(prep: Any, token_ids: Sequence[int], args: Args = "auto", *, tokenizer: Tokenizer | None = None) -> OutputCheck:
    """Check a completion (its ids, EOS included) against ``prep``'s output grammar.

    Returns an :class:`OutputCheck`: the first id the grammar rejects (position, the token's text
    and what the grammar said), or whether the turn is complete.

    Raises:
        ImportError: llguidance is not installed.
        MissingSpecialTokenError: as :class:`OutputMatcher` (a vocabulary that is not the model's).
    """
    tok = tokenizer or _default_tokenizer(get_encoding(prep.encoding))
    m = OutputMatcher(prep, args, tokenizer=tok)
    n = m.accept_many(token_ids)
    if n < len(token_ids):
        tid = int(token_ids[n])
        if m.finished:
            reason = "the turn had already ended"
        else:
            try:
                text = tok.decode([tid])
            except KeyError:
                text = "?"
            reason = f"token {tid} ({text!r}) is not allowed after {tok.decode(token_ids[max(0, n - 8):n])!r}"
        return OutputCheck(False, n, reason, m.accepting)
    if not m.accepting:
        return OutputCheck(False, None, "the output ends before the turn is complete", False)
    return OutputCheck(True, None, "", True)
