"""A Chat Completions request with ``n`` > 1: one engine request, ``n`` choices.

The engine samples the ``n`` choices of one prompt (vLLM's and SGLang's ``n``) and tags each delta
with its choice's ``index`` (:class:`~recipe.serve.engines.base.EngineDelta`); each choice has its
own :class:`~recipe.output.driver.CompletionStream` (``choice=k``), so its reasoning, tool calls,
stop sequences and notes are its own. The shapes are OpenAI's:

- a stream's chunks carry one choice each (``choices[0].index`` = k); each choice ends with its
  own finishing chunk (``finish_reason``, and its notes in ``recipe.notes``) whose ``usage`` is
  null, and once every choice has finished one more chunk with ``choices: []`` carries the
  request's usage (completion tokens of all choices), then ``data: [DONE]``;
- the response object lists the choices in index order, with the summed usage
  (:func:`~recipe.api.chat_output.merge_choices`).

The engine stream is closed once every choice has finished (EOS, a stop sequence or the engine's
finish). Errors, timeouts and disconnects are handled as for one choice
(:mod:`recipe.serve.generation`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from recipe.api.chat_output import ChatEncoder, merge_choices, total_usage
from recipe.output.driver import CompletionStream, response
from recipe.serve.engines.base import EngineDelta, EngineError
from recipe.serve.errors import from_engine_error
from recipe.serve.generation import (
    _SSE_HEADERS,
    Job,
    Receive,
    Send,
    _aclose,
    _count,
    _delta_error,
    _engine_error,
    _fail,
    _open,
    _guard_error,
    _id_headers,
    _log_engine_error,
    _observe_first,
    _pre_stream_error,
    _Usage,
    json_response,
)
from recipe.serve.guard import Guard
from recipe.serve.writer import FrameWriter
from recipe.tokenizer import TokenIdError

__all__ = ["run_choices", "stream_choices", "whole_choices"]


async def run_choices(job: Job, receive: Receive | None, send: Send, n: int) -> None:
    """Generate the ``n`` choices of ``job`` and answer them over ``send`` (stream or JSON, by
    ``job.prep.stream``), as :func:`recipe.serve.generation.run` does for one."""
    guard = Guard(job.timeouts, receive, job.drain)
    try:
        if job.prep.stream:
            await stream_choices(job, guard, send, n)
        else:
            await whole_choices(job, guard, send, n)
    finally:
        guard.close()
        job.metrics.child(job.metrics.generation, job.api).observe(time.perf_counter() - job.started)


def _index(d: EngineDelta, n: int) -> int:
    k = d.index
    if type(k) is not int or not 0 <= k < n:
        raise EngineError("protocol", f"the engine's delta names choice {k!r}; the request has choices 0..{n - 1}")
    return k


async def stream_choices(job: Job, guard: Guard, send: Send, n: int) -> None:
    """Stream the ``n`` choices of ``job`` (see the module docstring)."""
    api, prep, m = job.api, job.prep, job.metrics
    it: AsyncIterator[EngineDelta] | None = None
    usage = _Usage(len(prep.token_ids), 0)
    writer: FrameWriter | None = None
    first_byte = True
    engine_seconds: float | None = None
    try:
        try:
            it, d, engine_seconds = await _open(job)  # (a refused connection: another replica)
            guard.touch()
        except EngineError as exc:
            return await _pre_stream_error(job, send, from_engine_error(exc))
        cached = d.cached_tokens if d.cached_tokens is not None else job.cached_estimate
        usage.cached = min(max(cached, 0), usage.prompt)
        css = [CompletionStream(prep, prompt_tokens=usage.prompt, cached_tokens=usage.cached, response_id=job.response_id,
                                tokenizer=job.tokenizer, choice=k) for k in range(n)]
        enc: ChatEncoder = css[0].encoder  # type: ignore[assignment]  (n > 1: Chat Completions only)
        finals: list[dict[str, Any] | None] = [None] * n
        writer = FrameWriter(send, job.coalesce)
        await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *_id_headers(job)]})
        m.child(m.requests, api, "200").inc()
        out: list[dict[str, Any]] = [p for cs in css for p in cs.start()]
        while True:
            k = _index(d, n)
            cs = css[k]
            if d.cached_tokens is not None:
                usage.cached = min(max(d.cached_tokens, 0), usage.prompt)
            if not cs.finished:
                if d.token_ids:
                    out += cs.push(d.token_ids, d.logprobs)
                    usage.completion += len(d.token_ids)
                if d.finish is not None and not cs.finished:
                    if d.finish not in ("stop", "length"):
                        raise _delta_error(d)
                    out += cs.finish(d.finish)
                if cs.finished:  # its finishing chunk: the usage goes on the request's last chunk
                    finals[k] = enc.drop_usage(out[-1])
            data = b"".join(map(enc.frame, out))
            if all(f is not None for f in finals):
                guard.disarm()
                await _aclose(it)
                total = total_usage(finals)  # type: ignore[arg-type]
                if usage.cached != total["prompt_tokens_details"]["cached_tokens"]:
                    total["prompt_tokens_details"]["cached_tokens"] = usage.cached
                    total["prompt_cache_hit_tokens"] = usage.cached
                    total["prompt_cache_miss_tokens"] = usage.prompt - usage.cached
                await writer.close(data + enc.frame(enc.usage_chunk(total)) + enc.done())
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
            out = []
            try:
                d = await it.__anext__()
            except StopAsyncIteration:
                raise EngineError("unavailable", "the engine closed the stream before the output finished") from None
            guard.touch()
        _count(job, usage)
    except asyncio.CancelledError:
        if not guard.absorb():
            raise
        await _aclose(it)
        if guard.reason == "disconnect":
            if writer is not None:
                writer.abandon()
            m.child(m.errors, api, "disconnect").inc()
            return
        await _fail(job, send, writer, _guard_error(guard), None)
    except (EngineError, TokenIdError) as exc:
        guard.disarm()
        await _aclose(it)
        _log_engine_error(job, _engine_error(exc))
        await _fail(job, send, writer, from_engine_error(_engine_error(exc)), None)
    finally:
        await _aclose(it)
        if first_byte and engine_seconds is not None:
            m.child(m.engine_latency, job.replica).observe(engine_seconds)


async def whole_choices(job: Job, guard: Guard, send: Send, n: int) -> None:
    """Collect the ``n`` choices of ``job``, then answer one ``chat.completion`` (see the module
    docstring)."""
    api, prep, m = job.api, job.prep, job.metrics
    it: AsyncIterator[EngineDelta] | None = None
    ids: list[list[int]] = [[] for _ in range(n)]
    want_lp = prep.conversation.sampling.logprobs
    lps: list[list[Any] | None] = [[] if want_lp else None for _ in range(n)]
    watches = [CompletionStream(prep, response_id=job.response_id, tokenizer=job.tokenizer, choice=k)
               if prep.parsing.stop_sequences else None for k in range(n)]
    finish: list[str | None] = [None] * n
    usage = _Usage(len(prep.token_ids), -1)
    stops = frozenset(prep.engine.stop_token_ids) if prep.engine is not None else frozenset()
    try:
        it, d, engine_seconds = await _open(job)  # (a refused connection: another replica)
        m.child(m.engine_latency, job.replica).observe(engine_seconds)
        guard.touch()
        while True:
            k = _index(d, n)
            if d.cached_tokens is not None:
                usage.cached = min(max(d.cached_tokens, 0), usage.prompt)
            if finish[k] is None:
                if d.token_ids:
                    ids[k].extend(d.token_ids)
                    got = lps[k]
                    if got is not None:
                        if d.logprobs is not None and len(d.logprobs) == len(d.token_ids):
                            got.extend(d.logprobs)
                        else:
                            lps[k] = None
                    w = watches[k]
                    if w is not None:
                        w.push(d.token_ids)
                    if not stops.isdisjoint(d.token_ids) or (w is not None and w.finished):
                        finish[k] = "stop"
                if d.finish is not None and finish[k] is None:
                    if d.finish not in ("stop", "length"):
                        raise _delta_error(d)
                    finish[k] = d.finish
                elif d.finish is not None and d.finish not in ("stop", "length"):
                    raise _delta_error(d)
            if all(f is not None for f in finish):
                break
            try:
                d = await it.__anext__()
            except StopAsyncIteration:
                raise EngineError("unavailable", "the engine closed the stream before the output finished") from None
            guard.touch()
        guard.disarm()
        await _aclose(it)
        if usage.cached < 0:
            usage.cached = min(job.cached_estimate, usage.prompt)
        usage.completion = sum(map(len, ids))
        body = merge_choices([
            response(prep, ids[k], finish=finish[k] or "stop", logprobs=lps[k], prompt_tokens=usage.prompt,
                     cached_tokens=usage.cached, response_id=job.response_id, tokenizer=job.tokenizer, choice=k)
            for k in range(n)])
        m.child(m.requests, api, "200").inc()
        await json_response(send, 200, body, _id_headers(job))
        m.child(m.ttft, api).observe(time.perf_counter() - job.started)
        _count(job, usage)
    except asyncio.CancelledError:
        if not guard.absorb():
            raise
        await _aclose(it)
        if guard.reason == "disconnect":
            m.child(m.errors, api, "disconnect").inc()
            return
        await _pre_stream_error(job, send, _guard_error(guard))
    except (EngineError, TokenIdError) as exc:
        guard.disarm()
        await _aclose(it)
        if it is not None:  # (_open logged a failure before the first delta)
            _log_engine_error(job, _engine_error(exc))
        await _pre_stream_error(job, send, from_engine_error(_engine_error(exc)))
    finally:
        await _aclose(it)
