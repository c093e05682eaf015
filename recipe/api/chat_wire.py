"""OpenAI Chat Completions request models (pydantic), serde-compatible: what deepseek-recipe 0.2.0's
parser accepts or rejects at the ``parse`` stage (wire formats §2.1). Conversion lives in
:mod:`recipe.api.chat`."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, field_validator

from recipe.api.reuse import MemoMatch
from recipe.api.wire import U32, U64, EngineSamplingFields, WireModel, parse_body, parse_body_reusing

__all__ = ["ChatCompletionRequest", "parse_chat_request"]


# --- request model ------------------------------------------------------------------------------


class TextPart(WireModel):
    """A ``text`` content part."""

    type: Literal["text"]
    text: str


class ImageUrl(WireModel):
    """An ``image_url`` part's payload (``detail``: low | high | original | auto)."""

    url: str
    detail: Literal["low", "high", "original", "auto"] | None = None


class ImagePart(WireModel):
    """An ``image_url`` content part (``[Unsupported Image]`` on V4, the image token on V4.1)."""

    type: Literal["image_url"]
    image_url: ImageUrl


class FilePart(WireModel):
    """A ``file`` content part (``[Unsupported Image]`` on V4, as deepseek-recipe does). V4.1 reads
    only the top-level ``file_data`` (a base64 image data URL) and ``file_id`` (refused), as
    deepseek-recipe does; the OpenAI-standard nested ``file`` object is not read."""

    type: Literal["file"]
    file: dict[str, Any] = Field(default_factory=dict)
    file_data: str | None = None
    file_id: str | None = None


Part = Annotated[Union[TextPart, ImagePart, FilePart], Field(discriminator="type")]
Content = Union[str, list[Part]]


def _require_content(v: Any) -> Any:
    if not isinstance(v, (str, list)):
        raise ValueError("content should be a string or a list")
    return v


class SystemMsg(WireModel):
    """A ``system`` message (hoisted to the front of the prompt)."""

    role: Literal["system"]
    content: Content

    _check = field_validator("content", mode="before")(_require_content)


class UserMsg(WireModel):
    """A ``user`` message."""

    role: Literal["user"]
    content: Content

    _check = field_validator("content", mode="before")(_require_content)


class LatestReminderMsg(WireModel):
    """A DeepSeek ``latest_reminder`` message."""

    role: Literal["latest_reminder"]
    content: Content

    _check = field_validator("content", mode="before")(_require_content)


class FunctionCall(WireModel):
    """A tool call's function: name and arguments JSON text."""

    name: str
    arguments: str


class ToolCallModel(WireModel):
    """An assistant tool call."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class AssistantMsg(WireModel):
    """An ``assistant`` message (``prefix: true`` on the last one continues it)."""

    role: Literal["assistant"]
    content: Content | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallModel] | None = None
    prefix: bool = False


class DeveloperMsg(WireModel):
    """A ``developer`` message (a user message, as a Responses developer item; ``Options.developer_role``)."""

    role: Literal["developer"]
    content: Content

    _check = field_validator("content", mode="before")(_require_content)


class ToolMsg(WireModel):
    """A ``tool`` message answering ``tool_call_id``."""

    role: Literal["tool"]
    tool_call_id: str
    content: Content

    _check = field_validator("content", mode="before")(_require_content)


ChatMessage = Annotated[
    Union[SystemMsg, UserMsg, AssistantMsg, ToolMsg, LatestReminderMsg, DeveloperMsg], Field(discriminator="role")
]


class FunctionDef(WireModel):
    """A function tool's definition."""

    name: str
    description: str | None = None
    parameters: Any = None
    strict: bool | None = None


class ToolDef(WireModel):
    """A ``tools`` entry."""

    type: Literal["function"]
    function: FunctionDef


class NamedFunction(WireModel):
    """The function a named tool choice forces."""

    name: str


class NamedToolChoice(WireModel):
    """``{"type": "function", "function": {"name": …}}``."""

    type: Literal["function"]
    function: NamedFunction


class Thinking(WireModel):
    """DeepSeek ``thinking``: ``enabled`` / ``adaptive`` / ``disabled`` (``budget_tokens`` has no effect)."""

    type: Literal["adaptive", "enabled", "disabled"]  # (serde's variant order, for the unknown-variant message)
    budget_tokens: Any = None


class JsonSchemaSpec(WireModel):
    """``response_format.json_schema`` (``schema`` is required)."""

    name: str | None = None
    schema_: Any = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class RFText(WireModel):
    """``{"type": "text"}``."""

    type: Literal["text"]


class RFJsonObject(WireModel):
    """``{"type": "json_object"}``."""

    type: Literal["json_object"]


class RFJsonSchema(WireModel):
    """``{"type": "json_schema", "json_schema": {…}}``."""

    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


class RFRegex(WireModel):
    """DeepSeek ``{"type": "regex", "regex": …}``."""

    type: Literal["regex"]
    regex: str


ResponseFormatModel = Annotated[Union[RFText, RFJsonObject, RFJsonSchema, RFRegex], Field(discriminator="type")]


class StreamOptions(WireModel):
    """``stream_options`` (``include_usage`` decides the usage chunk)."""

    include_usage: bool | None = None


Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max"]


def _choice_check(v: Any) -> Any:
    """deepseek-recipe's message for a tool choice that is neither a mode nor an object."""
    if v is None or v in ("none", "auto", "required") or isinstance(v, dict):
        return v
    raise ValueError("expected one of `none`, `auto`, `required` or a tool")  # (sic: deepseek-recipe 0.2.0)


class ChatCompletionRequest(EngineSamplingFields):
    """A Chat Completions request body (the fields that matter; unknown keys are ignored)."""

    model: str
    messages: list[ChatMessage]
    tools: list[ToolDef] | None = None
    tool_choice: Annotated[Union[Literal["none", "auto", "required"], NamedToolChoice, None], BeforeValidator(_choice_check)] = None
    thinking: Thinking | None = None
    reasoning_effort: Effort | None = None
    response_format: ResponseFormatModel | None = None
    stop: Union[str, list[str], None] = None
    max_tokens: U32 | None = None
    max_completion_tokens: Any = None  # checked at conversion, when read (Options.max_completion_tokens)
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    n: U32 | None = None
    seed: U64 | None = None
    logprobs: bool | None = None
    top_logprobs: U32 | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    parallel_tool_calls: Any = None  # not type-checked (deepseek-recipe ignores it); False = one call


def parse_chat_request(body: Any, match: MemoMatch | None = None) -> ChatCompletionRequest:
    """Validate a Chat Completions body (dict, JSON text or bytes).

    ``match``: for a dict parsed from JSON text, the messages an earlier request sent byte for byte
    (:class:`~recipe.api.reuse.MessageMemo`): their wire models are reused and only the rest is
    validated (same result, same errors).

    Raises:
        RequestError: stage ``parse`` (missing field, wrong type, unknown role or part type, bad JSON).
    """
    if match is not None and type(body) is dict:
        return parse_body_reusing(ChatCompletionRequest, body, "messages", match)
    return parse_body(ChatCompletionRequest, body)
