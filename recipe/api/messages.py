"""Anthropic Messages: request models and conversion to a :class:`~recipe.conversation.Conversation`.

Conversion follows deepseek-recipe 0.2.0 (behaviour map §1.4 "Messages", §1.5–1.9; wire formats
§4.1): schema problems are ``parse``-stage errors, semantic problems ``convert``-stage errors, both
400. Field paths in ``RequestError.param`` are dotted, Anthropic style (``messages.1.content.0``).

Mapping in one breath: the top-level ``system`` becomes one SystemMessage; a ``system`` role inside
``messages`` becomes a user message ``<system-reminder>\\n{text}\\n</system-reminder>`` (V4.1: a
system message in place, with its ``tool_addition`` tools; tools a tool result references are
announced by a system message after that user message); every user
block becomes its own user/tool message; an assistant turn becomes one AssistantMessage (text joined
with ``\\n\\n``, thinking joined into reasoning, ``tool_use`` -> tool call with the input printed as
prompt JSON); consecutive assistant turns are not merged and a trailing assistant is not a prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from recipe.api import common
from recipe.api.engine_sampling import extra_sampling, read_seed, values_of
from recipe.api.messages_wire import (
    Base64ImageSource,
    FileImageSource,
    CustomTool,
    DocumentBlock,
    ImageBlock,
    MessageParam,
    MessagesRequest,
    RedactedThinkingBlock,
    ServerTool,
    ServerToolUseBlock,
    SystemTextBlock,
    TextBlock,
    ThinkingBlock,
    ToolAdditionBlock,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolReferenceBlock,
    ToolResultBlock,
    ToolUseBlock,
    WebSearchToolResultBlock,
    parse_messages_request,
)
from recipe.api.images import Piece, image_from_base64, image_from_messages_url, join_with_images
from recipe import conversation
from recipe.encodings.base import RequestRules
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_prompt
from recipe.options import Options

__all__ = ["MessagesRequest", "parse_messages_request", "messages_to_conversation"]


# --- conversion ---------------------------------------------------------------------------------

_PENDING = "`tool_use` ids were found without `tool_result` blocks immediately after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
_SERVER_BLOCK = "Unsupported content block: server tools are not supported"
_REASONING_MISSING = "The `content[].thinking` in the thinking mode must be passed back to the API."


def _pending_error(where: str, ids: Sequence[str], *, space: bool = True) -> RequestError:
    """The tool_use-without-result error: ids in byte order; deepseek-recipe omits the space after
    the colon when the answering user turn ran out of blocks."""
    listed = ", ".join(sorted(ids, key=lambda s: s.encode("utf-8", "surrogatepass")))
    return RequestError(f"{where}:{' ' if space else ''}{_PENDING.format(ids=listed)}", param=where)


def _document_text(block: DocumentBlock) -> str:
    common.note_dropped("document")
    return f"[Unsupported document type: {block.source.media_type or 'unknown'}]"


def _media_text(block: TextBlock | ImageBlock | DocumentBlock | ToolReferenceBlock) -> str:
    """Text of a text-like block; images and documents become Pro's placeholders."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ImageBlock):
        common.note_dropped("image")
        return common.UNSUPPORTED_IMAGE
    if isinstance(block, DocumentBlock):
        return _document_text(block)
    return block.tool_name


def _tool_result_text(block: ToolResultBlock) -> str:
    if block.content is None:
        return ""
    if isinstance(block.content, str):
        return block.content
    return "\n\n".join(_media_text(p) for p in block.content)


def _image(block: ImageBlock, path: str, where: str) -> conversation.ImageSource:
    """V4.1: an ``image`` block as a validated image source (``file`` sources refused)."""
    src = block.source
    if isinstance(src, Base64ImageSource):
        return image_from_base64(src.media_type, src.data, path, where)
    if isinstance(src, FileImageSource):
        raise RequestError(f"{where}: file_id is not supported. Pass the image as a base64 data url instead.", param=where)
    return image_from_messages_url(src.url, path, where)


def _tool_result_images(block: ToolResultBlock, i: int, j: int, token: str) -> tuple[str, tuple[conversation.ImagePlaceholder, ...]]:
    """V4.1: a tool result's text with its images as placeholders."""
    if not isinstance(block.content, list) or not any(isinstance(p, ImageBlock) for p in block.content):
        return _tool_result_text(block), ()
    path = f"messages.{i}.content.{j}.tool_result"
    pieces: list[Piece] = [
        _image(p, path, f"{path}.content[{k}]") if isinstance(p, ImageBlock) else _media_text(p) for k, p in enumerate(block.content)
    ]
    return join_with_images(pieces, token)


def _arguments(value: Any, where: str) -> str:
    """A tool_use ``input`` printed as deepseek-recipe stores it: prompt JSON (``", "``/``": "``)."""
    try:
        return dumps_prompt(value)
    except (TypeError, ValueError, RecursionError):  # only reachable with a dict body, not JSON text
        raise RequestError("invalid request body: tool_use input is not printable JSON", param=where, stage="parse") from None


class _Walker:
    """One pass over ``messages`` in order, checking tool_use/tool_result pairing the way
    deepseek-recipe does (each problem is reported at the first block where it shows) and
    producing the Conversation messages."""

    def __init__(self, tool_names: frozenset[str], rules: RequestRules) -> None:
        self.tool_names = tool_names
        self.rules = rules
        self.token = rules.image_token
        self.out: list[conversation.Message] = []
        self.pending: list[str] = []  # ids of the previous assistant turn still awaiting a result
        self.pending_from = -1  # index of that assistant turn
        self.prev_ids: frozenset[str] = frozenset()  # tool_use ids of the previous message

    def walk(self, messages: Sequence[MessageParam]) -> list[conversation.Message]:
        for i, m in enumerate(messages):
            ids: frozenset[str] = frozenset()
            if m.role == "user":
                self._user(i, m)
            elif m.role == "assistant":
                ids = self._assistant(i, m)
            else:
                self._system(i, m)
            self.prev_ids = ids
        if self.pending:
            raise _pending_error(f"messages.{self.pending_from}", self.pending, space=False)
        return self.out

    def _user(self, i: int, m: MessageParam) -> None:
        if isinstance(m.content, str):
            self._text_like(i, m.content)
            self._close_user()
            return
        if not m.content:
            raise RequestError(f"messages.{i}: all messages must have non-empty content", param=f"messages.{i}.content")
        seen: set[str] = set()
        refs: list[str] = []  # V4.1: tools the results reference, announced after the message
        for j, b in enumerate(m.content):
            if isinstance(b, ToolResultBlock):
                where = f"messages.{i}.content.{j}"
                if b.tool_use_id in seen:
                    raise RequestError(
                        f"{where}: each tool_use must have a single result. Found multiple `tool_result` blocks with id: {b.tool_use_id}",
                        param=f"{where}.tool_use_id",
                    )
                if b.tool_use_id not in self.prev_ids:
                    raise RequestError(
                        f"unexpected `{where}: tool_use_id` found in `tool_result` blocks: {b.tool_use_id}. "
                        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                        param=f"{where}.tool_use_id",
                    )
                for part in b.content if isinstance(b.content, list) else ():
                    if isinstance(part, ToolReferenceBlock):
                        if part.tool_name not in self.tool_names:
                            raise RequestError(
                                f"{where}: tool reference '{part.tool_name}' not found in available tools",
                                param=f"{where}.content",
                            )
                        refs.append(part.tool_name)
                seen.add(b.tool_use_id)
                self.pending.remove(b.tool_use_id)
                if self.token is None:
                    self.out.append(conversation.ToolMessage(b.tool_use_id, _tool_result_text(b)))
                else:
                    self.out.append(conversation.ToolMessage(b.tool_use_id, *_tool_result_images(b, i, j, self.token)))
            elif isinstance(b, ImageBlock) and self.token is not None:
                if self.pending:  # the pairing error comes before the image is read
                    raise _pending_error(f"messages.{i}", self.pending)
                where = f"messages.{i}.content[{j}]"
                self._text_like(i, self.token, (conversation.ImagePlaceholder(0, _image(b, where, where)),))
            elif isinstance(b, (TextBlock, ImageBlock, DocumentBlock)):
                self._text_like(i, _media_text(b))
            else:
                self._misplaced(i, j, b, "user")
        self._close_user()
        if refs and self.rules.deferred_tools:
            self.out.append(common.PendingSystem("", (), tuple(refs)))  # type: ignore[arg-type]

    def _text_like(self, i: int, text: str, images: tuple[conversation.ImagePlaceholder, ...] = ()) -> None:
        if self.pending:
            raise _pending_error(f"messages.{i}", self.pending)
        self.out.append(conversation.UserMessage(text, images))

    def _close_user(self) -> None:
        if self.pending:
            raise _pending_error(f"messages.{self.pending_from}", self.pending, space=False)

    def _assistant(self, i: int, m: MessageParam) -> frozenset[str]:
        if self.pending:
            raise _pending_error(f"messages.{i}", self.pending)
        if isinstance(m.content, str):
            self.out.append(conversation.AssistantMessage(m.content))
            return frozenset()
        if not m.content:
            raise RequestError(f"messages.{i}: all messages must have non-empty content", param=f"messages.{i}.content")
        text = ""
        thoughts: list[str] = []
        redacted = False
        calls: list[conversation.ToolCall] = []
        for j, b in enumerate(m.content):
            if isinstance(b, (TextBlock, ImageBlock, DocumentBlock)):
                if calls:
                    raise _pending_error(f"messages.{i}.{j}", [c.id for c in calls])
                if isinstance(b, ImageBlock) and self.token is not None:  # V4.1: read, then refused
                    _image(b, f"messages.{i}.content[{j}]", f"messages.{i}.content[{j}]")
                    raise RequestError("Image in assistant message is unsupported", param=f"messages.{i}.content.{j}")
                # deepseek-recipe adds the separator only once the text so far is non-empty:
                # ["", "b"] -> "b" but ["a", ""] -> "a\n\n" (thinking blocks use a plain join).
                text = f"{text}\n\n{_media_text(b)}" if text else _media_text(b)
            elif isinstance(b, ThinkingBlock):
                thoughts.append(b.thinking)
            elif isinstance(b, RedactedThinkingBlock):
                redacted = True  # no readable reasoning: the turn has empty reasoning
            elif isinstance(b, ToolUseBlock):
                if any(c.id == b.id for c in calls):
                    raise RequestError(f"messages.{i}.content.{j}: `tool_use` ids must be unique", param=f"messages.{i}.content.{j}.id")
                calls.append(conversation.ToolCall(b.id, b.name, _arguments(b.input, f"messages.{i}.content.{j}.input")))
            else:
                self._misplaced(i, j, b, "assistant")
        reasoning = "\n\n".join(thoughts) if thoughts else ("" if redacted else None)
        self.out.append(conversation.AssistantMessage(text, reasoning, tuple(calls)))
        self.pending = [c.id for c in calls]
        self.pending_from = i
        return frozenset(self.pending)

    def _system(self, i: int, m: MessageParam) -> None:
        """A ``role: "system"`` message: V4 a ``<system-reminder>`` user text (tool additions
        validated, then dropped); V4.1 a system message in place with its tool additions (names,
        resolved once the tools are known) and images."""
        if self.pending:
            raise _pending_error(f"messages.{i}", self.pending)
        pieces: list[Piece] = []
        additions: list[str] = []
        if isinstance(m.content, str):
            pieces.append(m.content)
        else:
            for j, b in enumerate(m.content):
                if isinstance(b, ImageBlock) and self.token is not None:
                    # a system message's images carry the message's path (deepseek-recipe 0.2.0)
                    pieces.append(_image(b, f"messages.{i}", f"messages.{i}.content[{j}]"))
                elif isinstance(b, (TextBlock, ImageBlock, DocumentBlock)):
                    pieces.append(_media_text(b))
                elif isinstance(b, ToolAdditionBlock):
                    if b.tool.name not in self.tool_names:
                        raise RequestError(
                            f"messages.{i}.content.{j}: `tool_addition` references unknown tool '{b.tool.name}'",
                            param=f"messages.{i}.content.{j}.tool.name",
                        )
                    additions.append(b.tool.name)
                else:
                    self._misplaced(i, j, b, "system")
        if not self.rules.system_in_place:
            text = "\n\n".join(p for p in pieces if isinstance(p, str))
            if text:
                self.out.append(conversation.UserMessage(f"<system-reminder>\n{text}\n</system-reminder>"))
            return
        text, images = join_with_images(pieces, self.token) if self.token is not None else ("\n\n".join(pieces), ())  # type: ignore[arg-type]
        self.out.append(common.PendingSystem(text, images, tuple(additions)))

    @staticmethod
    def _misplaced(i: int, j: int, b: Any, role: str) -> None:
        """A block that may not appear in a ``role`` message (deepseek-recipe's wording per block)."""
        if isinstance(b, (ServerToolUseBlock, WebSearchToolResultBlock)) and role == "assistant":
            raise RequestError(_SERVER_BLOCK, param=f"messages.{i}.content.{j}")
        if isinstance(b, (ThinkingBlock, RedactedThinkingBlock)):
            raise RequestError(f"messages.{i}.content: thinking blocks may only be in `assistant` messages", param=f"messages.{i}.content.{j}")
        kind, home = {
            ToolResultBlock: ("tool_result", "user"),
            ToolUseBlock: ("tool_use", "assistant"),
            ServerToolUseBlock: ("tool_use", "assistant"),
            WebSearchToolResultBlock: ("web_search_tool_result", "assistant"),
            ToolAdditionBlock: ("tool_addition", "system"),
        }[type(b)]
        raise RequestError(f"messages.{i}: `{kind}` blocks can only be in `{home}` messages", param=f"messages.{i}.content.{j}")


@contextmanager
def _param(param: str) -> Iterator[None]:
    """Re-raise a shared rule's RequestError with a dotted Messages field path."""
    try:
        yield
    except RequestError as err:
        raise RequestError(err.message, param=param, status=err.status, stage=err.stage) from None


THREADS_BETA = "message-threads-2026-08-12"


def _check_thread(req: MessagesRequest, options: Options) -> None:
    """Message threads (a conversation the server holds) are not supported: a clear 400 naming the
    beta, in the shape the anthropic SDK recognises to continue without a thread."""
    if req.thread is not None and options.anthropic_threads == "reject":
        raise RequestError(
            f"message threads (anthropic-beta: {THREADS_BETA}) are not supported by this server: "
            "send the whole conversation in `messages` without `thread`",
            param="thread",
            details={"error_code": "thread_unsupported_request", "unsupported": ["thread"]},
        )


def _check_parity_rejections(req: MessagesRequest, options: Options) -> None:
    """What deepseek-recipe refuses and recipe accepts by default (docs/clients.md): ``type: custom``
    client tools and ``redacted_thinking`` blocks; with the parity options, its errors."""
    if options.anthropic_custom_tools == "reject":
        for k, t in enumerate(req.tools or ()):
            if isinstance(t, CustomTool) and t.type == "custom":
                raise RequestError(f"tools[{k}]: server tools are not supported", param=f"tools.{k}")
    if options.redacted_thinking == "reject":
        for i, m in enumerate(req.messages):
            for j, b in enumerate(m.content if isinstance(m.content, list) else ()):
                if isinstance(b, RedactedThinkingBlock):
                    raise RequestError(
                        "invalid request body: unknown variant `redacted_thinking`, expected one of `text`, `image`, "
                        "`document`, `thinking`, `server_tool_use`, `tool_use`, `tool_result`, `web_search_tool_result`, "
                        "`tool_addition`",
                        param=f"messages.{i}.content.{j}.type",
                        stage="parse",
                    )


def _check_tool_entries(tools: Sequence[Any], options: Options) -> frozenset[str]:
    """First pass over ``tools`` (before the messages): server tools and tool names."""
    for k, t in enumerate(tools):
        if isinstance(t, ServerTool):
            raise RequestError(f"tools[{k}]: server tools are not supported", param=f"tools.{k}")
        with _param(f"tools.{k}.name"):
            common.check_tool_name(t.name, f"tools[{k}].name", options)
    return frozenset(t.name for t in tools)


def _build_tools(tools: Sequence[CustomTool], deferred: bool = False, strict: bool = False) -> tuple[conversation.ToolDefinition, ...]:
    """Second pass (after the messages): unique names, then each ``input_schema`` (required; never
    strict-normalised); ``deferred`` (V4.1) keeps ``defer_loading``; ``strict`` keeps a tool's
    ``strict: true`` (Anthropic strict tool use: its arguments follow the schema in the output grammar)."""
    out: list[conversation.ToolDefinition] = []
    seen: set[str] = set()
    for k, t in enumerate(tools):
        if t.name in seen:
            raise RequestError("Tool names must be unique.", param=f"tools.{k}.name")
        seen.add(t.name)
        if t.input_schema is None:
            raise RequestError(
                f"Invalid schema for function '{t.name}': null is not of types \"boolean\", \"object\"",
                param=f"tools.{k}.input_schema",
            )
        with _param(f"tools.{k}.input_schema"):
            tool = common.build_tool(t.name, t.description, t.input_schema, None, f"tools[{k}].name", normalize_strict=False)
        if strict and t.strict is True:
            from recipe.schema.strict_enforce import check_strict  # loaded when a request has strict tools

            check_strict(t.input_schema, f"tools.{k}.input_schema", tool=True, structure=False)
            tool = replace(tool, strict=True)
        out.append(replace(tool, defer_loading=True) if deferred and t.defer_loading else tool)
    return tuple(out)


def _with_reasoning(messages: list[conversation.Message], thinking: bool, has_tools: bool,
                    options: Options) -> list[conversation.Message]:
    """History reasoning as deepseek-recipe keeps it: dropped when thinking is off; with thinking and
    declared tools, a turn without thinking blocks gets ``""`` (or, with ``reject``, a turn after
    the last user message is a 400)."""
    if not thinking:
        return [conversation.AssistantMessage(m.content, None, m.tool_calls)
                if isinstance(m, conversation.AssistantMessage) and m.reasoning_content is not None else m
                for m in messages]
    if not has_tools:
        return messages
    last_user = max((k for k, m in enumerate(messages) if isinstance(m, conversation.UserMessage)), default=-1)
    out: list[conversation.Message] = []
    for k, m in enumerate(messages):
        if isinstance(m, conversation.AssistantMessage) and m.reasoning_content is None:
            if options.reasoning_content_behavior == "reject" and k > last_user:
                raise RequestError(_REASONING_MISSING, param="messages")
            m = conversation.AssistantMessage(m.content, "", m.tool_calls)
        out.append(m)
    return out


def _system_text(system: str | list[SystemTextBlock] | None) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(b.text for b in system)


_TOOL_CHOICE_MODES = {ToolChoiceAuto: "auto", ToolChoiceAny: "required", ToolChoiceNone: "none", ToolChoiceTool: "required"}


def _tool_choice_mode(tc: Any, options: Options) -> str:
    """``auto`` | ``none`` | ``required`` for a Messages ``tool_choice`` (``any`` forces a call unless
    ``options.anthropic_tool_choice_any`` is ``auto``, deepseek-recipe's reading)."""
    if tc is None:
        return "auto"
    if isinstance(tc, ToolChoiceAny) and options.anthropic_tool_choice_any == "auto":
        return "auto"
    return _TOOL_CHOICE_MODES[type(tc)]


def _output_format(req: MessagesRequest, options: Options) -> conversation.ResponseFormat:
    """The response format of ``output_config.format`` (Anthropic structured outputs): a
    ``json_schema`` format as Chat's ``response_format`` json_schema without ``strict`` (the schema
    as given, checked against its meta-schema); text when absent or ``options.anthropic_output_format``
    is ``ignore``.

    Raises:
        RequestError: a format that is not ``{"type": "json_schema", "schema": {…}}`` or whose schema
            is invalid, ``param`` naming the field (``output_config.format.schema``).
    """
    fmt = req.output_config.format if req.output_config is not None else None
    if fmt is None or options.anthropic_output_format == "ignore":
        return common.TEXT_FORMAT
    field = "output_config.format"
    if not isinstance(fmt, dict):
        raise RequestError(f"{field}: Input should be an object", param=field)
    if fmt.get("type") != "json_schema":
        raise RequestError(f"{field}.type: Input should be 'json_schema'", param=f"{field}.type")
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise RequestError(f"{field}.schema: Field required (a JSON Schema object)", param=f"{field}.schema")
    rf = conversation.ResponseFormat("json_schema", schema=schema)
    common.check_response_format(rf, f"{field}.schema")
    return rf


def messages_to_conversation(req: MessagesRequest, options: Options) -> conversation.Conversation:
    """Convert a validated Messages request into a Conversation (deepseek-recipe 0.2.0 rules).

    Check order (as the parity target): model; server tools and tool names; at least one message;
    the messages in order (block placement, tool_use/tool_result pairing, tool_addition references);
    reasoning (``reject`` only); unique tool names and input schemas (skipped for tool_choice
    ``none``); tool_choice; stop sequences; temperature/top_p; max_tokens (values above the bound
    are lowered to it).

    Raises:
        RequestError: stage ``convert``, status 400, with the parity target's message and a dotted
            field path in ``param`` (stage ``parse`` only for a dict body whose tool_use ``input``
            cannot be printed as JSON, e.g. a Python set).
    """
    encoding = common.check_model(req.model, options)
    rules = get_encoding(encoding).request
    _check_thread(req, options)
    _check_parity_rejections(req, options)
    tools_in = list(req.tools or ())
    tool_names = _check_tool_entries(tools_in, options)
    if rules.deferred_tools and tools_in and all(t.defer_loading for t in tools_in):
        raise RequestError("tools: at least one tool must have defer_loading=false. All tools cannot be deferred.", param="tools")
    if not req.messages:
        raise RequestError("messages: at least one message is required", param="messages")
    thinking, effort = common.resolve_thinking(
        req.thinking.type if req.thinking else common.template_thinking(req.chat_template_kwargs, options),
        req.output_config.effort if req.output_config else None,
        options,
        encoding,
    )
    body = _Walker(tool_names, rules).walk(req.messages)
    body = _with_reasoning(body, thinking, bool(tools_in), options)
    fmt = req.output_config.format if req.output_config is not None else None
    common.check_schema_limits(options, [*((t.input_schema, f"tools.{k}.input_schema") for k, t in enumerate(tools_in)
                                           if isinstance(t, CustomTool)),
                                         (fmt.get("schema") if isinstance(fmt, dict) else None, "output_config.format.schema")])
    tc = req.tool_choice
    mode = _tool_choice_mode(tc, options)
    if type(tc) is ToolChoiceAny and req.tools and mode == "auto":  # read as auto (the option): no call required
        common.note_dropped("tool_choice_any")
    strict_tools = options.anthropic_strict_tools == "enforce"
    tools = () if mode == "none" else _build_tools(tools_in, rules.deferred_tools, strict_tools)  # "none": schemas never looked at
    tool_choice: conversation.ToolChoice
    if not common.thinking_for_tool_choice(mode, tools, thinking, options):
        thinking, effort = False, None
    tool_choice, tools = common.resolve_tool_choice(
        mode, tc.name if isinstance(tc, ToolChoiceTool) else None, tools, thinking, options=options
    )

    try:
        stop = common.check_stop(list(req.stop_sequences or ()), "stop", indexed=True)
    except RequestError as err:
        index = re.search(r"stop\[(\d+)\]", err.message)
        raise RequestError(err.message, param="stop_sequences" + (f".{index[1]}" if index else "")) from None
    common.check_sampling(req.temperature, req.top_p)
    max_tokens = common.check_max_tokens(req.max_tokens, thinking, options, clamp=True, field="max_tokens")
    response_format = _output_format(req, options)
    if response_format.type != "text":
        common.check_format_with_strict_tools(tools, True, "output_config.format", options=options)

    system = _system_text(req.system)
    if rules.system_in_place:
        body = common.resolve_systems(body, tools)
    # V4 hoists system text (an empty one adds nothing); V4.1 renders a given one, even empty
    given = req.system is not None if rules.system_in_place else bool(system)
    messages: tuple[conversation.Message, ...] = ((conversation.SystemMessage(system),) if given else ()) + tuple(body)
    extra, seed = None, None
    if options.engine_sampling == "use":
        extra = extra_sampling(values_of(req), n_field=False)
        seed = read_seed(req.seed)
    sampling = common.sampling(thinking, tools, req.temperature, req.top_p, seed=seed, rule=rules.top_p, extra=extra)
    return conversation.Conversation(
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        thinking=thinking,
        reasoning_effort=effort,
        response_format=response_format,
        max_tokens=max_tokens,
        stop=stop,
        sampling=sampling,
        parallel_tool_calls=not getattr(tc, "disable_parallel_tool_use", None),
    )
