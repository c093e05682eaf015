"""A :class:`~recipe.conversation.Conversation` as the message dicts a pre-V4 template reads.

The API path of the V3 / R1 / V3.1 / V3.2 families renders "the equivalent messages" through the
generation's own template (:func:`messages_of`), so a Chat, Responses or Messages request gets
exactly the prompt the published template gives the same conversation. Equivalence rules
(docs/earlier-generations.md, "API path"):

* messages keep their order (system messages included); an assistant turn's content is ``""``
  when it has none (the OpenAI ``null`` of a tool-call turn renders the same in V3-0324 and V3.1,
  and R1-0528 would raise on ``null``); calls become ``tool_calls`` with ``type: "function"`` and
  the arguments text as the client sent it; ``prefix`` is kept; ``reasoning_content`` is passed
  (only V3.2 reads it);
* tool results are put in the order of the calls they answer (by call id; unknown ids keep their
  place after the known ones), since every pre-V4 template pairs results with calls by position;
* ``latest_reminder`` messages (a DeepSeek-V4 role) are rejected.
"""

from __future__ import annotations

from typing import Any

from recipe.conversation import (
    AssistantMessage,
    Conversation,
    LatestReminderMessage,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.errors import RequestError
from recipe.prompt import Prompt

__all__ = ["messages_of", "openai_tools", "remap_starts", "request_error"]


def _assistant(m: AssistantMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
    if m.reasoning_content is not None:
        out["reasoning_content"] = m.reasoning_content
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls
        ]
    if m.prefix:
        out["prefix"] = True
    return out


def messages_of(conv: Conversation, family: str) -> tuple[list[dict[str, Any]], list[int]]:
    """``(message dicts, conversation index of each)`` for ``conv`` (rules in the module docstring).

    Raises:
        RequestError: a ``latest_reminder`` message (not part of ``family``'s format).
    """
    msgs: list[dict[str, Any]] = []
    index: list[int] = []
    order: dict[str, int] = {}
    run: list[tuple[int, int, dict[str, Any]]] = []  # (rank, conversation index, dict) of a tool-result run

    def flush() -> None:
        run.sort(key=lambda r: r[0])
        for _, k, d in run:
            msgs.append(d)
            index.append(k)
        run.clear()

    for k, m in enumerate(conv.messages):
        kind = type(m)
        if kind is ToolMessage:
            rank = order.get(m.tool_call_id, len(order) + len(run))
            run.append((rank, k, {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}))
            continue
        flush()
        if kind is SystemMessage:
            d: dict[str, Any] = {"role": "system", "content": m.content}
        elif kind is UserMessage:
            d = {"role": "user", "content": m.content}
        elif kind is AssistantMessage:
            d = _assistant(m)
            order = {c.id: i for i, c in enumerate(m.tool_calls)}
        elif kind is LatestReminderMessage:
            raise RequestError(f"latest_reminder messages are a DeepSeek-V4 feature; the {family} format has none",
                               param="messages")
        else:  # pragma: no cover - the Message union is closed
            raise RequestError(f"unsupported message {kind.__name__}", param="messages")
        msgs.append(d)
        index.append(k)
    flush()
    return msgs, index


def openai_tools(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    """OpenAI-shaped tool dicts: ``{"type": "function", "function": {"name", ["description"], "parameters"}}``."""
    out = []
    for t in tools:
        fn: dict[str, Any] = {"name": t.name}
        if t.description is not None:
            fn["description"] = t.description
        fn["parameters"] = t.parameters
        out.append({"type": "function", "function": fn})
    return out


def remap_starts(prompt: Prompt, index: list[int]) -> Prompt:
    """``prompt`` with message starts mapped from dict indices to conversation indices (dicts the
    render added, such as V3.2's tools carrier, are dropped)."""
    starts = tuple((index[m], s) for m, s in prompt.message_starts if 0 <= m < len(index) and index[m] >= 0)
    return Prompt(prompt.segments, starts)


def request_error(err: ChatTemplateError, family: str) -> RequestError:
    """A template refusal on the API path as a 400 (the request cannot be rendered in this format)."""
    return RequestError(f"the request cannot be rendered in the {family} format: {err}", param="messages")
