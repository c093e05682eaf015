"""vLLM's render protocol with DeepSeek-exact token ids: the routes fleet routers call for prompt ids.

llm-d's router (its ``token-producer`` with the ``vllm`` backend) and Dynamo's endpoint picker
(``vllm-render``) send the client's request body to a renderer and route on the token ids it
returns; the ids then go to an engine's token-in/token-out ``POST /inference/v1/generate``. vLLM 0.32
serves that protocol with ``--enable-scale-out``; recipe serves the same routes with the ids
``recipe.prepare`` gives (byte for byte deepseek-recipe's):

===================================  ==================================================================
``POST /v1/chat/completions/render``  a Chat Completions body → one ``GenerateRequest``
``POST /v1/messages/render``          a Messages body → one ``GenerateRequest``
``POST /v1/responses/render``         a Responses body → one ``GenerateRequest`` (``previous_response_id``
                                      is expanded from the conversation store, where vLLM refuses it)
``POST /v1/chat/completions/derender`` ``{generate_response, chat_request, prompt_tokens?, model?}`` →
                                      the ``chat.completion`` recipe would have answered
``POST /v1/messages/derender``        the same with ``messages_request`` → a Messages ``message``
``POST /v1/responses/derender``       the same with ``responses_request`` → a Responses ``response``
``POST /v1/completions/render``       a Completions body (text or token-id prompts) → a list of
                                      ``GenerateRequest`` (:mod:`recipe.serve.render_completions`)
``POST /v1/completions/derender``     ``{generate_responses, prompt_tokens?, completion_request?, model?}``
                                      → a ``text_completion``
===================================  ==================================================================

A ``GenerateRequest`` has exactly the fields of vLLM 0.32's ``GenerateRequest.model_dump()`` in its
order (``vllm/entrypoints/scale_out/token_in_token_out/protocol.py``): ``request_id, token_ids,
token_offsets, features, content_parts, sampling_params, model, reasoning_ended,
reasoning_parser_kwargs, return_token_ids, output_mode, stream, stream_options, cache_salt, priority,
kv_transfer_params, ec_transfer_params``. ``sampling_params`` has the keys vLLM's render writes for
the same request, in its order (:func:`recipe.serve.engines.generate.sampling_params`), with the
values ``recipe serve`` sends its own engines: ``max_tokens``, sampling, the EOS ids in
``stop_token_ids``, ``logprobs`` and the output grammar in ``structured_outputs`` (with
``reasoning_ended: true``, so an engine with a reasoning parser applies the grammar from the first
token: the grammar covers the reasoning too). Request ids follow vLLM: Chat and Messages
``chatcmpl-`` + the ``X-Request-Id`` header, the body's ``request_id`` or 16 hex digits (vLLM's ``random_uuid``); Responses
the body's ``request_id`` or ``resp_`` + 16 hex digits.

Derender is the way back for a caller that generated through ``/inference/v1/generate``: recipe's own
output parser (reasoning, DSML tool calls, stop sequences) on the choice's ``token_ids``, with the
original request (``chat_request`` as in vLLM; ``messages_request`` / ``responses_request`` for the
other two APIs, which vLLM has no derender for). The response's id is the generate response's
``request_id``. Streaming derender (``stream: true``) is not served: a caller that streams from the
engine runs ``recipe.CompletionStream`` itself or generates through ``recipe serve``.

Every route authenticates as the generation routes do; the tenant's cache salt becomes
``cache_salt``. Errors are each API's own error body, naming the field.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from recipe.errors import RequestError
from recipe.encodings.table import get_encoding
from recipe.jsonfmt import dumps_wire, loads_request
from recipe.output.driver import response as derendered
from recipe.pipeline import prepare
from recipe.serve.engines.base import EngineRequest
from recipe.serve.engines.generate import GENERATE_REQUEST_FIELDS, generate_body
from recipe.serve.errors import ServeError, error_json
from recipe.serve.render_completions import derender_completion, random_id, render_completion
from recipe.tokenizer import TokenIdError

__all__ = ["RENDER_PATHS", "DERENDER_PATHS", "COMPLETIONS_RENDER_PATH", "COMPLETIONS_DERENDER_PATH", "GENERATE_REQUEST_FIELDS", "generate_request", "derender", "render_routes"]

#: Render route -> API.
RENDER_PATHS = {"/v1/chat/completions/render": "chat", "/v1/messages/render": "messages",
                "/v1/responses/render": "responses"}
#: Derender route -> API.
DERENDER_PATHS = {"/v1/chat/completions/derender": "chat", "/v1/messages/derender": "messages",
                  "/v1/responses/derender": "responses"}
#: The Completions routes (a list of ``GenerateRequest`` per request: :mod:`recipe.serve.render_completions`).
COMPLETIONS_RENDER_PATH = "/v1/completions/render"
COMPLETIONS_DERENDER_PATH = "/v1/completions/derender"
#: The body field of each derender route that carries the original request.
REQUEST_FIELDS = {"chat": "chat_request", "messages": "messages_request", "responses": "responses_request"}

def generate_request(prep: Any, request_id: str, *, cache_salt: str | None = None, priority: int = 0,
                     constrain: str = "full", grammar_form: str = "structural_tag") -> dict[str, Any]:
    """The ``GenerateRequest`` body for a prepared request: vLLM 0.32's render answer for the same
    request, field for field (:func:`recipe.serve.engines.generate.generate_body`), with recipe's ids.

    Args:
        prep: a :class:`~recipe.api.prepared.PreparedRequest` with ids.
        request_id: the request id to carry.
        cache_salt: the tenant's prefix-cache salt, or None.
        priority: vLLM's scheduling priority (0 unless the body set one).
        constrain: the server's constrain level (``full``, ``format``, ``off``).
        grammar_form: ``structural_tag`` or ``lark`` (how the turn grammar is sent).

    Raises:
        ValueError: ``prep`` has no engine parameters.
    """
    req = EngineRequest.from_prepared(prep, request_id, cache_salt, constrain)
    c = req.constraint
    grammar = c.grammar if c is not None and constrain == "full" else None
    stream = bool(prep.stream)
    options = None
    if stream and prep.api == "chat":
        opts = prep.request.stream_options
        if opts is not None:
            usage = getattr(opts, "include_usage", None)
            continuous = getattr(opts, "continuous_usage_stats", None)
            options = {"include_usage": True if usage is None else bool(usage),
                       "continuous_usage_stats": bool(continuous)}
    elif stream and prep.api == "messages":  # vLLM's Messages-to-Chat conversion asks for usage on every chunk
        options = {"include_usage": True, "continuous_usage_stats": True}
    return generate_body(req, grammar, form=grammar_form, model=prep.model, stream=stream, stream_options=options,
                         priority=priority, extra_args=prep.api == "responses")


def _request_id(api: str, body: Mapping[str, Any], header: str | None) -> str:
    """vLLM's request id rule (see the module docstring)."""
    given = body.get("request_id")
    if given is not None and not isinstance(given, str):  # vLLM's request models type it str
        raise ServeError("invalid_request", f"request_id must be a string, not {type(given).__name__}", "request_id")
    given = given or None
    if api == "responses":
        return given or f"resp_{random_id()}"
    return "chatcmpl-" + (header if header is not None else given or random_id())


def _priority(body: Mapping[str, Any]) -> int:
    value = body.get("priority", 0)
    if type(value) is not int or not -(2**63) <= value < 2**63:
        raise ServeError("invalid_request", "priority must be an integer between -2**63 and 2**63-1", "priority")
    return value


def _number(value: Any) -> bool:
    """A finite JSON number (an int or float, not a bool)."""
    return type(value) in (int, float) and math.isfinite(value)


def _ids(values: list[Any], n_vocab: int, param: str) -> None:
    """Check that ``values`` are token ids (ints, not bools) of a vocabulary of ``n_vocab`` ids.

    Raises:
        ServeError: one is not an int (400), or outside the vocabulary (400 naming the id and the
            vocabulary's size), at ``param``.
    """
    for value in values:
        if type(value) is not int:
            raise ServeError("invalid_request", f"a token id must be an integer, not {type(value).__name__} "
                                                f"{str(value)[:40]!r}", param)
        if not 0 <= value < n_vocab:
            raise ServeError("invalid_request", f"token id outside the vocabulary: {TokenIdError(value, n_vocab)}", param)


def _generated_logprobs(choice: Mapping[str, Any], n: int,
                        n_vocab: int) -> list[tuple[float, list[tuple[int, float]]]] | None:
    """A generate choice's ``logprobs.content`` (``{token_id, logprob, top_logprobs: [{token_id, logprob}]}``
    per token) as the output driver's pairs; None when absent. Token ids must be ids of the vocabulary
    (``n_vocab`` ids) and log-probabilities finite numbers, as written: nothing is converted.

    Raises:
        ServeError: a malformed entry (400 naming it).
    """
    lp = choice.get("logprobs")
    if lp is None:
        return None
    content = lp.get("content") if isinstance(lp, Mapping) else None
    if not isinstance(content, list) or len(content) != n:
        raise ServeError("invalid_request", f"logprobs.content must hold one entry per token id ({n})",
                         "generate_response.choices[0].logprobs")
    out = []
    for i, entry in enumerate(content):
        where = f"generate_response.choices[0].logprobs.content[{i}]"
        alts = entry.get("top_logprobs") if isinstance(entry, Mapping) else None
        alts = [] if alts is None else alts
        if (not isinstance(entry, Mapping) or "token_id" not in entry or not _number(entry.get("logprob"))
                or not isinstance(alts, list)
                or not all(isinstance(a, Mapping) and "token_id" in a and _number(a.get("logprob")) for a in alts)):
            raise ServeError("invalid_request", "each entry needs token_id and logprob (a finite number), and "
                                                "top_logprobs a list of such entries", where)
        _ids([entry["token_id"], *(a["token_id"] for a in alts)], n_vocab, where)
        out.append((float(entry["logprob"]), [(a["token_id"], float(a["logprob"])) for a in alts]))
    return out


_FINISH = {None: "stop", "stop": "stop", "length": "length"}


def derender(api: str, body: Mapping[str, Any], prep: Any, tokenizer: Any = None) -> dict[str, Any]:
    """The response ``api`` answers for a generate response (see the module docstring).

    Args:
        api: ``chat``, ``messages`` or ``responses``.
        body: the derender body (``generate_response``, ``prompt_tokens``, ``model``).
        prep: the prepared original request.
        tokenizer: the server's vocabulary (None: the model family's).

    Raises:
        ServeError: a malformed ``generate_response`` (400, naming the field), token ids or
            log-probability ids outside the vocabulary included.
    """
    gen = body.get("generate_response")
    if not isinstance(gen, Mapping):
        raise ServeError("invalid_request", "generate_response must be an object (the /inference/v1/generate "
                                            "response)", "generate_response")
    if gen.get("output_mode", "tokens") != "tokens":
        raise ServeError("invalid_request", "only output_mode 'tokens' responses can be derendered",
                         "generate_response.output_mode")
    choices = gen.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], Mapping):
        raise ServeError("invalid_request", "generate_response.choices must hold exactly one choice",
                         "generate_response.choices")
    choice = choices[0]
    tok = tokenizer if tokenizer is not None else get_encoding(prep.encoding).tokenizer()
    ids = choice.get("token_ids")
    ids = [] if ids is None else ids
    if not isinstance(ids, list):
        raise ServeError("invalid_request", "token_ids must be a list of token ids", "generate_response.choices[0].token_ids")
    _ids(ids, tok.n_vocab, "generate_response.choices[0].token_ids")
    finish = choice.get("finish_reason")
    if not (finish is None or isinstance(finish, str)) or finish not in _FINISH:
        raise ServeError("invalid_request", f"finish_reason {finish!r} cannot be derendered (stop, length or null)",
                         "generate_response.choices[0].finish_reason")
    prompt_tokens = body.get("prompt_tokens")
    if prompt_tokens is not None and (type(prompt_tokens) is not int or prompt_tokens < 0):
        raise ServeError("invalid_request", "prompt_tokens must be a non-negative integer", "prompt_tokens")
    usage = gen.get("usage") if isinstance(gen.get("usage"), Mapping) else {}
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), Mapping) else {}
    cached = details.get("cached_tokens")
    cached = cached if type(cached) is int and cached >= 0 else 0
    prompt = prompt_tokens if prompt_tokens is not None else len(prep.token_ids)
    if cached > prompt:  # the engine's count of the prompt's cached tokens cannot exceed the prompt
        raise ServeError("invalid_request", f"cached_tokens ({cached}) is more than the prompt's {prompt} tokens"
                         f"{' (prompt_tokens)' if prompt_tokens is not None else ''}",
                         "generate_response.usage.prompt_tokens_details.cached_tokens")
    request_id = gen.get("request_id")
    model = body.get("model")
    out = derendered(
        prep, ids, finish=_FINISH[finish], logprobs=_generated_logprobs(choice, len(ids), tok.n_vocab),
        prompt_tokens=prompt, cached_tokens=cached,
        response_id=request_id if isinstance(request_id, str) and request_id else None,
        model=model if isinstance(model, str) and model else None, tokenizer=tok)
    if api == "chat":  # the fields vLLM's ChatCompletionResponse adds, so a vLLM client reads them as from vLLM
        for c in out["choices"]:
            for key in _VLLM_CHOICE:
                c.setdefault(key, None)
        for key in _VLLM_CHAT:
            out.setdefault(key, None)
        out["kv_transfer_params"] = gen.get("kv_transfer_params")
    return out


#: The fields of vLLM 0.32's ChatCompletionResponse and its choices beyond the OpenAI ones.
_VLLM_CHAT = ("service_tier", "system_fingerprint", "prompt_logprobs", "prompt_token_ids", "prompt_text",
              "kv_transfer_params", "ec_transfer_params", "metrics")
_VLLM_CHOICE = ("stop_reason", "token_ids", "routed_experts")


async def _read(request: Request, limit: int) -> bytes:
    """The whole body; 413 past ``limit`` (declared or read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ServeError("too_large", f"Request body too large: {declared} bytes, the limit is {limit} bytes.")
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServeError("too_large", f"Request body too large: over {limit} bytes, the limit is {limit} bytes.")
        parts.append(chunk)
    return b"".join(parts)


def _object(raw: bytes) -> dict[str, Any]:
    body = loads_request(raw)
    if not isinstance(body, dict):
        raise ServeError("invalid_request", "the request body must be a JSON object")
    return body


def render_routes(st: Any) -> list[Route]:
    """The render and derender routes over the server state ``st`` (``tenants``, ``options``,
    ``tokenizer``, ``config``, ``scoped``) of :mod:`recipe.serve.server`.

    A body larger than ``config.prepare_inline_bytes`` or with more JSON objects than
    ``config.prepare_inline_objects`` is parsed, prepared, answered and printed in a worker thread,
    as is one that reads the conversation store, so no request holds the event loop for long; the
    answer is printed with :func:`recipe.jsonfmt.dumps_wire`."""
    cfg = st.config

    def answer(api: str, err: ServeError | RequestError) -> Response:
        status, body = error_json(api, err)
        return JSONResponse(body, status_code=status)

    def large(raw: bytes) -> bool:
        return len(raw) > cfg.prepare_inline_bytes or raw.count(b"{") > cfg.prepare_inline_objects

    def tenant_of(request: Request) -> Any:
        """The tenant whose key ``request`` carries.

        Raises:
            ServeError: ``authentication``, a missing or unknown key.
        """
        key, api_key = request.headers.get("authorization"), request.headers.get("x-api-key")
        tenant = st.tenants.authenticate(key, api_key)
        if tenant is None:
            raise ServeError("authentication", "Incorrect API key provided." if key or api_key else "Missing API key.")
        return tenant

    def ids_of(prep: Any) -> None:
        if prep.ids is None:
            raise ServeError("invalid_request", f"The model {prep.model} cannot be rendered with this server's "
                                                f"vocabulary: {prep.token_ids_note}", "model")

    async def run(work: Any, raw: bytes, *args: Any) -> bytes:
        """``work(body, raw, *args, store_ok)`` → the answer, printed: inline for a small body that needs
        no store, else in a worker thread (``store_ok`` says whether it may read the store)."""
        if large(raw):
            return await asyncio.to_thread(lambda: dumps_wire(work(_object(raw), raw, *args, True)))
        body = _object(raw)
        try:
            return dumps_wire(work(body, raw, *args, False))
        except _NeedsStore:
            return await asyncio.to_thread(lambda: dumps_wire(work(body, raw, *args, True)))

    def render(api: str):  # type: ignore[no-untyped-def]
        def work(body: dict[str, Any], raw: bytes, tenant: Any, header: str | None, store_ok: bool) -> dict[str, Any]:
            store = None
            if api == "responses" and body.get("previous_response_id") is not None:
                if not store_ok:
                    raise _NeedsStore
                store = st.scoped(tenant)
            # (the JSON text, as the generation routes pass it: the agent loop's next request reuses
            # the messages an earlier one sent)
            prep = prepare(raw, api, options=st.options, store=store, tokenizer=st.tokenizer)
            ids_of(prep)
            return generate_request(prep, _request_id(api, body, header), cache_salt=tenant.salt,
                                    priority=_priority(body), constrain=cfg.constrain)

        async def handler(request: Request) -> Response:
            try:
                tenant = tenant_of(request)
                raw = await _read(request, st.options.max_body_bytes)
                out = await run(work, raw, tenant, request.headers.get("x-request-id"))
            except (ServeError, RequestError) as err:
                return answer(api, err)
            return Response(out, media_type="application/json")
        return handler

    def derender_route(api: str):  # type: ignore[no-untyped-def]
        field = REQUEST_FIELDS[api]

        def work(body: dict[str, Any], raw: bytes, tenant: Any, store_ok: bool) -> dict[str, Any]:
            if body.get("stream") is True:
                raise ServeError("invalid_request", "streaming derender is not served: derender the whole "
                                                    "generate response (stream false)", "stream")
            original = body.get(field)
            if not isinstance(original, dict):
                raise ServeError("invalid_request", f"{field} must be the request that was rendered (an object): "
                                                    "recipe parses the output with it", field)
            store = None
            if api == "responses" and original.get("previous_response_id") is not None:
                if not store_ok:
                    raise _NeedsStore
                store = st.scoped(tenant)
            try:
                prep = prepare(original, api, options=st.options, store=store, tokenizer=st.tokenizer)
            except RequestError as err:  # the field path names where in the derender body it is
                raise replace(err, param=f"{field}.{err.param}" if err.param else field) from None
            ids_of(prep)
            return derender(api, body, prep, st.tokenizer)

        async def handler(request: Request) -> Response:
            try:
                tenant = tenant_of(request)
                raw = await _read(request, st.options.max_body_bytes)
                out = await run(work, raw, tenant)
            except (ServeError, RequestError) as err:
                return answer(api, err)
            return Response(out, media_type="application/json")
        return handler

    async def completions_render(request: Request) -> Response:
        try:
            tenant = tenant_of(request)
            raw = await _read(request, st.options.max_body_bytes)
            header = request.headers.get("x-request-id")
            out = await asyncio.to_thread(lambda: dumps_wire(render_completion(
                _object(raw), st.options, st.tokenizer, header_id=header, cache_salt=tenant.salt)))
        except (ServeError, RequestError) as err:
            return answer("chat", err)
        return Response(out, media_type="application/json")

    async def completions_derender(request: Request) -> Response:
        try:
            tenant_of(request)
            raw = await _read(request, st.options.max_body_bytes)
            out = await asyncio.to_thread(lambda: dumps_wire(derender_completion(_object(raw), st.options, st.tokenizer)))
        except (ServeError, RequestError) as err:
            return answer("chat", err)
        return Response(out, media_type="application/json")

    return [*(Route(p, render(api), methods=["POST"]) for p, api in RENDER_PATHS.items()),
            *(Route(p, derender_route(api), methods=["POST"]) for p, api in DERENDER_PATHS.items()),
            Route(COMPLETIONS_RENDER_PATH, completions_render, methods=["POST"]),
            Route(COMPLETIONS_DERENDER_PATH, completions_derender, methods=["POST"])]


class _NeedsStore(Exception):
    """Raised by a route's inline work when the body reads the conversation store: run it in a thread."""
