"""The ASGI app: Chat Completions, Responses and Messages over any engine (Starlette, run by uvicorn).

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET /v1/responses/{id}``,
``POST /v1/messages``, ``POST /v1/messages/count_tokens``, ``GET /v1/models``, ``GET /health``
(= ``/health/ready``: 503 while no replica is reachable), ``GET /health/live``, ``GET /metrics``.
The three generation routes are raw ASGI handlers (one code path,
:mod:`recipe.serve.generation`): key → tenant (401), concurrency limit (429 / 529), body read with
its size limit (413, before parsing), ``prepare`` (the API's own 400), routing to a replica, then
the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, Options
from recipe.jsonfmt import dumps_wire, loads_request
from recipe.output.driver import ENCODERS, CompletionStream
from recipe.pipeline import prepare
from recipe.serve.admission import request_finished, request_started
from recipe.serve.config import ServeConfig
from recipe.serve.engines import build_engines
from recipe.serve.engines.base import Engine
from recipe.serve.errors import ServeError, error_json
from recipe.serve.extra_routes import extra_routes
from recipe.serve.generation import Job, json_response, retry_headers, run
from recipe.serve.guard import Drain
from recipe.serve.metrics import CONTENT_TYPE, Metrics
from recipe.serve.pool import ReplicaPool
from recipe.serve.render import render_routes
from recipe.serve.tenants import Tenant, Tenants
from recipe.serve.vocabulary import narrow, vocabulary_of
from recipe.store.conversations import ConversationStore, MemoryStore, ScopedStore, StoreUnavailable
from recipe.tokenizer import Tokenizer, load_tokenizer

if TYPE_CHECKING:
    from recipe.serve.shared_load import SharedLoad

__all__ = ["app", "ServerState", "RecipeApp"]

_log = logging.getLogger(__name__)

#: Path -> API of the generation routes.
API_PATHS = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}


class ServerState:
    """Everything the routes share: engines, options, store, tenants, metrics, in-flight count, and
    the shutdown deadline (:attr:`drain`, a :class:`~recipe.serve.guard.Drain`: ``recipe serve``
    starts it with ``--drain-seconds`` when it begins shutting down; an embedder's server calls
    ``app.state.recipe.drain.start(seconds)`` from its own shutdown)."""

    def __init__(self, pool: ReplicaPool, options: Options, config: ServeConfig, store: ConversationStore,
                 tenants: Tenants, metrics: Metrics, tokenizer: Tokenizer | None = None) -> None:
        self.pool, self.options, self.config, self.store = pool, options, config, store
        self.base_options = options  # ``options`` is this narrowed to the engines' vocabulary, with their window
        # the replicas that report their served models and window (HTTP engines: ``refresh``)
        # (a P/D engine's replicas: its ``members``)
        self.reporting = [m for r in pool.replicas for m in getattr(r.engine, "members", (r.engine,))
                          if callable(getattr(m, "refresh", None))]
        #: the vocabularies whose families the server serves (``--vocabulary``, else what the vLLM
        #: replicas tokenize the probe with), or None: every family (nothing says otherwise)
        self.vocabularies: tuple[str, ...] | None = (config.vocabulary,) if config.vocabulary else None
        #: where :attr:`vocabularies` comes from: ``flag``, ``engine`` or ``none`` (every family)
        self.vocabulary_source = "flag" if config.vocabulary else "none"
        self.options = self._derive(options.context_limit if config.max_model_len is None else config.max_model_len)
        self.tenants, self.metrics = tenants, metrics
        self.in_flight = 0
        self.drain = Drain()  # the shutdown deadline: ``drain.start(seconds)`` when the server stops
        self.count_options = replace(self.options, context_limit=1 << 62)
        # None: each request's model family's own vocabulary (DeepSeek-V4's, or the embedded V3 one for
        # V3 … V3.2), which prepare and the output driver resolve from a per-process cache; a given
        # vocabulary (``--tokenizer``) is used for every request
        self.tokenizer: Tokenizer | None = tokenizer
        #: the fleet's shared in-flight counts (``app(shared_load=…)``), or None
        self.shared_load: SharedLoad | None = None

    def _derive(self, window: int) -> Options:
        """:attr:`base_options` with context window ``window``, narrowed to :attr:`vocabularies`."""
        opts = self.base_options if self.vocabularies is None else narrow(self.base_options, self.vocabularies)
        return opts if window == opts.context_limit else replace(opts, context_limit=window)

    def learned(self, engine: Any = None, info: Any = None) -> None:
        """Size :attr:`options`' context window to the engines' and narrow its model table to their
        vocabulary (called when a replica's :class:`~recipe.serve.engines.base.EngineInfo` is read):
        the window is ``ServeConfig.max_model_len`` when set, else the smallest ``max_model_len`` a
        replica reported, else the options' own; the families are ``ServeConfig.vocabulary``'s when
        set, else those of the vocabularies the replicas' probe ids name (:func:`vocabulary_of`),
        else every family (no replica tokenizes, or one runs a vocabulary recipe does not know)."""
        infos = [e.info for e in self.reporting if e.info is not None]
        changed = False
        if self.config.vocabulary is None:
            probed = [i.probe_ids for i in infos if i.probe_ids is not None]
            names = [vocabulary_of(p) for p in probed]
            vocabularies = None if not names or None in names else tuple(sorted(set(names)))  # type: ignore[arg-type]
            if vocabularies != self.vocabularies:
                self.vocabularies, changed = vocabularies, True
                self.vocabulary_source = "none" if vocabularies is None else "engine"
                if vocabularies is None and probed:
                    _log.warning("an engine tokenizes with a vocabulary recipe does not know; serving every model family")
                else:
                    _log.info("the engines serve the %s vocabulary: serving its model families",
                              ", ".join(vocabularies or ("every",)))
        if self.config.max_model_len is not None:
            window = self.config.max_model_len
        else:
            lens = [i.max_model_len for i in infos if i.max_model_len]
            window = min(lens) if lens else self.base_options.context_limit
        if changed or window != self.options.context_limit:
            self.options = self._derive(window)
            self.count_options = replace(self.options, context_limit=1 << 62)

    async def learn(self) -> None:
        """Read the info of every replica whose info is :attr:`~recipe.serve.engines.http.HTTPEngine.stale`
        (never read, or its connection was refused or broke since), at once; never raises."""
        await asyncio.gather(*(e.refresh() for e in self.reporting if e.stale))

    def scoped(self, tenant: Tenant) -> ConversationStore:
        """The tenant's view of the conversation store (the open server's too: scope ``""``), keyed by
        :func:`~recipe.store.conversations.scope_key`."""
        return ScopedStore(self.store, tenant.name)


def _vocabulary(st: ServerState) -> dict[str, Any]:
    """``/health``'s ``vocabulary``: the vocabularies served (null: every family's) and ``source``:
    ``flag`` (``--vocabulary``), ``engine`` (learned from the vLLM replicas) or ``none``."""
    return {"served": list(st.vocabularies) if st.vocabularies is not None else None, "source": st.vocabulary_source}


def _prompt_ids(prep: Any) -> list[int]:
    """The prompt ids of a prepared request, or a 400 on ``model`` when the server's vocabulary is not
    the model's (DeepSeek-V4.1 on the embedded DeepSeek-V4 vocabulary: start it with ``--tokenizer``),
    as an unknown model is."""
    if prep.ids is None:
        raise ServeError("invalid_request", f"The model {prep.model} cannot be served with this server's vocabulary: "
                         f"{prep.token_ids_note}", "model")
    return prep.ids


def _choices(prep: Any, engine: Any) -> int:
    """The number of choices the request asks for (Chat ``n``); a 400 on ``n`` when it is over 1 and
    the engine does not sample several choices of one prompt (no true ``serves_n``)."""
    extra = prep.engine.extra if prep.engine is not None else None
    n = extra.n if extra is not None else 1
    if n > 1 and not getattr(engine, "serves_n", False):
        raise ServeError("invalid_request", f"Invalid n value: this server's engine ({getattr(engine, 'name', 'engine')}) "
                         "samples one choice per request; send n = 1", "n")
    return n


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for k, v in scope["headers"]:
        if k == name:
            return v.decode("latin-1")
    return None


_ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#: byte b -> _ALNUM[b % 62], as a ``bytes.translate`` table
_TO_ALNUM = bytes(_ALNUM[b % 62] for b in range(256))


def _new_id(prefix: str) -> str:
    """``prefix`` + 29 random ``[A-Za-z0-9]`` (one ``os.urandom`` call, each byte b mapped to
    ``_ALNUM[b % 62]``; the encoders' id shape)."""
    return prefix + os.urandom(29).translate(_TO_ALNUM).decode("ascii")


class _ClientGone(Exception):
    """The client disconnected before its request body was read."""


async def _read_body(receive: Any, limit: int, declared: str | None) -> bytes:
    """The whole request body; 413 past ``limit`` (from Content-Length, before reading, or while reading)."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ServeError("too_large", f"Request body too large: {declared} bytes, the limit is {limit} bytes.")
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ServeError("too_large", f"Request body too large: over {limit} bytes, the limit is {limit} bytes.")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


class GenerationRoute:
    """The raw ASGI handler of one generation API."""

    def __init__(self, api: str, state: ServerState) -> None:
        self.api = api
        self.state = state
        self.prefix = ENCODERS[api].id_prefix

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        st, api, m = self.state, self.api, self.state.metrics
        started = time.perf_counter()
        response_id = _new_id(self.prefix)
        ids = [(b"x-request-id", response_id.encode()), (b"request-id", response_id.encode())]
        counted = False
        generating = False  # run() answers its own cancellations; before it, see CancelledError below

        def release() -> None:
            nonlocal counted
            if counted:
                counted = False
                st.in_flight -= 1

        async def send_last_releases(message: dict[str, Any]) -> None:
            # the slot is free once the response's last byte is handed over: a client that read the
            # whole response and sends again at once is not refused for the request that just ended
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                release()
            await send(message)

        async def refuse(err: ServeError | RequestError, kind: str) -> None:
            """Answer ``err`` as the API's JSON error, counted under ``kind``."""
            status, body = error_json(api, err)
            m.child(m.errors, api, kind).inc()
            m.child(m.requests, api, str(status)).inc()
            await json_response(send_last_releases, status, body, ids)

        try:
            tenant = _authenticate(st.tenants, scope["headers"])
            limit = st.config.max_concurrency
            if limit is not None and st.in_flight >= limit:
                raise ServeError("overloaded", f"The server is overloaded: {limit} requests in flight. Retry later.")
            st.in_flight += 1
            counted = True
            raw = await _read_body(receive, st.options.max_body_bytes, _header(scope, b"content-length"))
            if st.reporting and any(e.stale for e in st.reporting):  # a replica's window not (re)read yet
                await st.learn()
            store = st.scoped(tenant)
            body: Any = raw
            # a large body, or one with many JSON objects (a schema whose checks and grammar take
            # long), is prepared in a worker thread
            large = len(raw) > st.config.prepare_inline_bytes or raw.count(b"{") > st.config.prepare_inline_objects
            if not large and api == "responses":
                # the parsed value decides, not the bytes (``previous\u005fresponse_id`` is the same
                # field): a store lookup (SQLite, Redis) never runs on the event loop
                body = loads_request(raw)
            if large or _needs_store(body):
                prep = await asyncio.to_thread(prepare, body, api, options=st.options, store=store, tokenizer=st.tokenizer)
            else:
                prep = prepare(body, api, options=st.options, store=store, tokenizer=st.tokenizer)
            await _build_grammar(prep, st.config.constrain, large)
            route = await st.pool.route(_prompt_ids(prep), tenant.salt, prep.model)
            if route.index_failed:
                m.index_errors.inc()
            replica = route.replica
            n = _choices(prep, replica.engine)
            m.child(m.routed, replica.name).inc()
            job = Job(api, prep, (body if isinstance(body, dict) else _body(raw)) if api == "responses" else {}, replica.engine,
                      replica.name, response_id, tenant.salt, route.cached_tokens, store if api == "responses" else None,
                      m, st.config.timeouts, started, [], st.config.coalesce_ms / 1000, st.tokenizer,
                      st.config.constrain, st.drain, st.pool, route.dp_rank)
            replica.in_flight += 1
            replica.served += 1
            generating = True
            try:
                # without a limit no request is refused, so the slot can wait for the end of the
                # handler: the stream's frames skip the wrapper
                reply = send_last_releases if limit is not None else send
                await run(job, receive, reply, n)
            finally:
                # (a refused connection moved the request, and its count, to another replica)
                (st.pool.get(job.replica) or replica).in_flight -= 1
        except (ServeError, RequestError) as err:
            kind = err.kind if isinstance(err, ServeError) else "invalid_request" if err.status < 500 else "internal"
            if isinstance(err, RequestError) and err.status == 413:
                kind = "too_large"
            await refuse(err, kind)
        except StoreUnavailable as exc:
            m.store_errors.inc()
            await refuse(ServeError("store_unavailable", str(exc)), "store_unavailable")
        except _ClientGone:
            return
        except asyncio.CancelledError:
            # the HTTP server's grace period ran out at shutdown while the request was still being
            # read or prepared (a client slow to send its body): the API's own 503 / 529, not the
            # server's plain-text 500 and a logged traceback
            if generating or not st.drain.started:
                raise
            await refuse(ServeError("shutting_down", "The server is shutting down: the request was stopped before its "
                                                     "generation started. Retry the request."), "shutting_down")
        except Exception as exc:  # a bug: logged, and the API's own 500 when nothing was sent yet
            _log.exception("internal error in %s %s", scope.get("method"), scope.get("path"))
            m.child(m.errors, api, "internal").inc()
            status, body = error_json(api, ServeError("internal", f"internal error: {type(exc).__name__}"))
            try:
                await json_response(send_last_releases, status, body, ids)
            except Exception:  # the response had started: the connection is closed by the server
                pass
        finally:
            release()


def _needs_store(body: Any) -> bool:
    """Whether a parsed Responses body names a stored turn (its expansion reads the store)."""
    return isinstance(body, dict) and body.get("previous_response_id") is not None


async def _build_grammar(prep: Any, constrain: str, large: bool) -> None:
    """Build the request's output grammar before it is routed (``--constrain full``), in a worker
    thread for a large body, so a grammar past ``max_grammar_bytes`` is the API's own 400 and no
    grammar work runs on the event loop for a large request."""
    c = prep.output_constraint
    if constrain != "full" or c is None or c.build_grammar is None:
        return
    if large:
        await asyncio.to_thread(lambda: c.grammar)
    else:
        c.grammar  # noqa: B018 - builds and caches it


def _body(raw: bytes) -> dict[str, Any]:
    """The parsed body for the store (``prepare`` already accepted it, so it is a JSON object)."""
    return loads_request(raw)


def _error(request: Request, api: str, err: ServeError | RequestError) -> Response:
    status, body = error_json(api, err)
    return JSONResponse(body, status_code=status)


def _authenticate(tenants: Tenants, headers: Sequence[tuple[bytes, bytes]]) -> Tenant:
    """The tenant of a request's ASGI ``headers`` (:data:`~recipe.serve.tenants.OPEN` on an open
    server).

    Raises:
        ServeError: 401 ``authentication``: a missing or unknown key, an ``Authorization`` or
            ``x-api-key`` header sent more than once, or both sent with different keys (a proxy in
            front that checks another copy than ours would let another tenant's request through).
    """
    if tenants.open:
        return tenants.authenticate(None, None)
    auth = [v.decode("latin-1") for k, v in headers if k == b"authorization"]
    key = [v.decode("latin-1") for k, v in headers if k == b"x-api-key"]
    if len(auth) > 1 or len(key) > 1:
        raise ServeError("authentication", f"The {'Authorization' if len(auth) > 1 else 'x-api-key'} header was sent "
                                           f"more than once; send one API key.")
    scheme, _, bearer = auth[0].partition(" ") if auth else ("", "", "")
    if key and scheme.lower() == "bearer" and bearer.strip() and bearer.strip() != key[0].strip():
        raise ServeError("authentication", "The Authorization and x-api-key headers name different API keys; "
                                           "send one API key.")
    tenant = tenants.authenticate(auth[0] if auth else None, key[0] if key else None)
    if tenant is None:
        raise ServeError("authentication", "Incorrect API key provided." if auth or key else "Missing API key.")
    return tenant


def _tenant(request: Request, st: ServerState, api: str) -> Tenant | Response:
    try:
        return _authenticate(st.tenants, request.scope["headers"])
    except ServeError as err:
        return _error(request, api, err)


def _routes(st: ServerState, direct: dict[str, GenerationRoute]) -> list[Route]:
    async def get_response(request: Request) -> Response:
        tenant = _tenant(request, st, "responses")
        if isinstance(tenant, Response):
            return tenant
        rid = request.path_params["response_id"]
        try:
            rec = await asyncio.to_thread(st.scoped(tenant).load, rid)
        except StoreUnavailable as exc:
            st.metrics.store_errors.inc()
            return _error(request, "responses", ServeError("store_unavailable", str(exc)))
        if rec is None:
            return _error(request, "responses", ServeError("not_found", f"Response with id '{rid}' not found.", "response_id"))
        body = rec.response if isinstance(rec.response, dict) else {
            "id": rec.id, "object": "response", "created_at": rec.created_at, "status": "completed", "model": rec.model,
            "output": list(rec.output_items), "previous_response_id": rec.previous_response_id}
        return JSONResponse(body)

    async def count_tokens(request: Request) -> Response:
        tenant = _tenant(request, st, "messages")
        if isinstance(tenant, Response):
            return tenant
        try:
            raw = await _read_body(request.receive, st.options.max_body_bytes, request.headers.get("content-length"))
            prep = await asyncio.to_thread(prepare, raw, "messages", options=st.count_options, tokenizer=st.tokenizer)
            ids = _prompt_ids(prep)
        except (RequestError, ServeError) as err:
            return _error(request, "messages", err)
        except _ClientGone:
            return Response(status_code=499)
        return JSONResponse({"input_tokens": len(ids)})

    async def models(request: Request) -> Response:
        tenant = _tenant(request, st, "messages" if request.headers.get("anthropic-version") else "chat")
        if isinstance(tenant, Response):
            return tenant
        opts = st.options
        names = sorted({*opts.models, *opts.aliases})
        if request.headers.get("anthropic-version"):
            data = [{"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"} for n in names]
            return JSONResponse({"data": data, "has_more": False, "first_id": names[0] if names else None,
                                 "last_id": names[-1] if names else None})
        return JSONResponse({"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "recipe"}
                                                       for n in names]})

    async def live(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def ready(request: Request) -> Response:
        if st.config.render_only:  # a renderer contacts no engine: ready once it is up
            return JSONResponse({"status": "ok", "in_flight": st.in_flight, "replicas": [],
                                 "vocabulary": _vocabulary(st)})
        now = time.monotonic()
        ok = st.pool.ready()
        shared = {} if st.shared_load is None else {"shared_load": st.shared_load.status()}
        return JSONResponse({"status": "ok" if ok else "unavailable", "in_flight": st.in_flight,
                             "vocabulary": _vocabulary(st), **shared, "replicas": [
            {"name": r.name, "reachable": r.reachable is not False, "ejected": r.ejected(now), "in_flight": r.in_flight,
             "in_flight_others": r.others, **(r.engine.health(now) if hasattr(r.engine, "health") else {})}
            for r in st.pool.replicas]}, status_code=200 if ok else 503)

    async def metrics(request: Request) -> Response:
        return Response(st.metrics.render(), media_type=CONTENT_TYPE)

    routes = [Route(path, handler, methods=["POST"]) for path, handler in direct.items()]
    return [
        *routes,
        Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
        *extra_routes(st, _tenant, _error),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", ready, methods=["GET"]),
        Route("/health/ready", ready, methods=["GET"]),
        Route("/health/live", live, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *render_routes(st),
    ]


def _routed_pools(pool: ReplicaPool) -> list[ReplicaPool]:
    """The replica pools whose choices this server makes, each with two or more replicas: the server's
    own, and a P/D engine's prefill and decode pools (its ``pools``). Their replicas follow their KV
    events and share their in-flight counts with the fleet's other frontends."""
    pools = [pool]
    for r in pool.replicas:
        pools.extend(getattr(r.engine, "pools", ()))
    return [p for p in pools if len(p) > 1]


def app(
    engine: Any = None,
    *,
    options: Options = DEFAULT_OPTIONS,
    config: ServeConfig = ServeConfig(),
    store: ConversationStore | None = None,
    index: Any = None,
    tenants: Tenants | None = None,
    engines: Sequence[Any] | None = None,
    tokenizer: Tokenizer | str | os.PathLike[str] | None = None,
    shared_load: SharedLoad | None = None,
) -> RecipeApp:
    """The server as an ASGI app (run it with uvicorn, or mount it in another app).

    Args:
        engine: an :class:`~recipe.serve.engines.base.Engine`, an engine spec string (``demo``,
            ``replay:FILE``, ``vllm+http://HOST:PORT``, ``sglang+http://HOST:PORT``), or a Python
            callable (``async def fn(request)`` yielding deltas or id lists); None: the demo engine.
        engines: several of those: a replica pool (overrides ``engine``). A pool's vLLM replicas
            whose spec names ``kv_events=`` are followed through their KV events while the app runs
            (:mod:`recipe.serve.kv_events`; needs ``dsrecipe[fleet]``), and so are a P/D pool's
            prefill replicas.
        options: conversion options (model table, aliases, body-size limit …).
        config: timeouts, concurrency limit and the rest (:class:`~recipe.serve.config.ServeConfig`).
        store: the conversation store for ``previous_response_id`` (default: in memory).
        index: the prefix index for routing (default: in memory).
        tenants: API keys (default: open).
        shared_load: the requests in flight on each replica shared with the fleet's other frontends
            through Redis (:class:`~recipe.serve.shared_load.SharedLoad`; default: this server's own
            counts); synced in the background while the app runs (pools of two or more replicas, a
            P/D pool's prefill and decode replicas included).
        tokenizer: the vocabulary (a :class:`~recipe.tokenizer.Tokenizer` or a ``tokenizer.json`` path;
            default: each request's model family's own, e.g. the embedded DeepSeek-V4 one). A model whose template emits special tokens it lacks
            (DeepSeek-V4.1 on the default) is answered 400 on ``model``, naming the token.

    Raises:
        ValueError: a bad engine spec, ``kv_events=`` without pyzmq and msgpack, or a P/D pool with
            ``config.routing`` other than ``cost``.
        TokenizerError: an unreadable or invalid ``tokenizer`` file.
    """
    specs = list(engines) if engines else [engine]
    built: list[Engine] = build_engines(specs, config.timeouts, index=index, weights=config.routing_weights,
                                        metrics_interval=config.metrics_interval if config.routing == "cost" else 0.0)
    if config.routing != "cost":
        from recipe.serve.engines.disagg import DisaggregatedEngine

        if any(isinstance(e, DisaggregatedEngine) for e in built):  # refused rather than silently not applied
            raise ValueError(f"P/D: routing {config.routing!r} is not served for a P/D pool: its prefill replica is "
                             "chosen by the cost rule (uncached prompt tokens plus load)")
    pool = ReplicaPool(built, index, max_imbalance=config.max_imbalance, routing=config.routing,
                       weights=config.routing_weights)
    routed = _routed_pools(pool)
    if any(getattr(r.engine, "kv_events", None) is not None for p in routed for r in p.replicas):
        from recipe.serve.kv_events import require_fleet

        try:
            require_fleet()
        except ImportError as exc:
            raise ValueError(str(exc)) from None
    tok = tokenizer if isinstance(tokenizer, Tokenizer) or tokenizer is None else load_tokenizer(tokenizer)
    if config.schema_limits is not None:
        options = replace(options, schema_limits=config.schema_limits)
    st = ServerState(pool, options, config, store if store is not None else MemoryStore(), tenants or Tenants(), Metrics(),
                     tok)
    st.metrics.in_flight.set_function(lambda: st.in_flight)  # read when scraped: no per-request update
    st.shared_load = shared_load
    st.metrics.watch_pool(pool)
    for p in routed:
        if p is not pool and p.reads_cache:  # a P/D pool's prefill replicas
            st.metrics.watch_pool(p)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette):  # type: ignore[no-untyped-def]
        for e in st.reporting:
            e.watch(st.learned)
        if not config.render_only:  # each replica's served models and context window
            with contextlib.suppress(asyncio.TimeoutError):  # a slow engine: its read goes on, the window follows
                await asyncio.wait_for(st.learn(), 5.0)
        if config.warm:
            _warm(st)
        if config.gc_freeze:
            _freeze_once()
        prober = None
        if config.probe_seconds is not None:
            with contextlib.suppress(asyncio.TimeoutError):  # an engine slow to answer: the background probe tells
                await asyncio.wait_for(pool.probe(), min(config.probe_seconds, 2.0))
            prober = asyncio.create_task(pool.probe_forever(config.probe_seconds))
        if not config.render_only:  # the replicas' own cache state (``kv_events=``)
            for p in routed:
                if p.reads_cache:
                    p.follow_events()
        scraper = None
        if len(pool) > 1 and config.routing == "cost" and config.metrics_interval > 0 and not config.render_only:
            scraper = asyncio.create_task(pool.scrape_forever(config.metrics_interval))
        sharer = None
        if shared_load is not None and routed and not config.render_only:
            sharer = asyncio.create_task(shared_load.run([r for p in routed for r in p.replicas],
                                                         st.metrics.shared_load_errors.inc))
        yield
        for task in (prober, scraper, sharer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if shared_load is not None:
            if sharer is not None:
                await shared_load.leave()
            await shared_load.aclose()
        await pool.aclose()
        close = getattr(st.store, "close", None)
        if close is not None:
            close()

    async def not_found(request: Request, exc: Exception) -> Response:
        api = "messages" if request.url.path.startswith("/v1/messages") else "chat"
        return _error(request, api, ServeError("not_found", f"Unknown route: {request.method} {request.url.path}"))

    direct = {} if config.render_only else {path: GenerationRoute(api, st) for path, api in API_PATHS.items()}
    application = Starlette(routes=_routes(st, direct), lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})
    application.state.recipe = st
    return RecipeApp(application, direct)


_WARM_BODY = b'{"model": %s, "messages": [{"role": "user", "content": "Hello"}]}'


def _warm(st: ServerState) -> None:
    """Prepare one request for the table's first model and build its output parser
    (``ServeConfig.warm``): the vocabulary and the parser tables are loaded before the first request."""
    model = next(iter(st.options.models), None)
    if model is None:
        return
    try:
        prep = prepare(_WARM_BODY % dumps_wire(model), "chat", options=st.options, tokenizer=st.tokenizer)
        stream = CompletionStream(prep, tokenizer=st.tokenizer)
        stream.start()
        stream.finish("stop")
    except Exception:  # a model the server's vocabulary cannot encode, …: the first request says why
        _log.warning("warm-up of %s failed", model, exc_info=True)


_FROZEN = False


def _freeze_once() -> None:
    """``gc.collect()`` then ``gc.freeze()``, once per process (``ServeConfig.gc_freeze``)."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.collect()
        gc.freeze()


class RecipeApp:
    """The ASGI app: ``POST`` to a generation route goes straight to its handler (no middleware
    between the engine's frames and the server); everything else (other routes, lifespan) to the
    Starlette app, whose responses get a request id and, on a 4xx other than 429,
    ``x-should-retry: false`` (:func:`_tagged`). ``state`` and ``router`` are the Starlette app's."""

    def __init__(self, starlette: Starlette, direct: dict[str, GenerationRoute]) -> None:
        self.starlette = starlette
        self.direct = direct
        self.state = starlette.state
        self.router = starlette.router

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.starlette(scope, receive, send)
        request_started()  # (recipe serve's head deadline: this connection's head is in)
        try:
            if scope["method"] == "POST":
                handler = self.direct.get(scope["path"])
                if handler is not None:
                    return await handler(scope, receive, send)
            await self.starlette(scope, receive, _tagged(send))
        finally:
            request_finished()


def _tagged(send: Any) -> Any:
    """``send`` for a request the Starlette routes answer: its response head gets a fresh request id
    (``x-request-id`` / ``request-id``: ``req_`` + 29 ``[A-Za-z0-9]``) and, on a 4xx other than 429,
    ``x-should-retry: false``, as the generation routes' answers have (``generation.json_response``)."""
    rid = _new_id("req_").encode("ascii")

    async def tagged(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = [*message.get("headers", ()), (b"x-request-id", rid), (b"request-id", rid), *retry_headers(status)]
            message = {**message, "headers": headers}
        await send(message)

    return tagged

