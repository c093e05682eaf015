"""OpenAI Responses request body as pydantic models (wire formats §3.1; deepseek-recipe 0.2.0 §1.9).

What the parity target type-checks is checked here (a wrong type is a ``parse``-stage error);
what it ignores is ignored: unknown keys, unknown item types (``item_reference``, hosted-tool
calls), hosted tools other than web search, ``summary`` of reasoning items. Enums are read the
serde way: a variant name, or a one-key map to null.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from recipe.api.wire import U32, EngineSamplingFields, WireModel, parse_body

__all__ = [
    "ResponsesRequest",
    "parse_responses_request",
    "InputText",
    "OutputText",
    "InputImage",
    "InputFile",
    "MessageItem",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "CustomToolCallItem",
    "CustomToolCallOutputItem",
    "ReasoningItem",
    "ReasoningText",
    "ToolSearchCallItem",
    "ToolSearchOutputItem",
    "IgnoredItem",
    "FunctionTool",
    "CustomTool",
    "NamespaceTool",
    "WebSearchTool",
    "IgnoredTool",
    "NamedChoice",
    "WebSearchChoice",
    "FormatText",
    "FormatJsonObject",
    "FormatJsonSchema",
    "TextConfig",
    "ReasoningConfig",
]

U8 = Annotated[int, Field(strict=True, ge=0, le=255)]


def _unit_variant(v: Any) -> Any:
    """serde unit-enum input: ``"x"`` or ``{"x": null}`` both mean ``x``."""
    if isinstance(v, dict) and len(v) == 1:
        ((key, val),) = v.items()
        if val is None:
            return key
    return v


def _enum(*values: str) -> Any:
    """A string enum read the serde way (a variant name, or a one-key map to null)."""
    return Annotated[Literal[values], BeforeValidator(_unit_variant)]  # type: ignore[valid-type]


def _tagged(tags: dict[str, str], fallback: str | None, error: str, message: str) -> Discriminator:
    """Callable discriminator on ``type``: known tags -> model tag, other strings -> ``fallback``."""

    def pick(v: Any) -> str | None:
        if isinstance(v, BaseModel):
            return type(v).__name__
        if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str) and v[0] not in tags:
            return fallback  # serde reads an internally tagged enum from [tag, fields…] too
        if not isinstance(v, dict):
            return None
        t = v.get("type")
        if not isinstance(t, str):
            return None
        return tags.get(t, fallback)

    return Discriminator(pick, custom_error_type=error, custom_error_message=message)


class _SeqStruct(WireModel):
    """serde also reads a struct from a JSON array holding every field in declaration order."""

    _seq_fields: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _from_sequence(cls, v: Any) -> Any:
        if isinstance(v, list):
            if len(v) != len(cls._seq_fields):
                raise ValueError(f"invalid length {len(v)}, expected struct {cls.__name__} with {len(cls._seq_fields)} elements")
            return dict(zip(cls._seq_fields, v))
        return v


def _content_check(message: str) -> Any:
    def check(v: Any) -> Any:
        if not isinstance(v, (str, list)):
            raise ValueError(message)
        return v

    return check


# --- content parts ------------------------------------------------------------------------------

Detail = _enum("low", "high", "original", "auto")
Role = _enum("user", "assistant", "system", "developer")
Level = _enum("low", "medium", "high")


class InputText(WireModel):
    """``{"type": "input_text", "text"}`` content part."""

    type: Literal["input_text"]
    text: str


class OutputText(WireModel):
    """``{"type": "output_text", "text"}``; interchangeable with input_text in any role (``annotations`` ignored)."""

    type: Literal["output_text"]
    text: str


class InputImage(WireModel):
    """``{"type": "input_image", …}``: becomes ``[Unsupported Image]`` on V4 Pro; fields type-checked only."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Detail | None = None


class InputFile(WireModel):
    """``{"type": "input_file", …}``: becomes ``[Unsupported Document]``; other fields are not checked."""

    type: Literal["input_file"]


Part = Annotated[Union[InputText, OutputText, InputImage, InputFile], Field(discriminator="type")]
OutputPart = Annotated[Union[InputText, InputImage, InputFile], Field(discriminator="type")]

_CONTENT_MSG = "content should be a string or a list of content blocks"
_OUTPUT_MSG = "output should be a string or a list of output content parts"


# --- input items --------------------------------------------------------------------------------


class MessageItem(WireModel):
    """``{"role", "content", "type"?: "message"}``; ``id``, ``status``, ``phase`` are ignored."""

    role: Role  # type: ignore[valid-type]
    content: Union[str, list[Part]]

    _check = field_validator("content", mode="before")(_content_check(_CONTENT_MSG))


class FunctionCallItem(WireModel):
    """A replayed function call; ``namespace`` flattens the name (``ns__name``); ``id``/``status`` ignored."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None


class FunctionCallOutputItem(WireModel):
    """A tool result: ``output`` is a string or input_text/input_image/input_file parts.

    ``call_id`` may be absent: the result then answers no call (accepted when no call is pending).
    """

    type: Literal["function_call_output"]
    call_id: str | None = None
    output: Union[str, list[OutputPart]]

    _check = field_validator("output", mode="before")(_content_check(_OUTPUT_MSG))


class CustomToolCallItem(WireModel):
    """A replayed custom tool call: becomes a call with arguments ``{"input": <input>}``."""

    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str


class CustomToolCallOutputItem(WireModel):
    """The result of a custom tool call (``output`` optional: an empty result)."""

    type: Literal["custom_tool_call_output"]
    call_id: str
    output: Union[str, list[OutputPart], None] = None

    @field_validator("output", mode="before")
    @classmethod
    def _output(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, (str, list)):
            raise ValueError(_OUTPUT_MSG)
        return v


class ReasoningText(_SeqStruct):
    """One ``content`` entry of a reasoning item; its ``type`` is not checked."""

    _seq_fields = ("text",)
    text: str


class ReasoningItem(WireModel):
    """Only ``content[].text`` is used; ``summary`` is ignored, ``encrypted_content`` type-checked."""

    type: Literal["reasoning"]
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None


class ToolSearchCallItem(WireModel):
    """Type-checked and ignored."""

    type: Literal["tool_search_call"]
    call_id: str
    arguments: dict[str, Any]


class IgnoredItem(WireModel):
    """``item_reference`` and item types the converter does not use."""

    type: str


# --- tools --------------------------------------------------------------------------------------


class FunctionTool(WireModel):
    """Flat function tool ``{"type": "function", "name", "description"?, "parameters"?, "strict"?}``."""

    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: Any = None
    strict: bool | None = None


class CustomTool(WireModel):
    """Custom tool: only ``apply_patch`` is supported (a fixed function tool); others are rejected."""

    type: Literal["custom"]
    name: str


class NamespaceTool(WireModel):
    """``{"type": "namespace", "name", "tools": [function|custom]}``: functions flattened to ``ns__name``."""

    type: Literal["namespace"]
    name: str
    description: str | None = None
    tools: list[Annotated[Union[FunctionTool, CustomTool], Field(discriminator="type")]]


class WebSearchTool(WireModel):
    """Hosted web search: dropped (Options has no "reject web search" switch yet)."""

    type: Literal["web_search", "web_search_2025_08_26"]
    search_context_size: Level | None = None  # type: ignore[valid-type]
    user_location: dict[str, Any] | None = None


class IgnoredTool(WireModel):
    """Hosted tools the converter drops (file_search, mcp, tool_search, web_search_preview, …)."""

    type: str

    @model_validator(mode="before")
    @classmethod
    def _from_sequence(cls, v: Any) -> Any:
        return {"type": v[0]} if isinstance(v, list) and len(v) == 1 else v


_TOOL_TAGS = {
    "function": "FunctionTool",
    "custom": "CustomTool",
    "namespace": "NamespaceTool",
    "web_search": "WebSearchTool",
    "web_search_2025_08_26": "WebSearchTool",
}
Tool = Annotated[
    Union[
        Annotated[FunctionTool, Tag("FunctionTool")],
        Annotated[CustomTool, Tag("CustomTool")],
        Annotated[NamespaceTool, Tag("NamespaceTool")],
        Annotated[WebSearchTool, Tag("WebSearchTool")],
        Annotated[IgnoredTool, Tag("IgnoredTool")],
    ],
    _tagged(_TOOL_TAGS, "IgnoredTool", "invalid_tool", "expected a tool object with a string `type`"),
]


class ToolSearchOutputItem(WireModel):
    """Type-checked (its ``tools`` like request tools) and ignored."""

    type: Literal["tool_search_output"]
    call_id: str
    tools: list[Tool]


_ITEM_TAGS = {
    "message": "MessageItem",
    "function_call": "FunctionCallItem",
    "function_call_output": "FunctionCallOutputItem",
    "custom_tool_call": "CustomToolCallItem",
    "custom_tool_call_output": "CustomToolCallOutputItem",
    "reasoning": "ReasoningItem",
    "tool_search_call": "ToolSearchCallItem",
    "tool_search_output": "ToolSearchOutputItem",
}


def _item_tag(v: Any) -> str | None:
    if isinstance(v, BaseModel):
        return type(v).__name__
    if not isinstance(v, dict):
        return None
    if "type" not in v:
        return "MessageItem" if "role" in v else None
    t = v["type"]
    return _ITEM_TAGS.get(t, "IgnoredItem") if isinstance(t, str) else None


InputItem = Annotated[
    Union[
        Annotated[MessageItem, Tag("MessageItem")],
        Annotated[FunctionCallItem, Tag("FunctionCallItem")],
        Annotated[FunctionCallOutputItem, Tag("FunctionCallOutputItem")],
        Annotated[CustomToolCallItem, Tag("CustomToolCallItem")],
        Annotated[CustomToolCallOutputItem, Tag("CustomToolCallOutputItem")],
        Annotated[ReasoningItem, Tag("ReasoningItem")],
        Annotated[ToolSearchCallItem, Tag("ToolSearchCallItem")],
        Annotated[ToolSearchOutputItem, Tag("ToolSearchOutputItem")],
        Annotated[IgnoredItem, Tag("IgnoredItem")],
    ],
    Discriminator(_item_tag, custom_error_type="invalid_input_item", custom_error_message="invalid input item"),
]


# --- tool_choice, text, reasoning ---------------------------------------------------------------


class NamedChoice(WireModel):
    """``{"type": "function"|"custom", "name"}``: force that tool."""

    type: Literal["function", "custom"]
    name: str


class _FunctionChoice(NamedChoice):
    type: Literal["function"]


class _CustomChoice(NamedChoice):
    type: Literal["custom"]


class WebSearchChoice(WireModel):
    """``{"type": "web_search"…}``: behaves as ``auto``."""

    type: Literal["web_search", "web_search_2025_08_26"]


_CHOICE_MSG = "expected one of `none`, `auto`, `required` or a tool choice object"


def _choice_check(v: Any) -> Any:
    if v is None or v in ("none", "auto", "required") or (isinstance(v, dict) and "type" in v):
        return v
    raise ValueError(_CHOICE_MSG)


# (the tags in serde's variant order: an unknown type's message lists them as deepseek-recipe does)
ToolChoiceModel = Annotated[
    Union[Literal["none", "auto", "required"], Annotated[Union[_FunctionChoice, WebSearchChoice, _CustomChoice], Field(discriminator="type")], None],
    BeforeValidator(_choice_check),
]


class FormatText(WireModel):
    """``text.format`` ``{"type": "text"}`` (the default)."""

    type: Literal["text"]


class FormatJsonObject(WireModel):
    """``text.format`` ``{"type": "json_object"}``: needs the word json in some message."""

    type: Literal["json_object"]


class FormatJsonSchema(WireModel):
    """Flat json_schema format: ``{"type", "name", "schema", "description"?, "strict"?}``."""

    type: Literal["json_schema"]
    name: str
    schema_: Any = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


class TextConfig(_SeqStruct):
    """``text``: ``format`` (null is rejected, absent means text); ``verbosity`` is ignored."""

    _seq_fields = ("format", "verbosity")
    format: Annotated[Union[FormatText, FormatJsonObject, FormatJsonSchema], Field(discriminator="type")] = None  # type: ignore[assignment]
    verbosity: Level | None = None  # type: ignore[valid-type]


Effort = _enum("none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max")
Summary = _enum("auto", "concise", "detailed")


class ReasoningConfig(_SeqStruct):
    """``reasoning``: ``effort`` decides thinking; ``summary``/``generate_summary`` are ignored."""

    _seq_fields = ("effort", "summary", "generate_summary")
    effort: Effort | None = None  # type: ignore[valid-type]
    summary: Summary | None = None  # type: ignore[valid-type]
    generate_summary: Summary | None = None  # type: ignore[valid-type]


class ResponsesRequest(EngineSamplingFields):
    """A Responses request body (the fields that matter; unknown keys are ignored).

    Type-checked but unused for the prompt: ``stream``, ``user``. Not checked at all:
    ``previous_response_id``, ``store``, ``metadata``, ``parallel_tool_calls``, ``stop``, … ``seed``
    and the engines' sampling fields (:class:`~recipe.api.wire.EngineSamplingFields`) are checked at
    conversion and reach the engine.
    """

    model: str
    input: Union[str, list[InputItem], None] = None
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoiceModel = None
    text: TextConfig | None = None
    reasoning: ReasoningConfig | None = None
    max_output_tokens: U32 | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_logprobs: U8 | None = None
    presence_penalty: Any = None
    frequency_penalty: Any = None
    n: Any = None
    seed: Any = None
    stream: bool | None = None
    user: str | None = None
    parallel_tool_calls: Any = None  # not type-checked (deepseek-recipe ignores it); False = one call

    @field_validator("input", mode="before")
    @classmethod
    def _input(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, (str, list)):
            raise ValueError("input should be a string or a list of input items")
        return v


def parse_responses_request(body: Any) -> ResponsesRequest:
    """Validate a Responses body (dict, JSON text or bytes).

    Raises:
        RequestError: stage ``parse`` (missing field, wrong type, unknown role, part or tool type,
            bad JSON), with the field path in ``param``.
    """
    return parse_body(ResponsesRequest, body)
