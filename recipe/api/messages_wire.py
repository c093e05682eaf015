"""Anthropic Messages request models (pydantic), serde-compatible: what deepseek-recipe 0.2.0's
parser accepts or rejects at the ``parse`` stage (wire formats §4.1). Conversion lives in
:mod:`recipe.api.messages`."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, field_validator

from recipe.api.wire import U32, U64, EngineSamplingFields, WireModel, parse_body
from recipe.errors import RequestError

__all__ = ["MessagesRequest", "parse_messages_request"]


# --- serde-compatible helpers -------------------------------------------------------------------


def _unit_variant(v: Any) -> Any:
    """serde reads a unit enum variant from ``"name"`` or from the one-key map ``{"name": null}``."""
    if isinstance(v, dict):
        if len(v) != 1:
            raise ValueError("invalid value: map, expected map with a single key")
        ((key, value),) = v.items()
        if value is not None:
            raise ValueError(f"invalid type: {type(value).__name__}, expected unit")
        return key
    return v


def _string_or_list(v: Any) -> Any:
    if not isinstance(v, (str, list)):
        raise ValueError("expected a string or a list")
    return v


def _string_list_or_null(v: Any) -> Any:
    return v if v is None else _string_or_list(v)


def _struct_from_seq(v: Any) -> Any:
    """serde also reads the one-field document source from a one-element sequence."""
    if isinstance(v, list):
        if len(v) != 1:
            raise ValueError(f"invalid length {len(v)}, expected 1 element in sequence")
        return {"media_type": v[0]}
    return v


Role = Annotated[Literal["user", "assistant", "system"], BeforeValidator(_unit_variant)]
ImageMediaType = Annotated[
    Literal["image/jpeg", "image/jpg", "image/png", "image/gif", "image/webp"], BeforeValidator(_unit_variant)
]
ThinkingType = Annotated[Literal["adaptive", "enabled", "disabled"], BeforeValidator(_unit_variant)]
Effort = Annotated[
    Literal["none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"], BeforeValidator(_unit_variant)
]


# --- request model: content blocks ----------------------------------------------------------------


class TextBlock(WireModel):
    """A ``text`` block (``cache_control`` and ``citations`` accepted, any value, ignored)."""

    type: Literal["text"]
    text: str
    cache_control: Any = None
    citations: Any = None


class Base64ImageSource(WireModel):
    """An inline image; ``media_type`` must be one of the five image types deepseek-recipe knows."""

    type: Literal["base64"]
    media_type: ImageMediaType
    data: str


class UrlImageSource(WireModel):
    """An image by URL (never fetched: Pro renders a placeholder)."""

    type: Literal["url"]
    url: str


class FileImageSource(WireModel):
    """An image by Files-API id (never fetched)."""

    type: Literal["file"]
    file_id: str


ImageSource = Annotated[Union[Base64ImageSource, UrlImageSource, FileImageSource], Field(discriminator="type")]


class ImageBlock(WireModel):
    """An ``image`` block; rendered as ``[Unsupported Image]`` on Pro."""

    type: Literal["image"]
    source: ImageSource
    cache_control: Any = None


class DocumentSource(WireModel):
    """Only ``media_type`` matters (Pro renders a placeholder); every other source field is ignored."""

    media_type: str | None = None


class DocumentBlock(WireModel):
    """A ``document`` block; rendered as ``[Unsupported document type: {media_type or unknown}]``."""

    type: Literal["document"]
    source: Annotated[DocumentSource, BeforeValidator(_struct_from_seq)]
    cache_control: Any = None


class ThinkingBlock(WireModel):
    """Assistant reasoning replayed from an earlier turn (``signature`` ignored)."""

    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(WireModel):
    """Encrypted reasoning replayed by Anthropic clients: no readable text (the turn's reasoning is
    empty). deepseek-recipe rejects the block type (``Options.redacted_thinking="reject"``)."""

    type: Literal["redacted_thinking"]
    data: str | None = None


class ToolUseBlock(WireModel):
    """An assistant tool call; ``input`` is any JSON value, printed into the call arguments."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: Any  # required; any JSON value (null included)
    cache_control: Any = None


class ServerToolUseBlock(WireModel):
    """A server tool call: parsed, then rejected (server tools are not supported)."""

    type: Literal["server_tool_use"]
    id: str
    name: str
    input: Any


class WebSearchToolResultBlock(WireModel):
    """A server tool result: parsed, then rejected."""

    type: Literal["web_search_tool_result"]
    tool_use_id: str
    content: Any


class ToolReferenceBlock(WireModel):
    """A tool name inside a ``tool_result`` (rendered as the name; must be a declared tool)."""

    type: Literal["tool_reference"]
    tool_name: str


ToolResultPart = Annotated[
    Union[TextBlock, ImageBlock, DocumentBlock, ToolReferenceBlock], Field(discriminator="type")
]


class ToolResultBlock(WireModel):
    """A user-side tool result; ``content`` absent/null reads as ``""``, ``is_error`` is ignored."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: Union[str, list[ToolResultPart], None] = None
    is_error: bool | None = None
    cache_control: Any = None

    _check = field_validator("content", mode="before")(_string_list_or_null)


class ToolReference(WireModel):
    """The tool a ``tool_addition`` block announces."""

    type: Literal["tool_reference"]
    name: str


class ToolAdditionBlock(WireModel):
    """Announces a (deferred) tool; allowed only in ``system`` messages, validated, not rendered on Pro."""

    type: Literal["tool_addition"]
    tool: ToolReference
    cache_control: Any = None


ContentBlock = Annotated[
    Union[
        TextBlock,
        ImageBlock,
        DocumentBlock,
        ThinkingBlock,
        RedactedThinkingBlock,
        ServerToolUseBlock,
        ToolUseBlock,
        ToolResultBlock,
        WebSearchToolResultBlock,
        ToolAdditionBlock,
    ],
    Field(discriminator="type"),
]


class MessageParam(WireModel):
    """One entry of ``messages``: role ``user`` | ``assistant`` | ``system`` and a string or blocks."""

    role: Role
    content: Union[str, list[ContentBlock]]

    _check = field_validator("content", mode="before")(_string_or_list)


class SystemTextBlock(TextBlock):
    """A block of the top-level ``system`` list: a :class:`TextBlock` (only ``text`` is allowed there)."""


# --- request model: tools and settings ------------------------------------------------------------


class CustomTool(WireModel):
    """A client tool; ``cache_control`` is accepted and ignored (any value); ``strict: true`` makes the
    arguments follow ``input_schema`` in the output grammar (``Options.anthropic_strict_tools``).
    ``type: "custom"`` is Anthropic's explicit spelling of a client tool (litellm sends it)."""

    type: Literal["custom"] | None = None
    name: str
    description: str | None = None
    input_schema: Any = None
    defer_loading: bool | None = None
    cache_control: Any = None
    strict: Any = None


class ServerTool(WireModel):
    """Any tool carrying a ``type`` (``web_search_20250305``, ``bash_20250124``, ``custom`` …): rejected."""

    type: str
    name: str | None = None


def _tool_kind(v: Any) -> str:
    typed = isinstance(v, dict) and "type" in v and v["type"] not in ("custom", None)
    return "server_tool" if typed else "custom_tool"


ToolParam = Annotated[
    Union[Annotated[ServerTool, Tag("server_tool")], Annotated[CustomTool, Tag("custom_tool")]],
    Discriminator(_tool_kind),
]


class ToolChoiceAuto(WireModel):
    """``{"type": "auto"}``."""

    type: Literal["auto"]
    disable_parallel_tool_use: bool | None = None


class ToolChoiceAny(WireModel):
    """``{"type": "any"}``: a forced call of one of the tools (``Options.anthropic_tool_choice_any``;
    deepseek-recipe treats it as auto)."""

    type: Literal["any"]
    disable_parallel_tool_use: bool | None = None


class ToolChoiceTool(WireModel):
    """``{"type": "tool", "name": …}``: a forced call of that tool (tools filtered to it)."""

    type: Literal["tool"]
    name: str
    disable_parallel_tool_use: bool | None = None


class ToolChoiceNone(WireModel):
    """``{"type": "none"}``: tools are dropped (their schemas are not even validated)."""

    type: Literal["none"]


ToolChoiceParam = Annotated[
    Union[ToolChoiceAuto, ToolChoiceAny, ToolChoiceTool, ToolChoiceNone], Field(discriminator="type")
]


class Thinking(WireModel):
    """``thinking``: ``enabled``/``adaptive`` turn thinking on, ``disabled`` off; ``budget_tokens`` has no effect."""

    type: ThinkingType
    budget_tokens: U64 | None = None
    display: Any = None


class OutputConfig(WireModel):
    """``output_config``: ``effort`` picks the reasoning effort; ``format`` (structured outputs,
    ``{"type": "json_schema", "schema": …}``) is checked at conversion (``Options.anthropic_output_format``)."""

    effort: Effort | None = None
    format: Any = None  # read at conversion; the parity target ignores it


class Metadata(WireModel):
    """``metadata`` (ignored; ``user_id`` must be a string when given)."""

    user_id: str | None = None


class MessagesRequest(EngineSamplingFields):
    """An Anthropic Messages request body (the fields that matter; unknown keys are ignored).

    ``max_tokens`` is optional here (deepseek-recipe accepts its absence). ``metadata``,
    ``service_tier`` and top-level ``reasoning_effort`` have no effect; ``top_k`` and the engines'
    other sampling fields (:class:`~recipe.api.wire.EngineSamplingFields`) reach the engine.
    """

    model: str
    messages: list[MessageParam]
    thread: Any = None  # beta message threads: refused in conversion unless Options.anthropic_threads="ignore"
    max_tokens: U32 | None = None
    system: Union[str, list[SystemTextBlock], None] = None
    tools: list[ToolParam] | None = None
    tool_choice: ToolChoiceParam | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: Any = None
    frequency_penalty: Any = None
    n: Any = None
    seed: Any = None
    metadata: Metadata | None = None
    stream: bool | None = None

    _check = field_validator("system", mode="before")(_string_list_or_null)


#: Union-branch tags pydantic puts into error locations (not field names).
_TAGS = frozenset(
    "text image document thinking server_tool_use tool_use tool_result web_search_tool_result tool_addition "
    "tool_reference base64 url file server_tool custom_tool auto any tool none".split()
)
_INDEX_RE = re.compile(r"\[(\d+)\]")


def _dotted(param: str | None) -> str | None:
    """``messages[1].content[0].tool_use.id`` -> ``messages.1.content.0.id`` (tags dropped)."""
    if not param:
        return param
    parts = _INDEX_RE.sub(r".\1", param).split(".")
    out: list[str] = []
    prev = ""
    for p in parts:
        if not (p in _TAGS and (prev.isdigit() or prev in ("source", "tool_choice"))):
            out.append(p)
        prev = p
    return ".".join(out)


def parse_messages_request(body: Any) -> MessagesRequest:
    """Validate a Messages body (dict, JSON text or bytes).

    Raises:
        RequestError: stage ``parse`` (missing field, wrong type, unknown role or block type, bad
            JSON), ``param`` the dotted path of the first problem.
    """
    try:
        return parse_body(MessagesRequest, body)
    except RequestError as err:
        raise RequestError(err.message, param=_dotted(err.param), stage="parse") from None
