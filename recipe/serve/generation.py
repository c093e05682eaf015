"""One generation, for any of the three APIs: prepared request → engine → stream or response.

:class:`Job` holds what one request needs; :func:`run` drives it over raw ASGI ``send``:

- a stream's HTTP head is sent with the engine's first delta, so an engine that fails before it
  gets the API's own error status and body; after it, failures end the stream with the API's
  in-stream error (:mod:`recipe.serve.errors`);
- ``CompletionStream`` is opened with the engine's prompt / cached-token counts from the first delta
  (else the router's estimate); a count the engine reports only at the end (vLLM's usage chunk)
  replaces it in the final usage;
- a stream that ends on EOS or a stop sequence closes the engine stream at once; so do a client
  disconnect and the timeouts (:class:`~recipe.serve.guard.Guard`), which abort the engine request;
- Responses: the answered turn is stored before the final event is sent, so the client's next turn
  (``previous_response_id``) always finds it; a turn the store failed to save is answered with
  ``"store": false`` in its final response object (``response.created`` and ``response.in_progress``
  carry what the request asked for);
- a Chat request with ``n`` > 1 choices is one engine request whose deltas name their choice; one
  choice is the case ``n`` = 1 (:mod:`recipe.serve.choices`: each choice's bookkeeping, the shapes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from recipe.api.chat_output import merge_choices
from recipe.api.prepared import PreparedRequest
from recipe.jsonfmt import dumps_wire
from recipe.output.driver import CompletionStream, response
from recipe.serve.choices import ChoiceFrames, Collected, Usage, choice_index, delta_error
from recipe.serve.config import Timeouts
from recipe.serve.engines.base import Engine, EngineDelta, EngineError, EngineRequest
from recipe.serve.errors import ServeError, error_json, from_engine_error, stream_error
from recipe.serve.guard import Drain, Guard
from recipe.serve.metrics import Metrics
from recipe.serve.pool import ReplicaPool
from recipe.serve.writer import FrameWriter
from recipe.store.conversations import ConversationStore, remember
from recipe.tokenizer import TokenIdError, Tokenizer

__all__ = ["Job", "run", "json_response", "Send"]

_log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.completed", "response.incomplete"})


@dataclass(slots=True)
class Job:
    """One generation request.

    Attributes:
        api: ``chat`` | ``responses`` | ``messages``.
        prep: the prepared request.
        body: the request body as sent (Responses: what the store saves).
        engine: the replica's engine; ``replica`` its name.
        response_id: the response id (also the ``x-request-id`` / ``request-id`` header).
        cache_salt: the tenant's salt for the engine.
        cached_estimate: the router's cached-token estimate, used when the engine reports none.
        store: the tenant's conversation store (Responses), or None.
        started: ``time.perf_counter()`` at request arrival.
        coalesce: stream frames arriving within this many seconds share one write (0: never).
        tokenizer: the vocabulary (the encoding's default when None).
        constrain: how much of the output constraint reaches the engine (``ServeConfig.constrain``).
        drain: the server's shutdown deadline (:class:`~recipe.serve.guard.Drain`), or None.
        pool: the replica pool ``replica`` belongs to, told of the engine's failures and successes
            (a refused connection is resent to another replica: ``engine`` and ``replica`` change),
            or None.
        dp_rank: the replica's data-parallel rank to run it on (:attr:`recipe.serve.pool.Route.dp_rank`;
            dropped when the request is resent to another replica), or None.
    """

    api: str
    prep: PreparedRequest
    body: Mapping[str, Any]
    engine: Engine
    replica: str
    response_id: str
    cache_salt: str | None
    cached_estimate: int
    store: ConversationStore | None
    metrics: Metrics
    timeouts: Timeouts
    started: float
    headers: list[tuple[bytes, bytes]]
    coalesce: float = 0.0
    tokenizer: Tokenizer | None = None
    constrain: str = "full"
    drain: Drain | None = None
    pool: ReplicaPool | None = None
    dp_rank: int | None = None


def _id_headers(job: Job) -> list[tuple[bytes, bytes]]:
    rid = job.response_id.encode()
    return [(b"x-request-id", rid), (b"request-id", rid), (b"x-recipe-replica", job.replica.encode()), *job.headers]


def retry_headers(status: int) -> list[tuple[bytes, bytes]]:
    """``[(b"x-should-retry", b"false")]`` for a 4xx other than 429 (a request that fails the same way
    again; the SDKs read the header), else ``[]``."""
    return [(b"x-should-retry", b"false")] if 400 <= status < 500 and status != 429 else []


async def json_response(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    """Send ``body`` as a whole JSON response (with :func:`retry_headers`)."""
    data = dumps_wire(body)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers,
            *retry_headers(status)]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


async def _aclose(it: AsyncIterator[EngineDelta]) -> None:
    """Close an engine stream (which aborts its request upstream) in the calling task; never raises
    an engine's error. A stream that already ended costs nothing.

    The close runs in the task that iterated the stream, never partly in another: an HTTP engine's
    stream holds httpx / anyio cancel scopes, which must be exited in the task that entered them
    (else the close fails, the connection is left half-closed and the engine keeps generating). A
    cancellation of the calling task during the close is passed on once the close has run; httpcore
    closes the connection under its own shield.
    """
    if getattr(it, "ag_frame", True) is None:  # an async generator that has ended or was closed
        return
    close = getattr(it, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # an engine's cleanup must not mask the outcome
        pass


def _patch_usage(api: str, payloads: list[dict[str, Any]], prompt: int, cached: int) -> None:
    """Rewrite the cached-token fields of the final payloads (an engine that reports at the end)."""
    for p in payloads:
        if api == "chat":
            u = p.get("usage")
            if isinstance(u, dict):
                u["prompt_tokens_details"] = {**(u.get("prompt_tokens_details") or {}), "cached_tokens": cached}
                u["prompt_cache_hit_tokens"], u["prompt_cache_miss_tokens"] = cached, prompt - cached
        elif api == "responses":
            if p.get("type") in _LIFECYCLE and isinstance(p["response"].get("usage"), dict):
                p["response"]["usage"]["input_tokens_details"]["cached_tokens"] = cached
        elif p.get("type") == "message_delta":
            u = p["usage"]
            if "input_tokens" in u:
                u["input_tokens"] = prompt - cached
            u["cache_read_input_tokens"] = cached


class _ResponsesState:
    """Responses bookkeeping: lifecycle fields, the failure event's inputs, the final object.

    Fed the payloads of each push (:meth:`see`), or the frames of a push made by ``push_sse``
    (:meth:`see_sse`): plain delta frames are only remembered (the last one's sequence number is
    read if the stream fails); frames that finish an output item or the response are read back
    into payloads, seen, and framed again (the lifecycle objects get ``previous_response_id`` and
    ``store`` before they go out).
    """

    __slots__ = ("prev", "store", "seq", "base", "output", "final", "last", "held")

    def __init__(self, body: Mapping[str, Any], storing: bool) -> None:
        self.prev = body.get("previous_response_id")
        self.store = storing
        self.seq = 0
        self.base: dict[str, Any] | None = None
        self.output: list[Any] = []
        self.final: dict[str, Any] | None = None
        self.last = b""  # the latest push_sse frames not read back (their sequence numbers follow seq)
        self.held: list[dict[str, Any]] = []  # the finishing push's payloads, framed once the turn is stored

    def see_sse(self, data: bytes, cs: CompletionStream) -> bytes:
        """The frames ``data`` of one ``push_sse`` of ``cs``, as they go out (see the class docstring)."""
        if not cs.finished and _ITEM_DONE not in data:
            self.last = data
            return data
        payloads = _read_frames(data)
        self.see(payloads)
        if cs.finished:  # framed after the save, which may turn ``store`` false (:meth:`take_held`)
            self.held = payloads
            return b""
        return cs.sse(payloads)

    def take_held(self) -> list[dict[str, Any]]:
        """The payloads :meth:`see_sse` held back from the finishing push (already seen), once."""
        held, self.held = self.held, []
        return held

    def see(self, payloads: list[dict[str, Any]]) -> None:
        for p in payloads:
            t = p["type"]
            if t in _LIFECYCLE:
                r = p["response"]
                r["previous_response_id"] = self.prev
                r["store"] = self.store
                if self.base is None:
                    self.base = r
                if t in ("response.completed", "response.incomplete"):
                    self.final = r
            elif t == "response.output_item.done":
                self.output.append(p["item"])
        if payloads:
            self.seq = payloads[-1]["sequence_number"] + 1
            self.last = b""

    def close_items(self, cs: CompletionStream) -> bytes:
        """Before ``response.failed``: the frames that close the output items still open (held text
        flushed, each item done with status ``incomplete``), seen here, so the failed response's
        ``output`` holds everything that was streamed; b"" once ``cs`` finished."""
        if cs.finished:
            return b""
        self.state()  # the sequence number after the last push_sse frames
        kept = [p for p in cs.finish("error") if p["type"] not in _LIFECYCLE]  # (not its response.incomplete)
        self.see(kept)
        return cs.sse(kept)

    def state(self) -> dict[str, Any]:
        if self.last:
            self.seq = _read_frames(self.last)[-1]["sequence_number"] + 1
            self.last = b""
        return {"seq": self.seq, "response": self.base, "output": self.output}


#: In a Responses push's frames: an output item finished (its frame's ``event:`` line; a literal
#: newline never appears inside a frame's JSON).
_ITEM_DONE = b"response.output_item.done\n"


def _read_frames(data: bytes) -> list[dict[str, Any]]:
    """The payloads of Responses SSE frames (``event: TYPE\\ndata: JSON\\n\\n`` …), in order."""
    out = []
    for frame in data.split(b"\n\n"):
        at = frame.find(b"data: ")
        if at >= 0:
            raw = frame[at + 6:]
            try:
                out.append(orjson.loads(raw))
            except orjson.JSONDecodeError:  # a lone surrogate, which the fallback printer escapes
                out.append(json.loads(raw))
    return out


def _guard_error(guard: Guard) -> ServeError:
    """The error a generation the guard cancelled ends with (not a disconnect: nobody to tell)."""
    if guard.reason == "shutdown":
        return ServeError("shutting_down", "The server is shutting down: the generation was stopped at its drain "
                                           "deadline. Retry the request.")
    return from_engine_error(_timeout_error(guard))


def _timeout_error(guard: Guard) -> EngineError:
    why = guard.reason or "total"
    return EngineError("timeout", f"engine timed out: no {'first token' if why == 'first_token' else 'delta' if why == 'idle' else 'end'} "
                                  f"within {guard.timeout_of(why)} s ({why.replace('_', ' ')} timeout)")


def _engine_error(exc: EngineError | TokenIdError) -> EngineError:
    """An id outside the request's vocabulary is the engine's malformed output (a 502), not a bug of ours."""
    return exc if isinstance(exc, EngineError) else EngineError("protocol", f"the engine's output: {exc}")


def _count(job: Job, usage: Usage) -> None:
    m, api = job.metrics, job.api
    m.child(m.prompt_tokens, api).inc(usage.prompt)
    m.child(m.cached_tokens, api).inc(usage.cached)
    m.child(m.completion_tokens, api).inc(usage.completion)


async def _save(job: Job, final: dict[str, Any] | None) -> None:
    """Store a Responses turn (in a thread: SQLite and Redis block) before its final event or
    object goes out. A failing store is counted and logged with the request id, and ``final`` then
    says ``"store": false``: the answer still goes out, and never claims a turn that was not stored."""
    if job.store is None or final is None or job.api != "responses" or final.get("store") is False:
        return
    try:
        await asyncio.to_thread(remember, job.store, job.body, final)
    except Exception as exc:  # StoreUnavailable, sqlite3.Error
        final["store"] = False
        job.metrics.store_errors.inc()
        job.metrics.child(job.metrics.errors, job.api, "store_unavailable").inc()
        _log.warning("request %s: the turn was not stored (answered with store: false): %s: %s",
                     job.response_id, type(exc).__name__, exc)


async def run(job: Job, receive: Receive | None, send: Send, n: int = 1) -> None:
    """Generate the ``n`` choices of ``job`` (``n`` > 1: a Chat request, :mod:`recipe.serve.choices`)
    and answer them over ``send`` (stream or JSON, by ``job.prep.stream``)."""
    guard = Guard(job.timeouts, receive, job.drain)
    try:
        if job.prep.stream:
            await _stream(job, guard, send, n)
        else:
            await _whole(job, guard, send, n)
    finally:
        guard.close()
        job.metrics.child(job.metrics.generation, job.api).observe(time.perf_counter() - job.started)


async def _open(job: Job) -> tuple[AsyncIterator[EngineDelta], EngineDelta, float]:
    """Send ``job`` to its engine: the stream, its first delta and the seconds it took. A connection
    never made (refused, unreachable) is resent to another replica of the pool (``job.engine`` and
    ``job.replica`` then name it), never to the one that failed; the pool hears of each outcome.

    Raises:
        EngineError: the last replica's failure (logged once, with the request id and replica).
    """
    tried: set[str] = set()
    while True:
        it = job.engine.generate(EngineRequest.from_prepared(job.prep, job.response_id, job.cache_salt, job.constrain,
                                                             job.dp_rank))
        try:
            d, seconds = await _first(it)
        except BaseException as exc:
            await _aclose(it)  # (a cancel too: the engine request is aborted)
            if not isinstance(exc, EngineError):
                raise
            replica = job.pool.get(job.replica) if job.pool is not None else None
            nxt = job.pool.failover(replica, exc, tried) if job.pool is not None and replica is not None else None
            if nxt is None:
                _log_engine_error(job, exc, tell_pool=False)  # (failover told it)
                raise
            _log.warning("request %s: replica %s refused the connection; resent to %s (%s)", job.response_id,
                         job.replica, nxt.name, exc.message)
            tried.add(job.replica)
            job.engine, job.replica, job.dp_rank = nxt.engine, nxt.name, None
            continue
        if job.pool is not None:
            replica = job.pool.get(job.replica)
            if replica is not None and (replica.failures or replica.ejected_until):
                job.pool.succeeded(replica)
        return it, d, seconds


def _log_guard(job: Job, guard: Guard) -> None:
    """Log a generation the server's timeouts stopped (a shutdown is not the engine's failure)."""
    if guard.reason != "shutdown":
        _log.warning("request %s: engine %s failed: %s", job.response_id, job.replica, _timeout_error(guard).message)


def _log_engine_error(job: Job, exc: BaseException, tell_pool: bool = True) -> None:
    """Log an engine failure once (the request id, the replica, what happened), and tell the pool."""
    if isinstance(exc, EngineError):
        if tell_pool and job.pool is not None and (replica := job.pool.get(job.replica)) is not None:
            job.pool.failed(replica, exc)
        what = f"{exc.kind}: {exc.message}"
    else:
        what = f"{type(exc).__name__}: {exc}"
    _log.warning("request %s: engine %s failed: %s", job.response_id, job.replica, what)


async def _first(it: AsyncIterator[EngineDelta]) -> tuple[EngineDelta, float]:
    """The engine's first delta and the seconds it took (observed by the caller, after the first
    byte is out: a metric is not on the way to the first token)."""
    t0 = time.perf_counter()
    try:
        d = await it.__anext__()
    except StopAsyncIteration:
        raise EngineError("protocol", "the engine closed the stream before producing anything") from None
    return d, time.perf_counter() - t0


def _observe_first(job: Job, engine_seconds: float) -> None:
    """The metrics of the first answer byte: time to first token, engine latency."""
    m = job.metrics
    m.child(m.ttft, job.api).observe(time.perf_counter() - job.started)
    m.child(m.engine_latency, job.replica).observe(engine_seconds)


async def _pre_stream_error(job: Job, send: Send, err: ServeError) -> None:
    job.metrics.child(job.metrics.errors, job.api, err.kind).inc()
    status, body = error_json(job.api, err)
    job.metrics.child(job.metrics.requests, job.api, str(status)).inc()
    await json_response(send, status, body, _id_headers(job))


class _OneChoice:
    """The stream of a request with one choice, any API: each delta's frames (the generation
    driver calls :meth:`step` per delta until :attr:`done`, then :meth:`end` once the engine stream
    is closed; :meth:`failure` for an in-stream error). A delta with nothing before it to frame and
    no usage change gets its frames straight from the parser (``push_sse``: the same bytes, no
    payload dicts); Responses reads back the rare frames its bookkeeping needs
    (:meth:`_ResponsesState.see_sse`) and stores the turn before its final event (:meth:`end`)."""

    __slots__ = ("usage", "done", "_job", "_cs", "_opened", "_rstate", "_out")

    def __init__(self, job: Job, d: EngineDelta) -> None:
        prep = job.prep
        self.usage = usage = Usage(len(prep.token_ids), 0)
        usage.see_cached(d.cached_tokens if d.cached_tokens is not None else job.cached_estimate)
        self.done = False
        self._job = job
        self._opened = usage.cached  # a count the engine reports after this is patched into the usage
        self._cs = CompletionStream(prep, prompt_tokens=usage.prompt, cached_tokens=usage.cached,
                                    response_id=job.response_id, tokenizer=job.tokenizer)
        self._rstate = _ResponsesState(job.body, job.store is not None and job.body.get("store") is not False) \
            if job.api == "responses" else None
        self._out = self._cs.start()

    def step(self, d: EngineDelta) -> bytes:
        """The frames delta ``d`` adds (the first call: the opening events too); once the output
        finished, the last push's payloads wait for :meth:`end`.

        Raises:
            EngineError: ``d`` ends the request as a failure.
            TokenIdError: an id outside the vocabulary.
        """
        cs, usage, rstate, out = self._cs, self.usage, self._rstate, self._out
        data = b""
        if d.token_ids:
            if not out and d.cached_tokens is None and usage.cached == self._opened:
                data = cs.push_sse(d.token_ids, d.logprobs)
                if rstate is not None and data:
                    data = rstate.see_sse(data, cs)
            else:
                out += cs.push(d.token_ids, d.logprobs)
            usage.completion += len(d.token_ids)
        if d.cached_tokens is not None:
            usage.see_cached(d.cached_tokens)
        if d.finish is not None and not cs.finished:
            if d.finish not in ("stop", "length"):
                raise delta_error(d)
            out += cs.finish(d.finish)
        if cs.finished:
            if usage.cached != self._opened:  # a count the engine reported after the start
                _patch_usage(self._job.api, out, usage.prompt, usage.cached)
            self.done = True
            return data
        if rstate is not None:
            rstate.see(out)
        if out:
            data += cs.sse(out)
            self._out = []
        return data

    async def end(self) -> bytes:
        """The frames of the finishing push (Responses: once the turn is stored)."""
        out, rstate = self._out, self._rstate
        if rstate is not None:
            rstate.see(out)
            await _save(self._job, rstate.final)
            out = rstate.take_held() + out
        return self._cs.sse(out) if out else b""

    def failure(self, err: ServeError) -> bytes:
        """The frames that end the stream with ``err`` (Responses: the open output items closed
        first, so the failed response's ``output`` holds everything that was streamed)."""
        rstate = self._rstate
        if rstate is None:
            return stream_error(self._job.api, err, None)
        return rstate.close_items(self._cs) + stream_error(self._job.api, err, rstate.state())


async def _stream(job: Job, guard: Guard, send: Send, n: int) -> None:
    """Stream the ``n`` choices of ``job``: the head with the engine's first delta, each delta's
    frames as they come, the engine stream closed as soon as the output finished."""
    api, m = job.api, job.metrics
    it: AsyncIterator[EngineDelta] | None = None
    writer: FrameWriter | None = None
    frames: _OneChoice | ChoiceFrames | None = None
    engine_seconds: float | None = None
    first_byte = True
    try:
        try:
            it, d, engine_seconds = await _open(job)
            guard.touch()
        except EngineError as exc:
            return await _pre_stream_error(job, send, from_engine_error(exc, job.api))
        frames = _OneChoice(job, d) if n == 1 else \
            ChoiceFrames(job.prep, d, n, job.cached_estimate, job.response_id, job.tokenizer)
        writer = FrameWriter(send, job.coalesce)
        await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *_id_headers(job)]})
        m.child(m.requests, api, "200").inc()
        while True:
            data = frames.step(d)
            if frames.done:
                guard.disarm()
                if d.finish is None:  # EOS or a stop sequence before the engine's finish: stop generating now
                    await _aclose(it)
                await writer.close(data + await frames.end())  # the last frames and the end of the body: one write
                if d.finish is not None:  # the engine's own finish: its stream is closed after the client's last
                    await _aclose(it)     # byte (an HTTP engine reads the rest of its body, to keep the connection)
                if first_byte:
                    first_byte = False
                    _observe_first(job, engine_seconds)
                break
            if data:
                if writer.hold(data):
                    await writer.flush()
                if first_byte:
                    first_byte = False
                    _observe_first(job, engine_seconds)
            try:
                d = await it.__anext__()
            except StopAsyncIteration:
                raise EngineError("unavailable", "the engine closed the stream before the output finished") from None
            guard.touch()
        _count(job, frames.usage)
    except asyncio.CancelledError:
        if not guard.absorb():
            raise
        await _aclose(it)
        if guard.reason == "disconnect":
            if writer is not None:
                writer.abandon()
            m.child(m.errors, api, "disconnect").inc()
            return
        _log_guard(job, guard)
        await _fail(job, send, writer, _guard_error(guard), frames)
    except (EngineError, TokenIdError) as exc:
        guard.disarm()
        await _aclose(it)
        _log_engine_error(job, _engine_error(exc))
        await _fail(job, send, writer, from_engine_error(_engine_error(exc), job.api), frames)
    finally:
        await _aclose(it)
        if first_byte and engine_seconds is not None:  # the engine answered, the stream failed before a frame
            m.child(m.engine_latency, job.replica).observe(engine_seconds)


async def _fail(job: Job, send: Send, writer: FrameWriter | None, err: ServeError,
                frames: _OneChoice | ChoiceFrames | None) -> None:
    if writer is None or frames is None:
        return await _pre_stream_error(job, send, err)
    job.metrics.child(job.metrics.errors, job.api, err.kind).inc()
    try:
        await writer.close(frames.failure(err))
    except OSError:  # the client left meanwhile
        writer.abandon()


async def _whole(job: Job, guard: Guard, send: Send, n: int) -> None:
    """Collect the whole output of the ``n`` choices, then answer the response object (the engine
    stopped early on EOS or a stop sequence, as in a stream)."""
    api, prep, m = job.api, job.prep, job.metrics
    it: AsyncIterator[EngineDelta] | None = None
    want_lp = prep.conversation.sampling.logprobs
    choices = [Collected(prep, want_lp, job.response_id, job.tokenizer, k) for k in range(n)]
    usage = Usage(len(prep.token_ids), -1)
    stops = frozenset(prep.engine.stop_token_ids) if prep.engine is not None else frozenset()
    try:
        it, d, engine_seconds = await _open(job)
        m.child(m.engine_latency, job.replica).observe(engine_seconds)  # no byte goes out before the whole answer
        guard.touch()
        while True:
            c = choices[0] if n == 1 else choices[choice_index(d, n)]
            if d.cached_tokens is not None:
                usage.see_cached(d.cached_tokens)
            if c.finish is None:
                c.take(d, stops)
            elif d.finish is not None and d.finish not in ("stop", "length"):  # (n > 1: a finished choice)
                raise delta_error(d)
            if all(c.finish is not None for c in choices):
                break
            try:
                d = await it.__anext__()
            except StopAsyncIteration:
                raise EngineError("unavailable", "the engine closed the stream before the output finished") from None
            guard.touch()
        guard.disarm()
        if d.finish is None:  # EOS or a stop sequence before the engine's finish: stop generating now
            await _aclose(it)  # (else the stream is closed after the answer is sent, as in a stream)
        if usage.cached < 0:
            usage.cached = min(job.cached_estimate, usage.prompt)
        usage.completion = sum(len(c.ids) for c in choices)
        bodies = [response(prep, c.ids, finish=c.finish or "stop", logprobs=c.logprobs, prompt_tokens=usage.prompt,
                           cached_tokens=usage.cached, response_id=job.response_id, tokenizer=job.tokenizer, choice=k)
                  for k, c in enumerate(choices)]
        body = bodies[0] if n == 1 else merge_choices(bodies)
        if api == "responses":
            body["previous_response_id"] = job.body.get("previous_response_id")
            body["store"] = job.store is not None and job.body.get("store") is not False
            await _save(job, body)
        m.child(m.requests, api, "200").inc()
        await json_response(send, 200, body, _id_headers(job))
        m.child(m.ttft, api).observe(time.perf_counter() - job.started)
        _count(job, usage)
        await _aclose(it)
    except asyncio.CancelledError:
        if not guard.absorb():
            raise
        await _aclose(it)
        if guard.reason == "disconnect":
            m.child(m.errors, api, "disconnect").inc()
            return
        _log_guard(job, guard)
        await _pre_stream_error(job, send, _guard_error(guard))
    except (EngineError, TokenIdError) as exc:
        guard.disarm()
        await _aclose(it)
        if it is not None:  # (_open logged a failure before the first delta)
            _log_engine_error(job, _engine_error(exc))
        await _pre_stream_error(job, send, from_engine_error(_engine_error(exc), job.api))
    finally:
        await _aclose(it)
