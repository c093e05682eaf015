"""Output parser for the ``<｜tool▁calls▁begin｜>`` formats (DeepSeek-V3, R1, V3.1): completion token
ids (or text) -> output events, incrementally, in any chunking.

Output formats (reference/deepseek-v3x-formats.md §2-4)::

    [reasoning</think>][content]<｜tool▁calls▁begin｜>CALL…<｜tool▁calls▁end｜><｜end▁of▁sentence｜>
    CALL (fenced: V3, R1)  <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```<｜tool▁call▁end｜>
    CALL (bare: V3.1)      <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>

Reasoning, when the prompt starts the output in it (``ParsingOptions.thinking_stage``), runs to
``</think>``; an opening ``<think>`` at its start (R1 writes it itself) is dropped.

Robustness rules (the V4 parser's, docs/streaming.md):

* no text is lost: markup that yields no call stays text — a call whose name is not a declared
  tool (``undeclared_tool``), whose head is malformed or whose arguments do not start with ``{``
  (``invalid_json_argument``), text inside a block between calls (``text_in_tool_block``) and a
  block that yields no call at all are content, byte for byte;
* arguments are always one valid JSON object (:class:`~.json_stream.JsonStream` streams the prefix
  that can still be completed by appending): a call cut short by the end of output, a new call or a
  block end is closed (``truncated_tool_call``); arguments that stop being JSON are closed where
  they broke and the rest of the call's text is content (``invalid_json_argument``); text between
  the object and the call's end other than the closing fence is content (``text_in_tool_block``);
* calls are accepted only for declared tools (``ParsingOptions.tool_names``) and only when tools
  were declared (``parse_tool_calls``); a ``<｜tool▁call▁begin｜>`` without the block opener also
  starts a call (a bare call);
* EOS (ids in ``eos_token_ids``, or its spelling) ends the output and appears in no field;
  ``</think>`` inside content is dropped; leading newlines of reasoning and content, the newlines
  before ``</think>`` and before a call block, and blanks around call markup are not content.

A complete, well-formed block of declared calls written inside the reasoning is a call (note
``tool_call_in_reasoning``); any other block there stays reasoning (``dsml_in_reasoning``):
:mod:`.output_reasoning`.
"""

from __future__ import annotations

import codecs
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.call_ids import IdStream
from recipe.encodings.v3_shared.constants import (
    BARE,
    EOS,
    FENCED,
    THINK_END,
    THINK_START,
    TOOL_CALL_BEGIN,
    TOOL_CALL_END,
    TOOL_CALLS_BEGIN,
    TOOL_CALLS_END,
)
from recipe.encodings.v3_shared.output_calls import ARGS, BLOCK, HEAD, TAIL, CallStates
from recipe.encodings.v3_shared.output_reasoning import ReasoningCalls
from recipe.output.events import (
    Finish,
    OutputEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
)
from recipe.output.parsing import JsonObjectFilter, MarkerMatcher, StopMatcher
from recipe.tokenizer import Tokenizer

if TYPE_CHECKING:
    from recipe.encodings.v3_shared.json_stream import JsonStream

__all__ = ["OutputParser", "FENCED", "BARE"]


#: states before and after the call states of :mod:`.output_calls`
REASONING, CONTENT, DONE = 0, 1, 7
_CALL_MARKERS = (TOOL_CALL_BEGIN, TOOL_CALL_END, TOOL_CALLS_END)
#: per vocabulary (fingerprint): token id -> its text, for ids whose bytes are whole UTF-8
_TEXTS: dict[str, dict[int, str]] = {}


class OutputParser(CallStates, ReasoningCalls):
    """Incremental parser for the V3 / R1 / V3.1 output formats (module docstring).

    Args:
        options: how to read this completion (thinking stage, declared tools, stop sequences, …).
        tokenizer: the vocabulary (token bytes; special tokens decode to their spelling).
        syntax: :data:`FENCED` (V3, R1) or :data:`BARE` (V3.1).
        tool_call_id: ``index -> id``, or a seed for reproducible ``call_…`` ids, or None (random).
        eos_token_ids: ids that end the output (counted, never decoded).

    Feed :meth:`push` / :meth:`push_text` in any chunking, then :meth:`finish`. Never raises on
    model output; degraded output is reported in ``Finish.notes``.
    """

    def __init__(
        self,
        options: ParsingOptions,
        tokenizer: Tokenizer,
        *,
        syntax: str = FENCED,
        tool_call_id: Callable[[int], str] | int | str | None = None,
        eos_token_ids: Sequence[int] = (1,),
    ) -> None:
        self._opts = options
        self._fenced = syntax == FENCED
        self._new_id = tool_call_id if callable(tool_call_id) else IdStream(random.Random(tool_call_id))
        self._tb = tokenizer.encoding.decode_single_token_bytes
        self._texts = _TEXTS.setdefault(tokenizer.fingerprint, {})  # token id -> text, whole UTF-8 only
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self._eos = frozenset(eos_token_ids)
        eos_text = [t for t in (tokenizer.special_name(i) for i in eos_token_ids) if t] or [EOS]
        self._eos_text = frozenset(eos_text)
        self._declared = frozenset(options.tool_names) if options.parse_tool_calls else frozenset()
        calls = (TOOL_CALLS_BEGIN, TOOL_CALL_BEGIN) if options.parse_tool_calls else ()
        # a block in the reasoning may be a call (output_reasoning) when tools are declared
        self._m_reason = MarkerMatcher([THINK_END, *eos_text, *((TOOL_CALLS_BEGIN,) if self._declared else ())])
        self._init_rcalls(self._eos_text)
        self._m_content = MarkerMatcher([THINK_END, *eos_text, *calls])
        self._m_block = MarkerMatcher([*_CALL_MARKERS, *eos_text])
        self._ends = (*_CALL_MARKERS, *eos_text, TOOL_CALLS_BEGIN)  # markup that ends a call head
        self._stops = StopMatcher(options.stop_sequences) if options.stop_sequences else None
        self._json = JsonObjectFilter() if options.parse_json_output else None
        stage = options.thinking_stage
        self._state = REASONING if stage in ("reasoning", "reasoning_continuation") else CONTENT
        self._r_open = stage == "reasoning"  # an opening <think> may come first
        self._r_lead = stage == "reasoning"
        self._c_lead = stage != "content_continuation"
        self._r_nl = self._c_nl = ""
        self._after_block = False
        self._buf = ""
        self._pos = 0  # characters decoded so far
        self._out: list[OutputEvent] = []
        self._notes: dict[str, None] = {}
        self._completion = 0
        self._r_tokens = 0
        self._r_pending: list[int] = []  # start positions of reasoning-stage tokens not yet attributed
        self._r_end: int | None = None  # position of </think> (or of the end of reasoning)
        self._end: tuple[str, str | None] | None = None
        self._ncalls = 0
        # the block / call being read
        self._block_markup = ""  # block opener (and blanks) held until the block yields a call
        self._block_ws = ""  # blanks in a block, held until what follows them decides
        self._block_calls = 0
        self._in_block = False
        self._head = ""  # raw text of the call being decided, from <｜tool▁call▁begin｜>
        self._js: JsonStream | None = None
        self._args: list[str] = []
        self._tail = ""  # blanks / fence after the arguments object
        self._tail_junk = False  # text that is not the fence was found after the arguments
        self._plain = self._stops is None and self._json is None  # content goes out unchanged
        self._handlers = (self._reasoning, self._content, self._block, self._head_state, self._args_state,
                          self._tail_state, self._raw)

    # ------------------------------------------------------------------ public API

    @property
    def finished(self) -> bool:
        """True once the output has ended (Finish emitted)."""
        return self._state == DONE

    def push(self, token_ids: Sequence[int]) -> list[OutputEvent]:
        """Feed completion token ids; returns the new events. Raises ``KeyError`` for an unknown id."""
        if self._state == DONE:
            return []
        self._out = []
        counted = len(token_ids)  # a push that ends the output on a stop sequence counts all its ids
        for k, tid in enumerate(token_ids):
            if tid in self._eos:
                counted = k + 1
                self._flush_decoder()
                self._end = self._end or ("stop", None)
                break
            text = self._texts.get(tid) if not self._dec.buffer else None
            if text is None:
                text = self._decode(tid)
            if self._state == REASONING and self._r_end is None:
                self._r_pending.append(self._pos)
            if text:
                self._feed(text)
            if self._end is not None:
                break
        self._completion += counted
        return self._epilogue()

    def push_text(self, text: str, token_count: int = 0) -> list[OutputEvent]:
        """Feed decoded text accounting for ``token_count`` tokens (a chunk's tokens count as reasoning
        when the chunk starts before ``</think>``)."""
        if self._state == DONE:
            return []
        self._out = []
        self._completion += token_count
        if self._state == REASONING and self._r_end is None:
            self._r_pending.extend([self._pos] * token_count)
        if text:
            self._feed(text)
        return self._epilogue()

    def finish(self, reason: str = "stop") -> list[OutputEvent]:
        """End of output: flush what was held, close an open call, emit :class:`Finish`."""
        if self._state == DONE:
            return []
        self._out = []
        self._flush_decoder()
        self._close(self._end[0] if self._end else reason)
        return self._merge(self._out)

    # ------------------------------------------------------------------ plumbing

    def _epilogue(self) -> list[OutputEvent]:
        if self._end is not None and self._state != DONE:
            self._close(self._end[0])
        out = self._out
        return self._merge(out) if len(out) > 1 else out

    @staticmethod
    def _merge(events: list[OutputEvent]) -> list[OutputEvent]:
        """Adjacent deltas of one kind (and call) merged: at most one delta per kind in a row."""
        merged: list[OutputEvent] = []
        for ev in events:
            prev = merged[-1] if merged else None
            t = type(ev)
            if prev is not None and type(prev) is t and t in (TextDelta, ReasoningDelta):
                merged[-1] = t(prev.text + ev.text)
            elif prev is not None and t is ToolCallArgumentsDelta and type(prev) is t and prev.index == ev.index:
                merged[-1] = ToolCallArgumentsDelta(ev.index, prev.text + ev.text)
            else:
                merged.append(ev)
        return merged

    def _decode(self, tid: int) -> str:
        """Text completed by one token (whole-UTF-8 tokens are remembered per vocabulary)."""
        b = self._tb(tid)
        if not self._dec.buffer:
            try:
                text = b.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                if len(self._texts) < 1 << 18:
                    self._texts[tid] = text
                return text
        return self._dec.decode(b)

    def _flush_decoder(self) -> None:
        tail = self._dec.decode(b"", final=True)
        if tail and self._end is None:
            self._feed(tail)

    def _note(self, tag: str) -> None:
        self._notes[tag] = None

    def _feed(self, text: str) -> None:
        self._pos += len(text)
        if not self._buf and "<" not in text and "\n" not in text:
            # no marker can start here and no newline run is involved: the common token
            st = self._state
            if st == REASONING and not self._r_open and not self._r_lead and not self._rc_hold:
                self._out.append(ReasoningDelta(self._r_nl + text))
                self._r_nl = ""
                return
            if st == CONTENT and self._plain and not self._c_lead and not self._after_block:
                self._out.append(TextDelta(self._c_nl + text))
                self._c_nl = ""
                return
        self._buf += text
        handlers = self._handlers
        while self._buf and self._end is None and self._state != DONE:
            if not handlers[self._state]():
                break

    def _take(self, n: int) -> str:
        piece, self._buf = self._buf[:n], self._buf[n:]
        return piece

    def _find(self, matcher: MarkerMatcher) -> tuple[int, str | None]:
        return matcher.find(self._buf)

    # ------------------------------------------------------------------ reasoning

    def _reasoning(self) -> bool:
        if self._rc_hold:
            return self._rc_step()
        if self._r_open:
            head = self._buf.lstrip(" \t\r\n")
            if not head or (len(head) < len(THINK_START) and THINK_START.startswith(head)):
                return False  # undecided: hold
            self._r_open = False
            if head.startswith(THINK_START):
                self._buf = head[len(THINK_START):]
                return True
        j, m = self._find(self._m_reason)
        if j:
            self._emit_reasoning(self._take(j))
        if m is None:
            return False
        if m == TOOL_CALLS_BEGIN:
            self._rc_start()
            return True
        self._take(len(m))
        self._r_end = self._pos - len(self._buf) - len(m)
        self._settle()
        self._r_nl = ""
        if m == THINK_END:
            self._state = CONTENT
            return True
        self._end = ("stop", None)
        return False

    def _emit_reasoning(self, piece: str) -> None:
        if self._r_lead:
            piece = piece.lstrip("\n")
            if not piece:
                return
            self._r_lead = False
        piece = self._r_nl + piece
        body = piece.rstrip("\n")
        self._r_nl = piece[len(body):]
        if body:
            self._out.append(ReasoningDelta(body))

    def _settle(self) -> None:
        limit = self._r_end
        pend = self._r_pending
        if limit is None:
            return
        self._r_tokens += sum(1 for p in pend if p < limit)
        pend.clear()

    # ------------------------------------------------------------------ content

    def _content(self) -> bool:
        j, m = self._find(self._m_content)
        if j:
            self._emit_content(self._take(j))
            if self._end is not None:
                return False
        if m is None:
            return False
        self._take(len(m))
        if m == THINK_END:
            return True
        if m in self._eos_text:
            self._end = ("stop", None)
            return False
        if m == TOOL_CALLS_BEGIN:
            self._block_markup = self._c_nl + m  # newlines before the block go with its markup
            self._c_nl = ""
            self._block_calls = 0
            self._in_block = True
            self._state = BLOCK
            return True
        # a bare call (no block opener)
        self._in_block = False
        self._block_markup = self._c_nl
        self._c_nl = ""
        self._block_calls = 0
        self._head = m
        self._state = HEAD
        return True

    def _emit_content(self, piece: str) -> None:
        if self._after_block:
            if not piece.strip():
                self._c_nl += piece
                return
            self._after_block = False
        if self._c_lead:
            piece = (self._c_nl + piece).lstrip("\n")
            self._c_nl = ""
            if not piece:
                return
            self._c_lead = False
        piece = self._c_nl + piece
        body = piece.rstrip("\n")
        self._c_nl = piece[len(body):]
        if body:
            self._deliver(body)

    def _deliver(self, text: str) -> None:
        if self._stops is not None:
            text, matched = self._stops.feed(text)
            if matched is not None:
                if text:
                    self._text_out(text)
                self._end = ("stop", matched)
                return
        if text:
            self._text_out(text)

    def _text_out(self, text: str) -> None:
        if self._json is not None:
            text = self._json.feed(text)
            if not text:
                return
        self._out.append(TextDelta(text))

    def _as_content(self, text: str) -> None:
        """Markup that yields no call (or text inside a block): content, exactly as written."""
        if text:
            self._after_block = False
            self._emit_content(text)

    # ------------------------------------------------------------------ ending

    def _close(self, reason: str) -> None:
        self._rc_flush()
        st = self._state
        if self._end is None or self._end[1] is None:
            if st == HEAD and self._head:
                head, self._head = self._head, ""
                self._reject(head, "truncated_tool_call")
                st = self._state
            elif st in (ARGS, TAIL) and self._js is not None:
                self._note("truncated_tool_call")
                self._tail_junk = True
                self._as_content(self._end_call())
            elif st == TAIL and self._tail.strip(" \t\r\n") not in ("", "```" if self._fenced else ""):
                self._flush_tail(len(self._tail))
            elif st == BLOCK and not self._block_calls:
                self._block_markup += self._block_ws
                self._release_markup()
            buf, self._buf = self._buf, ""
            if buf:  # a held possible marker that never completed
                if st == REASONING:
                    self._emit_reasoning(buf)
                elif st == CONTENT:
                    self._emit_content(buf)
                else:
                    self._as_content(buf)
            if self._state == REASONING or st == REASONING:
                if self._r_nl:
                    self._out.append(ReasoningDelta(self._r_nl))
                    self._r_nl = ""
                if self._opts.thinking_stage is not None:
                    self._note("unclosed_reasoning")
            if self._c_nl and not self._after_block:
                nl, self._c_nl = self._c_nl, ""
                self._deliver(nl)
            if self._stops is not None and (self._end is None or self._end[1] is None):
                held = self._stops.flush()
                if held:
                    self._text_out(held)
        if self._json is not None:
            tail = self._json.finish()
            if tail:
                self._out.append(TextDelta(tail))
            for note in self._json.notes:
                self._note(note)
        if self._r_end is None and self._state == REASONING:
            self._r_end = self._pos
        self._settle()
        if self._r_end is None:  # never in reasoning after its start: every pending token was reasoning
            self._r_tokens += len(self._r_pending)
            self._r_pending.clear()
        self._state = DONE
        self._out.append(Finish(reason, self._completion, self._r_tokens,
                                self._end[1] if self._end else None, self._ncalls, tuple(self._notes)))
