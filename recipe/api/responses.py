"""OpenAI Responses: conversion of a request to a :class:`~recipe.conversation.Conversation`.

The pydantic request models live in :mod:`recipe.api.responses_wire` (re-exported here).

Conversion follows deepseek-recipe 0.2.0 (behaviour map §1.4 "Responses", §1.5–1.9; wire formats
§3.1): schema problems are ``parse``-stage errors, semantic problems ``convert``-stage errors, both
400 with an OpenAI error body. Field paths in :attr:`RequestError.param` use the request's own
names (``input[3].call_id``, ``tools[0].tools[1].name``).

Item walk (observed rules):

- ``instructions`` is the first system message; ``system`` items are system messages, ``user`` and
  ``developer`` items user messages; content parts are joined with ``\\n\\n``.
- Consecutive ``assistant`` items, ``reasoning`` items and ``function_call`` items build one
  assistant message: non-empty texts joined with ``\\n\\n``, non-empty reasoning texts with ``\\n``,
  calls sorted by call id. A non-empty reasoning item after assistant text starts a new assistant message.
- After a call, only calls and outputs may follow until every pending call has its output; the
  assistant message and its tool results are then closed. With ``Options.interleaved_history``
  ``accept`` (the default; OpenAI accepts these histories) reasoning and assistant items between
  pending calls join the same assistant message, and a system / developer item there is placed
  after the results (outputs are matched to calls by ``call_id``); ``reject`` is the parity error. ``item_reference`` and unknown item
  types are ignored everywhere; tool-search items too, except on V4.1 (:mod:`recipe.api.tool_search`).
- V4.1 (the family's :class:`~recipe.encodings.base.RequestRules`): ``developer`` items are system
  messages, images are image tokens, namespaces flatten to ``ns::name``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

import orjson

from recipe.api import common, tool_search
from recipe.api.engine_sampling import extra_sampling, read_seed, values_of
from recipe.api.apply_patch import (
    APPLY_PATCH_DESCRIPTIONS,
    APPLY_PATCH_NAME,
    APPLY_PATCH_PARAMETERS,
)
from recipe.api.responses_wire import (
    CustomTool,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FormatJsonObject,
    FormatText,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    InputFile,
    InputImage,
    InputText,
    MessageItem,
    NamespaceTool,
    OutputText,
    ReasoningItem,
    ResponsesRequest,
    TextConfig,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    WebSearchChoice,
    parse_responses_request,
)
from recipe.api.images import Piece, image_from_url, join_with_images
from recipe import conversation
from recipe.encodings.base import RequestRules
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.options import Options

__all__ = [
    "ResponsesRequest",
    "parse_responses_request",
    "responses_to_conversation",
    "namespace_tool_map",
    "flat_name",
    "UNSUPPORTED_DOCUMENT",
]

UNSUPPORTED_DOCUMENT = "[Unsupported Document]"
_V4_RULES = RequestRules()


# --- tools: flattening and validation -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ToolEntry:
    """One function the request declares, before schema validation."""

    name: str  # final (flattened, de-duplicated) name
    description: str | None
    parameters: Any
    strict: bool | None
    field: str  # path of the name field, for errors
    namespace: tuple[str, str] | None = None  # (namespace, local name) for flattened tools
    deferred: bool = False  # found by a tool search (V4.1): a deferred tool


def flat_name(namespace: str, name: str, style: str = "v4") -> str:
    """The flat tool name of ``name`` in ``namespace``.

    ``v4``: ``ns__name``; when either side already has an underscore at the seam the two are just
    joined (``("x_", "y")`` -> ``x_y``, ``("x", "_y")`` -> ``x_y``), as the parity target does.
    ``v41``: ``ns::name`` (deepseek-recipe's V4.1 conversion).
    """
    if style == "v41":
        return f"{namespace}::{name}"
    return namespace + name if namespace.endswith("_") or name.startswith("_") else f"{namespace}__{name}"


def _flat_description(namespace: str | None, description: str | None, style: str) -> str | None:
    """A flattened tool's description: its own (``v4``); ``v41``: the namespace's description, a
    newline, then its own, when the namespace has a non-empty one."""
    if style == "v41" and namespace:
        return f"{namespace}\n{description or ''}"
    return description


def _check_name(name: str, path: str, options: Options) -> None:
    common.check_tool_name(name, path, options)


def _first_free(base: str, used: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, … — the first not in ``used``; added to ``used``."""
    candidate, n = base, 0
    while candidate in used:
        n += 1
        candidate = f"{base}_{n}"
    used.add(candidate)
    return candidate


def _flat_entries(tools: Sequence[Any], rules: RequestRules = _V4_RULES, prefix: str = "", deferred: bool = False) -> list[_ToolEntry]:
    """Function tools in request order with namespace tools flattened (:func:`flat_name` in the
    family's style, ``rules.namespaces``); ``prefix`` starts the field paths (``input[3].`` for the
    tools a tool search found, which are ``deferred``).

    A flattened name that collides with a plain tool or an earlier flattened name gets the first
    free suffix ``_1``, ``_2``, …; plain names never change. No validation here.
    """
    used = {t.name for t in tools if isinstance(t, FunctionTool)}
    used |= {APPLY_PATCH_NAME for t in tools if isinstance(t, CustomTool) and t.name == APPLY_PATCH_NAME}
    out: list[_ToolEntry] = []
    for k, t in enumerate(tools):
        if isinstance(t, FunctionTool):
            out.append(_ToolEntry(t.name, t.description, t.parameters, t.strict, f"{prefix}tools[{k}].name", deferred=deferred))
        elif isinstance(t, CustomTool):
            if t.name == APPLY_PATCH_NAME:
                description = APPLY_PATCH_DESCRIPTIONS[rules.apply_patch]
                out.append(_ToolEntry(APPLY_PATCH_NAME, description, APPLY_PATCH_PARAMETERS, None, f"{prefix}tools[{k}].name", deferred=deferred))
        elif isinstance(t, NamespaceTool):
            for j, inner in enumerate(t.tools):
                if not isinstance(inner, FunctionTool):
                    continue
                candidate = _first_free(flat_name(t.name, inner.name, rules.namespaces), used)
                description = _flat_description(t.description, inner.description, rules.namespaces)
                out.append(_ToolEntry(
                    candidate, description, inner.parameters, inner.strict, f"{prefix}tools[{k}].tools[{j}].name", (t.name, inner.name), deferred
                ))
    return out


def namespace_tool_map(req: ResponsesRequest, rules: RequestRules = _V4_RULES) -> dict[str, tuple[str, str]]:
    """Flattened tool name -> (namespace, local name) for every namespace function tool.

    E.g. ``{"fs__read": ("fs", "read")}`` (V4.1: ``{"fs::read": ("fs", "read")}``); a name bumped
    by a collision keeps its suffix (``{"ns__a_1": ("ns", "a")}``). The output side uses it to
    report calls under their namespace. ``rules``: the model family's request rules. Never raises
    (the request is already parsed; invalid names are the converter's business).
    """
    return {e.name: e.namespace for e in _flat_entries(req.tools or (), rules) if e.namespace is not None}


def _check_tools(tools: Sequence[Any], options: Options, prefix: str = "") -> None:
    """First pass over ``tools``, in order: names, custom tools, namespace contents (before input);
    ``prefix`` starts the field paths (``input[3].`` for a tool search's tools)."""
    for k, t in enumerate(tools):
        if isinstance(t, FunctionTool):
            _check_name(t.name, f"{prefix}tools[{k}].name", options)
        elif isinstance(t, CustomTool):
            if t.name != APPLY_PATCH_NAME:
                raise RequestError(f"Unsupported custom tool: '{t.name}'. Only 'apply_patch' is supported.", param=f"{prefix}tools[{k}].name")
        elif isinstance(t, NamespaceTool):
            _check_name(t.name, f"{prefix}tools[{k}].name", options)
            seen: set[str] = set()
            for j, inner in enumerate(t.tools):
                if isinstance(inner, CustomTool):
                    raise RequestError(
                        f"Currently custom tools are not allowed inside a namespace. Found custom tool '{inner.name}' in {prefix}tools[{k}].tools[{j}].",
                        param=f"{prefix}tools[{k}].tools[{j}]",
                    )
                _check_name(inner.name, f"{prefix}tools[{k}].tools[{j}].name", options)
                if inner.name in seen:
                    raise RequestError("Tool names within a namespace must be unique.", param=f"{prefix}tools[{k}].tools[{j}].name")
                seen.add(inner.name)


def _build_tools(entries: Sequence[_ToolEntry], enforce_strict: bool = True) -> tuple[conversation.ToolDefinition, ...]:
    """Second pass: plain names unique, then each schema validated (and strict-normalised)."""
    out: list[conversation.ToolDefinition] = []
    names: set[str] = set()
    for e in entries:
        if e.name in names:
            raise RequestError("Tool names must be unique.", param=e.field)
        names.add(e.name)
        parameters = e.parameters
        if parameters is None and e.strict:
            # The parity target normalises a strict tool without parameters to the empty object
            # schema; common.build_tool would print {} instead.
            parameters = {"type": "object"}
        tool = common.build_tool(e.name, e.description, parameters, e.strict, e.field, check_name=e.namespace is None,
                                 enforce_strict=enforce_strict)
        out.append(replace(tool, defer_loading=True) if e.deferred else tool)
    return tuple(out)


# --- input items -> messages --------------------------------------------------------------------

_PART_TEXT = {InputImage: common.UNSUPPORTED_IMAGE, InputFile: UNSUPPORTED_DOCUMENT}


def _join(content: Union[str, Sequence[Any], None]) -> str:
    """Parts joined with ``\\n\\n`` (empty parts kept); images and files become placeholders (Pro)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n\n".join(p.text if isinstance(p, (InputText, OutputText)) else _placeholder(p) for p in content)


def _placeholder(part: Any) -> str:
    common.note_dropped("image" if isinstance(part, InputImage) else "document")
    return _PART_TEXT[type(part)]


def _image_url(i: int, j: int, part: InputImage, field: str) -> str:
    """V4.1: an ``input_image`` part's URL (``input[i].<field>[j]``), its fields checked (an empty
    string counts as absent)."""
    where = f"input[{i}].{field}[{j}]"
    if part.image_url and part.file_id:
        raise RequestError(f"{where}: input_image cannot have both image_url and file_id", param=where)
    if part.file_id:
        raise RequestError(f"{where}: file_id is not supported. Pass the image as a base64 data url instead.", param=where)
    if not part.image_url:
        raise RequestError(f"{where}: input_image must have image_url or file_id", param=where)
    return part.image_url


def _join_images(
    i: int, content: Union[str, Sequence[Any], None], rules: RequestRules, field: str = "content"
) -> tuple[str, tuple[conversation.ImagePlaceholder, ...]]:
    """Content text and its image placeholders (V4.1); V4 writes ``[Unsupported Image]``."""
    if rules.image_token is None or not isinstance(content, list) or not any(isinstance(p, InputImage) for p in content):
        return _join(content), ()
    # every image part's fields are checked before any URL (deepseek-recipe's order)
    urls = {j: _image_url(i, j, p, field) for j, p in enumerate(content) if isinstance(p, InputImage)}
    pieces: list[Piece] = [
        image_from_url(urls[j], p.detail, f"input[{i}]", f"input[{i}]") if j in urls
        else p.text if isinstance(p, (InputText, OutputText)) else _PART_TEXT[type(p)]
        for j, p in enumerate(content)
    ]
    return join_with_images(pieces, rules.image_token)


def _empty_call_id(i: int) -> RequestError:
    path = f"input[{i}].call_id"
    return RequestError(f"Invalid '{path}': empty string. Expected a string with minimum length 1, but got an empty string instead.", param=path)


@dataclass(slots=True)
class _Turn:
    """The assistant message being built from consecutive assistant-side items."""

    texts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[conversation.ToolCall] = field(default_factory=list)

    def message(self) -> conversation.AssistantMessage:
        # calls sorted by id, as deepseek-recipe's Responses conversion stores them (V4 renders
        # every family's calls by id anyway; V4.1 renders the conversation's order)
        calls = tuple(sorted(self.calls, key=lambda c: c.id))
        return conversation.AssistantMessage("\n\n".join(self.texts), "\n".join(self.reasoning) if self.reasoning else None, calls)


class _Walker:
    """Turns input items into messages (see the module docstring for the rules)."""

    def __init__(self, flat_names: dict[tuple[str, str], str], rules: RequestRules, used: set[str],
                 interleaved: bool = False) -> None:
        self.flat_names = flat_names
        self.interleaved = interleaved  # Options.interleaved_history == "accept"
        self.deferred: list[conversation.Message] = []  # system / developer messages met while calls were pending
        self.used = used  # the declared tools' (flat) names, then the undeclared pairs' as they are named
        self.rules = rules
        self.messages: list[conversation.Message] = []
        self.turn: _Turn | None = None
        self.pending: list[str] = []  # call ids awaiting output, in call order
        self.results: list[conversation.ToolMessage] = []  # outputs held until every pending call is answered
        self.calls: set[str] = set()
        self.answered: set[str] = set()
        self.found: list[_ToolEntry] = []  # tools found by tool searches (V4.1), in order
        self.announce: list[str] = []  # their names, announced after the turn's results

    def call_name(self, namespace: str, name: str) -> str:
        """The flat name a history call in ``namespace`` renders under: the declared tool's, else
        :func:`flat_name` with the first free suffix ``_1``, ``_2``, … against the declared tools' names
        and the undeclared pairs named before it (one name per pair; observed in deepseek-recipe 0.2.0)."""
        key = (namespace, name)
        known = self.flat_names.get(key)
        if known is not None:
            return known
        candidate = _first_free(flat_name(namespace, name, self.rules.namespaces), self.used)
        self.flat_names[key] = candidate
        return candidate

    def close(self) -> None:
        if self.turn is not None:
            self.messages.append(self.turn.message())
            self.turn = None
        self.messages.extend(self.results)
        self.results = []
        if self.announce:
            self.messages.append(common.PendingSystem("", (), tuple(self.announce)))  # type: ignore[arg-type]
            self.announce = []
        if self.deferred:
            self.messages.extend(self.deferred)
            self.deferred = []

    def require_no_pending(self, i: int) -> None:
        if self.pending:
            raise RequestError(f"No tool output found for tool call {self.pending[0]}.", param=f"input[{i}]")

    def call(self, i: int, call: conversation.ToolCall) -> None:
        if call.id == "":
            raise _empty_call_id(i)
        if call.id in self.calls:
            raise RequestError(f"Duplicate 'call_id': {call.id}.", param=f"input[{i}].call_id")
        self.calls.add(call.id)
        self.pending.append(call.id)
        if self.turn is None:
            self.turn = _Turn()
        self.turn.calls.append(call)

    def output(self, i: int, call_id: str | None, content: str, images: tuple[conversation.ImagePlaceholder, ...] = ()) -> None:
        if call_id is None:  # accepted: a tool result answering nothing
            self.require_no_pending(i)
            self.close()
            self.messages.append(conversation.ToolMessage("", content, images))
            return
        if call_id == "":
            raise _empty_call_id(i)
        if call_id in self.answered:
            raise RequestError(f"Duplicate tool output for call_id: {call_id}.", param=f"input[{i}].call_id")
        if call_id not in self.pending:
            raise RequestError(f"No tool call found for tool output with call_id {call_id}.", param=f"input[{i}].call_id")
        self.pending.remove(call_id)
        self.answered.add(call_id)
        self.results.append(conversation.ToolMessage(call_id, content, images))
        if not self.pending:
            self.close()

    def item(self, i: int, it: Any) -> None:
        if isinstance(it, FunctionCallItem):
            name = it.name if it.namespace is None else self.call_name(it.namespace, it.name)
            self.call(i, conversation.ToolCall(it.call_id, name, it.arguments))
        elif isinstance(it, CustomToolCallItem):
            self.call(i, conversation.ToolCall(it.call_id, it.name, orjson.dumps({"input": it.input}).decode()))
        elif isinstance(it, ToolSearchCallItem) and self.rules.tool_search:
            self.call(i, tool_search.search_call(it))
        elif isinstance(it, ToolSearchOutputItem) and self.rules.tool_search:
            text = tool_search.result_text(i, it.tools)
            found = _flat_entries(it.tools, self.rules, f"input[{i}].", deferred=True)
            self.found += found
            self.announce += [e.name for e in found]
            self.output(i, it.call_id, text)
        elif isinstance(it, (FunctionCallOutputItem, CustomToolCallOutputItem)):
            self.output(i, it.call_id, *_join_images(i, it.output, self.rules, "output"))
        elif isinstance(it, MessageItem):
            interleaved = self.interleaved and bool(self.pending)
            if not interleaved or it.role == "user":
                self.require_no_pending(i)
            if it.role == "assistant":
                if self.rules.image_token is not None and isinstance(it.content, list) and any(isinstance(p, InputImage) for p in it.content):
                    for j, p in enumerate(it.content):  # the parts' fields are checked first
                        if isinstance(p, InputImage):
                            _image_url(i, j, p, "content")
                    raise RequestError(f"input[{i}]: Image in assistant message is unsupported", param=f"input[{i}].content")
                text = _join(it.content)
                if self.turn is None:
                    self.turn = _Turn()
                if text:
                    self.turn.texts.append(text)
                return
            text, images = _join_images(i, it.content, self.rules)
            if it.role == "system" or (it.role == "developer" and self.rules.system_in_place):
                msg: conversation.Message = conversation.SystemMessage(text, images)
            else:
                msg = conversation.UserMessage(text, images)
            if interleaved:  # a system / developer message before the pending calls' outputs: after them
                self.deferred.append(msg)
                return
            self.close()
            self.messages.append(msg)
        elif isinstance(it, ReasoningItem):
            interleaved = self.interleaved and bool(self.pending)
            if not interleaved:
                self.require_no_pending(i)
            text = "\n".join(p.text for p in it.content or ())
            if not text:
                return
            if self.turn is not None and self.turn.texts and not interleaved:  # (calls pending: the same turn)
                self.close()
            if self.turn is None:
                self.turn = _Turn()
            self.turn.reasoning.append(text)
        # item_reference, tool_search_*, unknown types: ignored


def _messages(req: ResponsesRequest, rules: RequestRules,
              interleaved: bool = False) -> tuple[list[conversation.Message], list[_ToolEntry]]:
    """Instructions and input as Conversation messages (pairing and call-id rules checked), and the
    tools tool searches found (V4.1). ``interleaved``: ``Options.interleaved_history == "accept"``."""
    if req.input is None and not req.instructions:
        raise RequestError("Either input or instructions must be provided", param="input")
    if isinstance(req.input, list) and not req.input:
        raise RequestError("Input items array must not be empty", param="input")
    messages: list[conversation.Message] = [conversation.SystemMessage(req.instructions)] if req.instructions else []
    if isinstance(req.input, str):
        messages.append(conversation.UserMessage(req.input))
        return messages, []
    flat = {}
    entries = _flat_entries(req.tools or (), rules)
    for e in entries:
        if e.namespace is not None:
            flat.setdefault(e.namespace, e.name)
    walker = _Walker(flat, rules, {e.name for e in entries}, interleaved)
    for i, it in enumerate(req.input or ()):
        walker.item(i, it)
    walker.require_no_pending(len(req.input or ()))
    walker.close()
    return messages + walker.messages, walker.found


def _check_reasoning_present(messages: Sequence[conversation.Message], declares_tools: bool) -> None:
    """Reject mode: assistant turns after the last user turn must carry reasoning when the request
    declares function tools (even with tool_choice none) or the turn made tool calls (observed)."""
    last_user = max((i for i, m in enumerate(messages) if type(m) is conversation.UserMessage), default=-1)
    for m in messages[last_user + 1 :]:
        if type(m) is conversation.AssistantMessage and m.reasoning_content is None and (declares_tools or m.tool_calls):
            raise RequestError("The `reasoning_text` in the thinking mode must be passed back to the API.", param="input")


# --- response format, sampling ------------------------------------------------------------------


def _response_format(text: TextConfig | None, messages: Sequence[conversation.Message],
                     enforce_strict: bool = True) -> conversation.ResponseFormat:
    fmt = None if text is None else text.format
    if fmt is None or isinstance(fmt, FormatText):
        return common.TEXT_FORMAT
    if isinstance(fmt, FormatJsonObject):
        texts = (m.content or "" for m in messages)
        if not common.mentions_json(texts):
            raise RequestError(
                "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.",
                param="text.format",
            )
        return conversation.ResponseFormat("json_object")
    rf = conversation.ResponseFormat("json_schema", schema=fmt.schema_, name=fmt.name, strict=fmt.strict)
    return common.check_response_format(rf, "text.format", schema_field="text.format.schema", enforce_strict=enforce_strict)


def responses_to_conversation(req: ResponsesRequest, options: Options) -> conversation.Conversation:
    """Convert a validated Responses request into a Conversation (deepseek-recipe 0.2.0 rules).

    Check order (observed): model; tool names / custom tools / namespaces; instructions and input
    items (call ids, pairing); tool names unique and schemas (skipped for tool_choice none); tool_choice; text.format; strict
    mixing; text.format with strict tools; temperature, top_p; top_logprobs; max_output_tokens.

    Raises:
        RequestError: stage ``convert``, status 400, with the parity target's message and a field path.
    """
    encoding = common.check_model(req.model, options)
    rules = get_encoding(encoding).request
    effort_level = req.reasoning.effort if req.reasoning else None
    thinking, effort = common.resolve_thinking(common.template_thinking(req.chat_template_kwargs, options), effort_level,
                                               options, encoding)
    tool_list = req.tools or ()
    _check_tools(tool_list, options)
    if rules.tool_search and isinstance(req.input, list):  # the tools searches found, checked with the request's
        for i, it in enumerate(req.input):
            if isinstance(it, ToolSearchOutputItem):
                _check_tools(it.tools, options, f"input[{i}].")
    messages, found = _messages(req, rules, options.interleaved_history == "accept")
    entries = _flat_entries(tool_list, rules)
    if options.reasoning_content_behavior == "reject" and thinking:
        _check_reasoning_present(messages, bool(entries))
    tc = req.tool_choice
    if tc is None or isinstance(tc, WebSearchChoice):
        mode, name = "auto", None
    elif isinstance(tc, str):
        mode, name = tc, None
    else:
        mode, name = "required", tc.name
    fmt = req.text.format if req.text is not None else None
    common.check_schema_limits(options, [*((e.parameters, f"{e.field.removesuffix('.name')}.parameters") for e in entries + found),
                                         (getattr(fmt, "schema_", None), "text.format.schema")])
    # tool_choice none drops the tools before they are checked (duplicates, schemas): observed.
    tools = () if mode == "none" else _build_tools(entries + found, options.strict_schemas == "enforce")
    if not common.thinking_for_tool_choice(mode, tools, thinking, options):
        thinking, effort = False, None
    tool_choice, tools = common.resolve_tool_choice(mode, name, tools, thinking, options=options)

    rf = _response_format(req.text, messages, options.strict_schemas == "enforce")
    common.check_strict_mixing(tools, options)
    # Unlike Chat, an explicit {"type": "text"} format is allowed next to strict tools (observed).
    common.check_format_with_strict_tools(tools, rf.type != "text", "text.format", options=options)
    common.check_sampling(req.temperature, req.top_p)
    if req.top_logprobs is not None and req.top_logprobs > 20:
        raise RequestError("Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].", param="top_logprobs")
    max_tokens = common.check_max_tokens(req.max_output_tokens, thinking, options, clamp=False, field="max_output_tokens")

    extra, seed = None, None
    if options.engine_sampling == "use":
        extra = extra_sampling(values_of(req), n_field=False)
        seed = read_seed(req.seed)
    sampling = common.sampling(
        thinking, tools, req.temperature, req.top_p, seed=seed, logprobs=req.top_logprobs is not None,
        top_logprobs=req.top_logprobs, rule=rules.top_p, extra=extra,
    )
    if not rules.system_in_place:  # V4 hoists system text; an empty one adds nothing (V4.1 keeps it)
        messages = [m for m in messages if not (type(m) is conversation.SystemMessage and m.content == "")]
    if found:
        messages = common.resolve_systems(messages, tools)
    return conversation.Conversation(
        messages=tuple(messages),
        tools=tools,
        tool_choice=tool_choice,
        thinking=thinking,
        reasoning_effort=effort,
        response_format=rf,
        max_tokens=max_tokens,
        stop=(),
        sampling=sampling,
        parallel_tool_calls=req.parallel_tool_calls is not False,
    )
