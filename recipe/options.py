"""Per-request behaviour as one immutable value: model table, thinking default, limits, switches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Literal

from recipe.encodings.table import MODELS

__all__ = ["Options", "SchemaLimits", "ModelAlias", "DEFAULT_MODELS", "DEFAULT_ALIASES", "DEFAULT_OPTIONS", "PARITY_OPTIONS",
           "DEFAULT_MAX_BODY_BYTES", "parse_alias"]

#: API model name -> encoding name. Matched exactly and case-sensitively (as deepseek-recipe does);
#: derived from the encoding records' model names (:data:`recipe.encodings.table.MODELS`).
DEFAULT_MODELS: Mapping[str, str] = MODELS
#: the families deepseek-recipe 0.2.0 has (:meth:`Options.parity` keeps only their model names)
PARITY_ENCODINGS = frozenset({"deepseek_v4", "deepseek_v41"})

#: Default request-body size limit in bytes (8 MiB), checked before parsing.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024

#: The options deepseek-recipe 0.2.0 answers with a 400 (``reject``) and the request fields it drops
#: (``ignore``): :meth:`Options.parity` sets them so.
_PARITY_REJECT = ("developer_role", "forced_tool_choice_thinking", "format_with_strict_tools", "mixed_strict_tools",
                  "redacted_thinking", "anthropic_custom_tools", "long_tool_names", "interleaved_history")
_PARITY_IGNORE = ("anthropic_threads", "max_completion_tokens", "engine_sampling", "chat_template_kwargs",
                  "unrendered_input", "anthropic_strict_tools", "anthropic_output_format")


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """Bounds on the JSON Schemas of one request (tools' parameters, response formats), checked
    before any work is done with them; past one, the request is the API's own 400 naming the limit
    and the field path. The defaults are far above what real clients send (an agent with a hundred
    tools sends a few thousand schema nodes) and keep the work a request can cause small.

    Attributes:
        max_schema_nodes: objects and arrays in all of a request's schemas together.
        max_schema_properties: properties of one object schema.
        max_enum_values: values of one ``enum``.
        max_size_bound: the largest size a schema may ask for with ``minItems``, ``minLength``,
            ``minProperties`` or ``minContains`` (output, and examples of it, must reach it).
        max_grammar_bytes: the output grammar's size (Lark or structural tag, the larger) that
            ``recipe serve`` sends to an engine.
    """

    max_schema_nodes: int = 20_000
    max_schema_properties: int = 1_000
    max_enum_values: int = 1_000
    max_size_bound: int = 10_000
    max_grammar_bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_schema_nodes", "max_schema_properties", "max_enum_values", "max_size_bound", "max_grammar_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class ModelAlias:
    """Another name for a model of the table, with its own thinking default.

    Attributes:
        target: a model name of :attr:`Options.models` (its encoding is used).
        thinking: the thinking default for requests naming the alias (``True`` thinking, ``False``
            chat); None keeps :attr:`Options.default_thinking`. An explicit thinking switch or
            effort in the request still wins.
    """

    target: str
    thinking: bool | None = None


#: Hosted DeepSeek's names: ``deepseek-chat`` is the non-thinking mode and ``deepseek-reasoner`` the
#: thinking mode of the same model (DeepSeek-V4-Flash).
DEFAULT_ALIASES: Mapping[str, ModelAlias] = MappingProxyType({
    "deepseek-chat": ModelAlias("deepseek-v4-flash", False),
    "deepseek-reasoner": ModelAlias("deepseek-v4-flash", True),
})

_ALIAS_MODES = {"": None, "thinking": True, "chat": False}


def parse_alias(spec: str) -> tuple[str, ModelAlias]:
    """``NAME=TARGET[:thinking|:chat]`` (the CLI's ``--alias``) as ``(name, ModelAlias)``.

    Raises:
        ValueError: no ``=``, an empty name or target, or a mode other than ``thinking`` / ``chat``.
    """
    name, eq, rest = spec.partition("=")
    target, _, mode = rest.partition(":")
    if not eq or not name or not target or mode not in _ALIAS_MODES:
        raise ValueError(f"alias {spec!r}: want NAME=TARGET[:thinking|:chat]")
    return name, ModelAlias(target, _ALIAS_MODES[mode])


@dataclass(frozen=True, slots=True, repr=False)
class Options:
    """Conversion options (never read from globals or the environment).

    Attributes:
        models: API model name -> encoding name; other names are rejected with a 400.
        default_thinking: thinking mode when the request says nothing about thinking or effort.
        thinking_max_tokens: upper bound for ``max_tokens`` in thinking mode.
        non_thinking_max_tokens: upper bound for ``max_tokens`` otherwise.
        reasoning_content_behavior: ``fill_empty`` (history assistant turns without reasoning get
            empty reasoning) or ``reject`` (thinking mode requires reasoning after the last user turn).
        context_limit: the model's context window in tokens: a prompt that leaves no room is the
            API's own 400, and ``max_tokens`` is resolved against it
            (:func:`recipe.api.common.resolve_max_tokens`).
        aliases: model aliases (:class:`ModelAlias`); by default hosted DeepSeek's
            ``deepseek-chat`` / ``deepseek-reasoner`` (:data:`DEFAULT_ALIASES`); none under parity.
        max_body_bytes: request bodies (bytes or text given to ``prepare``) longer than this are
            refused before parsing with a 413 ``request_too_large``.
        schema_limits: bounds on the request's JSON Schemas (:class:`SchemaLimits`); also under parity.

    Acceptance of what real clients send where deepseek-recipe 0.2.0 answers 400 (docs/clients.md);
    each default is the accepting behaviour, ``"reject"`` restores the parity target's error:
        developer_role: Chat ``developer`` messages — ``user`` (mapped as the model's Responses
            developer item is: a user message, on DeepSeek-V4.1 a system message) or ``reject``.
        forced_tool_choice_thinking: ``required`` / named tool choice in thinking mode —
            ``non_thinking`` (render that request without thinking so the prompt can open the
            tool-call block), ``constrain`` (keep thinking; the output constraint requires a tool
            call after the reasoning) or ``reject``.
        format_with_strict_tools: a response format next to strict tools — ``accept`` (render both as
            deepseek-recipe does with non-strict tools; constraint "tool calls or the format") or ``reject``.
        mixed_strict_tools: strict and non-strict tools together — ``accept`` (normalise only the
            strict ones) or ``reject``.
        redacted_thinking: Messages ``redacted_thinking`` blocks in history — ``accept`` (the turn has
            empty reasoning) or ``reject``.
        anthropic_custom_tools: Messages tools with ``"type": "custom"`` — ``accept`` (an ordinary
            client tool) or ``reject``.
        anthropic_threads: a Messages ``thread`` field (beta ``message-threads-2026-08-12``, a
            conversation the server holds) — ``reject`` (400 ``thread_unsupported_request``, which the
            SDK's ``unsupported_request_behavior="continue_unthreaded"`` answers by resending the
            full history) or ``ignore`` (deepseek-recipe: the field is dropped, so a ``continue``
            turn silently loses its history).
        long_tool_names: tool names longer than 128 characters — ``accept`` or ``reject``
            (deepseek-recipe's 400 ``string too long``, checked with the names' pattern).
        max_completion_tokens: Chat ``max_completion_tokens`` without ``max_tokens`` (the openai
            SDK's current field; LangChain sends only it) — ``use`` (the completion-token limit,
            checked as ``max_tokens``) or ``ignore`` (deepseek-recipe: no limit, the engine may
            generate to the end of the window). ``max_tokens`` wins when both are given.
        engine_sampling: the sampling fields of vLLM's and SGLang's own servers (``top_k``,
            ``min_p``, ``repetition_penalty``, ``presence_penalty`` / ``frequency_penalty``,
            ``logit_bias``, ``min_tokens``, ``stop_token_ids``, ``seed``, Chat ``n`` > 1;
            :mod:`recipe.api.engine_sampling`) — ``use`` (checked, then in
            ``EngineParams.extra`` for the engine) or ``ignore`` (deepseek-recipe: Chat's penalties
            range-checked only, ``n`` other than 1 refused, the rest dropped).
        chat_template_kwargs: the ``thinking`` / ``enable_thinking`` switch of a request's
            ``chat_template_kwargs`` (how vLLM and SGLang users turn DeepSeek's thinking off) —
            ``use`` (a thinking switch, as ``thinking.type``; the API's own ``thinking`` object wins)
            or ``ignore`` (deepseek-recipe: the field is dropped).
        unrendered_input: input the model family's prompt cannot show the model (tools on a
            template without a tool section, images on a model without image input, Messages
            ``tool_choice`` ``any`` rendered as auto: :mod:`recipe.api.input_notes`) — ``note`` (rendered
            as deepseek-recipe does, with a note in the response's ``recipe.notes``), ``reject``
            (a 400 naming the field) or ``ignore`` (deepseek-recipe: no word).
        interleaved_history: a history whose items interleave around pending tool calls, as
            OpenAI accepts them — a system / developer message between calls and their outputs
            (Chat tool messages, Responses ``function_call_output`` items), and Responses reasoning
            or assistant messages between the calls of one turn (``[reasoning, message, call1,
            reasoning, call2, output1, output2]``) — ``accept`` (outputs matched to their calls by
            id; the turn's reasoning, text and calls are one assistant turn, the results follow it,
            then the system / developer messages) or ``reject`` (deepseek-recipe's 400).
        unknown_model: the 400 for a model name the table does not have — ``closest`` (one short
            line: the closest names, and where the full list is: ``GET /v1/models``, ``recipe
            models``) or ``list`` (deepseek-recipe's message, every supported name on one line).
        strict_schemas: ``strict: true`` tool and json_schema schemas — ``enforce`` (also checked as a
            JSON Schema, as non-strict ones are: an invalid ``pattern`` or an unresolvable ``$ref`` is a
            400; a keyword the output grammar cannot enforce is a 400 naming its path; the grammar
            enforces the client's schema, every keyword kept, not only the normalised one the prompt
            shows) or ``normalize`` (deepseek-recipe: only its normalisation, which drops keywords).
        anthropic_tool_choice_any: Messages ``tool_choice {"type": "any"}`` — ``required`` (Anthropic's
            meaning: the model must call one of the tools; the same forced turn as Chat's
            ``tool_choice: "required"``) or ``auto`` (deepseek-recipe: read as ``auto``, no call forced).
        anthropic_strict_tools: Messages tools with ``strict: true`` (Anthropic's strict tool use) —
            ``enforce`` (the tool's arguments follow its ``input_schema`` in the output grammar, as a
            Chat strict tool's do; the schema is not rewritten and the prompt is unchanged) or
            ``ignore`` (deepseek-recipe: the flag is dropped).
        anthropic_output_format: Messages ``output_config.format`` (Anthropic structured outputs,
            ``{"type": "json_schema", "schema": …}``) — ``use`` (the same prompt, output constraint and
            grammar as the equivalent Chat ``response_format`` json_schema) or ``ignore``
            (deepseek-recipe: the field is dropped, the answer is plain text).
    """

    models: Mapping[str, str] = field(default_factory=lambda: DEFAULT_MODELS)
    default_thinking: bool = True
    thinking_max_tokens: int = 393216
    non_thinking_max_tokens: int = 393216
    reasoning_content_behavior: Literal["fill_empty", "reject"] = "fill_empty"
    context_limit: int = 1048576
    developer_role: Literal["user", "reject"] = "user"
    forced_tool_choice_thinking: Literal["non_thinking", "constrain", "reject"] = "non_thinking"
    format_with_strict_tools: Literal["accept", "reject"] = "accept"
    mixed_strict_tools: Literal["accept", "reject"] = "accept"
    redacted_thinking: Literal["accept", "reject"] = "accept"
    anthropic_custom_tools: Literal["accept", "reject"] = "accept"
    anthropic_threads: Literal["reject", "ignore"] = "reject"
    aliases: Mapping[str, ModelAlias] = field(default_factory=lambda: DEFAULT_ALIASES)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    long_tool_names: Literal["accept", "reject"] = "accept"
    max_completion_tokens: Literal["use", "ignore"] = "use"
    engine_sampling: Literal["use", "ignore"] = "use"
    chat_template_kwargs: Literal["use", "ignore"] = "use"
    unrendered_input: Literal["note", "reject", "ignore"] = "note"
    interleaved_history: Literal["accept", "reject"] = "accept"
    unknown_model: Literal["closest", "list"] = "closest"
    strict_schemas: Literal["enforce", "normalize"] = "enforce"
    schema_limits: SchemaLimits = field(default_factory=SchemaLimits)
    anthropic_tool_choice_any: Literal["required", "auto"] = "required"
    anthropic_strict_tools: Literal["enforce", "ignore"] = "enforce"
    anthropic_output_format: Literal["use", "ignore"] = "use"

    def __repr__(self) -> str:
        """``Options(...)`` naming only the fields that differ from the defaults, the model and alias
        tables by their sizes (``help(recipe.prepare)`` shows the default as ``Options()``)."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
            if value == default:
                continue
            if isinstance(value, Mapping):
                parts.append(f"{f.name}=<{len(value)} names>")
            else:
                parts.append(f"{f.name}={value!r}")
        return f"Options({', '.join(parts)})"

    def parity(self) -> Options:
        """A copy that answers every request exactly as deepseek-recipe 0.2.0 does (400s included).

        The model table keeps only the names of the families deepseek-recipe has (DeepSeek-V4 and
        V4.1: :data:`PARITY_ENCODINGS`), so an unknown model's 400 lists the names it lists and an
        earlier generation's model is rejected, as there.
        """
        return replace(
            self, models=MappingProxyType({k: v for k, v in self.models.items() if v in PARITY_ENCODINGS}),
            aliases=MappingProxyType({}), **dict.fromkeys(_PARITY_REJECT, "reject"),
            **dict.fromkeys(_PARITY_IGNORE, "ignore"), unknown_model="list", strict_schemas="normalize",
            anthropic_tool_choice_any="auto")

    def with_model(self, name: str, encoding: str = "deepseek_v4") -> Options:
        """A copy whose model table also maps ``name`` to ``encoding``."""
        return replace(self, models=MappingProxyType({**self.models, name: encoding}))

    def with_alias(self, name: str, target: str, thinking: bool | None = None) -> Options:
        """A copy whose alias table also maps ``name`` to the model ``target`` (thinking default
        ``thinking``: True, False, or None for :attr:`default_thinking`).

        Raises:
            ValueError: ``target`` is not a model of :attr:`models`, or ``name`` is one.
        """
        if target not in self.models:
            raise ValueError(f"alias {name!r}: unknown target model {target!r} (choose from {', '.join(sorted(self.models))})")
        if name in self.models:
            raise ValueError(f"alias {name!r}: already a model name")
        return replace(self, aliases=MappingProxyType({**self.aliases, name: ModelAlias(target, thinking)}))

    def for_model(self, name: str) -> Options:
        """The options a request naming ``name`` is converted with: ``self`` unless ``name`` is an
        alias, else a copy whose model table maps ``name`` to its target's encoding and whose thinking
        default is the alias's. An alias whose target is not in the table is left unresolved (the
        request gets the unknown-model 400)."""
        alias = self.aliases.get(name)
        if alias is None or name in self.models or alias.target not in self.models:
            return self
        thinking = self.default_thinking if alias.thinking is None else alias.thinking
        return replace(self, models=MappingProxyType({**self.models, name: self.models[alias.target]}),
                       default_thinking=thinking)


DEFAULT_OPTIONS = Options()
#: deepseek-recipe 0.2.0's behaviour everywhere (for differential tests and strict deployments).
PARITY_OPTIONS = DEFAULT_OPTIONS.parity()
