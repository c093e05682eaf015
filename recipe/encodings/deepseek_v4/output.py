"""DeepSeek-V4 output parser: completion token ids (or decoded text) -> output events, incrementally.

The parity target is deepseek-recipe 0.2.0's ``StreamProcessor`` (observed behaviour, see
docs). Format facts: reasoning runs up to ``</think>``; a tool-call block is ::

    <｜DSML｜tool_calls>
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

Rules kept from the parity target: leading ``\\n`` of reasoning (fresh reasoning only) and of
content are dropped; ``\\n`` runs just before ``</think>`` and before a tool block are dropped;
trailing newlines at the end are kept; ``</think>`` inside content is removed; a bare
``<｜DSML｜invoke …>`` (no wrapper) starts a block; unknown tool names and duplicate parameter
names are passed through; stop sequences apply to content only and cut before the match.

**Unclosed reasoning policy.** In thinking mode an output that never emits ``</think>`` stays
reasoning (content ``""``), as in the parity target: the model never said it had started its
answer, and showing chain-of-thought as the answer would be worse. The Finish event carries the
note ``unclosed_reasoning``. EOS (ids in ``eos_token_ids``, or their spelling in text) always
ends the output and never appears in any field.

**Speed.** The general path is a tag-by-tag state machine. Two shortcuts sit on top and give
exactly its events (``tests/test_output_fastpath.py`` compares them push by push): a push whose
text holds complete well-formed invokes matches them with one regex run and emits each call's
start / arguments / end at once; one-token pushes (plain text, a token completing a held DSML
tag, the ``<`` / ``｜DSML｜`` pieces of a tag) skip the scanner. ``bench/bench_stream.py``
measures both against deepseek-recipe.

**Deliberate deviations from the parity target** (each has a test):

1. Tool-call arguments are always valid JSON: a ``string="false"`` value is buffered until its
   closer and emitted raw only if it is valid JSON, else as a JSON string; a call cut short
   (max tokens, EOS, a new invoke) is closed (``"`` / ``}``) rather than left open.
2. A parameter left open is closed by the next structural DSML tag (its single trailing ``\\n``
   dropped) instead of swallowing the tag as value text.
3. No text is dropped: text after a tool block, text between invokes, inline ``<｜DSML｜``
   mentions, malformed tags and DSML inside reasoning stay content (or reasoning). Only
   whitespace between tags, the exact-format markup and the markup of recovered calls (7) are
   removed.
4. Reasoning-token counts are exact counts of the ids that start before ``</think>``.
5. EOS / configured stop-token ids end the output (the parity target prints EOS as text).
6. Stop sequences are matched on the content as the client sees it (after newline trimming
   and ``</think>`` removal).
7. Corrupted spellings are recovered, cautiously (peer failure 9; :mod:`.output_recovery`):
   doubled bars (``<｜｜DSML｜｜ …>``), ASCII or spaced bars (``< | DSML | …>``), V4.1 names with a
   leading space (``<｜DSML｜ calls>``, `` invoke``, `` parameter``), the V3.2 block name
   ``function_calls``, a block opener missing its ``>``. A call is accepted only when its invoke
   is structurally complete (opener, parameters with explicit closers, invoke closer, only
   whitespace between tags) and names a declared tool (``ParsingOptions.tool_names``); it is
   emitted whole when its invoke closes, with the note ``recovered_dsml``. Everything else
   stays content byte for byte; reasoning is never recovered, and without declared tool names
   there is no recovery. Streaming stays bounded: text from a candidate opener is held only
   while it can still be one (released as soon as its head is not a DSML tag, when an invoke or
   block closer shows the structure is broken, or after ``MAX_HOLD`` = 32768 characters). The
   parity target drops such text or returns it raw.
8. An incomplete UTF-8 sequence at the end becomes U+FFFD instead of vanishing.
9. ``parse_json_output`` (JSON-object mode) gives the same content for every chunking (the parity
   target replaces the text around the JSON by a chunking-dependent number of spaces). Rule
   (:class:`recipe.parsing.JsonObjectFilter`): when the content's first non-blank character is
   ``{`` / ``[``, or the content opens with a ```` ``` ```` / ```` ```json ```` fence line followed
   by one, only that JSON value is emitted (fence, surrounding blanks and any text after it are
   dropped; ``json_trailing_text`` when that was more than blanks and a closing fence). Otherwise
   the content is kept unchanged (``json_not_found``): prose before the JSON is not stripped
   (the target strips it, and drops content without ``{``/``[`` entirely). A value that never
   closes is kept as streamed (``json_incomplete``). Reasoning is never touched.
"""

from __future__ import annotations

import codecs
import json
import operator
import random
import re
import string
from collections.abc import Callable, Sequence
from itertools import islice
from json.encoder import encode_basestring  # type: ignore[attr-defined]

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.constants import EOS, THINK_END
from recipe.encodings.deepseek_v4.output_recovery import (
    MAX_HOLD,
    TRIGGER_SPAN,
    RecoveryGrammar,
    block_closer,
    has_trigger,
    head_state,
    params_json,
)
from recipe.parsing import JsonObjectFilter, MarkerMatcher, StopMatcher
from recipe.streaming import (
    Finish,
    OutputEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from recipe.tokenizer import Tokenizer

__all__ = ["OutputParser", "make_tool_call_id"]

_OPEN = "<｜DSML｜"
_CLOSE = "</｜DSML｜"
_OPEN_BLOCK = "<｜DSML｜tool_calls>"
_CLOSE_BLOCK = "</｜DSML｜tool_calls>"
_CLOSE_INVOKE = "</｜DSML｜invoke>"
_CLOSE_PARAM = "</｜DSML｜parameter>"
_INVOKE_RE = re.compile(r'<｜DSML｜invoke name="([^"<>\n]+)"(?: [A-Za-z_]+="[^"<>\n]*")*>')
_PARAM_RE = re.compile(r'<｜DSML｜parameter name="([^"<>\n]+)" string="(true|false)">')
#: longest tag text read while looking for its ``>``; longer means "not a tag".
_TAG_MAX = 512

# states
_REASONING, _CONTENT, _BLOCK, _INVOKE, _VALUE, _RECOVER, _DONE = range(7)
#: a handler's return value asking the driver to continue on ``_resume`` from index 0.
_SWITCH = -1
#: content markers that may start a corrupted DSML tag (recovery on): doubled / spaced / ASCII bars.
_SOFT_OPENERS = ("<｜｜", "<｜ ", "<|", "< |", "< ｜")
# tag kinds
_T_OPEN_BLOCK, _T_CLOSE_BLOCK, _T_INVOKE, _T_CLOSE_INVOKE, _T_PARAM, _T_CLOSE_PARAM, _T_OTHER = range(7)
_FIXED_TAGS = {
    _OPEN_BLOCK: _T_OPEN_BLOCK,
    _CLOSE_BLOCK: _T_CLOSE_BLOCK,
    _CLOSE_INVOKE: _T_CLOSE_INVOKE,
    _CLOSE_PARAM: _T_CLOSE_PARAM,
}
_ALNUM = string.ascii_letters + string.digits
_INF = float("inf")
_START_STATE = {
    None: _CONTENT,
    "reasoning": _REASONING,
    "reasoning_continuation": _REASONING,
    "content_continuation": _CONTENT,
}


_TEXT_CACHES: dict[int, tuple[object, dict[int, str]]] = {}
_NO_TEXTS: dict[int, str] = {}  # never written: the one-token shortcuts are off


def _text_cache(tokenizer: Tokenizer) -> dict[int, str]:
    """Per-vocabulary cache: token id -> its text, for ids whose bytes are whole UTF-8 (filled lazily)."""
    key = id(tokenizer.encoding)
    hit = _TEXT_CACHES.get(key)
    if hit is None or hit[0] is not tokenizer.encoding:
        hit = _TEXT_CACHES[key] = (tokenizer.encoding, {})
    return hit[1]


#: byte -> alphanumeric map for call ids; bytes >= 248 are dropped so every character is uniform.
_ID_MAP = bytes(_ALNUM.encode()[b % 62] if b < 248 else 0 for b in range(256))
_ID_DROP = bytes(range(248, 256))
#: byte -> digit map; bytes >= 250 are dropped.
_DIGIT_MAP = bytes(48 + b % 10 if b < 250 else 0 for b in range(256))
_DIGIT_DROP = bytes(range(250, 256))


def make_tool_call_id(rng: random.Random, index: int) -> str:
    """A deepseek-recipe-shaped call id: ``call_{index:02d}_{20 [A-Za-z0-9]}{4 digits}``.

    Characters are uniform over ``[A-Za-z0-9]`` / ``[0-9]`` (random bytes mapped modulo 62 / 10,
    bytes that would bias the map rejected); the same ``rng`` state always gives the same id.
    """
    while True:
        raw = rng.randbytes(32)
        letters = raw[:24].translate(_ID_MAP, _ID_DROP)
        digits = raw[24:].translate(_DIGIT_MAP, _DIGIT_DROP)
        if len(letters) >= 20 and len(digits) >= 4:
            return f"call_{index:02d}_{letters[:20].decode()}{digits[:4].decode()}"


_ID_PREFIX = [f"call_{i:02d}_" for i in range(100)]
_CHUNK20 = re.compile(".{20}")
_CHUNK4 = re.compile(".{4}")


class _IdStream:
    """Call ids ``call_{index:02d}_{20 [A-Za-z0-9]}{4 digits}`` drawn from buffered random bytes.

    Same alphabet and uniformity as :func:`make_tool_call_id`. Random bytes are drawn from
    ``rng`` in blocks of 32 ids, so the i-th id depends only on the seed, never on chunking.
    """

    __slots__ = ("_pool", "_rng")

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._pool: list[str] = []

    def _refill(self) -> None:
        rnd = self._rng.randbytes
        letters = ""
        while len(letters) < 640:
            letters += rnd(720).translate(_ID_MAP, _ID_DROP).decode()
        digits = ""
        while len(digits) < 128:
            digits += rnd(144).translate(_DIGIT_MAP, _DIGIT_DROP).decode()
        pool = list(map(str.__add__, _CHUNK20.findall(letters, 0, 640), _CHUNK4.findall(digits, 0, 128)))
        pool.reverse()
        self._pool = pool

    def __call__(self, index: int) -> str:
        if not self._pool:
            self._refill()
        if index < 100:
            return _ID_PREFIX[index] + self._pool.pop()
        return f"call_{index:02d}_{self._pool.pop()}"


def _reject_constant(name: str) -> None:
    raise ValueError(name)


#: one strict decoder (json.loads with options would build a new one per call)
_JSON_DECODE = json.JSONDecoder(parse_constant=_reject_constant).decode


def _is_json(raw: str) -> bool:
    """True when ``raw`` is one JSON value (surrounding JSON blanks allowed; NaN / Infinity refused)."""
    try:
        _JSON_DECODE(raw)
    except (ValueError, RecursionError):
        return False
    return True


_CLASSIFIED: dict[str, tuple[int, str, bool]] = {}


def _classify(tag: str) -> tuple[int, str, bool]:
    """(kind, name, is_string) of a complete ``<…>`` DSML tag text (memoised: tags repeat)."""
    hit = _CLASSIFIED.get(tag)
    if hit is not None:
        return hit
    kind = _FIXED_TAGS.get(tag)
    if kind is not None:
        hit = kind, "", False
    elif m := _INVOKE_RE.fullmatch(tag):
        hit = _T_INVOKE, m.group(1), False
    elif m := _PARAM_RE.fullmatch(tag):
        hit = _T_PARAM, m.group(1), m.group(2) == "true"
    else:
        hit = _T_OTHER, "", False
    if len(_CLASSIFIED) < 4096:
        _CLASSIFIED[tag] = hit
    return hit


# Bulk path: a complete, well-formed invoke (exact spelling, explicit closers, only ASCII
# whitespace between tags, values free of DSML openers/closers and EOS spellings) is matched by
# one regex and emitted at once. Anything else falls back to the tag-by-tag state machine, which
# gives the same events for these inputs (so the bulk path is an optimisation, not a rule).
_WS = "[ \t\r\n]*"
_NAME = '[^"<>\n]{1,256}'
_BULK: dict[tuple[str, ...], tuple[re.Pattern[str], re.Pattern[str]]] = {}
_HEAD_PEEK = 64
#: shortest remaining text worth a bulk match attempt (a minimal invoke is longer).
_BULK_MIN = 40
#: a JSON number or literal (the common string="false" values), skipping json.loads.
_SIMPLE_JSON = re.compile(r"[ \t\r\n]*(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)[ \t\r\n]*")


_BLOCK_END = re.compile(f"{_WS}</｜DSML｜tool_calls>")
_KEY_JSON: dict[str, str] = {}


def _key_json(key: str) -> str:
    """``"key": `` (JSON-escaped key and separator), memoised: parameter names repeat."""
    k = encode_basestring(key) + ": "
    if len(_KEY_JSON) < 4096:
        _KEY_JSON[key] = k
    return k


def _bulk_patterns(eos_texts: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(run regex, lexer regex) for values that cannot contain these EOS spellings.

    The run regex matches one or more consecutive complete invokes; the lexer's ``findall`` over
    such a run yields ``(invoke_name, key, "t" if string, value, "</" at invoke close)`` tuples.
    """
    hit = _BULK.get(eos_texts)
    if hit is None:
        bad = "|".join(["/?｜DSML｜", *(re.escape(e[1:]) for e in eos_texts)])
        value = f"[^<]*(?:<(?!{bad})[^<]*)*"  # unrolled loop: linear, no nested ambiguity
        invoke = (f'{_WS}<｜DSML｜invoke name="{_NAME}">(?:{_WS}<｜DSML｜parameter name="{_NAME}" '
                  f'string="(?:true|false)">{value}</｜DSML｜parameter>)*{_WS}</｜DSML｜invoke>')
        lexer = (f'{_WS}<｜DSML｜invoke name="({_NAME})">'
                 f'|{_WS}<｜DSML｜parameter name="({_NAME})" string="(?:(t)rue|false)">({value})</｜DSML｜parameter>'
                 f'|{_WS}(</)｜DSML｜invoke>')
        hit = _BULK[eos_texts] = (re.compile(f"(?:{invoke})+"), re.compile(lexer))
    return hit


class OutputParser:
    """Incremental DeepSeek-V4 completion parser producing :mod:`recipe.streaming` events.

    Args:
        options: how to read this completion (thinking stage, tools, stop sequences, …).
        tokenizer: the V4 tokenizer (token bytes and special-token spellings).
        tool_call_id: a callable ``index -> id``, or a seed (int/str) for reproducible
            deepseek-recipe-shaped ids, or None for fresh random ids.
        eos_token_ids: ids that end the output (EOS and any stop-token ids); they are counted as
            completion tokens but never decoded. Their spellings in text also end the output.

    Feed :meth:`push` (token ids) or :meth:`push_text` (decoded text) in any chunking, then call
    :meth:`finish`. Every call returns the new events. After the output has ended (finish, EOS,
    stop sequence) pushes are ignored and return ``[]``; :attr:`finished` tells. Never raises on
    model output; degraded output is reported in ``Finish.notes``.
    """

    def __init__(
        self,
        options: ParsingOptions,
        tokenizer: Tokenizer,
        *,
        tool_call_id: Callable[[int], str] | int | str | None = None,
        eos_token_ids: Sequence[int] = (1,),
    ) -> None:
        self._opts = options
        if callable(tool_call_id):
            self._new_id = tool_call_id
        else:
            self._new_id = _IdStream(random.Random(tool_call_id))
        self._tb = tokenizer.encoding.decode_single_token_bytes
        self._decode_bytes = tokenizer.encoding.decode_bytes
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self._texts = _text_cache(tokenizer)
        self._eos = tuple(dict.fromkeys(eos_token_ids))
        self._eos_set = frozenset(self._eos)
        eos_text = [s for s in (tokenizer.special_name(t) for t in self._eos) if s] or [EOS]
        self._eos_text = frozenset(eos_text)
        self._m_reason = MarkerMatcher([THINK_END, *eos_text])
        self._declared = frozenset(options.tool_names)
        # corrupted-spelling recovery: only when tools are declared (only declared tools are accepted)
        self._rec = RecoveryGrammar(eos_text) if options.parse_tool_calls and self._declared else None
        self._m_content = MarkerMatcher([
            THINK_END, *eos_text, *((_OPEN,) if options.parse_tool_calls else ()),
            *(_SOFT_OPENERS if self._rec is not None else ())])
        self._m_dsml = MarkerMatcher([_OPEN, _CLOSE, *eos_text])
        self._stops = StopMatcher(options.stop_sequences) if options.stop_sequences else None
        self._json = JsonObjectFilter() if options.parse_json_output else None
        self._plain = self._stops is None and self._json is None  # content goes out unchanged
        self._rbuf: list[str] = []  # recovery: held text from the candidate on (joined lazily)
        self._rws = ""  # recovery: blanks after a recovered call, before anything else
        self._rlen = 0
        self._rtail = ""  # last characters seen, to find an "invoke>" split across pushes
        self._rmore = False  # recovery phase: False = first invoke, True = after a recovered invoke
        self._rhead = False  # the held text's head was recognised (only the trigger is awaited)
        # (text, index) of a candidate just rejected: read as plain text there
        self._rec_skip: tuple[str, int] | None = None
        self._resume = ""

        stage = options.thinking_stage
        self._state = _START_STATE.get(stage, _CONTENT)
        if options.starts_in_tool_calls and options.parse_tool_calls and self._state == _CONTENT:
            self._state = _BLOCK
        self._r_lead = stage == "reasoning"  # drop leading newlines of reasoning
        self._c_lead = stage != "content_continuation"  # drop leading newlines of content
        self._r_nl = ""  # held trailing newlines of reasoning
        self._c_nl = ""  # held trailing newlines (or after-block whitespace) of content
        # blank-only pieces arriving while a run is held: queued, so a long run of newline
        # tokens costs O(1) each instead of re-copying (and re-scanning) the whole run
        self._r_q: list[str] = []
        self._c_q: list[str] = []
        self._after_block = False
        self._hold = ""  # raw text held (possible marker / unfinished tag)
        self._hold_tag = False  # the hold is a DSML tag opening waiting for its ">"
        self._fast_ok = all(m[0] == "<" for m in self._m_dsml.markers + self._m_content.markers)
        self._fast_texts = self._texts if self._fast_ok else _NO_TEXTS
        self._re_run, self._re_lex = _bulk_patterns(tuple(sorted(self._eos_text))) if self._fast_ok else (None, None)
        self._hold_pos = 0
        self._pos = 0  # chars decoded so far
        self._out: list[OutputEvent] = []
        # counting
        self._completion = 0
        self._rcount = 0
        self._rpend: list[int] = []
        self._r_limit = _INF  # start of </think> (or EOS) ending the reasoning
        # tool calls
        self._ncalls = 0
        self._call = -1  # index of the open call, -1 when none
        self._args: list[str] = []
        self._args_sent = 0  # how many of _args were emitted as deltas
        self._nparams = 0
        self._vstring = True
        self._vnl = False  # a trailing "\n" of a string value is held
        self._vbuf: list[str] = []
        self._ws = ""  # whitespace held between DSML tags
        self._ws_text = False  # text was emitted from inside the current invoke since the last tag
        self._notes: dict[str, None] = {}
        self._end: tuple[str, str | None] | None = None  # (reason, matched_stop) once ended
        self._handlers = (
            self._do_reasoning,
            self._do_content,
            self._do_block,
            self._do_invoke,
            self._do_value,
            self._do_recover,
        )

    # ------------------------------------------------------------------ public API

    @property
    def finished(self) -> bool:
        """True once the output has ended (Finish emitted); further pushes are ignored."""
        return self._state == _DONE

    def push(self, token_ids: Sequence[int]) -> list[OutputEvent]:
        """Feed completion token ids (any number). Returns the events they complete.

        An id in ``eos_token_ids`` ends the output (Finish ``stop``); ids after it are ignored.
        Raises ``KeyError`` only for an id outside the vocabulary.
        """
        n = len(token_ids)
        if n == 1:
            # Fast paths for one whole-text token (``_pos`` is only read while reasoning, so
            # the non-reasoning paths below do not maintain it).
            text = self._fast_texts.get(token_ids[0])
            if text is not None:  # (empty table while the decoder holds part of a character)
                st = self._state
                if not self._hold:
                    if "<" not in text:
                        if st == _VALUE:
                            self._completion += 1
                            if self._vstring and not self._vnl and text[-1] != "\n":
                                # a string value piece: one escaped arguments delta (nothing was pending)
                                piece = encode_basestring(text)[1:-1]
                                args = self._args
                                args.append(piece)
                                self._args_sent = len(args)
                                return [ToolCallArgumentsDelta(self._call, piece)]
                            out = self._out = []
                            self._value_text(text)
                            if self._args_sent < len(self._args):
                                self._flush_args()
                            return out
                        if st == _REASONING:
                            self._completion += 1
                            pos0 = self._pos
                            self._pos = pos0 + len(text)
                            if (text[-1] != "\n" and not self._r_nl and not self._r_q and not self._r_lead
                                    and not self._rpend):
                                self._rcount += 1  # mid-reasoning text: delivered as is
                                return [ReasoningDelta(text)]
                            out = self._out = []
                            self._emit_reasoning(text)
                            if self._rpend:
                                self._count_one(pos0)
                            else:
                                self._rcount += 1
                            return out
                        if st == _CONTENT:
                            self._completion += 1
                            if (text[-1] != "\n" and self._plain and not self._c_nl and not self._c_q
                                    and not self._c_lead and not self._after_block):
                                return [TextDelta(text)]  # mid-content text: delivered as is
                            out = self._out = []
                            self._emit_content(text)
                            if self._end is not None:
                                self._close(self._end[0])
                            return out
                        if st < _RECOVER and text.isspace():  # between tags in a block / an invoke: held, dropped at the next tag
                            self._completion += 1
                            self._ws += text
                            return []
                    elif (text == "<" or text == "</") and _BLOCK <= st <= _VALUE:
                        # the start of a DSML tag (or of an EOS spelling): held, as the scan would
                        self._hold = text
                        self._hold_tag = False
                        self._completion += 1
                        return []
                elif self._hold_tag:
                    if ">" not in text:
                        if "<" not in text and "\n" not in text and len(self._hold) + len(text) < _TAG_MAX:
                            self._hold += text
                            self._completion += 1
                            return []
                    elif _BLOCK <= st <= _VALUE:
                        out = self._tag_token(text)
                        if out is not None:
                            return out
                elif text == "｜DSML｜" and _BLOCK <= st <= _VALUE and (self._hold == "<" or self._hold == "</"):
                    self._hold += text  # now exactly an opener / closer prefix waiting for its ">"
                    self._hold_tag = True
                    self._completion += 1
                    return []
        if self._state == _DONE:
            return []
        out = self._out = []
        if n == 1:
            tid = token_ids[0]
            if tid in self._eos_set:
                self._completion += 1
                self._flush_decoder()
                if self._state != _DONE:
                    self._close(self._end[0] if self._end else "stop")
                return out
            text = self._texts.get(tid) if not self._dec.buffer else None
            if text is None:
                text = self._decode_one(tid)
            self._completion += 1
            if self._state == _REASONING:
                pos0 = self._pos
                if text:
                    self._feed(text)
                self._count_one(pos0)
            elif text:
                self._feed(text)
        else:
            cut = n
            if self._eos_set:
                for e in self._eos:
                    try:
                        k = token_ids.index(e, 0, cut)
                    except ValueError:
                        continue
                    cut = k
            ids = token_ids[:cut] if cut < n else token_ids
            self._completion += cut + (cut < n)
            if ids:
                dstate = self._dec.getstate()
                text = self._dec.decode(self._decode_bytes(list(ids)))
                self._sync_fast()
                if self._state == _REASONING:
                    pos0 = self._pos
                    if text:
                        self._feed(text)
                    self._count_many(ids, pos0, dstate)
                elif text:
                    self._feed(text)
            if cut < n and self._state != _DONE:
                self._flush_decoder()
                if self._state != _DONE:
                    self._close(self._end[0] if self._end else "stop")
        if self._end is not None and self._state != _DONE:
            self._close(self._end[0])
        if self._call >= 0:
            self._flush_args()
        if len(out) > 1:
            out = self._out = _coalesce(out)
        return out

    def _tag_token(self, text: str) -> list[OutputEvent] | None:
        """One token completing a held DSML tag inside a block; None when the general scan must decide.

        Handles the structural tags valid in the current state (invoke or block closer in a
        block, parameter or invoke closer in an invoke, parameter closer in a value) and the
        text after the ``>``, with the same events as :meth:`_dsml_step` and the state
        handlers (inlined: this runs for about one token in ten of a tool-call-heavy output).
        """
        g = text.find(">")
        if "<" in text or "\n" in text[:g] or len(self._hold) + g >= _TAG_MAX:
            return None
        tag = self._hold + text[: g + 1]
        kind, name, is_str = _classify(tag)
        st = self._state
        rest = text[g + 1:]
        if st == _VALUE:
            if kind != _T_CLOSE_PARAM:
                return None
            out = self._out = []
            self._end_value(implicit=False)
            st = self._state = _INVOKE
        elif st == _INVOKE:
            if kind == _T_PARAM:
                out = self._out = []
                k = _KEY_JSON.get(name) or _key_json(name)
                piece = (", " + k if self._nparams else k) + ('"' if is_str else "")
                self._args.append(piece)
                self._nparams += 1
                self._vstring = is_str
                self._vnl = False
                self._vbuf = []
                st = self._state = _VALUE
            elif kind == _T_CLOSE_INVOKE:
                out = self._out = []
                self._end_call()
                st = self._state = _BLOCK
            else:
                return None
        elif st == _BLOCK:
            if kind == _T_INVOKE:
                out = self._out = []
                self._start_call(name)
                st = _INVOKE
            elif kind == _T_CLOSE_BLOCK:
                out = self._out = []
                self._leave_block()
                st = _CONTENT
            else:
                return None
        else:
            return None
        self._completion += 1
        self._hold = ""
        self._ws = ""
        self._ws_text = False
        if rest:
            if st == _VALUE:
                self._value_text(rest)
            elif st == _CONTENT:  # no "<" in rest: no marker, plain content after the block
                self._emit_content(rest)
                if self._end is not None:
                    self._close(self._end[0])
            elif rest.isspace():
                self._ws = rest
            else:
                self._feed(rest)
                if self._end is not None and self._state != _DONE:
                    self._close(self._end[0])
                if self._call >= 0:
                    self._flush_args()
                if len(out) > 1:
                    out = self._out = _coalesce(out)
                return out
        if self._call >= 0:
            self._flush_args()
        return out  # start + "{" / args / args + end / content: never two mergeable deltas in a row

    def push_text(self, text: str, token_count: int = 0) -> list[OutputEvent]:
        """Feed decoded text that accounts for ``token_count`` tokens. Returns the new events.

        Reasoning tokens in text mode: the chunk's tokens count as reasoning when the chunk
        starts before ``</think>``.
        """
        if self._state == _DONE:
            return []
        out = self._out = []
        self._completion += token_count
        if self._state == _REASONING:
            pos0 = self._pos
            if text:
                self._feed(text)
            self._rpend.extend([pos0] * token_count)
            self._settle()
        elif text:
            self._feed(text)
        if self._end is not None and self._state != _DONE:
            self._close(self._end[0])
        if self._call >= 0:
            self._flush_args()
        if len(out) > 1:
            out = self._out = _coalesce(out)
        return out

    def finish(self, reason: str = "stop") -> list[OutputEvent]:
        """End of output: flush everything held back, close an open call, emit :class:`Finish`.

        ``reason`` is the backend's (``stop``, ``length``, ``content_filter``, …). Calling it
        after the output has ended returns ``[]``.
        """
        if self._state == _DONE:
            return []
        out = self._out = []
        self._flush_decoder()
        if self._state != _DONE:
            self._close(self._end[0] if self._end else reason)
        if self._call >= 0:
            self._flush_args()
        if len(out) > 1:
            out = self._out = _coalesce(out)
        return out

    def _flush_decoder(self) -> None:
        """Bytes of an unfinished code point at the end of the ids become U+FFFD (deviation 8)."""
        if self._dec.buffer:
            tail = self._dec.decode(b"", final=True)
            self._sync_fast()
            if tail and self._end is None:
                self._feed(tail)

    def _decode_one(self, tid: int) -> str:
        b = self._tb(tid)
        if not self._dec.buffer:
            try:
                text = b.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                self._texts[tid] = text
                return text
        text = self._dec.decode(b)
        self._sync_fast()
        return text

    def _sync_fast(self) -> None:
        """One-token shortcuts read ``_fast_texts``: the id -> text table, or an empty one while
        they are off (a marker spelling not starting with ``<``) or the decoder holds a partial
        UTF-8 sequence (a token's text then depends on the bytes before it)."""
        self._fast_texts = self._texts if self._fast_ok and not self._dec.buffer else _NO_TEXTS

    # ------------------------------------------------------------------ counting

    def _count_one(self, pos0: int) -> None:
        self._rpend.append(pos0)
        self._settle()

    def _count_many(self, ids: Sequence[int], pos0: int, dstate: tuple[bytes, int]) -> None:
        limit = self._limit()
        if limit == _INF:
            self._rcount += len(ids) + len(self._rpend)
            self._rpend.clear()
            return
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        dec.setstate(dstate)
        tb = self._tb
        p = pos0
        starts = self._rpend
        for t in ids:
            starts.append(p)
            p += len(dec.decode(tb(t)))
        self._settle()

    def _limit(self) -> float:
        if self._r_limit != _INF:
            return self._r_limit
        return self._hold_pos if self._hold else _INF

    def _settle(self) -> None:
        limit = self._limit()
        pend = self._rpend
        if limit == _INF:
            self._rcount += len(pend)
            pend.clear()
            return
        keep = [p for p in pend if p >= limit]
        self._rcount += len(pend) - len(keep)
        self._rpend = [] if self._r_limit != _INF else keep

    # ------------------------------------------------------------------ text core

    def _feed(self, text: str) -> None:
        if self._hold:
            s = self._hold + text
            base = self._hold_pos
            self._hold = ""
        else:
            s = text
            base = self._pos
        self._pos += len(text)
        self._drive(s, base)

    def _drive(self, s: str, base: int = 0) -> None:
        """Run the state handlers over ``s`` until it is consumed (or held, or the output ended)."""
        i: int | None = 0
        handlers = self._handlers
        while i is not None and self._state != _DONE and self._end is None:
            i = handlers[self._state](s, i, base)
            if i == _SWITCH:
                s, i, self._resume = self._resume, 0, ""

    def _held(self, s: str, j: int, base: int, tag: bool = False) -> None:
        if j < len(s):
            self._hold = s[j:]
            self._hold_pos = base + j
            self._hold_tag = tag

    def _read_tag(self, s: str, j: int, plen: int) -> int:
        """End index (after ``>``) of the tag starting at ``j``; -1: need more text; -2: not a tag."""
        lim = j + _TAG_MAX
        gt = s.find(">", j + plen, lim)
        stop = gt if gt >= 0 else min(len(s), lim)
        nl = s.find("\n", j + plen, stop)
        lt = s.find("<", j + plen, stop)
        if nl >= 0 or lt >= 0:
            return -2
        if gt >= 0:
            return gt + 1
        return -1 if len(s) < lim else -2

    # reasoning -------------------------------------------------------------

    def _do_reasoning(self, s: str, i: int, base: int) -> int | None:
        j, m = self._m_reason.find(s, i)
        if j > i:
            self._emit_reasoning(s[i:j])
        if m is None:
            self._held(s, j, base)
            return None
        self._r_limit = base + j
        if m == THINK_END:
            self._r_nl = ""
            self._r_q.clear()
            self._state = _CONTENT
            self._c_lead = True
            return j + len(m)
        self._end = ("stop", None)
        return None

    def _emit_reasoning(self, piece: str) -> None:
        if self._r_lead:
            piece = piece.lstrip("\n")
            if not piece:
                return
            self._r_lead = False
        if piece[-1] == "\n" and not piece.strip("\n"):
            self._r_q.append(piece)  # newlines only: held with the run
            return
        if self._r_q:
            self._r_nl += "".join(self._r_q)
            self._r_q.clear()
        if self._r_nl:
            piece = self._r_nl + piece
            self._r_nl = ""
        if piece[-1] == "\n":
            body = piece.rstrip("\n")
            self._r_nl = piece[len(body):]
            if not body:
                return
            piece = body
        self._out.append(ReasoningDelta(piece))

    # content ---------------------------------------------------------------

    def _do_content(self, s: str, i: int, base: int) -> int | None:
        while True:
            j, m = self._m_content.find(s, i)
            if j > i:
                self._emit_content(s[i:j])
                if self._end is not None:
                    return None
            if m is None:
                self._held(s, j, base)
                return None
            if m == THINK_END:
                i = j + len(m)
                continue
            if m == _OPEN:
                k = self._read_tag(s, j, len(_OPEN))
                if k == -1:
                    self._held(s, j, base, True)
                    return None
                kind, name, _ = _classify(s[j:k]) if k >= 0 else (_T_OTHER, "", False)
                if (kind != _T_OPEN_BLOCK and kind != _T_INVOKE and self._rec is not None
                        and not self._rec_skipped(s, j)):
                    return self._rec_start(j)
                if k == -2:
                    self._note("stray_dsml")
                    self._emit_content(_OPEN)
                    if self._end is not None:
                        return None
                    i = j + len(_OPEN)
                    continue
                if kind == _T_OPEN_BLOCK:
                    self._enter_block()
                    return k
                if kind == _T_INVOKE:
                    self._enter_block()
                    self._start_call(name)
                    return k
                self._note("stray_dsml")
                self._emit_content(s[j:k])
                if self._end is not None:
                    return None
                i = k
                continue
            if m in self._eos_text:
                self._end = ("stop", None)  # EOS spelling
                return None
            # a soft opener: maybe a corrupted DSML tag
            if not self._rec_skipped(s, j):
                return self._rec_start(j)
            self._emit_content(m)
            if self._end is not None:
                return None
            i = j + len(m)

    # corrupted-spelling recovery ------------------------------------------------

    def _rec_skipped(self, s: str, j: int) -> bool:
        """True (once) for the candidate at ``s[j]`` that recovery has just given up on."""
        skip = self._rec_skip
        if skip is not None and skip[0] is s and skip[1] == j:
            self._rec_skip = None
            return True
        return False

    def _rec_start(self, j: int) -> int:
        """Enter recovery at a candidate (index ``j`` of the current text): hold it from there."""
        self._state = _RECOVER
        self._rbuf = []
        self._rws = ""
        self._rlen = 0
        self._rtail = ""
        self._rmore = False
        self._rhead = False
        return j

    def _do_recover(self, s: str, i: int, base: int) -> int | None:
        """Hold text while a corrupted call may be forming; decide as soon as it is certain.

        Decisions happen when the held head stops looking like a DSML tag, when the end of an
        invoke or block closer arrives (an invoke may be complete, or can no longer be), or at
        :data:`MAX_HOLD` characters.
        """
        new = s[i:] if i else s
        if not new:
            return None
        self._rlen += len(new)
        if self._rmore and not self._rbuf and new.isspace():
            self._rws += new  # only blanks since the last call (kept apart: no re-joining)
            return None
        self._rbuf.append(new)
        if not self._rhead:
            held = "".join(self._rbuf)
            if self._rws:
                held = self._rws + held
                self._rws = ""
            self._rbuf = [held]
            if self._rmore:
                return self._rec_more(held, final=False)
            hs = head_state(held)
            if hs < 0:
                return self._rec_reject(held)
            if hs == 0:
                return None
            self._rhead = True
        window = self._rtail + new
        self._rtail = window[-TRIGGER_SPAN:]
        if self._rlen > MAX_HOLD:
            held = "".join(self._rbuf)
            return self._rec_exit(held, skip=True) if self._rmore else self._rec_reject(held)
        if not has_trigger(window):
            return None
        held = "".join(self._rbuf)
        self._rbuf = [held]
        return self._rec_more(held, final=False) if self._rmore else self._rec_first(held)

    def _rec_first(self, held: str) -> int:
        m = self._rec.first.match(held)
        if m is None or m.group(1) not in self._declared:
            return self._rec_reject(held)
        # the text before the call ends like content before a tool block
        self._c_nl = ""
        self._c_q.clear()
        self._after_block = False
        if self._stops is not None:
            tail = self._stops.flush()
            if tail:
                self._text_out(tail)
                self._c_lead = False
        self._rec_call(held, m)
        return self._rec_continue(held[m.end():])

    def _rec_more(self, held: str, final: bool) -> int | None:
        """After a recovered invoke: another invoke, the block closer, or the end of the block."""
        body = held.lstrip()
        if not body:
            if final:
                return None  # blanks after the last call are dropped, as after a block
            self._rhead = False
            self._rws = held
            self._rbuf = []
            return None
        closing = head_state(body, "close")
        opening = head_state(body, "invoke")
        if closing == 1:
            k = block_closer(self._rec, held)
            if k >= 0:
                self._state = _CONTENT
                self._rbuf = []
                self._after_block = True
                self._resume = held[k:]
                return _SWITCH
            if final or ">" in body[:_HEAD_PEEK] or len(body) > _HEAD_PEEK:
                return self._rec_exit(held, skip=False)  # a closer is never a candidate
            return None
        if opening == 1:
            self._rhead = True
            m = self._rec.next.match(held)
            if m is not None and m.group(1) in self._declared:
                self._rec_call(held, m)
                return self._rec_continue(held[m.end():])
            if final or (m is None and has_trigger(held)) or m is not None:
                return self._rec_exit(held, skip=True)
            return None
        if not final and (closing == 0 or opening == 0):
            return None
        return self._rec_exit(held, skip=False)

    def _rec_continue(self, rest: str) -> int:
        """A call was recovered: keep watching the text after it (phase "more")."""
        self._state = _RECOVER
        self._rmore = True
        self._rhead = False
        self._rbuf = []
        self._rws = ""
        self._rlen = 0
        self._rtail = ""
        self._resume = rest
        return _SWITCH

    def _rec_call(self, held: str, m: re.Match[str]) -> None:
        args, invalid = params_json(self._rec, held, m.start(2), m.end(2), _is_json)
        if invalid:
            self._note("invalid_json_argument")
        self._note("recovered_dsml")
        idx = self._ncalls
        self._ncalls = idx + 1
        out = self._out
        out.append(ToolCallStart(idx, self._new_id(idx), m.group(1)))
        out.append(ToolCallArgumentsDelta(idx, args))
        out.append(ToolCallEnd(idx, args))

    def _rec_reject(self, held: str) -> int:
        """Not a recoverable call: the held text is content, read again with this candidate as text."""
        self._state = _CONTENT
        self._rbuf = []
        self._rec_skip = (held, 0)
        self._resume = held
        return _SWITCH

    def _rec_exit(self, held: str, skip: bool) -> int:
        """The recovered block is over: the rest is content (blanks kept only before text)."""
        self._state = _CONTENT
        self._rbuf = []
        self._after_block = True
        self._rec_skip = (held, len(held) - len(held.lstrip())) if skip else None
        self._resume = held
        return _SWITCH

    def _rec_finish(self) -> None:
        """End of output while recovering: decide with what is held, then read the rest."""
        while self._state == _RECOVER and self._end is None:
            held = self._rws + "".join(self._rbuf)
            self._rws = ""
            if self._rmore:
                r = self._rec_more(held, final=True)
                if r is None:
                    self._state = _CONTENT
                    self._rbuf = []
                    return
            else:
                m = self._rec.first.match(held) if self._rhead else None
                if m is not None and m.group(1) in self._declared:
                    self._rec_first(held)
                else:
                    self._rec_reject(held)
            text, self._resume = self._resume, ""
            self._drive(text)
        if self._state == _RECOVER:
            self._state = _CONTENT

    def _emit_content(self, piece: str) -> None:
        if self._after_block:
            if not piece.strip():
                self._c_q.append(piece)
                return
            self._after_block = False
        elif not self._c_lead and piece[-1] == "\n" and not piece.strip("\n"):
            self._c_q.append(piece)  # newlines only: held with the run
            return
        if self._c_q:
            self._c_nl += "".join(self._c_q)
            self._c_q.clear()
        if self._c_nl:
            piece = self._c_nl + piece
            self._c_nl = ""
        if self._c_lead:
            piece = piece.lstrip("\n")
            if not piece:
                return
            self._c_lead = False
        if piece[-1] == "\n":
            body = piece.rstrip("\n")
            self._c_nl = piece[len(body):]
            if not body:
                return
            piece = body
        self._deliver(piece)

    def _deliver(self, piece: str) -> None:
        if self._plain:
            self._out.append(TextDelta(piece))
            return
        if self._stops is None:
            self._text_out(piece)
            return
        text, matched = self._stops.feed(piece)
        if text:
            self._text_out(text)
        if matched is not None:
            self._end = ("stop", matched)

    def _text_out(self, text: str) -> None:
        """Content as the client sees it (after stop sequences), through the JSON-object filter."""
        if self._json is not None:
            text = self._json.feed(text)
            if not text:
                return
        self._out.append(TextDelta(text))

    def _enter_block(self) -> None:
        self._c_nl = ""
        self._c_q.clear()
        self._after_block = False
        if self._stops is not None:
            held = self._stops.flush()
            if held:
                self._text_out(held)
                self._c_lead = False
        self._state = _BLOCK

    def _leave_block(self) -> None:
        self._state = _CONTENT
        self._after_block = True

    # tool-call block ---------------------------------------------------------

    def _dsml_step(self, s: str, i: int, base: int) -> tuple[int, int, str, bool, int] | None:
        """Shared scan for block/invoke/value states.

        Returns None when everything up to the end was handed to ``_text_in_state`` (maybe with
        a hold), else ``(tag_start, kind, name, is_string, tag_end)`` of the next complete tag
        (kind ``_T_OTHER`` for a non-structural ``<｜DSML｜…>`` tag text).
        """
        find = self._m_dsml.find
        while True:
            j = s.find("<", i)
            if j < 0:
                j, m = len(s), None
            elif s.startswith(_OPEN, j):
                m = _OPEN
            elif s.startswith(_CLOSE, j):
                m = _CLOSE
            else:
                j, m = find(s, j)
            if j > i:
                if self._state == _BLOCK:
                    seg = s[i:j]
                    body = seg.lstrip()
                    if body:  # text between invokes: the block is over, continue as content
                        p = j - len(body)
                        self._note("text_in_tool_block")
                        self._c_nl = self._ws + s[i:p]
                        self._c_q.clear()
                        self._ws = ""
                        self._leave_block()
                        return (p, -1, "", False, p)
                    self._ws += seg
                else:
                    self._text_in_state(s[i:j])
                    if self._end is not None:
                        return (j, -1, "", False, j)
            if m is None:
                self._held(s, j, base)
                return None
            if m in self._eos_text:
                self._end = ("stop", None)
                return None
            k = self._read_tag(s, j, len(m))
            if k == -1:
                self._held(s, j, base, True)
                return None
            kind, name, is_str = _classify(s[j:k]) if k >= 0 else (_T_OTHER, "", False)
            if kind == _T_OTHER and self._state == _BLOCK and self._rec is not None:
                if k >= 0 and block_closer(self._rec, s[j:k]) == k - j:
                    # a corrupted spelling of the block closer (e.g. V4.1 ``calls``): it closes the block
                    self._note("recovered_dsml")
                    self._ws = ""
                    self._ws_text = False
                    return j, _T_CLOSE_BLOCK, "", False, k
                # not an exact tag between invokes: the block is over; content reads the tag
                # again, where a corrupted spelling may still be recovered
                self._note("stray_dsml")
                self._note("text_in_tool_block")
                self._c_nl = self._ws
                self._c_q.clear()
                self._ws = ""
                self._leave_block()
                return (j, -1, "", False, j)
            if k == -2:
                self._text_in_state(m)
                if self._end is not None or self._state == _CONTENT:
                    return (j + len(m), -1, "", False, j + len(m))
                i = j + len(m)
                continue
            if kind == _T_OTHER:  # not a structural tag: plain text of the current state
                if self._state != _VALUE:
                    self._note("stray_dsml")
                self._text_in_state(s[j:k])
                if self._end is not None or self._state == _CONTENT:
                    return (k, -1, "", False, k)
                i = k
                continue
            self._ws = ""
            self._ws_text = False
            return j, kind, name, is_str, k

    def _text_in_state(self, text: str) -> None:
        st = self._state
        if st == _VALUE:
            self._value_text(text)
            return
        body = text.rstrip()
        if not body:
            self._ws += text  # whitespace between tags: held, dropped at the next tag
            return
        self._note("text_in_tool_block")
        ws = text[len(body):]
        if st == _BLOCK:  # text between invokes: the block is over, back to content
            self._c_nl = self._ws
            self._c_q.clear()
            self._ws = ""
            self._leave_block()
            self._emit_content(body)
            if ws:
                self._emit_content(ws)
        else:  # text inside an invoke: content, trimmed as a run, the call continues
            if self._ws_text:
                body = self._ws + body
            else:
                body = body.lstrip()
            self._ws = ws
            self._ws_text = True
            self._flush_args()
            self._emit_content(body)

    def _do_block(self, s: str, i: int, base: int) -> int | None:
        if len(s) - i >= _BULK_MIN and self._re_run is not None:
            i = self._bulk_invokes(s, i)
            if self._state != _BLOCK:
                return i
        r = self._dsml_step(s, i, base)
        if r is None:
            return None
        j, kind, name, _, k = r
        if kind == -1:
            return k
        if kind == _T_INVOKE:
            self._start_call(name)
        elif kind == _T_CLOSE_BLOCK:
            self._leave_block()
        elif kind == _T_PARAM:  # a parameter outside any invoke: text, back to content
            self._note("stray_dsml")
            self._text_in_state(s[j:k])
        else:  # stray closer or a repeated block opener: markup, dropped
            self._note("stray_dsml")
        return k

    def _bulk_invokes(self, s: str, i: int) -> int:
        """Emit every complete well-formed invoke starting at ``i`` (after whitespace) at once.

        Returns the index after the last one matched (``i`` when none). The events are those
        the tag-by-tag path gives for the same text inside one push: start, one arguments
        delta, end.
        """
        m = self._re_run.match(s, i)
        if m is None:
            return i
        append = self._out.append
        declared = self._declared
        new_id = self._new_id
        keys = _KEY_JSON
        idx = self._ncalls
        parts: list[str] = []
        call = ""
        for name, key, is_str, val, close in self._re_lex.findall(s, i, m.end()):
            if key:
                k = keys.get(key)
                if k is None:
                    k = _key_json(key)
                if is_str:
                    parts.append(k + encode_basestring(val))
                elif _SIMPLE_JSON.fullmatch(val) or _is_json(val):
                    parts.append(k + val)
                else:
                    self._note("invalid_json_argument")
                    parts.append(k + encode_basestring(val))
            elif name:
                call = name
                parts = []
                if declared and name not in declared:
                    self._note("undeclared_tool")
            else:
                args = "{" + ", ".join(parts) + "}" if parts else "{}"
                append(ToolCallStart(idx, new_id(idx), call))
                append(ToolCallArgumentsDelta(idx, args))
                append(ToolCallEnd(idx, args))
                idx += 1
        i = m.end()
        self._ncalls = idx
        self._ws = ""
        self._ws_text = False
        m = _BLOCK_END.match(s, i)
        if m is not None:  # the block closer right after: leave the block here too
            self._leave_block()
            return m.end()
        return i

    def _do_invoke(self, s: str, i: int, base: int) -> int | None:
        r = self._dsml_step(s, i, base)
        if r is None:
            return None
        j, kind, name, is_str, k = r
        if kind == -1:
            return k
        self._invoke_tag(kind, name, is_str, s[j:k])
        return k

    def _invoke_tag(self, kind: int, name: str, is_str: bool, tag: str) -> None:
        if kind == _T_PARAM:
            self._arg(f'{", " if self._nparams else ""}{encode_basestring(name)}: {chr(34) if is_str else ""}')
            self._nparams += 1
            self._vstring = is_str
            self._vnl = False
            self._vbuf = []
            self._state = _VALUE
        elif kind == _T_CLOSE_INVOKE:
            self._end_call()
            self._state = _BLOCK
        elif kind == _T_INVOKE:
            self._note("unclosed_invoke")
            self._end_call()
            self._start_call(name)
        elif kind == _T_CLOSE_BLOCK:
            self._note("unclosed_invoke")
            self._end_call()
            self._leave_block()
        else:  # stray </parameter> or nested <tool_calls>
            self._note("stray_dsml")

    def _do_value(self, s: str, i: int, base: int) -> int | None:
        r = self._dsml_step(s, i, base)
        if r is None:
            return None
        j, kind, name, is_str, k = r
        if kind == -1:
            return k
        if kind == _T_CLOSE_PARAM:
            self._end_value(implicit=False)
            self._state = _INVOKE
        else:
            self._note("implicit_parameter_close")
            self._end_value(implicit=True)
            self._state = _INVOKE
            self._invoke_tag(kind, name, is_str, s[j:k])
        return k

    def _value_text(self, text: str) -> None:
        if not self._vstring:
            self._vbuf.append(text)
            return
        if self._vnl:
            text = "\n" + text
            self._vnl = False
        if text[-1] == "\n":
            self._vnl = True
            text = text[:-1]
            if not text:
                return
        self._arg(encode_basestring(text)[1:-1])

    def _end_value(self, implicit: bool) -> None:
        if self._vstring:
            if self._vnl and not implicit:
                self._arg("\\n")
            self._vnl = False
            self._arg('"')
            return
        raw = "".join(self._vbuf)
        self._vbuf = []
        if implicit and raw.endswith("\n"):
            raw = raw[:-1]
        if _SIMPLE_JSON.fullmatch(raw) or _is_json(raw):
            self._arg(raw)
        else:
            self._note("invalid_json_argument")
            self._arg(encode_basestring(raw))

    def _start_call(self, name: str) -> None:
        idx = self._ncalls
        self._ncalls += 1
        self._call = idx
        self._args = []
        self._nparams = 0
        if self._declared and name not in self._declared:
            self._note("undeclared_tool")
        self._out.append(ToolCallStart(idx, self._new_id(idx), name))
        self._args_sent = 0
        self._arg("{")
        self._state = _INVOKE

    def _end_call(self) -> None:
        self._arg("}")
        self._flush_args()
        self._out.append(ToolCallEnd(self._call, "".join(self._args)))
        self._call = -1

    def _arg(self, text: str) -> None:
        self._args.append(text)

    def _flush_args(self) -> None:
        """Emit the argument text appended since the last flush as one delta."""
        args = self._args
        k = self._args_sent
        if k < len(args):
            self._out.append(ToolCallArgumentsDelta(self._call, args[k] if k + 1 == len(args) else "".join(args[k:])))
            self._args_sent = len(args)

    # ------------------------------------------------------------------ ending

    def _note(self, tag: str) -> None:
        self._notes[tag] = None

    def _close(self, reason: str) -> None:
        """Flush held text (unless a stop sequence matched), close an open call, emit Finish."""
        if self._end is None or self._end[1] is None:
            self._flush_held()
        if self._json is not None:
            tail = self._json.finish()
            if tail:
                self._out.append(TextDelta(tail))
            for note in self._json.notes:
                self._note(note)
        if self._call >= 0:
            if self._state == _VALUE:
                self._end_value(implicit=False)
            self._note("truncated_tool_call")
            self._end_call()
        self._state = _DONE
        self._settle()
        self._out.append(
            Finish(
                reason,
                self._completion,
                self._rcount,
                self._end[1] if self._end else None,
                self._ncalls,
                tuple(self._notes),
            )
        )

    def _flush_held(self) -> None:
        if self._state == _RECOVER:
            self._rec_finish()
        hold, self._hold = self._hold, ""
        st = self._state
        if hold:
            if st == _REASONING:
                self._emit_reasoning(hold)
            elif st == _CONTENT:
                self._emit_content(hold)
            else:
                self._text_in_state(hold)
        if self._end is not None and self._end[1] is not None:
            return  # flushing completed a stop sequence
        if self._state == _REASONING:
            if self._r_nl or self._r_q:
                self._out.append(ReasoningDelta(self._r_nl + "".join(self._r_q)))
                self._r_nl = ""
                self._r_q.clear()
            if self._opts.thinking_stage is not None:
                self._note("unclosed_reasoning")
        if (self._c_nl or self._c_q) and not self._after_block:
            nl = self._c_nl + "".join(self._c_q)
            self._c_nl = ""
            self._c_q.clear()
            self._deliver(nl)
            if self._end is not None and self._end[1] is not None:
                return
        if self._stops is not None:
            held = self._stops.flush()
            if held:
                self._text_out(held)


def _coalesce(events: list[OutputEvent]) -> list[OutputEvent]:
    """Merge adjacent deltas of the same kind (and call index) into one event."""
    types = list(map(type, events))
    if not any(map(operator.is_, types, islice(types, 1, None))):
        return events  # no two neighbours of the same type: nothing to merge
    merged: list[OutputEvent] = []
    prev = None
    buf: list[str] = []
    for ev in events:
        t = type(ev)
        if t is TextDelta or t is ReasoningDelta or t is ToolCallArgumentsDelta:
            if prev is not None and type(prev) is t and (t is not ToolCallArgumentsDelta or prev.index == ev.index):
                buf.append(ev.text)
                continue
            _flush_merge(merged, prev, buf)
            prev = ev
            buf = [ev.text]
        else:
            _flush_merge(merged, prev, buf)
            prev = None
            buf = []
            merged.append(ev)
    _flush_merge(merged, prev, buf)
    return merged


def _flush_merge(merged: list[OutputEvent], prev: OutputEvent | None, buf: list[str]) -> None:
    if prev is None:
        return
    if len(buf) == 1:
        merged.append(prev)
    elif type(prev) is ToolCallArgumentsDelta:
        merged.append(ToolCallArgumentsDelta(prev.index, "".join(buf)))
    else:
        merged.append(type(prev)("".join(buf)))
