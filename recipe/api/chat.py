"""OpenAI Chat Completions: conversion of a request (models in :mod:`recipe.api.chat_wire`) to a
:class:`~recipe.conversation.Conversation`.

Conversion follows deepseek-recipe 0.2.0 (behaviour map §1.4 "Chat Completions", §1.5–1.9):
schema problems are ``parse``-stage errors, semantic problems ``convert``-stage errors, both 400
with an OpenAI error body.
"""

from __future__ import annotations

from typing import Any

from recipe.api import common
from recipe.api.engine_sampling import extra_sampling, values_of
from recipe.api.chat_wire import (
    FilePart,
    ImagePart,
    AssistantMsg,
    ChatCompletionRequest,
    Content,
    DeveloperMsg,
    LatestReminderMsg,
    RFJsonObject,
    RFRegex,
    RFText,
    SystemMsg,
    TextPart,
    ToolMsg,
    UserMsg,
    parse_chat_request,
)
from recipe.api.reuse import MemoMatch, strings_only
from recipe.api.images import Piece, file_data_url, image_from_url, join_with_images
from recipe.api.wire import check_u32
from recipe import conversation
from recipe.encodings.base import RequestRules
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.options import Options

__all__ = ["ChatCompletionRequest", "parse_chat_request", "chat_to_conversation"]


# --- conversion ---------------------------------------------------------------------------------


def _join(content: Content | None) -> str:
    """Content parts joined with ``\\n\\n`` (empty parts kept); images/files -> placeholder (V4)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n\n".join(p.text if isinstance(p, TextPart) else _unsupported_image() for p in content)


def _unsupported_image() -> str:
    common.note_dropped("image")
    return common.UNSUPPORTED_IMAGE


def _image_urls(i: int, content: list[Any]) -> list[tuple[str, str | None] | None]:
    """Per part: ``(url, detail)`` of an ``image_url`` or ``file`` part, None for text; every file
    part is checked first (deepseek-recipe's order)."""
    where = f".messages[{i}]"
    files = {k: file_data_url(p.file_data, p.file_id, where) for k, p in enumerate(content) if isinstance(p, FilePart)}
    out: list[tuple[str, str | None] | None] = []
    for k, p in enumerate(content):
        if k in files:
            out.append((files[k], None))
        elif isinstance(p, ImagePart):
            out.append((p.image_url.url, p.image_url.detail))
        else:
            out.append(None)
    return out


def _pieces(i: int, content: list[Any]) -> list[Piece]:
    """V4.1: text parts as text, ``image_url`` and ``file`` parts as validated image sources."""
    where = f".messages[{i}]"
    return [p.text if url is None else image_from_url(url[0], url[1], where, where)
            for p, url in zip(content, _image_urls(i, content))]


def _join_images(i: int, content: Content | None, rules: RequestRules) -> tuple[str, tuple[conversation.ImagePlaceholder, ...]]:
    """Content text and its image placeholders: V4 (no image token) writes ``[Unsupported Image]``."""
    if rules.image_token is None or not isinstance(content, list) or all(isinstance(p, TextPart) for p in content):
        return _join(content), ()
    return join_with_images(_pieces(i, content), rules.image_token)


def _check_assistant_media(i: int, content: Content | None, rules: RequestRules) -> None:
    """V4.1 refuses images in assistant content (a ``file`` part is validated first)."""
    if rules.image_token is None or not isinstance(content, list):
        return
    if any(url is not None for url in _image_urls(i, content)):
        raise RequestError("Image in assistant message is not supported", param=f"messages[{i}].content")


def _convert_and_pair(msgs: list[Any], rules: RequestRules, interleaved: bool = False,
                      reused: tuple[conversation.Message | None, ...] = (),
                      each: list[conversation.Message | None] | None = None) -> tuple[conversation.Message, ...]:
    """Each message converted (:func:`_message`), in order, while checking that every tool message
    answers the preceding assistant's calls and every call gets exactly one answer: the first
    problem in message order is the error, as deepseek-recipe reports it.

    ``reused``: per leading message, an earlier conversion of the same wire message under the same
    rules (None: convert it); ``each`` receives, per message, its conversion when it is a pure
    function of the wire message and the rules (text content: :func:`_pure`), else None.

    ``interleaved`` (``Options.interleaved_history="accept"``): a system or developer message between
    an assistant's calls and their tool messages is rendered after the tool messages (the template
    needs the results right after the calls), instead of the parity target's error."""
    out: list[conversation.Message] = []
    pending: list[str] | None = None  # call ids still awaiting a tool message
    answered: set[str] = set()
    deferred: list[conversation.Message] = []  # system / developer messages met while calls were pending
    n_reused = len(reused)
    for i, m in enumerate(msgs):
        conv = reused[i] if i < n_reused else None
        if conv is None:
            conv = _message(i, m, rules)
            if each is not None:
                each.append(conv if _pure(m) else None)
        elif each is not None:
            each.append(conv)  # (only pure conversions are kept)
        if type(m) is ToolMsg:
            out.append(conv)
            if pending is None:
                raise RequestError(
                    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
                    param=f"messages[{i}]",
                )
            if m.tool_call_id in answered:
                raise RequestError(
                    f"Duplicate value for 'tool_call_id' of {m.tool_call_id} in message[{i}]",
                    param=f"messages[{i}].tool_call_id",
                )
            answered.add(m.tool_call_id)
            if m.tool_call_id in pending:
                pending.remove(m.tool_call_id)
            continue
        if pending and interleaved and type(m) in (SystemMsg, DeveloperMsg):
            deferred.append(conv)
            continue
        if pending:
            _missing(pending, answered, i)
        out += deferred
        deferred.clear()
        out.append(conv)
        if pending is not None or answered:
            pending, answered = None, set()
        if type(m) is AssistantMsg and m.tool_calls:
            pending = [c.id for c in m.tool_calls]
    if pending:
        _missing(pending, answered, len(msgs))
    out += deferred
    return tuple(out)


def _missing(pending: list[str], answered: set[str], i: int) -> None:
    head = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'."
    if answered:
        raise RequestError(f"{head[:-1]}, The following tool_call_ids did not have response messages: {', '.join(pending)}", param=f"messages[{i}]")
    raise RequestError(f"{head} (insufficient tool messages following tool_calls message)", param=f"messages[{i}]")


def _by_eq(raw: Any) -> bool:
    """A message (JSON value) that ``==`` compares exactly with a later one (:mod:`recipe.api.reuse`):
    no content parts (a ``file`` part keeps its object as sent) and only strings and nulls; every
    other object in a message is read by key into a wire model."""
    return type(raw) is dict and type(raw.get("content")) is not list and strings_only(raw)


def _pure(m: Any) -> bool:
    """Whether :func:`_message` of ``m`` depends only on ``m`` and the rules and records nothing
    else (no content parts: an image part notes a placeholder)."""
    return type(m.content) is str or m.content is None


def _message(i: int, m: Any, rules: RequestRules) -> conversation.Message:
    kind = type(m)  # the wire models' exact classes (isinstance on a pydantic model costs ~4x)
    if type(m.content) is str:  # the common case: text content, no parts to join or images to place
        if kind is SystemMsg or (kind is DeveloperMsg and rules.system_in_place):
            return conversation.SystemMessage(m.content)
        if kind is UserMsg or kind is DeveloperMsg:
            return conversation.UserMessage(m.content)
    if kind is SystemMsg or (kind is DeveloperMsg and rules.system_in_place):
        return conversation.SystemMessage(*_join_images(i, m.content, rules))
    if kind is UserMsg or kind is DeveloperMsg:  # developer: as deepseek-recipe maps a Responses developer item
        return conversation.UserMessage(*_join_images(i, m.content, rules))
    if kind is LatestReminderMsg:
        return conversation.LatestReminderMessage(_join(m.content))
    if kind is ToolMsg:
        text, images = _join_images(i, m.content, rules)
        return conversation.ToolMessage(m.tool_call_id, text, images)
    _check_assistant_media(i, m.content, rules)
    if m.tool_calls is not None and len(m.tool_calls) == 0:
        raise RequestError(
            f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param=f"messages[{i}].tool_calls",
        )
    if m.content is None and not m.tool_calls:
        raise RequestError("Invalid assistant message: content or tool_calls must be set", param=f"messages[{i}]")
    calls = tuple(conversation.ToolCall(c.id, c.function.name, c.function.arguments) for c in m.tool_calls or ())
    content = None if m.content is None else _join(m.content)
    return conversation.AssistantMessage(content, m.reasoning_content, calls, m.prefix)


def _response_format(rf: Any) -> conversation.ResponseFormat:
    if rf is None or isinstance(rf, RFText):
        return common.TEXT_FORMAT
    if isinstance(rf, RFJsonObject):
        return conversation.ResponseFormat("json_object")
    if isinstance(rf, RFRegex):
        return conversation.ResponseFormat("regex", regex=rf.regex)
    js = rf.json_schema
    return conversation.ResponseFormat("json_schema", schema=js.schema_, name=js.name, strict=js.strict)


def chat_to_conversation(req: ChatCompletionRequest, options: Options, match: MemoMatch | None = None) -> conversation.Conversation:
    """Convert a validated request into a Conversation (deepseek-recipe 0.2.0 rules).

    ``match`` (from :func:`~recipe.api.chat_wire.parse_chat_request`): the unchanged messages'
    earlier conversions are reused, and this request's are remembered once it converts.

    Raises:
        RequestError: stage ``convert``, status 400, with the parity target's message and a field path.
    """
    encoding = common.check_model(req.model, options)
    rules = get_encoding(encoding).request
    if options.developer_role == "reject":
        for i, m in enumerate(req.messages):
            if isinstance(m, DeveloperMsg):
                raise RequestError(
                    "invalid request body: unknown variant `developer`, expected one of `system`, `user`, `assistant`, `tool`, `latest_reminder`",
                    param=f"messages[{i}].role",
                    stage="parse",
                )
    if not req.messages:
        raise RequestError("Empty input messages", param="messages")
    switch = req.thinking.type if req.thinking else common.template_thinking(req.chat_template_kwargs, options)
    thinking, effort = common.resolve_thinking(switch, req.reasoning_effort, options, encoding)

    each: list[conversation.Message | None] | None = None if match is None else []
    messages = _convert_and_pair(list(req.messages), rules, options.interleaved_history == "accept",
                                 () if match is None else match.converted(rules, req.messages), each)
    # empty system messages are dropped before the prefix rules apply (deepseek-recipe, V4 and V4.1):
    # a prefix followed only by empty system messages is the final message
    dropped = any(map(_dropped, messages))
    last = len(messages) - 1
    if dropped:
        last = next((i for i in range(last, -1, -1) if not _dropped(messages[i])), last)
    for i, m in enumerate(req.messages):
        if type(m) is AssistantMsg and m.prefix and i != last:
            raise RequestError(
                "Invalid completion message: prefix set true with message which is not final message or message role is not assistant",
                param=f"messages[{i}].prefix",
            )
    has_prefix = type(req.messages[last]) is AssistantMsg and bool(req.messages[last].prefix)
    if has_prefix and (req.tools or any(isinstance(m, AssistantMsg) and m.tool_calls for m in req.messages)):
        raise RequestError("Function call should not be used with prefix", param="tools")
    if options.reasoning_content_behavior == "reject" and thinking:
        _check_reasoning_present(req.messages)

    tc = req.tool_choice
    mode, name = ("auto", None) if tc is None else (tc, None) if isinstance(tc, str) else ("required", tc.function.name)
    rf = _response_format(req.response_format)
    if req.tools or rf.schema is not None:
        common.check_schema_limits(options, [*((t.function.parameters, f"tools[{k}].function.parameters")
                                               for k, t in enumerate(req.tools or ())),
                                             (rf.schema, "response_format.json_schema.schema")])
    tools = _tools(req.tools, mode, options) if req.tools else []
    if not common.thinking_for_tool_choice(mode, tools, thinking, options):
        thinking, effort = False, None
    tool_choice, tools = common.resolve_tool_choice(mode, name, tools, thinking, options=options)
    if tools:  # (both rules are about strict tools)
        common.check_strict_mixing(tools, options)
        common.check_format_with_strict_tools(tools, req.response_format is not None, options=options)

    rf = common.check_response_format(rf, schema_field="response_format.json_schema.schema",
                                      enforce_strict=options.strict_schemas == "enforce")
    if rf.type == "json_object" and not common.mentions_json(_texts(messages)):
        raise RequestError(
            "Prompt must contain the word 'json' in some form to use 'response_format' of type 'json_object'.",
            param="response_format",
        )
    if has_prefix and rf.type == "json_object":
        raise RequestError("response_format json_object should not be used with prefix", param="response_format")
    if req.temperature is not None or req.top_p is not None:
        common.check_sampling(req.temperature, req.top_p)
    extra = None
    if options.engine_sampling == "use":
        extra = extra_sampling(values_of(req), n_field=True)
    else:
        if req.n is not None and req.n != 1:
            raise RequestError("Invalid n value (currently only n = 1 is supported)", param="n")
        for key in ("presence_penalty", "frequency_penalty"):
            v = getattr(req, key)
            if v is not None and not -2 <= v <= 2:
                raise RequestError(f"Invalid {key} value, the valid range of {key} is [-2, 2]", param=key)
    if req.top_logprobs is not None and (req.top_logprobs > 20 or not req.logprobs):
        raise RequestError(
            "Invalid top_logprobs and logprobs value, logprobs must be set to true if top_logprobs is used.",
            param="top_logprobs",
        )
    max_tokens = None if req.max_tokens is None else common.check_max_tokens(
        req.max_tokens, thinking, options, clamp=False, field="max_tokens")
    if max_tokens is None and req.max_completion_tokens is not None and options.max_completion_tokens == "use":
        max_tokens = common.check_max_tokens(check_u32(req.max_completion_tokens, "max_completion_tokens"), thinking, options,
                                             clamp=False, field="max_completion_tokens")
    stop = () if req.stop is None else common.check_stop(
        [req.stop] if isinstance(req.stop, str) else list(req.stop), "stop", indexed=False)

    sampling = common.sampling(
        thinking, tools, req.temperature, req.top_p, seed=req.seed, logprobs=bool(req.logprobs), top_logprobs=req.top_logprobs,
        rule=rules.top_p, extra=extra,
    )
    if match is not None and each is not None:
        match.remember(req.messages, rules, each, _by_eq)
    return conversation.Conversation(
        messages=tuple([m for m in messages if not _dropped(m)]) if dropped else messages,
        tools=tools,
        tool_choice=tool_choice,
        thinking=thinking,
        reasoning_effort=effort,
        response_format=rf,
        max_tokens=max_tokens,
        stop=stop,
        sampling=sampling,
        parallel_tool_calls=req.parallel_tool_calls is not False,
    )


def _dropped(m: conversation.Message) -> bool:
    """An empty system message, left out of the conversation (deepseek-recipe drops it at conversion)."""
    return type(m) is conversation.SystemMessage and m.content == ""


def _tools(tools_in: list[Any], mode: str, options: Options) -> list[conversation.ToolDefinition]:
    """The declared tools, checked in deepseek-recipe's order: every name first, then per tool:
    unique (unless ``tool_choice`` is ``none``), schema."""
    fields = [f"tools[{k}].function.name" for k in range(len(tools_in))]
    for t, field in zip(tools_in, fields):
        common.check_tool_name(t.function.name, field, options)
    tools = []
    seen: set[str] = set()
    for k, t in enumerate(tools_in):
        if mode != "none":  # (tool_choice none drops the tools: duplicates are not checked, observed)
            if t.function.name in seen:  # two schemas under one name would make a call ambiguous
                raise RequestError("Tool names must be unique.", param=fields[k])
            seen.add(t.function.name)
        tools.append(common.build_tool(t.function.name, t.function.description, t.function.parameters, t.function.strict, fields[k],
                                       enforce_strict=options.strict_schemas == "enforce"))
    return tools


def _texts(messages: tuple[conversation.Message, ...]) -> list[str]:
    out: list[str] = []
    for m in messages:
        if isinstance(m, conversation.AssistantMessage):
            out.append(m.content or "")
        else:
            out.append(m.content)
    return out


def _check_reasoning_present(msgs: list[Any]) -> None:
    last_user = max((i for i, m in enumerate(msgs) if isinstance(m, UserMsg)), default=-1)
    for i, m in enumerate(msgs[last_user + 1 :], start=last_user + 1):
        if isinstance(m, AssistantMsg) and m.reasoning_content is None:
            raise RequestError(
                "The `reasoning_content` in the thinking mode must be passed back to the API.",
                param=f"messages[{i}].reasoning_content",
            )
