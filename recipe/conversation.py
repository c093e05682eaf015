"""The API-neutral hub: a conversation and the settings that go with it.

Every API adapter (Chat Completions, Responses, Messages) converts its request into a
:class:`Conversation`; every encoding renders a Conversation into a prompt. Plain frozen
dataclasses: cheap to build, easy to read, no validation here (the adapters validate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "ImageSource",
    "ImagePlaceholder",
    "ToolCall",
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolMessage",
    "LatestReminderMessage",
    "Message",
    "ToolDefinition",
    "ToolChoice",
    "ResponseFormat",
    "OutputConstraint",
    "Sampling",
    "ExtraSampling",
    "Conversation",
    "ReasoningEffort",
    "ThinkingStage",
    "ParsingOptions",
    "ToolArguments",
]

#: Effective reasoning effort of a thinking-mode conversation (API levels are mapped onto these).
ReasoningEffort = Literal["low", "high", "xhigh", "max"]
#: Where the model's output starts (DeepSeek-V4 output parser initial stage).
ThinkingStage = Literal["reasoning", "reasoning_continuation", "content_continuation"]


@dataclass(frozen=True, slots=True)
class ImageSource:
    """An image a message refers to (encodings with an image token: DeepSeek-V4.1).

    Attributes:
        kind: ``url`` (an ``http(s):`` URL, not fetched) or ``data_url`` (a validated base64 data URL).
        url: the URL or data URL exactly as the client sent it.
        detail: ``high`` (the default), ``low``, ``original`` or ``auto``.
        path: the request field the image came from (``.messages[0]``, ``input[2]``,
            ``messages.1.content.0``), as deepseek-recipe reports it.
    """

    kind: Literal["url", "data_url"]
    url: str
    detail: Literal["high", "low", "original", "auto"] = "high"
    path: str = ""


@dataclass(frozen=True, slots=True)
class ImagePlaceholder:
    """Where an image sits in a message's text: the family's image-token spelling starts at
    ``offset`` (code points) in ``content``. Only these positions become the image special token;
    the same spelling typed by a user stays text."""

    offset: int
    source: ImageSource


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call made by the assistant.

    Attributes:
        id: the call id (``call_…`` / ``toolu_…``); tool results refer to it.
        name: function name.
        arguments: the arguments as JSON text, exactly as the client sent it (may be invalid JSON).
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """System (or instructions) text, where the client put it. The V4 encoding hoists every system
    message to the front; V4.1 renders each in place.

    Attributes:
        content: the text.
        images: image placeholders in ``content`` (V4.1).
        tool_additions: tools a Messages ``tool_addition`` block re-lists here (V4.1 ``### Updated
            Tool Schemas``), in block order.
    """

    content: str
    images: tuple[ImagePlaceholder, ...] = ()
    tool_additions: tuple[ToolDefinition, ...] = ()


@dataclass(frozen=True, slots=True)
class UserMessage:
    """User text (content parts already joined; unsupported media already replaced by a placeholder;
    ``images``: image placeholders in ``content``, V4.1)."""

    content: str
    images: tuple[ImagePlaceholder, ...] = ()


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """An assistant turn from history, or (``prefix=True``, last message only) a turn to continue.

    Attributes:
        content: answer text; None when the turn only made tool calls.
        reasoning_content: reasoning ("thinking") text; None when absent.
        tool_calls: calls in the order the client gave them.
        prefix: continue this message instead of starting a new assistant turn.
    """

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The result of the tool call ``tool_call_id`` (text; media replaced by placeholders;
    ``images``: image placeholders in ``content``, V4.1)."""

    tool_call_id: str
    content: str
    images: tuple[ImagePlaceholder, ...] = ()


@dataclass(frozen=True, slots=True)
class LatestReminderMessage:
    """DeepSeek ``latest_reminder`` text, rendered after ``<｜latest_reminder｜>``."""

    content: str


Message = Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage, LatestReminderMessage]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A function the model may call.

    Attributes:
        name: function name (``^[a-zA-Z0-9_-]+$``).
        description: None when the client gave none.
        parameters: JSON Schema of the arguments (a JSON value; already strict-normalised when
            ``strict`` is true; ``{}`` when the client gave none).
        strict: the client's ``strict`` flag (None = not given).
        defer_loading: a Messages tool loaded later (V4.1: left out of the tools block, listed by
            a ``tool_addition`` when the conversation adds it).
        enforced: the JSON Schema the output grammar holds a strict tool's arguments to, when it is
            not ``parameters``: the client's schema with the strict structure and every keyword kept
            (:func:`recipe.schema.strict_enforce.enforced_schema`; strict normalisation drops some).
    """

    name: str
    description: str | None
    parameters: Any
    strict: bool | None = None
    defer_loading: bool = False
    enforced: Any = None


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``auto`` | ``none`` | ``required``; ``name`` is set when one function is forced."""

    mode: Literal["auto", "none", "required"] = "auto"
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """Requested output format.

    Attributes:
        type: ``text`` | ``json_object`` | ``json_schema`` | ``regex``.
        schema: the JSON Schema as the client sent it (json_schema), else None.
        name: the schema's name (json_schema), else None.
        strict: the schema's ``strict`` flag (json_schema), else None.
        regex: the pattern (regex), else None.
        enforced: the schema the output grammar holds a strict json_schema answer to (as
            :attr:`ToolDefinition.enforced`), or None (the strict-normalised ``schema``).
    """

    type: Literal["text", "json_object", "json_schema", "regex"] = "text"
    schema: Any = None
    name: str | None = None
    strict: bool | None = None
    regex: str | None = None
    enforced: Any = None


@dataclass(frozen=True, slots=True)
class OutputConstraint:
    """What a constrained decoder should enforce on the completion.

    Attributes:
        kind: ``json`` (schema = compact JSON Schema, ``""`` for any JSON value), ``regex``
            (schema = the pattern), ``tool_call`` / ``tool_call_required`` (schema = compact JSON
            list of the OpenAI-shaped tool definitions); beyond deepseek-recipe:
            ``tool_call_required_after_reasoning`` (same schema; a tool call must follow the
            reasoning) and ``tool_call_or_format`` (``{"tools": [...], "format": {"kind", "schema"}}``).
        schema: the constraint text, exactly as deepseek-recipe 0.2.0 prints it.
        build_grammar: ``() -> OutputGrammar``, set by ``prepare`` when the model family has a
            grammar builder; read it through :attr:`grammar`. Not part of equality.
    """

    kind: Literal[
        "json", "regex", "tool_call", "tool_call_required", "tool_call_required_after_reasoning", "tool_call_or_format"
    ]
    schema: str
    build_grammar: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    _grammar: Any = field(default=None, init=False, compare=False, repr=False)

    @property
    def grammar(self) -> Any:
        """The grammar of the whole assistant turn (an ``OutputGrammar``, :mod:`recipe.schema.turn`:
        Lark, structural tag, engine fields), built on first access (compiled grammars are cached by
        tools, choice, format and encoding); None when the family has no grammar builder.

        Raises:
            ValueError: the grammar cannot be built (never for a request ``prepare`` accepted).
            RequestError: the grammar is larger than the request's options allow
                (``Options.schema_limits.max_grammar_bytes``; a 400 naming ``tools`` or the format).
        """
        if self._grammar is None and self.build_grammar is not None:
            object.__setattr__(self, "_grammar", self.build_grammar())
        return self._grammar


@dataclass(frozen=True, slots=True)
class ExtraSampling:
    """The sampling fields vLLM and SGLang take beyond temperature, top_p and seed, as the request
    gave them (checked; ``None``: the engine's default). Sent to the engine under its own names
    (docs/serving.md, "Sampling fields"); recipe itself only reads ``stop_token_ids`` (they end the
    output as EOS does) and ``n`` (one choice per sample).

    Attributes:
        top_k: keep the k most likely tokens (None: off; a request's 0 or -1 is off).
        min_p: drop tokens below ``min_p`` times the top token's probability, in [0, 1].
        presence_penalty, frequency_penalty: OpenAI's penalties, in [-2, 2].
        repetition_penalty: vLLM / SGLang's multiplicative penalty, > 0 (1 is none).
        logit_bias: ``(token id, bias)`` pairs, bias in [-100, 100], in the request's order.
        min_tokens: completion tokens before a stop token may end the output.
        stop_token_ids: ids that end the output besides the family's EOS (not part of the answer).
        n: completions to sample for the one prompt (Chat Completions ``n``), at least 1.
    """

    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    logit_bias: tuple[tuple[int, float], ...] | None = None
    min_tokens: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    n: int = 1


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling settings after the API's rules (thinking forces temperature 1.0 and top_p 1.0).

    ``extra``: the engines' further sampling fields (:class:`ExtraSampling`), or None when the
    request set none of them.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    extra: ExtraSampling | None = None


@dataclass(frozen=True, slots=True)
class ToolArguments:
    """What the output parser knows about one declared tool's arguments (from its JSON Schema).

    Attributes:
        required: parameters a call must carry: the schema's ``required`` list for a strict tool
            (a strict call without one of them is not offered as a call), empty otherwise.
        json_params: properties whose declared ``type`` excludes ``string``: a parameter written
            without the ``string`` attribute is read as JSON for these, as a string otherwise.
    """

    required: frozenset[str] = frozenset()
    json_params: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ParsingOptions:
    """How the output parser reads the completion of this conversation.

    Attributes:
        parse_tool_calls: the request declared tools (DSML blocks become tool calls).
        starts_in_tool_calls: the prompt opened the tool-call block (required / named tool choice).
        parse_json_output: JSON-object mode.
        thinking_stage: None when thinking is off; otherwise where the output starts.
        stop_sequences: strings that end the content (applied to content only).
        tool_names: names of the declared tools (used to accept recovered calls only for them).
        tool_arguments: declared tool name -> :class:`ToolArguments` (tools whose schema gives the
            parser nothing to check or infer may be missing).
        response_schema: the json_schema response format's schema, against which a final answer is
            validated (a mismatch is reported as a note, never raised); None otherwise.
    """

    parse_tool_calls: bool = False
    starts_in_tool_calls: bool = False
    parse_json_output: bool = False
    thinking_stage: ThinkingStage | None = None
    stop_sequences: tuple[str, ...] = ()
    tool_names: tuple[str, ...] = ()
    response_schema: Any = None
    tool_arguments: Mapping[str, ToolArguments] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Conversation:
    """Everything an encoding needs to render a prompt, plus the request's generation settings.

    Attributes:
        messages: in the client's order (system messages included, wherever they were).
        tools: declared tools after tool-choice filtering (empty when ``tool_choice`` is none).
        tool_choice: resolved tool choice.
        thinking: thinking mode on/off.
        reasoning_effort: effective effort when thinking, else None.
        response_format: requested output format.
        max_tokens: completion-token limit (None = not given).
        stop: stop sequences (content only).
        sampling: sampling settings.
        parallel_tool_calls: more than one tool call per turn is allowed (the request's
            ``parallel_tool_calls`` / ``disable_parallel_tool_use``); read by the output grammar only.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    thinking: bool = True
    reasoning_effort: ReasoningEffort | None = None
    response_format: ResponseFormat = field(default_factory=ResponseFormat)
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    sampling: Sampling = field(default_factory=Sampling)
    parallel_tool_calls: bool = True
