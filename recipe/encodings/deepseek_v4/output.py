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
trailing newlines at the end are kept; a bare ``<｜DSML｜invoke …>`` (no wrapper) starts a block;
a well-formed call of an undeclared tool is a call (flagged ``undeclared_tool``); stop sequences
apply to content only and cut before the match.

**Malformed output** (docs/streaming.md "Malformed model output"): no call the model
did not validly make, no character lost. A block opener, an undeclared tool's invoke and a strict
tool's invoke are held (:mod:`.output_hold`) until they are known to be a call, else they are
content; a parameter without ``string=`` is inferred, one named twice keeps its first value (the
repeat is content); a later ``</think>`` and role tokens are text with notes, and nothing after
a role token is structure; an unfinished tag at the end of a cut call is dropped as its markup.

**Unclosed reasoning policy.** In thinking mode an output that never emits ``</think>`` stays
reasoning (content ``""``), as in the parity target: the model never said it had started its
answer, and showing chain-of-thought as the answer would be worse. The Finish event carries the
note ``unclosed_reasoning``. EOS (ids in ``eos_token_ids``, or their spelling in text) always
ends the output and never appears in any field.

**Layout.** :class:`OutputParser` is a state machine: one handler per state
(:mod:`.output_state`) consumes text up to the next marker or tag and switches state. This
module holds the parser itself (decoding, token counting, the driver, reasoning and content,
the ending); the other states and services live beside it, as mixins sharing its fields:

* :mod:`.output_block` — the exact-spelling tool-call block (block, invoke and value states),
  over the tag classification and argument-JSON helpers of :mod:`.output_dsml`;
* :mod:`.output_recovery` — corrupted DSML spellings (the recover state, deviation 7);
* :mod:`.output_hold` — exact markup held until it is known to be a valid call (the hold state);
* :mod:`.output_reasoning` — a block written inside the reasoning, held until it is decided;
* :mod:`.output_fastpath` — shortcuts giving exactly the general path's events: one-token
  pushes that skip the scanner and one regex run for complete well-formed invokes
  (``bench/bench_stream.py`` measures them against deepseek-recipe);
* :mod:`.call_ids` — deepseek-recipe-shaped tool-call ids.

**Deliberate deviations from the parity target** (each has a test):

1. Tool-call arguments are always valid JSON: a ``string="false"`` value is buffered until its
   closer and emitted raw only if it is valid JSON, else as a JSON string; a call cut short
   (max tokens, EOS, a new invoke) is closed (``"`` / ``}``) rather than left open.
2. A parameter left open is closed by the next structural DSML tag (its single trailing ``\\n``
   dropped) instead of swallowing the tag as value text.
3. No text is dropped: text after a tool block, text between invokes, inline ``<｜DSML｜``
   mentions, malformed tags, a block opener no call follows stay content. A complete,
   well-formed block inside the reasoning is a call (as in the parity target, which drops what
   follows it; :mod:`.output_reasoning`), any other DSML there stays reasoning. Only whitespace
   between tags and the markup of calls (exact or recovered, 7) are removed.
4. Reasoning-token counts are exact counts of the ids that start before ``</think>``.
5. EOS / configured stop-token ids end the output (the parity target prints EOS as text).
6. Stop sequences are matched on the content as the client sees it (after newline trimming).
7. Corrupted spellings are recovered, cautiously (peer failure 9; :mod:`.output_recovery`):
   doubled bars (``<｜｜DSML｜｜ …>``), ASCII or spaced bars (``< | DSML | …>``), the V3.2 block name
   ``function_calls``, a block opener missing its ``>``, other tag names with a leading space
   (V4.1's own spelling, ``<｜DSML｜ calls>`` / `` invoke`` / `` parameter``, is exact markup:
   :data:`.output_dsml.SPELLINGS`). A call is accepted only when its invoke is structurally complete (opener, parameters with explicit closers, invoke closer, only
   whitespace between tags), names a declared tool (``ParsingOptions.tool_names``), names no
   parameter twice and carries a strict tool's required parameters; it is emitted whole when
   its invoke closes, with the note ``recovered_dsml``. A refused complete invoke is content up
   to its closer (exact invokes inside a corrupted block included). Everything else stays
   content byte for byte; reasoning is never recovered, and without declared tool names
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
10. Malformed output (docs/streaming.md deviations 17–21): a later ``</think>`` is kept as text; a
    repeated parameter keeps its first value; a parameter without ``string=`` is read; an
    undeclared tool's invoke is a call only when well-formed, a strict tool's only with its
    required parameters; role tokens are text and end all structure.
"""

from __future__ import annotations

import bisect
import codecs
import itertools
from collections.abc import Callable, Sequence

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.call_ids import IdStream, make_tool_call_id
from recipe.encodings.deepseek_v4.constants import THINK_END
from recipe.encodings.deepseek_v4.output_block import ToolCallBlock
from recipe.encodings.deepseek_v4.output_dsml import (
    CLOSE,
    OPEN,
    SIMPLE_JSON,
    SPELLINGS,
    Spelling,
    T_INVOKE,
    T_OPEN_BLOCK,
    T_OTHER,
    classify,
    is_json,
    is_tag_prefix,
    dialect,
    read_tag,
)
from recipe.encodings.deepseek_v4.output_fastpath import FastPaths
from recipe.encodings.deepseek_v4.output_hold import Hold
from recipe.encodings.deepseek_v4.output_reasoning import ReasoningCalls
from recipe.encodings.deepseek_v4.output_recovery import Recovery
from recipe.encodings.deepseek_v4.output_setup import ROLE_TOKENS, VOCABULARY_ROLE_TOKENS, LazyIds, parser_setup
from recipe.encodings.deepseek_v4.output_state import (
    BLOCK,
    CONTENT,
    DONE,
    HOLD,
    INVOKE,
    RBLOCK,
    REASONING,
    RECOVER,
    SWITCH,
    VALUE,
    coalesce,
)
from recipe.output.parsing import JsonObjectFilter, MarkerMatcher, StopMatcher
from recipe.output.events import Finish, OutputEvent, ReasoningDelta, TextDelta
from recipe.tokenizer import Tokenizer

__all__ = ["OutputParser", "ROLE_TOKENS", "VOCABULARY_ROLE_TOKENS", "make_tool_call_id"]


# former names, still read through this module by tests/test_output_fastpath.py
_IdStream = IdStream
_SIMPLE_JSON = SIMPLE_JSON
_is_json = is_json

_INF = float("inf")
_UTF8 = codecs.getincrementaldecoder("utf-8")
_NO_STATE = (b"", 0)  # an incremental UTF-8 decoder holding nothing
_START_STATE = {
    None: CONTENT,
    "reasoning": REASONING,
    "reasoning_continuation": REASONING,
    "content_continuation": CONTENT,
}


class OutputParser(FastPaths, ToolCallBlock, Recovery, Hold, ReasoningCalls):
    """Incremental DeepSeek-V4 completion parser producing :mod:`recipe.output.events` events.

    Args:
        options: how to read this completion (thinking stage, tools, stop sequences, …).
        tokenizer: the V4 tokenizer (token bytes and special-token spellings).
        tool_call_id: a callable ``index -> id``, or a seed (int/str) for reproducible
            deepseek-recipe-shaped ids, or None for fresh random ids.
        eos_token_ids: ids that end the output (EOS and any stop-token ids); they are counted as
            completion tokens but never decoded. Their spellings in text also end the output.
        spellings: the DSML tag spellings read as markup (default :data:`~.output_dsml.SPELLINGS`,
            DeepSeek-V4's); DeepSeek-V3.2's dialect names its block ``function_calls`` (its
            ``｜DSML｜`` is ordinary text: the parser reads text either way).

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
        spellings: tuple[Spelling, ...] = SPELLINGS,
    ) -> None:
        self._opts = options
        self._dsml = dialect(spellings)  # its lookup tables (raises ValueError on a foreign prefix)
        self._new_id = tool_call_id if callable(tool_call_id) else LazyIds(tool_call_id)
        self._tb = tokenizer.encoding.decode_single_token_bytes
        self._decode_bytes = tokenizer.encoding.decode_bytes
        self._dec = _UTF8("replace")
        self._declared = frozenset(options.tool_names)
        setup = parser_setup(tokenizer, eos_token_ids, options.parse_tool_calls, bool(options.parse_tool_calls and self._declared))
        self._texts = setup.texts
        self._eos = setup.eos
        self._eos_bytes = setup.eos_bytes
        self._eos_set = setup.eos_set
        self._eos_text = setup.eos_text
        self._roles = setup.roles
        self._frozen = False  # a role token was read: no structure after it
        self._m_reason = setup.m_reason
        self._m_lit = setup.m_lit  # what literal content still reads
        self._tool_args = options.tool_arguments
        self._strict_req = {n: a.required for n, a in options.tool_arguments.items() if a.required}
        # corrupted-spelling recovery: only when tools are declared (only declared tools are accepted)
        self._rec = setup.rec
        self._m_content = setup.m_content
        self._m_dsml = setup.m_dsml
        self._stops = StopMatcher(options.stop_sequences) if options.stop_sequences else None
        self._json = JsonObjectFilter() if options.parse_json_output else None
        self._plain = self._stops is None and self._json is None  # content goes out unchanged
        self._resume = ""  # the text a handler returning SWITCH asks the driver to continue on …
        self._resume_at = 0  # … from this index
        self._init_recovery()  # the recover state's fields (output_recovery)
        self._init_hold(setup.m_hold)  # the hold state's fields (output_hold)
        self._init_rblock(setup.m_rvalue)  # blocks written in the reasoning (output_reasoning)

        stage = options.thinking_stage
        self._state = _START_STATE.get(stage, CONTENT)
        if options.starts_in_tool_calls and options.parse_tool_calls and self._state == CONTENT:
            self._state = BLOCK
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
        self._init_fast(setup)  # shortcuts on or off, for these markers (output_fastpath)
        self._hold_pos = 0
        self._pos = 0  # chars decoded so far
        self._out: list[OutputEvent] = []
        # counting
        self._completion = 0
        self._rcount = 0
        self._rpend: list[int] = []
        self._r_limit = _INF  # start of </think> (or EOS) ending the reasoning
        self._init_calls()  # the call being built (output_block)
        self._notes: dict[str, None] = {}
        self._end: tuple[str, str | None] | None = None  # (reason, matched_stop) once ended

    # ------------------------------------------------------------------ public API

    @property
    def finished(self) -> bool:
        """True once the output has ended (Finish emitted); further pushes are ignored."""
        return self._state == DONE

    #: :meth:`FastPaths.push <.output_fastpath.FastPaths.push>`: the one-token shortcuts, else
    #: :meth:`_push_ids`.
    push = FastPaths.push

    def push_text(self, text: str, token_count: int = 0) -> list[OutputEvent]:
        """Feed decoded text that accounts for ``token_count`` tokens. Returns the new events.

        Reasoning tokens in text mode: the chunk's tokens count as reasoning when the chunk
        starts before ``</think>``.
        """
        if self._state == DONE:
            return []
        out = self._out = []
        self._completion += token_count
        if self._state == REASONING or self._state == RBLOCK:
            pos0 = self._pos
            if text:
                self._feed(text)
            self._rpend.extend([pos0] * token_count)
            self._settle()
        elif text:
            self._feed(text)
        return self._end_push(out)

    def _end_push(self, out: list[OutputEvent]) -> list[OutputEvent]:
        """A push's epilogue: close on a pending end, flush argument text, merge adjacent deltas."""
        if self._end is not None and self._state != DONE:
            self._close(self._end[0])
        if self._call >= 0:
            self._flush_args()
        if len(out) > 1:
            out = self._out = coalesce(out)
        return out

    def finish(self, reason: str = "stop") -> list[OutputEvent]:
        """End of output: flush everything held back, close an open call, emit :class:`Finish`.

        ``reason`` is the backend's (``stop``, ``length``, ``content_filter``, …). Calling it
        after the output has ended returns ``[]``.
        """
        if self._state == DONE:
            return []
        out = self._out = []
        self._flush_decoder()
        if self._state != DONE:
            self._close(self._end[0] if self._end else reason)
        if self._call >= 0:
            self._flush_args()
        if len(out) > 1:
            out = self._out = coalesce(out)
        return out

    # ------------------------------------------------------------------ decoding

    def _push_ids(self, token_ids: Sequence[int]) -> list[OutputEvent]:
        """The general :meth:`push`: decode, feed the text, count tokens, end on an EOS id."""
        if self._state == DONE:
            return []
        n = len(token_ids)
        out = self._out = []
        if n == 1:
            tid = token_ids[0]
            if tid in self._eos_set:
                self._completion += 1
                self._flush_decoder()
                if self._state != DONE:
                    self._close(self._end[0] if self._end else "stop")
                return out
            text = self._texts.get(tid) if not self._dec.buffer else None
            if text is None:
                text = self._decode_one(tid)
            self._completion += 1
            if self._state == REASONING or self._state == RBLOCK:
                pos0 = self._pos
                if text:
                    self._feed(text)
                self._count_one(pos0)
            elif text:
                self._feed(text)
        else:
            cut = n
            raw = None
            if self._eos_set:
                eb = self._eos_bytes
                if eb is not None:
                    # an end id's bytes absent from the decoded push: no end id in it (no id scan)
                    try:
                        raw = self._decode_bytes(token_ids if type(token_ids) is list else list(token_ids))
                    except Exception:  # noqa: BLE001 - a bad id: the scan and decode below say so as before
                        raw = None
                if raw is None or any(b in raw for b in eb):  # type: ignore[union-attr]
                    for e in self._eos:
                        try:
                            k = token_ids.index(e, 0, cut)
                        except ValueError:
                            continue
                        cut = k
                    if cut < n:
                        raw = None
            ids = token_ids[:cut] if cut < n else token_ids
            self._completion += cut + (cut < n)
            if ids:
                if raw is None:
                    raw = self._decode_bytes(ids if type(ids) is list else list(ids))
                dec = self._dec
                text = None
                if not dec.buffer:  # whole characters so far: a strict decode is the same text
                    dstate = _NO_STATE
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        pass
                if text is None:
                    dstate = dec.getstate()
                    text = dec.decode(raw)
                    self._sync_fast()
                if self._state == REASONING or self._state == RBLOCK:
                    pos0 = self._pos
                    if text:
                        self._feed(text)
                    self._count_many(ids, pos0, dstate)
                elif text:
                    self._feed(text)
            if cut < n and self._state != DONE:
                self._flush_decoder()
                if self._state != DONE:
                    self._close(self._end[0] if self._end else "stop")
        return self._end_push(out)

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
        starts = self._rpend
        k = 0
        p = pos0
        if not dstate[0]:
            # from an empty decoder, the ids of whole-UTF-8 tokens start where their text lengths
            # add up to: summed at C speed up to the first id that is part of a character
            texts = self._texts
            parts: set[int] = set()
            for t in set(ids).difference(texts):
                try:
                    texts[t] = self._tb(t).decode("utf-8")
                except UnicodeDecodeError:
                    parts.add(t)
            k = next((j for j, t in enumerate(ids) if t in parts), len(ids)) if parts else len(ids)
            if k:
                run = list(itertools.accumulate(map(len, map(texts.__getitem__, ids[:k] if k < len(ids) else ids)), initial=pos0))
                p = run.pop()
                starts += run
        if k < len(ids):
            dec = codecs.getincrementaldecoder("utf-8")("replace")
            if not k:
                dec.setstate(dstate)
            tb = self._tb
            for t in ids[k:]:
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
        k = bisect.bisect_left(pend, limit)  # positions are appended in order
        self._rcount += k
        self._rpend = [] if self._r_limit != _INF else pend[k:]

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
        handlers = _HANDLERS
        while i is not None and self._state != DONE and self._end is None:
            i = handlers[self._state](self, s, i, base)
            if i == SWITCH:
                s, i, self._resume, self._resume_at = self._resume, self._resume_at, "", 0
                if self._resume_base is not None:
                    base, self._resume_base = self._resume_base, None

    def _held(self, s: str, j: int, base: int, tag: bool = False) -> None:
        if j < len(s):
            self._hold = s[j:]
            self._hold_pos = base + j
            self._hold_tag = tag

    # reasoning -------------------------------------------------------------

    def _do_reasoning(self, s: str, i: int, base: int) -> int | None:
        j, m = self._m_reason.find(s, i)
        if j > i:
            self._emit_reasoning(s[i:j])
        if m is None:
            self._held(s, j, base)
            return None
        if m in self._roles:
            self._role_token()
            self._emit_reasoning(m)
            return j + len(m)
        if m == OPEN or m == CLOSE:  # a DSML tag in the reasoning: a block that may be a call
            return self._reasoning_tag(s, j, base, m)
        self._r_limit = base + j
        if m == THINK_END:
            self._r_nl = ""
            self._r_q.clear()
            self._state = CONTENT
            self._c_lead = True
            return j + len(m)
        self._end = ("stop", None)
        return None

    def _reasoning_tag(self, s: str, j: int, base: int, m: str) -> int | None:
        """``s[j]`` starts an exact DSML opener or closer in the reasoning: a block opener is held
        (:mod:`.output_reasoning`); any other tag is reasoning text (``dsml_in_reasoning``)."""
        k = read_tag(s, j, len(m))
        if k == -1:
            self._held(s, j, base)
            return None
        if k == -2:
            self._emit_reasoning(m)
            return j + len(m)
        if m == OPEN and classify(s[j:k], self._dsml)[0] == T_OPEN_BLOCK:
            return self._rblock_start(s, j, k, base)
        if classify(s[j:k], self._dsml)[0] != T_OTHER:
            self._note("dsml_in_reasoning")
        self._emit_reasoning(s[j:k])
        return k

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
            if m == THINK_END or m in self._roles or m == CLOSE:
                # a later </think>, a role token, a closer outside a block: text, with a note
                if m == THINK_END:
                    self._note("think_end_in_content")
                elif m == CLOSE:
                    self._note("stray_dsml")
                else:
                    self._role_token()
                self._emit_content(m)
                if self._end is not None:
                    return None
                i = j + len(m)
                continue
            if m == OPEN:
                k = read_tag(s, j, len(OPEN))
                if k == -1:
                    self._held(s, j, base, True)
                    return None
                kind, name, _ = classify(s[j:k], self._dsml) if k >= 0 else (T_OTHER, "", False)
                if self._rec is not None:
                    if self._rec_skipped(s, j):  # recovery gave up on this candidate: text
                        kind = T_OTHER
                    elif kind != T_OPEN_BLOCK and kind != T_INVOKE:
                        return self._rec_start(j)
                if k == -2:
                    self._note("stray_dsml")
                    self._emit_content(OPEN)
                    if self._end is not None:
                        return None
                    i = j + len(OPEN)
                    continue
                if kind == T_OPEN_BLOCK:  # a block only if a call follows: held until then
                    return self._hold_start(s, j, k, CONTENT, None)
                if kind == T_INVOKE:
                    if self._needs_hold(name):
                        return self._hold_start(s, j, k, CONTENT, name)
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

    def _role_token(self) -> None:
        """A role token was read: note it; from here on nothing is read as structure."""
        self._note("role_token")
        if not self._frozen:
            self._frozen = True
            self._m_reason = self._m_content = MarkerMatcher(self._eos_text)

    def _emit_literal(self, text: str) -> None:
        """Content that no call claims (markup that did not become one), verbatim: only ``</think>``
        and role tokens (notes) and EOS spellings (the end) are read in it."""
        find = self._m_lit.find
        end0 = self._end
        i, n = 0, len(text)
        while i < n and self._end is end0:
            j, m = find(text, i)
            if m is None:
                self._emit_content(text[i:])
                return
            if j > i:
                self._emit_content(text[i:j])
            if m in self._eos_text:
                self._end = ("stop", None)
                return
            if m == THINK_END:
                self._note("think_end_in_content")
            else:
                self._role_token()
            self._emit_content(m)
            i = j + len(m)

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
            if self._state == VALUE:
                self._end_value(implicit=False)
            self._note("truncated_tool_call")
            self._end_call()
        self._state = DONE
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
        if self._state == RBLOCK:
            self._rblock_finish()
        while self._state == RECOVER or self._state == HOLD:  # (reading what they held may enter the other)
            if self._state == RECOVER:
                self._rec_finish()
            else:
                self._hold_finish()
        hold, self._hold = self._hold, ""
        st = self._state
        if hold:
            if st == REASONING:
                self._emit_reasoning(hold)
            elif st == CONTENT:
                if self._hold_tag:
                    self._note("stray_dsml")  # an unfinished DSML tag at the end: text
                self._emit_content(hold)
            elif (st == INVOKE or st == VALUE or (st == BLOCK and self._blk_calls)) and is_tag_prefix(hold, self._dsml):
                self._note("partial_markup")  # an unfinished tag of a tool block: markup, dropped
            else:
                self._text_in_state(hold)
        if self._end is not None and self._end[1] is not None:
            return  # flushing completed a stop sequence
        if self._state == REASONING:
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


#: The state handlers by state number, as plain functions called with the parser: a tuple of bound
#: methods on the instance made every parser a reference cycle (30 objects a request) that only the
#: cyclic garbage collector could free.
_HANDLERS = (
    OutputParser._do_reasoning,
    OutputParser._do_content,
    OutputParser._do_tags,  # BLOCK
    OutputParser._do_tags,  # INVOKE
    OutputParser._do_tags,  # VALUE
    OutputParser._do_recover,
    OutputParser._do_hold,
    OutputParser._do_rblock,
)
