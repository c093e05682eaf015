"""What every :class:`~.output.OutputParser` for one vocabulary and one set of end ids shares.

A server builds one parser per request; the marker matchers, the recovery regexes and the
shortcut switches depend only on the vocabulary, the EOS ids and two flags of the request's
parsing options, so they are built once (:func:`parser_setup`, memoised) and shared: all of them
are immutable. Tool-call ids are drawn lazily (:class:`LazyIds`): an output without a tool call
never seeds a random generator.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recipe.encodings.deepseek_v4.call_ids import IdStream
from recipe.encodings.deepseek_v4.constants import ASSISTANT, BOS, EOS, LATEST_REMINDER, THINK_END, USER
from recipe.encodings.deepseek_v4.output_dsml import CLOSE, OPEN
from recipe.encodings.deepseek_v4.output_fastpath import bulk_patterns, plain_cache, text_cache
from recipe.encodings.deepseek_v4.output_recovery import SOFT_OPENERS, RecoveryGrammar
from recipe.output.parsing import MarkerMatcher
from recipe.tokenizer import Tokenizer

__all__ = ["ROLE_TOKENS", "VOCABULARY_ROLE_TOKENS", "LazyIds", "ParserSetup", "parser_setup"]

#: template tokens that open a turn or a prompt section: in the output they mean the model went on
#: past its own turn. They are kept as text (note ``role_token``) and nothing after one is read as
#: structure (no ``</think>`` switch, no tool call).
ROLE_TOKENS = (USER, ASSISTANT, BOS, LATEST_REMINDER)
#: role tokens of later family members, read as such only when the parser's vocabulary has them as
#: special tokens: DeepSeek-V4.1's ``<｜System｜>`` (with a V4 vocabulary it is plain text).
VOCABULARY_ROLE_TOKENS = ("<｜System｜>",)


@dataclass(frozen=True, slots=True)
class ParserSetup:
    """The immutable parts of a parser (fields named as the parser's, without the underscore).

    ``eos``: the end ids (order kept, duplicates dropped); ``eos_set`` the same as a set;
    ``eos_text``: their spellings (EOS when none is special); ``roles``: role-token spellings that
    are not end spellings (:data:`VOCABULARY_ROLE_TOKENS` only when the vocabulary has them); ``rec``: the recovery regexes (None: recovery off); the matchers of
    reasoning (with DSML openers and closers when tools are declared: a block written in the
    reasoning may be a call), literal content, content, DSML tags and the hold; ``fast_ok``: every marker starts
    with ``<`` (the one-token shortcuts may run); ``texts``: the vocabulary's id -> text cache;
    ``plains``: its id -> plain-token cache (:func:`.output_fastpath.plain_cache`);
    ``re_run`` / ``re_lex``: the bulk-invoke regexes (None when the shortcuts are off);
    ``eos_bytes``: the end ids' token bytes (None when an end id has none in the vocabulary).
    """

    eos: tuple[int, ...]
    eos_set: frozenset[int]
    eos_text: frozenset[str]
    roles: frozenset[str]
    rec: RecoveryGrammar | None
    m_reason: MarkerMatcher
    m_lit: MarkerMatcher
    m_content: MarkerMatcher
    m_dsml: MarkerMatcher
    m_hold: MarkerMatcher
    m_rvalue: MarkerMatcher
    fast_ok: bool
    texts: dict[int, str]
    plains: dict[int, Any]
    re_run: object
    re_lex: object
    eos_bytes: tuple[bytes, ...] | None = None


_SETUPS: dict[tuple[int, tuple[int, ...], bool, bool], tuple[object, ParserSetup]] = {}


def parser_setup(tokenizer: Tokenizer, eos_token_ids: Sequence[int], parse_tool_calls: bool,
                 recover: bool) -> ParserSetup:
    """The shared setup for ``tokenizer`` (by identity of its encoding), these end ids, tool-call
    parsing on or off and corrupted-spelling recovery (declared tools) on or off; memoised."""
    encoding = tokenizer.encoding
    eos = tuple(dict.fromkeys(eos_token_ids))
    key = (id(encoding), eos, parse_tool_calls, recover)
    hit = _SETUPS.get(key)
    if hit is not None and hit[0] is encoding:
        return hit[1]
    eos_list = [s for s in (tokenizer.special_name(t) for t in eos) if s] or [EOS]
    eos_text = frozenset(eos_list)
    specials = tokenizer.special_tokens
    roles = [r for r in (*ROLE_TOKENS, *(v for v in VOCABULARY_ROLE_TOKENS if v in specials)) if r not in eos_text]
    rec = RecoveryGrammar(eos_list) if recover else None
    m_content = MarkerMatcher([THINK_END, *eos_list, *roles, *((OPEN, CLOSE) if parse_tool_calls else ()),
                               *(SOFT_OPENERS if rec is not None else ())])
    m_dsml = MarkerMatcher([OPEN, CLOSE, *eos_list])
    fast_ok = all(m[0] == "<" for m in m_dsml.markers + m_content.markers)
    re_run, re_lex = bulk_patterns(tuple(sorted(eos_text))) if fast_ok else (None, None)
    setup = ParserSetup(
        eos=eos, eos_set=frozenset(eos), eos_text=eos_text, roles=frozenset(roles), rec=rec,
        m_reason=MarkerMatcher([THINK_END, *eos_list, *roles, *((OPEN, CLOSE) if recover else ())]), m_lit=MarkerMatcher([THINK_END, *eos_list, *roles]),
        m_content=m_content, m_dsml=m_dsml, m_hold=MarkerMatcher([OPEN, CLOSE, *eos_list]),
        m_rvalue=MarkerMatcher([OPEN, CLOSE, THINK_END, *sorted(eos_text), *sorted(roles)]), fast_ok=fast_ok,
        texts=text_cache(tokenizer), plains=plain_cache(tokenizer), re_run=re_run, re_lex=re_lex,
        eos_bytes=_token_bytes(tokenizer, eos))
    if len(_SETUPS) > 64:  # a process that builds many vocabularies: start over rather than grow
        _SETUPS.clear()
    _SETUPS[key] = (encoding, setup)
    return setup


def _token_bytes(tokenizer: Tokenizer, ids: tuple[int, ...]) -> tuple[bytes, ...] | None:
    """The bytes of each of ``ids`` (None when one is not in the vocabulary, or has no bytes)."""
    try:
        out = tuple(tokenizer.encoding.decode_single_token_bytes(i) for i in ids)
    except Exception:  # noqa: BLE001 - any id the vocabulary cannot decode: no byte test
        return None
    return out if all(out) else None


class LazyIds:
    """Tool-call ids from an :class:`~.call_ids.IdStream` seeded with ``seed`` (None: fresh random),
    created at the first call: the same ids as an eager stream, without seeding a generator for
    outputs that make no call."""

    __slots__ = ("_seed", "_ids")

    def __init__(self, seed: int | str | None) -> None:
        self._seed = seed
        self._ids: IdStream | None = None

    def __call__(self, index: int) -> str:
        ids = self._ids
        if ids is None:
            ids = self._ids = IdStream(random.Random(self._seed))
        return ids(index)

    def stream(self) -> IdStream:
        """The underlying id stream (created now if it was not): calling it is calling this."""
        if self._ids is None:
            self._ids = IdStream(random.Random(self._seed))
        return self._ids
