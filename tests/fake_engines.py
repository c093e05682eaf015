"""Local HTTP servers speaking vLLM's and SGLang's documented token-in/token-out wire formats.

The formats followed: vLLM v0.12+ ``POST /v1/completions`` (``vllm/entrypoints/openai/completion/
protocol.py``: token-id ``prompt``, ``return_token_ids`` delta ids per chunk, ``stream_options.
include_usage`` → a final ``choices: []`` usage chunk with ``prompt_tokens_details.cached_tokens``,
``structured_outputs`` with exactly one constraint, ``cache_salt`` of 1-1024 characters), and
SGLang 0.5 ``POST /generate`` (``GenerateReqInput``: ``input_ids``, ``sampling_params`` with at most
one of ``json_schema``/``regex``/``ebnf``; frames with cumulative — or, with
``incremental_streaming_output``, delta — ``output_ids`` and ``meta_info``) plus
``POST /abort_request {"rid"}``.

Request validation is strict on purpose: a field outside the documented set is refused with a 400
(real vLLM only logs and ignores it — which is how a stale ``guided_json`` silently fails open), and
``max_tokens`` / ``max_new_tokens`` are required (vLLM would silently default to 16). Each server
plays a :class:`Script` and records what it saw: bodies, when its client went away, aborts.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamOptions(_Strict):
    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None


class StructuredOutputs(_Strict):
    json_: Any = Field(None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    structural_tag: str | None = None

    @model_validator(mode="after")
    def _one(self) -> StructuredOutputs:
        given = [k for k in ("json_", "regex", "choice", "grammar", "json_object", "structural_tag") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("structured_outputs: exactly one of json, regex, choice, grammar, json_object, structural_tag")
        return self


class VLLMCompletionRequest(_Strict):
    """vLLM's CompletionRequest, the fields a token-in/token-out client uses (max_tokens required here)."""

    model: str | None = None
    prompt: list[int]
    max_tokens: int = Field(ge=1)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool | None = None
    skip_special_tokens: bool = True
    logprobs: int | None = Field(None, ge=0)
    return_tokens_as_token_ids: bool | None = None
    cache_salt: str | None = Field(None, min_length=1, max_length=1024)
    structured_outputs: StructuredOutputs | None = None
    request_id: str | None = None
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    priority: int = 0


class SGLangSamplingParams(_Strict):
    max_new_tokens: int = Field(ge=0)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    ignore_eos: bool = False
    json_schema: str | None = None
    regex: str | None = None
    ebnf: str | None = None
    structural_tag: str | None = None
    n: int = 1

    @model_validator(mode="after")
    def _one(self) -> SGLangSamplingParams:
        if sum(v is not None for v in (self.json_schema, self.regex, self.ebnf)) > 1:
            raise ValueError("Only one of regex, json_schema, or ebnf can be set.")
        return self


class SGLangGenerateRequest(_Strict):
    input_ids: list[int]
    sampling_params: SGLangSamplingParams
    stream: bool = False
    rid: str | None = None
    return_logprob: bool = False
    top_logprobs_num: int = 0
    logprob_start_len: int = -1
    cache_salt: str | None = None
    priority: int | None = None


@dataclass
class Script:
    """What a fake engine does with each request.

    Attributes:
        ids: the completion ids it generates.
        chunk: ids per frame.
        cached: cached tokens it reports.
        finish: the finish reason it ends with (``stop`` / ``length`` / ``abort``).
        fault: None, ``status500``, ``close_mid_stream``, ``stall``, ``malformed``, ``ids_after_finish``,
            ``error_frame``, ``status429``.
        after: frames sent before a mid-stream fault.
        delay: seconds between frames.
        incremental: SGLang: delta ``output_ids`` instead of cumulative.
    """

    ids: list[int]
    chunk: int = 1
    cached: int = 0
    finish: str = "stop"
    fault: str | None = None
    after: int = 2
    delay: float = 0.0
    incremental: bool = False


@dataclass
class Seen:
    """What a fake engine recorded."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    gone: list[float] = field(default_factory=list)  # perf_counter when a streaming client went away
    aborts: list[tuple[float, str]] = field(default_factory=list)
    finished: int = 0


def _frame(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _invalid(exc: Exception) -> Response:
    return JSONResponse({"error": {"message": str(exc), "type": "BadRequestError", "param": None, "code": 400}}, status_code=400)


async def _frames(script: Script, seen: Seen, make: Any) -> Any:
    """The body iterator shared by both fakes: frames from ``make(start, end, last)``, faults."""
    ids = script.ids
    n = len(ids)
    sent = 0
    try:
        for k, start in enumerate(range(0, max(n, 1), script.chunk)):
            if script.fault in ("close_mid_stream", "stall", "malformed", "error_frame") and k == script.after:
                if script.fault == "close_mid_stream":
                    raise ConnectionResetError("fake engine: connection dropped")
                if script.fault == "stall":
                    await asyncio.sleep(30)
                if script.fault == "malformed":
                    yield b"data: {not json\n\n"
                    await asyncio.sleep(30)
                if script.fault == "error_frame":
                    yield _frame({"error": {"message": "CUDA out of memory", "type": "InternalServerError", "code": 500}})
                    yield b"data: [DONE]\n\n"
                    return
            end = min(start + script.chunk, n)
            last = end >= n
            for f in make(start, end, last):
                yield f
            sent = end
            if last:
                break
            await asyncio.sleep(script.delay)
        if script.fault == "ids_after_finish":
            for f in make(0, min(3, n), False):
                yield f
        for f in make(sent, sent, None):  # the trailer (usage chunk / nothing) and [DONE]
            yield f
        seen.finished += 1
    except asyncio.CancelledError:
        seen.gone.append(time.perf_counter())
        raise


def vllm_app(script: Script, seen: Seen) -> Starlette:
    """A fake vLLM ``/v1/completions`` (see the module docstring)."""

    async def completions(request: Request) -> Response:
        raw = await request.json()
        seen.bodies.append(raw)
        try:
            req = VLLMCompletionRequest.model_validate(raw)
        except Exception as exc:
            return _invalid(exc)
        if script.fault == "status500":
            return JSONResponse({"error": {"message": "engine crashed", "type": "InternalServerError", "param": None,
                                           "code": 500}}, status_code=500)
        if script.fault == "status429":
            return JSONResponse({"error": {"message": "queue full", "type": "TooManyRequests", "code": 429}}, status_code=429)
        if not req.stream:
            return _invalid(ValueError("this fake only streams"))
        base = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": req.model or "m"}

        def make(start: int, end: int, last: bool | None) -> list[bytes]:
            if last is None:
                usage = {"prompt_tokens": len(req.prompt), "completion_tokens": len(script.ids),
                         "total_tokens": len(req.prompt) + len(script.ids),
                         "prompt_tokens_details": {"cached_tokens": script.cached}}
                return ([_frame({**base, "choices": [], "usage": usage})] if req.stream_options and req.stream_options.include_usage
                        else []) + [b"data: [DONE]\n\n"]
            ids = script.ids[start:end]
            choice: dict[str, Any] = {"index": 0, "text": "", "token_ids": ids, "finish_reason": script.finish if last else None,
                                      "stop_reason": None, "logprobs": None}
            if start == 0:
                choice["prompt_token_ids"] = req.prompt
            if req.logprobs is not None:
                choice["logprobs"] = {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids),
                                      "top_logprobs": [{f"token_id:{i}": -0.5, "token_id:7": -2.0} for i in ids],
                                      "text_offset": [0] * len(ids)}
            return [_frame({**base, "choices": [choice], "usage": None})]

        return StreamingResponse(_frames(script, seen, make), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])


def sglang_app(script: Script, seen: Seen) -> Starlette:
    """A fake SGLang ``/generate`` + ``/abort_request`` (see the module docstring)."""

    async def generate(request: Request) -> Response:
        raw = await request.json()
        seen.bodies.append(raw)
        try:
            req = SGLangGenerateRequest.model_validate(raw)
        except Exception as exc:
            return _invalid(exc)
        if script.fault == "status500":
            return JSONResponse({"error": {"message": "engine crashed"}}, status_code=500)
        if not req.stream:
            return _invalid(ValueError("this fake only streams"))

        def make(start: int, end: int, last: bool | None) -> list[bytes]:
            if last is None:
                return [b"data: [DONE]\n\n"]
            out = script.ids[start:end] if script.incremental else script.ids[:end]
            fin = None
            if last:
                fin = {"type": script.finish, "matched": 1} if script.finish == "stop" else (
                    {"type": "length", "length": end} if script.finish == "length"
                    else {"type": "abort", "message": "aborted by scheduler", "status_code": 500})
            meta: dict[str, Any] = {"id": req.rid, "finish_reason": fin, "prompt_tokens": len(req.input_ids),
                                    "completion_tokens": end, "cached_tokens": script.cached}
            if req.return_logprob:
                span = range(start, end) if script.incremental else range(end)
                meta["output_token_logprobs"] = [[-0.25, script.ids[i], None] for i in span]
                meta["output_top_logprobs"] = [[[-0.25, script.ids[i], None], [-3.0, 9, None]] for i in span]
            return [_frame({"output_ids": out, "meta_info": meta})]

        return StreamingResponse(_frames(script, seen, make), media_type="text/event-stream")

    async def abort(request: Request) -> Response:
        body = await request.json()
        seen.aborts.append((time.perf_counter(), body.get("rid")))
        return JSONResponse({})

    return Starlette(routes=[Route("/generate", generate, methods=["POST"]), Route("/abort_request", abort, methods=["POST"])])


Kind = Literal["vllm", "sglang"]
APPS = {"vllm": vllm_app, "sglang": sglang_app}
