"""Conversion rules shared by the three API adapters (deepseek-recipe behaviour map §1.5–1.8).

Each function checks one rule and raises :class:`~recipe.errors.RequestError` (stage ``convert``,
status 400) with the parity target's message and the field path.
"""

from __future__ import annotations

import copy
import math
import operator
import re
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import orjson

from recipe.conversation import (
    AssistantMessage,
    Conversation,
    ExtraSampling,
    ImagePlaceholder,
    Message,
    OutputConstraint,
    ParsingOptions,
    ReasoningEffort,
    ResponseFormat,
    Sampling,
    SystemMessage,
    ToolArguments,
    ToolChoice,
    ToolDefinition,
)
from recipe.encodings.base import RequestRules
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.jsonfmt import dumps_compact
from recipe.options import DEFAULT_OPTIONS, Options

__all__ = [
    "EFFORT_LEVELS",
    "check_model",
    "family_rules",
    "TOP_P_RULES",
    "resolve_thinking",
    "template_thinking",
    "TEMPLATE_THINKING_KEYS",
    "build_tool",
    "check_tool_name",
    "check_strict_mixing",
    "check_format_with_strict_tools",
    "resolve_tool_choice",
    "thinking_for_tool_choice",
    "check_sampling",
    "check_max_tokens",
    "resolve_max_tokens",
    "check_stop",
    "mentions_json",
    "check_response_format",
    "check_schema_limits",
    "output_constraint",
    "parsing_options",
    "tool_arguments",
    "f32",
    "thinking_top_p",
    "sampling",
    "UNSUPPORTED_IMAGE",
    "TEXT_FORMAT",
    "note_dropped",
    "collect_dropped",
    "reset_dropped",
    "PendingSystem",
    "resolve_systems",
]

UNSUPPORTED_IMAGE = "[Unsupported Image]"

#: The ``text`` response format every request without one gets (frozen: shared by all of them).
TEXT_FORMAT = ResponseFormat("text")

#: What the conversion of the current request rendered without the model seeing it (``image``,
#: ``document``, ``tool_choice_any``), collected by ``prepare`` (:func:`collect_dropped`); None
#: outside a collection.
_DROPPED: ContextVar[list[str] | None] = ContextVar("recipe_dropped_input", default=None)


def note_dropped(what: str) -> None:
    """Record that the request's input ``what`` (``image``, ``document``, ``tool_choice_any``) was
    rendered as a placeholder or a weaker equivalent, for the response's notes
    (:func:`recipe.api.input_notes.input_notes`). Does nothing outside :func:`collect_dropped`."""
    seen = _DROPPED.get()
    if seen is not None:
        seen.append(what)


def collect_dropped(into: list[str]) -> Any:
    """Start collecting :func:`note_dropped` calls into ``into``; returns the token for
    ``reset_dropped``."""
    return _DROPPED.set(into)


def reset_dropped(token: Any) -> None:
    """Stop the collection :func:`collect_dropped` started."""
    _DROPPED.reset(token)


#: API effort level -> effective effort (None: thinking off). Behaviour map §1.6.
EFFORT_LEVELS: dict[str, ReasoningEffort | None] = {
    "none": None,
    "minimal": "low",
    "low": "low",
    "medium": "high",
    "high": "high",
    "xhigh": "xhigh",
    "ultra": "max",
    "max": "max",
}

_TOOL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]+")


def f32(x: float) -> float:
    """``x`` rounded to IEEE single precision, as the parity target stores sampling values
    (values beyond the f32 range become ±inf, so range checks reject them)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def thinking_top_p(tools: Sequence[ToolDefinition]) -> float:
    """top_p forced in thinking mode on V4: f32(0.95) when tools are rendered, else 1.0 (observed)."""
    return f32(0.95) if tools else 1.0


def _top_p_v4(thinking: bool, tools: Sequence[ToolDefinition], top_p: float | None) -> float:
    return thinking_top_p(tools) if thinking else f32(top_p if top_p is not None else 1.0)


_F32_095 = f32(0.95)


def _top_p_v41(thinking: bool, tools: Sequence[ToolDefinition], top_p: float | None) -> float:
    if not thinking or top_p is None:
        return 1.0
    return max(f32(top_p), _F32_095)


#: top_p rule name (:attr:`RequestRules.top_p`) -> ``(thinking, rendered tools, requested top_p) -> top_p``.
#: ``v4``: thinking forces :func:`thinking_top_p`, otherwise the requested value (default 1.0);
#: ``v41``: thinking gives ``max(f32(requested), f32(0.95))`` (1.0 when absent), otherwise 1.0.
TOP_P_RULES = {"v4": _top_p_v4, "v41": _top_p_v41}


def sampling(
    thinking: bool,
    tools: Sequence[ToolDefinition],
    temperature: float | None,
    top_p: float | None,
    *,
    seed: int | None = None,
    logprobs: bool = False,
    top_logprobs: int | None = None,
    rule: str = "v4",
    extra: ExtraSampling | None = None,
) -> Sampling:
    """Sampling settings after the thinking rules (§1.6): thinking forces temperature 1.0; top_p
    follows the family's rule (:data:`TOP_P_RULES`); values are stored as f32. ``extra``: the
    engines' further fields (:func:`recipe.api.engine_sampling.extra_sampling`), kept as given."""
    if temperature is None and top_p is None and seed is None and not logprobs and top_logprobs is None and extra is None:
        return _DEFAULT_SAMPLING[rule, bool(thinking), bool(tools)]  # the common request: nothing sampling-related set
    return Sampling(
        temperature=1.0 if thinking else f32(temperature if temperature is not None else 1.0),
        top_p=TOP_P_RULES[rule](thinking, tools, top_p),
        seed=seed,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        extra=extra,
    )


#: ``(rule, thinking, tools rendered)`` -> the Sampling of a request that sets no sampling field
#: (built once; Sampling is frozen, so requests share it).
_DEFAULT_SAMPLING: dict[tuple[str, bool, bool], Sampling] = {
    (rule, thinking, has_tools): Sampling(
        temperature=1.0 if thinking else f32(1.0), top_p=TOP_P_RULES[rule](thinking, (None,) if has_tools else (), None))
    for rule in TOP_P_RULES for thinking in (False, True) for has_tools in (False, True)
}


def check_model(model: str, options: Options) -> str:
    """Encoding name for ``model``; an unknown name is a 400 on ``model``: with
    ``options.unknown_model`` ``closest`` one short line naming up to three closest names (compared
    without case) and where the whole list is, with ``list`` deepseek-recipe's message listing every
    supported name in byte order."""
    encoding = options.models.get(model)
    if encoding is None:
        if options.unknown_model == "list":
            names = ", ".join(sorted(options.models))
            raise RequestError(f"The supported API model names are {names}, but you passed {model}.", param="model")
        raise RequestError(unknown_model_message(model, [*options.models, *options.aliases]), param="model")
    return encoding


def unknown_model_message(model: str, names: Sequence[str]) -> str:
    """``The model 'X' is not supported; closest: a, b, c. N model names are supported: …`` (the
    shown name cut at 100 characters)."""
    import difflib

    by_lower: dict[str, str] = {}
    for n in sorted(names):
        by_lower.setdefault(n.lower(), n)
    close = difflib.get_close_matches(model.lower()[:200], list(by_lower), n=3, cutoff=0.4)
    shown = model if len(model) <= 100 else model[:100] + "…"
    head = f"The model {shown!r} is not supported" + (f"; closest: {', '.join(by_lower[c] for c in close)}" if close else "")
    return f"{head}. {len(by_lower)} model names are supported: GET /v1/models (recipe serve) or `recipe models` lists them."


def family_rules(model: str, options: Options) -> RequestRules:
    """The request rules of the model family ``model`` maps to (:func:`check_model`'s 400 for an
    unknown name)."""
    return get_encoding(check_model(model, options)).request


#: The ``chat_template_kwargs`` keys that switch thinking (DeepSeek's templates in vLLM and SGLang
#: read ``thinking``; Qwen-style clients send ``enable_thinking``).
TEMPLATE_THINKING_KEYS = ("thinking", "enable_thinking")


def template_thinking(kwargs: Any, options: Options) -> str | None:
    """The thinking switch of a request's ``chat_template_kwargs`` (how vLLM and SGLang users turn
    DeepSeek's thinking on or off) as a ``thinking.type``: ``enabled``, ``disabled``, or None when
    it has neither key (or ``options.chat_template_kwargs`` is ``ignore``: deepseek-recipe drops the
    field). Other keys have no effect: recipe renders the model's template itself.

    Raises:
        RequestError: ``chat_template_kwargs`` is not an object, a switch is not a boolean, or the two
            keys disagree (``param``: the field's path).
    """
    if kwargs is None or options.chat_template_kwargs == "ignore":
        return None
    if not isinstance(kwargs, dict):
        raise RequestError("Invalid chat_template_kwargs value: expected an object", param="chat_template_kwargs")
    found = None
    for key in TEMPLATE_THINKING_KEYS:
        value = kwargs.get(key)
        if value is None:
            continue
        if not isinstance(value, bool):
            raise RequestError(f"Invalid chat_template_kwargs.{key} value: expected true or false",
                               param=f"chat_template_kwargs.{key}")
        if found is not None and value != found:
            raise RequestError("chat_template_kwargs.thinking and chat_template_kwargs.enable_thinking disagree",
                               param=f"chat_template_kwargs.{key}")
        found = value
    return None if found is None else "enabled" if found else "disabled"


def resolve_thinking(
    thinking_type: str | None, effort: str | None, options: Options, encoding: str | None = None
) -> tuple[bool, ReasoningEffort | None]:
    """(thinking on?, effective effort) from the API's thinking switch and effort level (§1.6).

    An explicit ``thinking.type`` wins (``enabled``/``adaptive`` on, ``disabled`` off); else effort
    ``none`` turns thinking off and any other effort turns it on; else ``options.default_thinking``.
    Thinking without an effort means ``high``. A family without a switch decides alone
    (:attr:`Encoding.thinking <recipe.encodings.base.Encoding.thinking>` of ``encoding``):
    ``never`` is off (DeepSeek-V3), ``always`` is on (DeepSeek-R1), whatever the request says.
    """
    family = None
    if encoding is not None:
        try:
            family = get_encoding(encoding)
        except KeyError:  # not a known encoding: the request's switch decides
            pass
    if family is not None and family.thinking == "never":
        return False, None
    if family is not None and family.thinking == "always":
        return True, EFFORT_LEVELS.get(effort or "high") or "high"
    if thinking_type is not None:
        on = thinking_type != "disabled"
    elif effort is not None:
        on = effort != "none"
    else:
        on = options.default_thinking
    if not on:
        return False, None
    return True, EFFORT_LEVELS.get(effort or "high") or "high"


_TOOL_CACHE: OrderedDict[bytes, ToolDefinition] = OrderedDict()
_TOOL_CACHE_SIZE = 1024


def build_tool(
    name: str, description: str | None, parameters: Any, strict: bool | None, field: str, *, normalize_strict: bool = True,
    check_name: bool = True, enforce_strict: bool = True,
) -> ToolDefinition:
    """A validated :class:`ToolDefinition` (§1.5); memoised, since agent loops re-send the same tools.

    The returned definition (and its ``parameters``) is shared between requests: treat it as read-only.
    A miss stores a deep copy of ``parameters``, so a caller that later edits its own schema dict in
    place never changes what an equal request gets from the memo.

    Args:
        field: path of the tool's name field for errors, e.g. ``tools[0].function.name``.
        normalize_strict: apply strict-schema normalisation when ``strict`` is true (Chat, Responses).
        check_name: apply the name rules (off for a Responses namespace tool's flattened name,
            whose parts were checked: V4.1 joins them with ``::``).
        enforce_strict: a strict tool's schema is also checked as a JSON Schema and for keywords the
            output grammar cannot enforce, and the grammar holds it to the client's schema
            (``Options.strict_schemas``; :mod:`recipe.schema.strict_enforce`).

    Raises:
        RequestError: empty name, name not matching ``^[a-zA-Z0-9_-]+$``, parameters that are not an
            object schema, strict-normalisation errors.
    """
    try:
        key = orjson.dumps([name, description, parameters, strict, normalize_strict, check_name, enforce_strict, field])
    except (TypeError, orjson.JSONEncodeError):  # e.g. integers beyond 64 bits: not worth caching
        return _build_tool(name, description, parameters, strict, field, normalize_strict, check_name, enforce_strict)
    tool = _TOOL_CACHE.get(key)
    if tool is None:
        tool = _build_tool(name, description, copy.deepcopy(parameters), strict, field, normalize_strict, check_name, enforce_strict)
        _TOOL_CACHE[key] = tool
        if len(_TOOL_CACHE) > _TOOL_CACHE_SIZE:
            _TOOL_CACHE.popitem(last=False)
    return tool


#: deepseek-recipe's longest tool name (checked only with ``options.long_tool_names="reject"``)
TOOL_NAME_MAX = 128


def check_tool_name(name: str, field: str, options: Options = DEFAULT_OPTIONS) -> None:
    """A tool name's own rules, in deepseek-recipe's order: at most :data:`TOOL_NAME_MAX` characters
    (only when ``options.long_tool_names`` is ``reject``), not empty, ``^[a-zA-Z0-9_-]+$``.

    Raises:
        RequestError: the parity target's message, ``param`` = ``field``.
    """
    if options.long_tool_names == "reject" and len(name) > TOOL_NAME_MAX:
        raise RequestError(
            f"Invalid '{field}': string too long. Expected a string with maximum length {TOOL_NAME_MAX}, "
            f"but got a string with length {len(name)} instead.",
            param=field,
        )
    _check_name_pattern(name, field)


def _check_name_pattern(name: str, field: str) -> None:
    if name == "":
        raise RequestError(
            f"Invalid '{field}': empty string. Expected a string with minimum length 1, but got an empty string instead.",
            param=field,
        )
    if not _TOOL_NAME_RE.fullmatch(name):
        raise RequestError(
            f"Invalid '{field}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            param=field,
        )


def _build_tool(
    name: str, description: str | None, parameters: Any, strict: bool | None, field: str, normalize_strict: bool, check_name: bool = True,
    enforce_strict: bool = True,
) -> ToolDefinition:
    if check_name:
        _check_name_pattern(name, field)
    where = f"{field.removesuffix('.name')}.parameters" if field.endswith(".name") else None
    enforced = None
    try:
        if strict and normalize_strict:
            from recipe.schema.strict import normalize_strict_schema  # schema rules: loaded when a request has tools

            # strict schemas are re-built (deepseek-recipe's errors first), absent ones as the empty object
            given = {"type": "object"} if parameters is None else parameters
            parameters = normalize_strict_schema(given, tool_name=name)
            if enforce_strict:
                from recipe.schema.strict_enforce import check_strict, enforced_schema
                from recipe.schema.validation import validate_tool_parameters

                validate_tool_parameters(given, name)
                check_strict(given, where or "parameters", tool=True)
                enforced = enforced_schema(given)
        elif parameters is None:
            parameters = {}
        else:
            from recipe.schema.validation import validate_tool_parameters  # jsonschema: loaded when a tool needs it

            validate_tool_parameters(parameters, name)
    except RequestError as err:
        if err.param is not None:
            raise
        # the schema rules name no field: the tool's parameters (``tools[0].function.parameters``)
        raise RequestError(err.message, param=where, status=err.status, stage=err.stage) from None
    return ToolDefinition(name=name, description=description, parameters=parameters, strict=strict, enforced=enforced)


def check_strict_mixing(tools: Sequence[ToolDefinition], options: Options = DEFAULT_OPTIONS) -> None:
    """Strict and non-strict tools mixed in one request (Chat and Responses): deepseek-recipe's 400,
    or accepted (each tool normalised by its own flag) with ``options.mixed_strict_tools="accept"``."""
    if options.mixed_strict_tools == "accept":
        return
    if any(t.strict for t in tools) and not all(t.strict for t in tools):
        raise RequestError("Cannot use strict tool with non-strict tool in the same request", param="tools")


def check_format_with_strict_tools(
    tools: Sequence[ToolDefinition], format_given: bool, field: str = "response_format", options: Options = DEFAULT_OPTIONS
) -> None:
    """deepseek-recipe rejects any response format (even ``text``) next to strict tools (after
    tool-choice filtering): ``response_format should not be used with tools``. Accepted with
    ``options.format_with_strict_tools="accept"`` (the constraint becomes "tool calls or the format")."""
    if options.format_with_strict_tools == "accept":
        return
    if format_given and any(t.strict for t in tools):
        raise RequestError("response_format should not be used with tools", param=field)


def thinking_for_tool_choice(mode: str, tools: Sequence[ToolDefinition], thinking: bool, options: Options) -> bool:
    """Thinking after the forced-tool-choice rule: a ``required`` / named choice with tools in
    thinking mode is rendered without thinking when ``options.forced_tool_choice_thinking`` is
    ``non_thinking`` (the default), so the prompt can open the tool-call block."""
    if thinking and mode == "required" and tools and options.forced_tool_choice_thinking == "non_thinking":
        return False
    return thinking


_AUTO, _NONE = ToolChoice("auto"), ToolChoice("none")


def resolve_tool_choice(
    mode: str,
    name: str | None,
    tools: Sequence[ToolDefinition],
    thinking: bool,
    field: str = "tool_choice",
    options: Options = DEFAULT_OPTIONS,
) -> tuple[ToolChoice, tuple[ToolDefinition, ...]]:
    """(tool choice, tools to render) per the tool_choice table of §1.5.

    ``mode`` is ``auto`` | ``none`` | ``required`` (a named choice is ``required`` with ``name``).
    ``none`` removes every tool; ``required``/named without tools silently become ``auto``; a named
    choice filters the tools to that one; a forced choice in thinking mode is a 400 unless
    ``options.forced_tool_choice_thinking`` is ``constrain`` (see :func:`thinking_for_tool_choice`
    for ``non_thinking``, applied before this).
    """
    tools = tuple(tools)
    if mode == "none":
        return _NONE, ()
    if mode == "auto" or not tools:
        return _AUTO, tools
    if name is not None:
        chosen = tuple(t for t in tools if t.name == name)
        if not chosen:
            raise RequestError(
                f"Invalid value for 'tool_call': no function named '{name}' was specified in the 'tools' parameter.",
                param=field,
            )
        tools = chosen
    if thinking and options.forced_tool_choice_thinking != "constrain":
        raise RequestError("Thinking mode does not support this tool_choice", param=field)
    return ToolChoice("required", name), tools


def check_sampling(temperature: float | None, top_p: float | None) -> None:
    """temperature in [0, 2] and top_p in (0, 1] after f32 rounding, on every API, even in thinking mode (§1.8)."""
    temperature = None if temperature is None else f32(temperature)
    top_p = None if top_p is None else f32(top_p)
    if temperature is not None and not 0 <= temperature <= 2:
        raise RequestError("Invalid temperature value, the valid range of temperature is [0, 2]", param="temperature")
    if top_p is not None and not 0 < top_p <= 1:
        raise RequestError("Invalid top_p value, the valid range of top_p is (0, 1.0]", param="top_p")


def check_max_tokens(value: int | None, thinking: bool, options: Options, *, clamp: bool, field: str) -> int | None:
    """``max_tokens`` after the range rule: ≥ 1 always; above the bound rejected, or lowered when ``clamp``."""
    if value is None:
        return None
    bound = options.thinking_max_tokens if thinking else options.non_thinking_max_tokens
    if value > bound and clamp:
        return bound
    if not 1 <= value <= bound:
        raise RequestError(f"Invalid max_tokens value, the valid range of max_tokens is [1, {bound}]", param=field)
    return value


#: API -> (the field that carries max_tokens, the field naming the prompt, clamp past the window?).
#: Anthropic Messages lowers ``max_tokens`` to the room left in the window (generation then ends at
#: the window); the OpenAI APIs refuse a request whose prompt plus ``max_tokens`` exceeds it.
_MAX_TOKENS_FIELDS = {
    "chat": ("max_tokens", "messages", False),
    "responses": ("max_output_tokens", "input", False),
    "messages": ("max_tokens", "messages", True),
}


def resolve_max_tokens(api: str, requested: int | None, prompt_tokens: int, thinking: bool, options: Options) -> int:
    """The completion-token limit every engine request carries (vLLM's ``/v1/completions`` would
    otherwise default it to 16).

    Without ``requested`` (Chat and Responses have no default of their own): the room left in the
    context window (``options.context_limit - prompt_tokens``), at most the mode's bound
    (``thinking_max_tokens`` / ``non_thinking_max_tokens``). With one: that value, unless the prompt
    plus it exceed the window — then Messages lowers it to the room left and the OpenAI APIs answer
    400 (``context_length_exceeded``, as OpenAI and vLLM do).

    Raises:
        RequestError: the prompt leaves no room in the window (each API's own 400: OpenAI
            ``context_length_exceeded`` naming ``messages`` / ``input``; Anthropic
            ``invalid_request_error`` "prompt is too long"), or (OpenAI APIs) prompt plus
            ``requested`` exceed it.
    """
    field, prompt_field, clamp = _MAX_TOKENS_FIELDS.get(api, _MAX_TOKENS_FIELDS["chat"])
    window = options.context_limit
    room = window - prompt_tokens
    if room < 1:
        if api == "messages":
            raise RequestError(f"prompt is too long: {prompt_tokens} tokens > {window - 1} maximum", param=prompt_field)
        raise RequestError(
            f"This model's maximum context length is {window} tokens. However, your {prompt_field} resulted in "
            f"{prompt_tokens} tokens. Please reduce the length of the {prompt_field}.",
            param=prompt_field, code="context_length_exceeded")
    if requested is None:
        return min(room, options.thinking_max_tokens if thinking else options.non_thinking_max_tokens)
    if requested <= room or clamp:
        return min(requested, room)
    raise RequestError(
        f"This model's maximum context length is {window} tokens. However, you requested {prompt_tokens + requested} "
        f"tokens ({prompt_tokens} in the {prompt_field}, {requested} in the completion). Please reduce the length of "
        f"the {prompt_field} or completion.", param=field, code="context_length_exceeded")


def check_stop(stop: Sequence[str], field: str, *, indexed: bool) -> tuple[str, ...]:
    """At most 16 stop sequences, none empty; duplicates kept (§1.8)."""
    if len(stop) > 16:
        raise RequestError(f"Stop string array too long: {len(stop)}", param=field)
    for i, s in enumerate(stop):
        if s == "":
            name = f"{field}[{i}]" if indexed else field
            raise RequestError(
                f"Invalid '{name}': empty string. Expected a string with minimum length 1, but got an empty string instead.",
                param=name,
            )
    return tuple(stop)


def check_schema_limits(options: Options, schemas: Iterable[tuple[Any, str]]) -> None:
    """Check a request's JSON Schemas against ``options.schema_limits`` before any work is done with
    them (:class:`recipe.schema.limits.SchemaBudget`: one budget for the whole request).

    Args:
        schemas: ``(schema, field path)`` pairs; None schemas are skipped.

    Raises:
        RequestError: status 400 naming the limit, ``param`` the offending value's path.
    """
    budget = None
    for schema, field in schemas:
        if type(schema) is dict or isinstance(schema, (dict, list)):
            if budget is None:
                from recipe.schema.limits import SchemaBudget  # loaded when a request has schemas

                budget = SchemaBudget(options.schema_limits)
            budget.check(schema, field)


def check_response_format(
    rf: ResponseFormat, field: str = "response_format", *, schema_field: str | None = None, enforce_strict: bool = False
) -> ResponseFormat:
    """A json_schema response format must be a valid schema: strict ones must normalise (§1.5
    rules, response-format variant), others must pass meta-schema validation.

    With ``enforce_strict`` (``Options.strict_schemas="enforce"``) a strict schema must also pass the
    meta-schema check and hold only keywords the output grammar enforces
    (:func:`recipe.schema.strict_enforce.check_strict`, errors on ``schema_field`` + the path), and
    the returned format carries the schema the grammar enforces (``enforced``).

    Returns:
        ``rf``, or a copy with ``enforced`` set.

    Raises:
        RequestError: status 400, ``param`` ``field`` (or the offending keyword's path).
    """
    if rf.type != "json_schema":
        return rf
    try:
        if rf.strict:
            from recipe.schema.strict import normalize_strict_response_schema

            normalize_strict_response_schema(rf.schema)
            if enforce_strict:
                from recipe.schema.strict_enforce import check_strict, enforced_schema
                from recipe.schema.validation import validate_response_schema

                validate_response_schema(rf.schema)
                check_strict(rf.schema, schema_field or field, tool=False)
                return replace(rf, enforced=enforced_schema(rf.schema))
        else:
            from recipe.schema.validation import validate_response_schema  # jsonschema: loaded when used

            validate_response_schema(rf.schema)
    except RequestError as err:
        if err.param is None:
            err.param = field
        raise
    return rf


def mentions_json(texts: Iterable[str]) -> bool:
    """True when some message text contains ``json`` in any case (json_object precondition, §1.7)."""
    return any("json" in t.lower() for t in texts)


def output_constraint(conv: Conversation) -> OutputConstraint | None:
    """What a constrained decoder should enforce (§4): tools win over a response format.

    Beyond deepseek-recipe (docs/clients.md): a forced tool choice kept in thinking mode gives
    ``tool_call_required_after_reasoning``; a response format next to strict tools (which
    deepseek-recipe rejects) gives ``tool_call_or_format`` with schema
    ``{"tools": [...], "format": {"kind", "schema"}}`` (compact JSON).
    """
    if conv.tools:
        tools_json = _tools_json(tuple(conv.tools))
        if conv.tool_choice.mode == "required":
            kind = "tool_call_required_after_reasoning" if conv.thinking else "tool_call_required"
            return OutputConstraint(kind, tools_json)
        fmt = _format_constraint(conv.response_format)
        if fmt is not None and any(t.strict for t in conv.tools):
            return OutputConstraint(
                "tool_call_or_format", f'{{"tools":{tools_json},"format":{dumps_compact({"kind": fmt.kind, "schema": fmt.schema})}}}'
            )
        return OutputConstraint("tool_call", tools_json)
    return _format_constraint(conv.response_format)


def _by_identity(fn: Callable[[tuple[Any, ...]], Any]) -> Callable[[tuple[Any, ...]], Any]:
    """``fn(objs)`` memoised by the identity of the items of the tuple ``objs``: for immutable,
    memoised objects (tool definitions, see :func:`build_tool`) an agent loop re-sends, so what is
    derived from them is computed once. Entries hold the objects, so their ids are never reused
    while an entry lives. Bounded: cleared when :data:`_TOOL_CACHE_SIZE` entries are held."""
    memo: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}

    def call(objs: tuple[Any, ...]) -> Any:
        key = tuple(map(id, objs))
        hit = memo.get(key)
        if hit is not None and all(map(operator.is_, hit[0], objs)):
            return hit[1]
        value = fn(objs)
        if len(memo) >= _TOOL_CACHE_SIZE:
            memo.clear()
        memo[key] = (objs, value)
        return value

    return call


@_by_identity
def _tools_json(tools: tuple[ToolDefinition, ...]) -> str:
    """``tools_constraint_json(tools)``, printed once per set of tool definitions."""
    from recipe.schema.strict import tools_constraint_json

    return tools_constraint_json(tools)


def _format_constraint(rf: ResponseFormat) -> OutputConstraint | None:
    if rf.type == "json_schema":
        from recipe.schema.strict import json_schema_constraint

        return OutputConstraint("json", json_schema_constraint(rf.schema, bool(rf.strict)))
    if rf.type == "json_object":
        return OutputConstraint("json", "")
    if rf.type == "regex":
        return OutputConstraint("regex", rf.regex or "")
    return None


#: ``(json_object, thinking stage, stop sequences)`` -> the parsing options of a request without
#: tools or a json_schema format (bounded; cleared when full).
_PLAIN_PARSING: dict[tuple[bool, str | None, tuple[str, ...]], ParsingOptions] = {}


def parsing_options(conv: Conversation) -> ParsingOptions:
    """How to parse the completion of ``conv`` (§1.1): tool parsing, forced block, continuation stage."""
    stage = None
    if conv.thinking:
        stage = "reasoning"
        last = conv.messages[-1] if conv.messages else None
        if isinstance(last, AssistantMessage) and last.prefix:
            if last.content:
                stage = "content_continuation"
            elif last.reasoning_content:
                stage = "reasoning_continuation"
    tools, rf = conv.tools, conv.response_format
    if not tools and rf.type != "json_schema" and type(conv.stop) is tuple:  # the common request: no tools, no schema (shared, frozen)
        key = (rf.type == "json_object", stage, conv.stop)
        found = _PLAIN_PARSING.get(key)
        if found is None:
            if len(_PLAIN_PARSING) >= 256:
                _PLAIN_PARSING.clear()
            found = _PLAIN_PARSING[key] = ParsingOptions(parse_json_output=key[0], thinking_stage=stage, stop_sequences=conv.stop)
        return found
    return ParsingOptions(
        parse_tool_calls=bool(tools),
        starts_in_tool_calls=bool(tools) and conv.tool_choice.mode == "required" and not conv.thinking,
        parse_json_output=rf.type == "json_object",
        thinking_stage=stage,
        stop_sequences=conv.stop,
        tool_names=tuple([t.name for t in tools]) if tools else (),
        response_schema=rf.schema if rf.type == "json_schema" else None,
        tool_arguments={t.name: a for t in tools if (a := _tool_arguments(t)) is not None} if tools else {},
    )


def _json_only(schema: Any) -> bool:
    """True when a property schema's ``type`` names only non-string JSON types."""
    if not isinstance(schema, dict):
        return False
    t = schema.get("type")
    if isinstance(t, str):
        return t != "string"
    return isinstance(t, list) and bool(t) and all(isinstance(x, str) and x != "string" for x in t)


#: :func:`tool_arguments` of one tool definition, read once per definition.
_tool_arguments_of = _by_identity(lambda tools: tool_arguments(tools[0]))


def _tool_arguments(tool: ToolDefinition) -> ToolArguments | None:
    return _tool_arguments_of((tool,))


def tool_arguments(tool: ToolDefinition) -> ToolArguments | None:
    """What the output parser checks and infers for calls of ``tool`` (None: nothing).

    ``required``: the schema's ``required`` names when the tool is strict (a strict call must carry
    them); ``json_params``: top-level properties whose type excludes ``string`` (a parameter written
    without ``string=`` is read as JSON for these). Never raises: a schema without those shapes
    gives nothing.
    """
    params = tool.parameters
    if not isinstance(params, dict):
        return None
    props = params.get("properties")
    json_params = frozenset(k for k, v in props.items() if _json_only(v)) if isinstance(props, dict) else frozenset()
    req = params.get("required") if tool.strict else None
    required = frozenset(r for r in req if isinstance(r, str)) if isinstance(req, list) else frozenset()
    if not json_params and not required:
        return None
    return ToolArguments(required, json_params)


@dataclass(frozen=True, slots=True)
class PendingSystem:
    """A V4.1 system message whose tool additions (Messages ``tool_addition`` blocks, Responses
    tools found by a tool search) are named here and resolved once the rendered tools are known."""

    content: str
    images: tuple[ImagePlaceholder, ...]
    additions: tuple[str, ...]


def resolve_systems(messages: Sequence[Any], tools: Sequence[ToolDefinition]) -> list[Message]:
    """Each :class:`PendingSystem` becomes a system message with the tools its additions name among
    the rendered ``tools`` (in addition order); one whose additions all fell away (tool choice) and
    which has no text is dropped, as deepseek-recipe does."""
    by_name = {t.name: t for t in tools}
    out: list[Message] = []
    for m in messages:
        if type(m) is not PendingSystem:
            out.append(m)
            continue
        added = tuple(by_name[n] for n in m.additions if n in by_name)
        if m.additions and not added and not m.content:
            continue
        out.append(SystemMessage(m.content, m.images, added))
    return out
