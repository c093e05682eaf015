"""The routes beside generation: a stored response's housekeeping and vLLM's tokenizer endpoints.

- ``DELETE /v1/responses/{id}``: removes the tenant's stored response; OpenAI's
  ``{"id", "object": "response.deleted", "deleted": true}``, a 404 when the tenant has none.
- ``GET /v1/responses/{id}/input_items``: the input items the response was generated from (the
  request's own ``input``, not the earlier turns of its ``previous_response_id`` chain), as OpenAI's
  ``{"object": "list", "data", "first_id", "last_id", "has_more"}`` with ``after`` / ``limit`` (1-100,
  default 20) / ``order`` (``desc`` by default, as OpenAI); each item with an ``id`` (its own, else
  one derived from the response id and its position, stable across calls), a string message content
  as one ``input_text`` part and ``status: "completed"``.
- ``POST /v1/responses/{id}/cancel``: only a background response can be cancelled (OpenAI's rule);
  ``recipe serve`` answers every response in the request that created it, so a stored response is a
  400 saying so and an unknown one a 404.
- ``POST /tokenize`` and ``POST /detokenize``: vLLM's shapes (``vllm/entrypoints/serve/tokenize``):
  ``{"model"?, "prompt", "add_special_tokens": true, "return_token_strs": false}`` — the prompt's ids
  (plain text: special-token spellings stay text), after BOS unless ``add_special_tokens`` is false —
  or ``{"model", "messages", …}`` as a Chat Completions body — the ids ``recipe serve`` would send the
  engine; both answer ``{"count", "max_model_len", "tokens", "token_strs"}`` (each token's text, U+FFFD
  for part of a character, when asked). ``/detokenize`` takes ``{"model"?, "tokens"}`` and answers
  ``{"prompt"}`` (special tokens spelled as in the prompt).

Every route needs the tenant's key when the server has a key file, and answers errors in OpenAI's
shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from recipe.api.common import check_model
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.jsonfmt import loads_request
from recipe.pipeline import prepare
from recipe.serve.errors import ServeError
from recipe.store.conversations import StoreUnavailable
from recipe.tokenizer import TokenIdError, Tokenizer, default_tokenizer

__all__ = ["extra_routes", "listed_items", "ErrorOf", "TenantOf"]

#: (request, api, error) -> the error response; (request, state, api) -> the tenant or an error response
ErrorOf = Callable[[Request, str, "ServeError | RequestError"], Response]
TenantOf = Callable[[Request, Any, str], Any]

_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def listed_items(response_id: str, items: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A stored response's input items as ``input_items`` lists them: each an object with an ``id``
    (its own, else ``{kind}_{response id without resp_}_{position}``), ``type`` (``message`` for a
    role item without one), a string message content as one ``input_text`` part (``output_text``
    for an assistant message) and a message's ``status`` ``completed``."""
    base = response_id.removeprefix("resp_")
    out = []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        it = dict(item)
        if "type" not in it and "role" in it:
            it["type"] = "message"
        kind = it.get("type")
        if kind == "message":
            content = it.get("content")
            if isinstance(content, str):
                part = "output_text" if it.get("role") == "assistant" else "input_text"
                it["content"] = [{"type": part, "text": content, **({"annotations": []} if part == "output_text" else {})}]
            it.setdefault("status", "completed")
        if not isinstance(it.get("id"), str) or not it["id"]:
            it = {"id": f"{_ID_PREFIX.get(str(kind), 'item')}_{base}_{k}", **it}
        out.append(it)
    return out


def _page(items: list[dict[str, Any]], params: Any) -> dict[str, Any]:
    """One page of ``items`` per the query ``params`` (``order``, ``after``, ``limit``).

    Raises:
        ServeError: a bad ``order`` or ``limit`` (400), or an ``after`` that names no item (400).
    """
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ServeError("invalid_request", f"Invalid 'order': {order!r}; expected 'asc' or 'desc'.", "order")
    raw = params.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise ServeError("invalid_request", f"Invalid 'limit': {raw!r}; expected an integer from 1 to 100.", "limit")
    ordered = items if order == "asc" else items[::-1]
    after = params.get("after")
    if after is not None:
        ids = [it["id"] for it in ordered]
        if after not in ids:
            raise ServeError("invalid_request", f"Invalid 'after': no input item with id {after!r}.", "after")
        ordered = ordered[ids.index(after) + 1:]
    page = ordered[:int(raw)]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(ordered) > len(page)}


def _token_strs(tok: Tokenizer, ids: list[int]) -> list[str]:
    return [tok.token_bytes(i).decode("utf-8", "replace") for i in ids]


def extra_routes(st: Any, tenant_of: TenantOf, error_of: ErrorOf) -> list[Route]:
    """The routes of the module docstring over the server state ``st`` (its store, options and
    vocabulary); ``tenant_of`` authenticates, ``error_of`` renders an error."""

    async def _stored(request: Request, call: Callable[..., Any]) -> tuple[Any, str] | Response:
        """Run ``call(store, id)`` on the tenant's store in a thread: its result and the id, or an
        error response (401, 503; a 404 when the result is None or False: the tenant has no such
        response)."""
        tenant = tenant_of(request, st, "responses")
        if isinstance(tenant, Response):
            return tenant
        rid = request.path_params["response_id"]
        try:
            got = await asyncio.to_thread(call, st.scoped(tenant), rid)
        except StoreUnavailable as exc:
            st.metrics.store_errors.inc()
            return error_of(request, "responses", ServeError("store_unavailable", str(exc)))
        if got is None or got is False:
            return error_of(request, "responses", ServeError("not_found", f"Response with id '{rid}' not found.",
                                                             "response_id"))
        return got, rid

    async def delete_response(request: Request) -> Response:
        got = await _stored(request, lambda store, rid: store.delete(rid))
        if isinstance(got, Response):
            return got
        return JSONResponse({"id": got[1], "object": "response.deleted", "deleted": True})

    async def input_items(request: Request) -> Response:
        got = await _stored(request, lambda store, rid: store.load(rid))
        if isinstance(got, Response):
            return got
        rec, rid = got
        try:
            return JSONResponse(_page(listed_items(rid, rec.input_items), request.query_params))
        except ServeError as err:
            return error_of(request, "responses", err)

    async def cancel(request: Request) -> Response:
        got = await _stored(request, lambda store, rid: store.load(rid))
        if isinstance(got, Response):
            return got
        return error_of(request, "responses", ServeError(
            "invalid_request", "Only responses created with background=true can be cancelled: this server answers every "
            "response in the request that created it (no background mode), so this one has already finished.",
            "response_id"))

    def _vocabulary(model: Any) -> tuple[Tokenizer, str | None]:
        """The vocabulary for ``model`` (None: the server's, else DeepSeek-V4's) and its checked name."""
        if model is None:
            return st.tokenizer or default_tokenizer(), None
        if not isinstance(model, str):
            raise RequestError("Invalid 'model': expected a string.", param="model")
        encoding = check_model(model, st.options.for_model(model))
        return st.tokenizer or get_encoding(encoding).tokenizer(), model

    async def _json(request: Request) -> dict[str, Any]:
        limit = st.options.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ServeError("too_large", f"Request body too large: {declared} bytes, the limit is {limit} bytes.")
        raw = await request.body()
        if len(raw) > limit:
            raise ServeError("too_large", f"Request body too large: {len(raw)} bytes, the limit is {limit} bytes.")
        body = loads_request(raw)
        if not isinstance(body, dict):
            raise RequestError("invalid request body: expected a JSON object", stage="parse")
        return body

    def _vllm_route(answer: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[Response]]:
        """A route of vLLM's tokenizer API: the tenant authenticated, the JSON body read, ``answer(body)``
        sent as JSON; a request error in OpenAI's shape."""
        async def handler(request: Request) -> Response:
            tenant = tenant_of(request, st, "chat")
            if isinstance(tenant, Response):
                return tenant
            try:
                return JSONResponse(await answer(await _json(request)))
            except (RequestError, ServeError) as err:
                return error_of(request, "chat", err)
        return handler

    async def tokenize(body: dict[str, Any]) -> dict[str, Any]:
        strs = body.get("return_token_strs", False)
        if not isinstance(strs, bool):
            raise RequestError("Invalid 'return_token_strs': expected true or false.", param="return_token_strs")
        if "messages" in body:
            prep = await asyncio.to_thread(prepare, body, "chat", options=st.options, tokenizer=st.tokenizer)
            if prep.ids is None:
                raise ServeError("invalid_request", f"The model {prep.model} cannot be served with this server's "
                                 f"vocabulary: {prep.token_ids_note}", "model")
            ids = list(prep.ids)
            tok = st.tokenizer or get_encoding(prep.encoding).tokenizer()
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                raise RequestError("Invalid 'prompt': expected a string (or send 'messages').", param="prompt")
            special = body.get("add_special_tokens", True)
            if not isinstance(special, bool):
                raise RequestError("Invalid 'add_special_tokens': expected true or false.", param="add_special_tokens")
            tok, _ = _vocabulary(body.get("model"))
            ids = tok.encode_ordinary(prompt)  # special-token spellings in the text stay text
            if special:
                ids = [tok.special_id("<｜begin▁of▁sentence｜>"), *ids]
        return {"count": len(ids), "max_model_len": st.options.context_limit, "tokens": ids,
                "token_strs": _token_strs(tok, ids) if strs else None}

    async def detokenize(body: dict[str, Any]) -> dict[str, Any]:
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise RequestError("Invalid 'tokens': expected a list of token ids.", param="tokens")
        tok, _ = _vocabulary(body.get("model"))
        try:
            tok.check_ids(ids)
        except TokenIdError as exc:
            raise RequestError(f"Invalid 'tokens': {exc}", param="tokens") from None
        return {"prompt": tok.decode(ids)}

    return [
        Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}/cancel", cancel, methods=["POST"]),
        Route("/tokenize", _vllm_route(tokenize), methods=["POST"]),
        Route("/detokenize", _vllm_route(detokenize), methods=["POST"]),
    ]

