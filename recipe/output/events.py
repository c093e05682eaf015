"""Output events (the API-neutral result of parsing model output) and SSE framing.

An encoding's output parser turns completion token ids into a flat list of these events; each
API's stream encoder turns events into that API's stream chunks, and :func:`accumulate` folds
them into one :class:`ParsedOutput` for non-streamed responses. Events are small frozen slots
dataclasses, safe to share.

Event order guarantees (per parser run):

* ``ToolCallStart(i)`` comes before every ``ToolCallArgumentsDelta(i)``, which come before
  ``ToolCallEnd(i)``; the concatenated argument deltas of call ``i`` equal ``ToolCallEnd.arguments``
  and are always one valid JSON object text, each key once;
* exactly one :class:`Finish` event, always the last.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Union


from recipe.jsonfmt import dumps_wire

__all__ = [
    "ReasoningDelta",
    "TextDelta",
    "ToolCallStart",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "Finish",
    "OutputEvent",
    "ParsedToolCall",
    "ParsedOutput",
    "accumulate",
    "sse_event",
    "sse_done",
]


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """More reasoning ("thinking") text. ``text`` is never empty."""

    text: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More answer (content) text. ``text`` is never empty."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins. ``index`` counts calls from 0 in output order; ``id`` is ``call_…``."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDelta:
    """A fragment of call ``index``'s arguments JSON text (``{``, ``"key": ``, string pieces, …)."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """Call ``index`` is complete; ``arguments`` is the whole JSON object text (always valid JSON)."""

    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class Finish:
    """The output ended.

    Attributes:
        reason: why generation stopped, as the backend / parser sees it: ``stop`` (EOS, stop
            token, stop sequence or a normal finish), ``length``, ``content_filter``, or another
            backend string passed through unchanged. API layers map it (``stop`` + tool calls →
            Chat ``tool_calls``, …).
        completion_tokens: token ids pushed (token mode, EOS/stop token included) plus the
            ``token_count`` of text pushes.
        reasoning_tokens: how many of those tokens were reasoning tokens (exact in token mode:
            ids that start before ``</think>``; text mode attributes a whole chunk by its start).
        matched_stop: the stop sequence that ended the content, else None.
        tool_calls: number of tool calls emitted.
        notes: tags for degraded or repaired output, empty for clean output (meanings tabled in
            docs/streaming.md, "Malformed model output"). Parser: ``unclosed_reasoning``,
            ``truncated_tool_call``, ``partial_markup``, ``implicit_parameter_close``,
            ``unclosed_invoke``, ``invalid_json_argument``, ``inferred_parameter_type``,
            ``duplicate_parameter``, ``text_in_tool_block``, ``stray_dsml``,
            ``rejected_tool_call``, ``missing_required_parameter``, ``undeclared_tool``,
            ``recovered_dsml`` (a call recovered from a corrupted spelling),
            ``think_end_in_content``, ``role_token``, ``tool_call_in_reasoning`` (a complete block
            inside the reasoning was made a call), ``dsml_in_reasoning`` (other tool-call markup
            there, kept as reasoning); JSON-object mode: ``json_not_found``,
            ``json_incomplete``, ``json_trailing_text``; json_schema answers (added by the
            completion driver): ``schema_mismatch`` followed by ``schema_error: …`` details.
    """

    reason: str
    completion_tokens: int
    reasoning_tokens: int
    matched_stop: str | None = None
    tool_calls: int = 0
    notes: tuple[str, ...] = ()

    @property
    def malformed(self) -> bool:
        """True when the parser had to repair or re-route anything (``notes`` is not empty)."""
        return bool(self.notes)


OutputEvent = Union[ReasoningDelta, TextDelta, ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd, Finish]


@dataclass(frozen=True, slots=True)
class ParsedToolCall:
    """One accumulated tool call: ``arguments`` is JSON object text."""

    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """Everything a non-streamed response needs, folded from the events of one output.

    Attributes:
        content: answer text ("" when none).
        reasoning_content: reasoning text ("" when none).
        tool_calls: calls in output order.
        finish_reason: Chat-style: ``tool_calls`` when calls were made and the output stopped
            normally (no stop sequence), else :attr:`Finish.reason`; None if no Finish was seen.
        backend_reason: :attr:`Finish.reason` unchanged (None if no Finish was seen).
        completion_tokens / reasoning_tokens / matched_stop / notes: from :class:`Finish`.
    """

    content: str
    reasoning_content: str
    tool_calls: tuple[ParsedToolCall, ...]
    finish_reason: str | None
    backend_reason: str | None
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    matched_stop: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def malformed(self) -> bool:
        """True when the parser had to repair or re-route anything."""
        return bool(self.notes)


def accumulate(events: Iterable[OutputEvent]) -> ParsedOutput:
    """Fold a stream of output events into a :class:`ParsedOutput`.

    Tool-call arguments are taken from ``ToolCallEnd`` when present, else from the concatenated
    deltas (a stream cut short). Never raises on a well-typed event sequence.
    """
    content: list[str] = []
    reasoning: list[str] = []
    starts: dict[int, ToolCallStart] = {}
    args: dict[int, list[str]] = {}
    ends: dict[int, str] = {}
    fin: Finish | None = None
    for ev in events:
        t = type(ev)
        if t is TextDelta:
            content.append(ev.text)
        elif t is ReasoningDelta:
            reasoning.append(ev.text)
        elif t is ToolCallArgumentsDelta:
            args.setdefault(ev.index, []).append(ev.text)
        elif t is ToolCallStart:
            starts[ev.index] = ev
        elif t is ToolCallEnd:
            ends[ev.index] = ev.arguments
        elif t is Finish:
            fin = ev
    calls = tuple(
        ParsedToolCall(i, s.id, s.name, ends[i] if i in ends else "".join(args.get(i, ())))
        for i, s in sorted(starts.items())
    )
    if fin is None:
        return ParsedOutput("".join(content), "".join(reasoning), calls, None, None)
    finish_reason = fin.reason
    if fin.reason == "stop" and calls and fin.matched_stop is None:
        finish_reason = "tool_calls"
    return ParsedOutput(
        "".join(content),
        "".join(reasoning),
        calls,
        finish_reason,
        fin.reason,
        fin.completion_tokens,
        fin.reasoning_tokens,
        fin.matched_stop,
        fin.notes,
    )


def sse_event(data: object, event: str | None = None) -> bytes:
    """One Server-Sent Events frame: optional ``event: NAME`` line, ``data: JSON`` line, blank line.

    ``data`` is serialised compactly with orjson unless it is already ``str``/``bytes`` (sent as
    is). Multi-line string data is split into several ``data:`` lines, as the SSE spec requires.
    Raises ``TypeError`` for data orjson cannot serialise.
    """
    if isinstance(data, bytes):
        body = data
    elif isinstance(data, str):
        body = data.encode()
    else:
        body = dumps_wire(data)
    head = b"event: " + event.encode() + b"\n" if event else b""
    if b"\n" in body:
        body = body.replace(b"\r\n", b"\n").replace(b"\n", b"\ndata: ")
    return head + b"data: " + body + b"\n\n"


def sse_done() -> bytes:
    """The Chat Completions stream terminator frame ``data: [DONE]``."""
    return b"data: [DONE]\n\n"
