"""The request flow, top to bottom: API body → Conversation → prompt segments → token ids.

``prepare(body)`` is the one call a serving stack needs on the way in; everything it returns is
plain data (the parsed request, the Conversation, the prompt, the ids, and how to parse the output).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from recipe.api.common import check_model, collect_dropped, output_constraint, parsing_options, reset_dropped, resolve_max_tokens
from recipe.api.input_notes import input_notes
from recipe.api.prepared import Api, EngineParams, PreparedRequest
from recipe.api.wire import DEPTH_CHECKED
from recipe.conversation import Conversation, OutputConstraint, ParsingOptions
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.jsonfmt import check_request_depth, loads_request
from recipe.options import DEFAULT_OPTIONS, Options
from recipe.prompt import SegmentCache, encode_prompt
from recipe.prompt_cache import PromptCache, default_prompt_cache
from recipe.tokenizer import MissingSpecialTokenError, Tokenizer

if TYPE_CHECKING:
    from recipe.encodings.base import Encoding
    from recipe.store.conversations import ConversationStore

__all__ = ["Api", "PreparedRequest", "prepare", "detect_api", "check_body_size", "ADAPTERS", "Adapter",
           "default_segment_cache"]


@dataclass(frozen=True, slots=True)
class Adapter:
    """One API's request adapter: ``parse(body) -> request model`` and
    ``convert(request, options) -> Conversation``.

    ``memo_field``: the body's list of messages when the adapter reuses an earlier request's
    validated and converted messages (:mod:`recipe.api.reuse`): then ``parse(body, match)`` and
    ``convert(request, options, match)`` take the :class:`~recipe.api.reuse.MemoMatch` too."""

    parse: Callable[..., Any]
    convert: Callable[..., Conversation]
    memo_field: str | None = None


# Each API's adapter is imported on first use: a process that serves only Chat never loads the
# Responses or Messages request models.


@functools.cache
def _chat() -> Adapter:
    from recipe.api.chat import chat_to_conversation, parse_chat_request

    return Adapter(parse_chat_request, chat_to_conversation, "messages")


@functools.cache
def _responses() -> Adapter:
    from recipe.api.responses import responses_to_conversation
    from recipe.api.responses_wire import parse_responses_request

    return Adapter(parse_responses_request, responses_to_conversation)


@functools.cache
def _messages() -> Adapter:
    from recipe.api.messages import messages_to_conversation, parse_messages_request

    return Adapter(parse_messages_request, messages_to_conversation)


#: API name -> a function returning its :class:`Adapter`.
ADAPTERS: Mapping[str, Callable[[], Adapter]] = MappingProxyType(
    {"chat": _chat, "responses": _responses, "messages": _messages}
)


_default_cache = SegmentCache()


def default_segment_cache() -> SegmentCache:
    """The process-wide segment cache ``prepare`` uses unless told otherwise."""
    return _default_cache


_RESPONSES_KEYS = frozenset({"input", "instructions"})
_MESSAGES_KEYS = frozenset({"system", "stop_sequences", "anthropic_version", "output_config"})
#: Chat Completions fields a Messages body never has (OpenAI's, and the sampling extras vLLM and
#: SGLang users send next to ``top_k``): with one of them, ``top_k`` does not make a body Messages.
_CHAT_SIGN_KEYS = frozenset(
    "response_format max_completion_tokens n logprobs top_logprobs stream_options frequency_penalty presence_penalty "
    "seed parallel_tool_calls reasoning_effort logit_bias user min_p repetition_penalty chat_template_kwargs "
    "skip_special_tokens min_tokens ignore_eos stop".split()
)
_CHAT_SIGN_ROLES = frozenset({"system", "developer", "tool"})
_MESSAGES_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"})


def detect_api(body: Mapping[str, Any]) -> Api:
    """Guess the API of a request body.

    ``input``/``instructions`` → responses; Anthropic-only fields (top-level ``system``,
    ``stop_sequences``, ``output_config``), ``top_k`` with ``max_tokens`` (which Messages requires) and
    without a sign of Chat (a Chat-only field such as
    ``n``, ``min_p``, ``repetition_penalty``, ``chat_template_kwargs``; a system, developer or tool
    message: vLLM and SGLang take ``top_k`` in Chat bodies too), tools without a ``function`` object,
    an object ``tool_choice`` of type auto/any/tool/none, or Anthropic content blocks → messages;
    otherwise chat (a body valid in both Chat and Messages, such as plain user strings, reads as
    chat: pass ``api``).
    """
    keys = body.keys()
    if not keys.isdisjoint(_RESPONSES_KEYS):
        return "responses"
    if not keys.isdisjoint(_MESSAGES_KEYS):
        return "messages"
    if "top_k" in keys and "max_tokens" in keys and keys.isdisjoint(_CHAT_SIGN_KEYS) and not any(
            isinstance(m, Mapping) and m.get("role") in _CHAT_SIGN_ROLES for m in body.get("messages") or ()):
        return "messages"
    tools = body.get("tools")
    if isinstance(tools, list) and any((type(t) is dict or isinstance(t, Mapping)) and "function" not in t for t in tools):
        return "messages"
    choice = body.get("tool_choice")
    if choice is not None and isinstance(choice, Mapping) and choice.get("type") in ("auto", "any", "tool", "none"):
        return "messages"
    for m in body.get("messages") or ():
        content = m.get("content") if type(m) is dict or isinstance(m, Mapping) else None
        if type(content) is not str and isinstance(content, list) and any(
                isinstance(b, Mapping) and b.get("type") in _MESSAGES_BLOCKS for b in content):
            return "messages"
    return "chat"


def prepare(
    body: Any,
    api: Api | Literal["auto"] = "auto",
    *,
    options: Options = DEFAULT_OPTIONS,
    tokenizer: Tokenizer | None = None,
    cache: SegmentCache | None | Literal["default"] = "default",
    store: ConversationStore | None = None,
    prompt_cache: PromptCache | None | Literal["default"] = "default",
) -> PreparedRequest:
    """Turn one API request body into prompt token ids.

    Args:
        body: the request (dict, JSON text or bytes).
        api: ``chat`` | ``responses`` | ``messages``, or ``auto`` to detect it.
        options: conversion options (model table and aliases, thinking default, limits).
        tokenizer: vocabulary (default: the model family's own, e.g. the embedded DeepSeek-V4 one).
            When it lacks a special token the model's template emits (DeepSeek-V4.1 with the
            embedded vocabulary), the result has the prompt but no ids: ``token_ids`` raises
            ``MissingSpecialTokenError``.
        cache: segment cache for repeated history text; ``None`` disables it.
        store: a conversation store: a Responses request with ``previous_response_id`` is expanded
            to its full history first (without a store the field is ignored, as deepseek-recipe does).
        prompt_cache: earlier prompts reused up to the last unchanged checkpoint (the agent loop's
            next request renders and encodes only what changed; ids are always those of a cold
            call): the process-wide :func:`~recipe.prompt_cache.default_prompt_cache` by default,
            another :class:`~recipe.prompt_cache.PromptCache`, or ``None`` to render in full.

    Raises:
        RequestError: the request is invalid (``stage`` says whether parsing or conversion refused it);
            413 ``request_too_large`` for a bytes or text body over ``options.max_body_bytes``
            (checked before parsing); 400 ``context_length_exceeded`` for a prompt past the window.
    """
    checked = 0  # id() of the body dict when its nesting depth was checked here
    text: str | bytes | None = None  # the JSON text the body was parsed from (its nesting checked below)
    if type(body) is not dict:  # (a dict: the common case, nothing to check here)
        if isinstance(body, (bytes, bytearray, str)):
            check_body_size(body, options.max_body_bytes)
            text = body if isinstance(body, str) else bytes(body)
            body = loads_request(text, check_depth=False)
            checked = id(body)
        if type(body) is not dict and not isinstance(body, Mapping):
            if text is not None:
                check_request_depth(body, text)
            raise RequestError("invalid request body: expected a JSON object", stage="parse")
    if api == "auto":
        api = detect_api(body)
    reuse = default_prompt_cache() if prompt_cache == "default" else prompt_cache
    load = ADAPTERS.get(api)
    adapter = None if load is None else load()
    # a body parsed from JSON text here, of an API whose messages are memoised: its messages are
    # compared with earlier requests' (recipe/api/reuse.py), and only the ones not seen before are
    # walked for the nesting check
    memo = (text is not None and reuse is not None and adapter is not None and adapter.memo_field is not None
            and not (store is not None and api == "responses"))
    if text is not None and not memo:
        check_request_depth(body, text)
    if store is not None and api == "responses":
        from recipe.store.conversations import expand_request  # sqlite3: loaded by store users only

        sent, body = body, expand_request(body, store)
        try:
            return prepare(body, api=api, options=options, tokenizer=tokenizer, cache=cache, prompt_cache=prompt_cache)
        except RequestError as err:  # paths said against the request the client sent
            from recipe.store.conversations import relocate_error

            raise relocate_error(err, sent, body) from None
    if adapter is None:
        raise RequestError(f"the {api} API is not supported yet", param=None, status=400)
    match = None
    if memo:
        field = adapter.memo_field
        match = reuse.messages.match(api, body.get(field))
        # the earlier requests' messages were checked (at these same depths) when they were new
        check_request_depth(body, text, {**body, field: body[field][match.length:]} if match is not None else body)
    if match is not None:
        request = adapter.parse(body, match)
    elif checked or DEPTH_CHECKED.get():
        token = DEPTH_CHECKED.set(checked)  # a store-expanded body is another dict: walked by the parse
        try:
            request = adapter.parse(body)
        finally:
            DEPTH_CHECKED.reset(token)
    else:  # a dict body, nothing marked: the parse walks it
        request = adapter.parse(body)
    options = options.for_model(request.model) if isinstance(request.model, str) else options
    dropped: list[str] = []
    token = collect_dropped(dropped)
    try:
        conversation = adapter.convert(request, options) if match is None else adapter.convert(request, options, match)
    finally:
        reset_dropped(token)
    encoding = check_model(request.model, options)
    family = get_encoding(encoding)
    notes = input_notes(api, dropped, conversation, family, options) if (
        dropped or conversation.tools or conversation.response_format.type != "text") else ()
    tok = tokenizer or family.tokenizer()
    segments = _default_cache if cache == "default" else cache
    missing = family.missing_special(tok)
    ids: list[int] | None = None
    if missing is None:
        try:
            if reuse is None:
                prompt = family.render(conversation)
                ids = encode_prompt(tok, prompt, segments)
            else:
                prompt, ids = reuse.render_encode(family, conversation, tok, segments)
        except MissingSpecialTokenError as err:
            missing = err.token
    if ids is None:  # a vocabulary that is not the family's: the prompt without ids
        prompt = family.render(conversation)
    parsing = parsing_options(conversation)
    if family.parsing is not None:
        parsing = family.parsing(conversation, parsing)
    constraint = output_constraint(conversation)
    if constraint is not None and family.grammar is not None:
        constraint = OutputConstraint(constraint.kind, constraint.schema,  # (dataclasses.replace, without its field walk)
                                      build_grammar=functools.partial(_grammar, family, conversation, parsing, tok,
                                                                      options.schema_limits.max_grammar_bytes, api))
    return PreparedRequest(
        api=api,
        model=request.model,
        encoding=encoding,
        request=request,
        conversation=conversation,
        prompt=prompt,
        ids=ids,
        parsing=parsing,
        output_constraint=constraint,
        stream=bool(getattr(request, "stream", False)),
        engine=None if ids is None else _engine_params(api, conversation, len(ids), family.stop_ids(tok), constraint, options),
        missing_special=missing,
        notes=notes,
    )


#: the field a grammar-size refusal names when the request has no tools
_FORMAT_FIELD = {"chat": "response_format", "responses": "text.format", "messages": "output_config.format"}


def _grammar(family: Encoding, conversation: Conversation, parsing: ParsingOptions, tok: Tokenizer,
             max_bytes: int | None = None, api: str = "chat") -> Any:
    """The turn's output grammar, built when first asked for (``prep.output_constraint.grammar``).

    Raises:
        RequestError: status 400, the grammar (Lark or structural tag) is longer than ``max_bytes``
            (``Options.schema_limits.max_grammar_bytes``), ``param`` ``tools`` or the format's field.
    """
    from recipe.schema.constrain import grammar_for  # loaded by grammar users only

    grammar = grammar_for(family, conversation, parsing, tok)
    size = max(len(grammar.lark), len(grammar.structural_tag))
    if max_bytes is not None and size > max_bytes:
        field = "tools" if conversation.tools else _FORMAT_FIELD.get(api, "response_format")
        raise RequestError(f"Invalid '{field}': the output grammar of this request is {size} bytes, above the "
                           f"server's limit of {max_bytes} (max_grammar_bytes).", param=field)
    return grammar


def _engine_params(api: str, conv: Conversation, prompt_tokens: int, stops: tuple[int, ...],
                   constraint: Any, options: Options) -> EngineParams:
    s = conv.sampling
    extra = s.extra
    if extra is not None and extra.stop_token_ids:
        stops = tuple(dict.fromkeys([*stops, *extra.stop_token_ids]))
    return EngineParams(
        max_tokens=resolve_max_tokens(api, conv.max_tokens, prompt_tokens, conv.thinking, options),
        stop_token_ids=stops,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=s.seed,
        logprobs=(s.top_logprobs or 0) if s.logprobs else None,
        constraint=constraint,
        extra=extra,
    )


def check_body_size(body: bytes | bytearray | str, limit: int) -> None:
    """Refuse a request body longer than ``limit`` bytes (UTF-8 for text) before parsing it.

    Raises:
        RequestError: 413 ``request_too_large`` (each API's own shape via ``error_body``).
    """
    n = len(body)
    if isinstance(body, str) and n <= limit < 4 * n:
        n = len(body.encode("utf-8", "surrogatepass"))
    if n > limit:
        raise RequestError(f"Request body too large: {n} bytes, the limit is {limit} bytes.", status=413,
                           code="request_too_large", stage="parse")
