"""Conversation -> DeepSeek-V3.2 prompt segments (the API path): DeepSeek's ``encode_messages``
(:mod:`.reference`) on the equivalent messages, ``thinking_mode`` from ``conv.thinking``.

Tools and the response format ride on the first message when it is a system message, else on a
new empty system message in front (DeepSeek's tests attach them to ``messages[0]``; an empty system
content gives ``<BOS>\\n\\n## Tools…``). Tool definitions are ``{"name", "description" (when
given), "parameters"}``; the response format is ``{"type": "json_object"}`` or ``{"type":
"json_schema", "json_schema": {"name", "schema", "strict" (when given)}}``.

Beyond the reference (which raises on these): in thinking mode an assistant turn after the last
user message without reasoning renders empty reasoning (``options.reasoning_content_behavior``
``fill_empty``); history arguments that are not a JSON object render as ``{}`` (blank) or as one
``arguments`` string parameter (deepseek-recipe's V4 rule); a prefix assistant turn is continued (cut after its content, or — thinking mode,
no content — after its reasoning, before ``</think>``). A conversation ending with a non-prefix
assistant turn is a 400: the V3.2 format opens an assistant turn only after a user message or tool
results.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from recipe.conversation import AssistantMessage, Conversation, ParsingOptions, ResponseFormat
from recipe.encodings.deepseek_v3_2.reference import render_messages
from recipe.encodings.v3_shared.api import messages_of, openai_tools, remap_starts, request_error
from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.errors import RequestError
from recipe.prompt import Prompt, Special

__all__ = ["render", "parsing", "response_format_dict"]


def response_format_dict(rf: ResponseFormat) -> dict[str, Any] | None:
    """The response format as the message dict field the encoder dumps (None for plain text)."""
    if rf.type == "json_object":
        return {"type": "json_object"}
    if rf.type == "json_schema":
        js: dict[str, Any] = {"name": rf.name or "", "schema": rf.schema}
        if rf.strict is not None:
            js["strict"] = rf.strict
        return {"type": "json_schema", "json_schema": js}
    return None


def _object_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A history call whose arguments are not a JSON object (the encoder would raise): blank
    arguments are ``{}``, anything else is one ``arguments`` string parameter holding the raw text
    (deepseek-recipe's rule for V4)."""
    raw = call["function"]["arguments"]
    try:
        if isinstance(json.loads(raw), dict):
            return call
    except ValueError:
        pass
    fixed = "{}" if not raw.strip() else json.dumps({"arguments": raw}, ensure_ascii=False)
    return {**call, "function": {**call["function"], "arguments": fixed}}


def render(conv: Conversation) -> Prompt:
    """The V3.2 prompt of ``conv``. Raises RequestError: a ``latest_reminder`` message, a conversation
    ending with a non-prefix assistant turn, arguments or results the encoder cannot pair."""
    msgs, index = messages_of(conv, "DeepSeek-V3.2")
    last = conv.messages[-1] if conv.messages else None
    cont = type(last) is AssistantMessage and last.prefix
    if type(last) is AssistantMessage and not cont:
        raise RequestError(
            "the DeepSeek-V3.2 format opens an assistant turn only after a user message or tool results: end the "
            "conversation with one of those, or mark the last assistant message as a prefix to continue it",
            param="messages")
    carrier: dict[str, Any] = {}
    tools = openai_tools(conv.tools)
    if tools:
        carrier["tools"] = tools
    rf = response_format_dict(conv.response_format)
    if rf is not None:
        carrier["response_format"] = rf
    if carrier:
        if msgs and msgs[0]["role"] == "system":
            msgs[0] = {**msgs[0], **carrier}
        else:
            msgs.insert(0, {"role": "system", "content": "", **carrier})
            index.insert(0, -1)
    for k, m in enumerate(msgs):
        if m.get("tool_calls"):
            msgs[k] = {**m, "tool_calls": [_object_arguments(c) for c in m["tool_calls"]]}
    mode = "thinking" if conv.thinking else "chat"
    try:
        prompt = render_messages(msgs, mode, continue_final_message=cont, require_reasoning=False)
    except ChatTemplateError as err:
        raise request_error(err, "DeepSeek-V3.2") from None
    if cont and conv.thinking and not last.content and last.reasoning_content and prompt.segments \
            and prompt.segments[-1] == Special("</think>"):
        prompt = replace(prompt, segments=prompt.segments[:-1])  # continue the reasoning
    return remap_starts(prompt, index)


def parsing(conv: Conversation, default: ParsingOptions) -> ParsingOptions:
    """V3.2's output starts in reasoning in thinking mode (after a user turn the prompt ends
    ``<think>``, after tool results ``\\n\\n<think>``); a prefix continues its answer, or its reasoning
    when it has no content. The prompt never opens a tool-call block."""
    last = conv.messages[-1] if conv.messages else None
    stage = None
    if conv.thinking:
        stage = "reasoning"
        if type(last) is AssistantMessage and last.prefix:
            stage = "content_continuation" if last.content or not last.reasoning_content else "reasoning_continuation"
    return replace(default, thinking_stage=stage, starts_in_tool_calls=False)
