"""The benchmark's anchor server: deepseek-recipe's own example server shape (its ``server-py``
FastAPI example: a route per API that prepares the request in the thread pool, runs a
``StreamProcessor`` over the API's chunk generator, frames each chunk as SSE, and closes the
inference iterator after a disconnect), written here against deepseek-recipe 0.2.0's Python API
and fed by the same replay engine as recipe's server (its deltas as ``InferenceChunk.tokens``).

Only the chat route is benchmarked (``/v1/chat/completions``); FastAPI is a bench/test-only
dependency. ``app(turns)`` returns the FastAPI app (its replay engine in ``app.state.engine``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anchor
from anchor import dr
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from recipe.serve.engines.base import EngineRequest
from recipe.serve.engines.replay import ReplayEngine, ReplayTurn

_FINISH = {"stop": "Stop", "length": "Length"}


class _Closing(StreamingResponse):
    """A streaming response that always closes its body iterator (the example's disconnect rule)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from anyio import CancelScope

        try:
            await super().__call__(scope, receive, send)
        finally:
            with CancelScope(shield=True):
                await self.body_iterator.aclose()


def app(turns: Sequence[ReplayTurn], engine_class: type[ReplayEngine] = ReplayEngine) -> FastAPI:
    """The anchor's FastAPI app over a replay of ``turns`` (played by ``engine_class``)."""
    engine = engine_class(turns, "anchor-replay")
    options, encoding, tokenizer = anchor.options(), anchor.encoding(), anchor.tokenizer()
    api = FastAPI()
    api.state.engine = engine  # the bench changes what it plays

    def prepare(body: bytes) -> tuple[str, Any, list[int]]:
        request = dr.ChatCompletionRequest(body.decode("utf-8"))
        model = request.model or "deepseek"
        converted = request.convert(options)
        return model, converted, list(encoding.encode(converted.conversation))

    async def inference(ids: list[int], max_tokens: int) -> AsyncIterator[Any]:
        req = EngineRequest(uuid.uuid4().hex, ids, max_tokens, stop_token_ids=(1,))
        it = engine.generate(req)
        try:
            first = True
            async for d in it:
                if first:
                    first = False
                    yield dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=len(ids)))
                ids_out = [i for i in d.token_ids if i not in req.stop_token_ids]  # an engine's text ends before EOS
                if ids_out:
                    yield dr.InferenceChunk.tokens(ids_out)
                if d.finish is not None:
                    yield dr.InferenceChunk.finish(getattr(dr.InferenceFinishReason, _FINISH.get(d.finish, "Stop")))
        finally:
            await it.aclose()

    async def body(model: str, converted: Any, ids: list[int]) -> AsyncIterator[str]:
        rid = str(uuid.uuid4())
        gen = dr.ChatCompletionRequest.chunk_generator(converted, rid, model)
        processor = dr.StreamProcessor(gen, converted.parsing_options, tokenizer)
        whole = None if converted.stream else dr.ChatCompletionResponse(rid, model, int(time.time()), len(ids), 0)
        source = inference(ids, 393216)
        try:
            while True:
                try:
                    chunk = await source.__anext__()
                except StopAsyncIteration:
                    out = processor.finish()
                else:
                    out = processor.push(chunk)
                for c in out:
                    if converted.stream:
                        name = dr.ChatCompletionResponse.sse_event_name(c)
                        yield (f"event: {name}\n" if name else "") + f"data: {c.to_json()}\n\n"
                    else:
                        whole.accumulate(c)
                if processor.finished:
                    break
            if converted.stream:
                done = dr.ChatCompletionResponse.sse_done_data()
                if done is not None:
                    yield f"data: {done}\n\n"
            else:
                yield whole.to_json()
        finally:
            from anyio import CancelScope

            with CancelScope(shield=True):
                await source.aclose()
            processor.close()

    @api.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        raw = await request.body()
        model, converted, ids = await run_in_threadpool(prepare, raw)
        out = body(model, converted, ids)
        if converted.stream:
            return _Closing(out, media_type="text/event-stream")
        return Response("".join([part async for part in out]), media_type="application/json")

    return api
