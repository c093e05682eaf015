"""Anthropic Messages output: output events → Messages stream events and the ``message`` object.

Shapes follow deepseek-recipe 0.2.0 (the parity target, behaviour map §3.5 / §3.9) and what the
official ``anthropic`` SDK accumulates (api-wire-formats §4.2–4.4, §7); the rules are tabled in
docs/streaming.md ("Anthropic Messages"):

* ``message_start`` ``{"message": {"id","type":"message","role":"assistant","model","content":[],
  "stop_reason":null,"stop_sequence":null,"usage":{…,"output_tokens":0}}}`` with the real input and
  cache counts (``input_tokens`` excludes cache reads);
* content blocks in output order, indexes 0, 1, 2…, each ``content_block_start`` → deltas →
  ``content_block_stop``: ``thinking`` (``thinking_delta``; a ``signature_delta`` just before it
  closes), ``text`` (``text_delta``), ``tool_use`` (``input: {}``, then ``input_json_delta`` with the
  parser's argument fragments);
* in thinking mode the thinking block opens with the stream (it exists even when the reasoning is
  empty); one ``ping`` follows the first ``content_block_start``;
* one ``message_delta`` with ``stop_reason`` / ``stop_sequence`` and the cumulative ``usage``
  (input and cache counts repeated), plus ``"recipe": {"notes": [...]}`` for degraded output;
  then ``message_stop``. Framing: ``event: NAME`` + ``data: JSON``; no terminator frame.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar


from orjson import dumps as _orjson_dumps

from recipe.jsonfmt import dumps_wire

from recipe.cache.usage import PromptUsage
from recipe.output import events as evt

from recipe.api.encoder import HOLE, frame_template

if TYPE_CHECKING:
    from recipe.api.encoder import ChannelLogprobs, ResponseMeta, TokenLogprob
    from recipe.api.prepared import PreparedRequest

__all__ = ["STOP_REASONS", "MessagesEncoder", "messages_stop_reason", "tool_input"]

#: backend finish reason -> Messages ``stop_reason`` (a stop-sequence match gives ``stop_sequence``
#: and ``stop`` with tool calls gives ``tool_use``, see :func:`messages_stop_reason`). Reasons not
#: listed pass through unchanged (the SDK accepts any string).
STOP_REASONS: dict[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_THINKING, _TEXT, _TOOL = 0, 1, 2
_EMPTY_BLOCK = ({"type": "thinking", "thinking": "", "signature": ""}, {"type": "text", "text": ""})
#: ``event: NAME\ndata: `` prefixes, keyed by the payload's ``type`` (the event name equals it).
_HEADS: dict[str, bytes] = {
    name: b"event: " + name.encode() + b"\ndata: "
    for name in ("message_start", "content_block_start", "content_block_delta", "content_block_stop",
                 "message_delta", "message_stop", "ping", "error")
}


def messages_stop_reason(reason: str, tool_calls: int, matched_stop: str | None) -> str:
    """Messages ``stop_reason`` for a backend ``reason`` (deepseek-recipe's mapping).

    A matched stop sequence gives ``stop_sequence``; ``stop`` with tool calls gives ``tool_use``;
    otherwise :data:`STOP_REASONS` (``length`` → ``max_tokens`` even with calls, ``content_filter``
    → ``refusal``), and unknown backend strings pass through.
    """
    if matched_stop is not None:
        return "stop_sequence"
    if reason == "stop" and tool_calls:
        return "tool_use"
    return STOP_REASONS.get(reason, reason)


def tool_input(arguments: str) -> Any:
    """The ``tool_use.input`` value for a call's arguments JSON text (parsed with :mod:`json`, as
    the SDK's partial-JSON accumulator reads the streamed fragments). Text that is not a JSON object
    gives ``{}`` (deepseek-recipe's rule; our parser always produces an object)."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


class MessagesEncoder:
    """The Anthropic Messages :class:`~recipe.api.encoder.StreamEncoder`.

    Args:
        prep: the prepared Messages request (its thinking stage decides whether a thinking block
            opens the stream).
        meta: id (``msg_…``), model and prompt token counts (``created`` and the fingerprint are
            not part of Messages objects).
        signature: the value of every thinking block's ``signature`` (default: the response id,
            deepseek-recipe's default; ``with_signature`` there).
        thinking_tokens: also report ``usage.output_tokens_details.thinking_tokens`` (the number
            of reasoning token ids) in ``message_delta`` and the response. Off by default: the
            parity target reports no reasoning-token count for Messages.

    Text or reasoning the parser reports inside an open tool call (degraded output, note
    ``text_in_tool_block``) is held and sent as the next block once the tool block closes: Messages
    blocks cannot interleave, and no byte is lost.

    Block layout: a content block per run of one kind in output order. The encoder records the
    layout it streamed (block kinds and text lengths), so :meth:`response` for the same output
    reproduces it exactly — including a text block after tool calls (text the parser keeps,
    docs/streaming.md deviation 3). A fresh encoder lays out thinking, text, tool uses.
    """

    id_prefix: ClassVar[str] = "msg_"

    __slots__ = ("_meta", "_signature", "_thinking_first", "_thinking_tokens", "_usage",
                 "_kind", "_index", "_pinged", "_tool_blocks", "_layout", "_run", "_held", "_tpl", "_ftpl")

    def __init__(self, prep: PreparedRequest, meta: ResponseMeta, *, signature: str | None = None,
                 thinking_tokens: bool = False) -> None:
        self._meta = meta
        stage = prep.parsing.thinking_stage
        # a thinking block opens the stream in thinking mode, unless the output continues an answer
        self._thinking_first = stage is not None and stage != "content_continuation"
        self._signature = meta.id if signature is None else signature
        self._thinking_tokens = thinking_tokens
        pu = PromptUsage(meta.prompt_tokens, meta.cached_tokens)
        self._usage = (pu.uncached_input_tokens, pu.cache_read_input_tokens)
        self._kind: int | None = None  # kind of the open block
        self._index = -1  # index of the last started block
        self._pinged = False
        self._tool_blocks: dict[int, int] = {}  # tool-call index -> block index
        # streamed layout: [kind, chars] for thinking/text runs, [_TOOL, call index] for tool uses
        self._layout: list[list[int]] = []
        self._run: list[int] | None = None  # the open thinking/text layout entry
        self._held: list[evt.OutputEvent] = []  # text that arrived inside an open tool call
        self._tpl: dict[int, tuple[bytes, ...]] = {}  # block index -> delta frame template; () ambiguous
        self._ftpl: tuple[bytes, ...] | None = None  # the open tool block's template (fragment_sse)

    @property
    def signature(self) -> str:
        """The thinking blocks' signature; settable until the first thinking block closes
        (``cs.encoder.signature = …`` on a :class:`~recipe.output.driver.CompletionStream`)."""
        return self._signature

    @signature.setter
    def signature(self, value: str) -> None:
        self._signature = value

    # ------------------------------------------------------------------ events

    def _usage_obj(self, output_tokens: int, reasoning_tokens: int | None = None) -> dict[str, Any]:
        uncached, cached = self._usage
        u: dict[str, Any] = {
            "input_tokens": uncached,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }
        if self._thinking_tokens and reasoning_tokens is not None:
            u["output_tokens_details"] = {"thinking_tokens": reasoning_tokens}
        return u

    def open(self) -> list[dict[str, Any]]:
        """``message_start``; in thinking mode also the thinking block's start and the ``ping``."""
        m = self._meta
        start = {
            "type": "message_start",
            "message": {
                "id": m.id,
                "type": "message",
                "role": "assistant",
                "model": m.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": self._usage_obj(0),
            },
        }
        out = [start]
        if self._thinking_first:
            self._start(_THINKING, out)
        return out

    def _start(self, kind: int, out: list[dict[str, Any]]) -> None:
        """Close the open block and start a thinking or text block."""
        if self._kind is not None:
            self._stop(out)
        self._index += 1
        self._kind = kind
        self._run = [kind, 0]
        self._layout.append(self._run)
        out.append({"type": "content_block_start", "index": self._index, "content_block": dict(_EMPTY_BLOCK[kind])})
        if not self._pinged:
            self._pinged = True
            out.append({"type": "ping"})

    def _stop(self, out: list[dict[str, Any]]) -> None:
        i = self._index
        if self._kind == _THINKING:
            out.append({"type": "content_block_delta", "index": i,
                        "delta": {"type": "signature_delta", "signature": self._signature}})
        out.append({"type": "content_block_stop", "index": i})
        self._kind = None
        self._run = None

    @staticmethod
    def _delta(index: int, kind: int, text: str) -> dict[str, Any]:
        """The ``content_block_delta`` of block ``index`` of ``kind`` carrying ``text``."""
        if kind == _TEXT:
            return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}
        if kind == _THINKING:
            return {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": text}}
        return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}

    def on_events(self, events: Sequence[evt.OutputEvent], logprobs: Sequence[TokenLogprob] | None = None) -> list[dict[str, Any]]:
        """Block starts, deltas and stops for parser events (``logprobs`` are ignored: Messages has
        none). ``ToolCallEnd`` closes the tool block; ``Finish`` goes to :meth:`close`."""
        out: list[dict[str, Any]] = []
        delta = self._delta
        for ev in events:
            t = type(ev)
            if t is evt.TextDelta or t is evt.ReasoningDelta:
                if self._kind == _TOOL:
                    self._held.append(ev)  # blocks cannot interleave: sent after the tool block
                    continue
                kind = _TEXT if t is evt.TextDelta else _THINKING
                if self._kind != kind:
                    self._start(kind, out)
                self._run[1] += len(ev.text)  # type: ignore[index]
                out.append(delta(self._index, kind, ev.text))
            elif t is evt.ToolCallArgumentsDelta:
                block = self._tool_blocks.get(ev.index)
                if block is not None:
                    out.append(delta(block, _TOOL, ev.text))
            elif t is evt.ToolCallStart:
                if self._kind is not None:
                    self._stop(out)
                self._index += 1
                self._kind = _TOOL
                self._tool_blocks[ev.index] = self._index
                self._ftpl = None
                self._layout.append([_TOOL, ev.index])
                out.append({"type": "content_block_start", "index": self._index,
                            "content_block": {"type": "tool_use", "id": ev.id, "name": ev.name, "input": {}}})
                if not self._pinged:
                    self._pinged = True
                    out.append({"type": "ping"})
            elif t is evt.ToolCallEnd and self._kind == _TOOL and self._tool_blocks.get(ev.index) == self._index:
                self._stop(out)
                self._flush_held(out)
        return out

    def delta_sse(self, event: evt.OutputEvent) -> bytes | None:
        """The frame of one delta the open block takes as it is (text in a text block, reasoning in
        a thinking block, a started call's arguments), from the block's template
        (:func:`~recipe.api.encoder.frame_template`); byte for byte ``frame(on_events([event])[0])``.
        None otherwise."""
        t = type(event)
        if t is evt.TextDelta or t is evt.ReasoningDelta:
            kind = self._kind
            if kind != (_TEXT if t is evt.TextDelta else _THINKING):
                return None
            block = self._index
        elif t is evt.ToolCallArgumentsDelta:
            block = self._tool_blocks.get(event.index)
            if block is None:
                return None
            kind = _TOOL
        else:
            return None
        tpl = self._tpl.get(block)
        if tpl is None:
            tpl = self._tpl[block] = frame_template(self.frame(self._delta(block, kind, HOLE)), 1) or ()
        if not tpl:
            return None
        text = event.text
        try:
            js = _orjson_dumps(text)
        except TypeError:  # a lone surrogate: the general path's fallback printer
            return None
        if kind != _TOOL:
            self._run[1] += len(text)  # type: ignore[index]
        return tpl[0] + js + tpl[1]

    def fragment_sse(self, text: str, js: bytes) -> bytes | None:
        """The frame of an arguments delta of the open tool block carrying ``text``, whose compact
        JSON string literal is ``js``; byte for byte ``delta_sse`` of that call's
        ``ToolCallArgumentsDelta``. None when no tool block is open or its template is ambiguous."""
        tpl = self._ftpl
        if tpl is None or self._kind != _TOOL:
            if self._kind != _TOOL:
                return None
            block = self._index
            tpl = self._tpl.get(block)
            if tpl is None:
                tpl = self._tpl[block] = frame_template(self.frame(self._delta(block, _TOOL, HOLE)), 1) or ()
            self._ftpl = tpl
        if not tpl:
            return None
        return tpl[0] + js + tpl[1]

    def _flush_held(self, out: list[dict[str, Any]]) -> None:
        if self._held:
            held, self._held = self._held, []
            out += self.on_events(held)

    def close(self, finish: evt.Finish) -> list[dict[str, Any]]:
        """Close the open block, then ``message_delta`` (stop reason, cumulative usage, notes) and
        ``message_stop``."""
        out: list[dict[str, Any]] = []
        if self._held:
            self._stop(out)
            self._flush_held(out)
        if self._kind is not None:
            self._stop(out)
        reason = messages_stop_reason(finish.reason, finish.tool_calls, finish.matched_stop)
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": finish.matched_stop},
            "usage": self._usage_obj(finish.completion_tokens, finish.reasoning_tokens),
        }
        if finish.notes:
            delta["recipe"] = {"notes": list(finish.notes)}
        out.append(delta)
        out.append({"type": "message_stop"})
        return out

    # ------------------------------------------------------------------ whole response

    def _blocks(self, parsed: evt.ParsedOutput) -> list[dict[str, Any]]:
        calls = {c.index: c for c in parsed.tool_calls}
        texts = (parsed.reasoning_content, parsed.content)
        layout = self._layout
        if layout:
            # reuse the streamed layout when it covers exactly this output
            sums = [0, 0]
            tools = []
            for kind, n in layout:
                if kind == _TOOL:
                    tools.append(n)
                else:
                    sums[kind] += n
            if sums != [len(texts[0]), len(texts[1])] or sorted(tools) != sorted(calls):
                layout = []
        if not layout:
            layout = [[_THINKING, len(texts[0])]] if self._thinking_first or texts[0] else []
            if texts[1]:
                layout.append([_TEXT, len(texts[1])])
            layout.extend([_TOOL, c.index] for c in parsed.tool_calls)
        blocks: list[dict[str, Any]] = []
        pos = [0, 0]
        for kind, n in layout:
            if kind == _TOOL:
                c = calls[n]
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c.arguments)})
                continue
            a = pos[kind]
            pos[kind] = a + n
            if kind == _THINKING:
                blocks.append({"type": "thinking", "thinking": texts[0][a:a + n], "signature": self._signature})
            else:
                blocks.append({"type": "text", "text": texts[1][a:a + n]})
        return blocks

    def response(self, parsed: evt.ParsedOutput, logprobs: ChannelLogprobs | None = None) -> dict[str, Any]:
        """The ``message`` object; equals what the SDK accumulates (``get_final_message()``) from
        this encoder's events for the same output, plus ``recipe.notes`` for degraded output."""
        m = self._meta
        body: dict[str, Any] = {
            "id": m.id,
            "type": "message",
            "role": "assistant",
            "model": m.model,
            "content": self._blocks(parsed),
            "stop_reason": messages_stop_reason(parsed.backend_reason or "stop", len(parsed.tool_calls), parsed.matched_stop),
            "stop_sequence": parsed.matched_stop,
            "usage": self._usage_obj(parsed.completion_tokens, parsed.reasoning_tokens),
        }
        if parsed.notes:
            body["recipe"] = {"notes": list(parsed.notes)}
        return body

    # ------------------------------------------------------------------ framing

    def frame(self, payload: dict[str, Any]) -> bytes:
        """``event: TYPE\\ndata: {json}\\n\\n`` (the event name equals ``payload["type"]``; the SDK
        drops events without an ``event:`` line)."""
        t = payload["type"]
        head = _HEADS.get(t)
        if head is None:
            head = b"event: " + str(t).encode() + b"\ndata: "
        try:
            body = _orjson_dumps(payload)
        except TypeError:  # a huge integer or a lone surrogate: the fallback printer
            body = dumps_wire(payload)
        return head + body + b"\n\n"

    def done(self) -> None:
        """Messages streams end at EOF: no terminator frame."""
