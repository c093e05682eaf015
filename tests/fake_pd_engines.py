"""Local HTTP servers playing the two halves of vLLM's and SGLang's P/D-disaggregated serving.

Each checks the fields its real counterpart needs and answers as it does:

- vLLM (a KV connector such as NixlConnector; ``vllm/distributed/kv_transfer/kv_connector/v1/nixl/``):
  the **prefill** server takes a ``/v1/completions`` request with ``kv_transfer_params`` exactly
  ``{do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null,
  remote_host: null, remote_port: null}``, ``stream: false`` and ``max_tokens: 1``, and answers the
  whole completion with the ``kv_transfer_params`` its connector writes in ``request_finished``
  (``do_remote_prefill: true``, ``do_remote_decode: false``, ``remote_block_ids``,
  ``remote_engine_id``, ``remote_request_id``, ``remote_host``, ``remote_port``, ``tp_size``, …). The
  **decode** server takes the request with those parameters unchanged, reads the blocks once (a
  second read, unknown parameters or another prompt is an error, as a failed transfer is) and
  streams the output as vLLM's ``/v1/completions`` does.
- SGLang (``--disaggregation-mode prefill|decode``): both servers take ``/generate`` with the same
  ``bootstrap_host``, ``bootstrap_port`` (the prefill server's bootstrap port) and ``bootstrap_room``
  (an integer below 2**63); the decode server waits for the prefill of that room (its KV transfer)
  and streams SGLang frames; the prefill server answers whole.

The servers share a :class:`Ledger` (the KV handoff), and record what they saw.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from recipe.tokenizer import load_tokenizer

PREFILL_TRANSFER = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                    "remote_block_ids": None, "remote_host": None, "remote_port": None}
EOS = 1
_ids = itertools.count(1)


@dataclass
class Ledger:
    """The KV handoff between fake prefill and decode servers: what each prefill left for a decode
    server to read, and every request each server saw (``(server name, body)``; ``ranks``: its
    ``X-data-parallel-rank`` header)."""

    transfers: dict[Any, dict[str, Any]] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ranks: list[tuple[str, str | None]] = field(default_factory=list)  # (server, X-data-parallel-rank header)

    def by(self, name: str) -> list[dict[str, Any]]:
        return [b for n, b in self.seen if n == name]


@dataclass
class Fake:
    """One fake server's settings: ``name``; ``text`` its decode output; ``fail`` an HTTP status to
    answer every request with; ``no_params`` a prefill answering without ``kv_transfer_params``;
    ``running`` what its ``/metrics`` reports; ``bootstrap_port`` an SGLang prefill's; ``delay`` seconds
    between a decode server's frames, and a vLLM prefill server's time to answer; ``hold`` an Event
    that holds a vLLM server's requests while it is not set (:meth:`held`)."""

    name: str
    text: str = "Hello from decode."
    fail: int | None = None
    no_params: bool = False
    running: float = 0.0
    bootstrap_port: int = 8998
    delay: float = 0.0
    cache: list[list[int]] = field(default_factory=list)
    hold: threading.Event | None = None

    async def held(self) -> None:
        """Wait while :attr:`hold` (read at each look) is an Event not set: a vLLM prefill server
        before it answers, a vLLM decode server before its first frame."""
        while self.hold is not None and not self.hold.is_set():
            await asyncio.sleep(0.02)

    def cached(self, ids: list[int]) -> int:
        """The prompt tokens this server holds, in 64-token blocks (its earlier prompts' prefixes)."""
        best = 0
        for old in self.cache:
            n = 0
            for a, b in zip(old, ids):
                if a != b:
                    break
                n += 1
            best = max(best, n // 64 * 64)
        self.cache.append(list(ids))
        return best


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "BadRequestError" if status < 500 else "InternalServerError",
                                   "param": None, "code": status}}, status_code=status)


def _recorded(fake: Fake, ledger: Ledger) -> Any:
    """A fake engine route's prelude: the JSON body read and recorded in ``ledger`` under the server's
    name, ``fake.fail`` answered at once; the wrapped ``handler(request, body)`` does the rest."""

    def wrap(handler: Any) -> Any:
        async def route(request: Request) -> Response:
            body = orjson.loads(await request.body())
            ledger.seen.append((fake.name, body))
            ledger.ranks.append((fake.name, request.headers.get("x-data-parallel-rank")))
            if fake.fail:
                return _error(fake.fail, f"{fake.name} failed")
            return await handler(request, body)

        return route

    return wrap


def _common(fake: Fake) -> list[Route]:
    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "tiny", "object": "model", "max_model_len": 4096}]})

    async def metrics(request: Request) -> Response:
        text = (f"vllm:num_requests_running{{engine=\"0\"}} {fake.running}\nvllm:num_requests_waiting{{engine=\"0\"}} 0\n"
                f"vllm:kv_cache_usage_perc{{engine=\"0\"}} 0.1\n")
        return Response(text, media_type="text/plain")

    return [Route("/health", health), Route("/v1/models", models), Route("/metrics", metrics)]


def vllm_prefill_app(fake: Fake, ledger: Ledger) -> Starlette:
    """vLLM's prefill half (see the module docstring)."""
    engine_id = f"engine-{fake.name}"

    @_recorded(fake, ledger)
    async def completions(request: Request, body: dict[str, Any]) -> Response:
        if body.get("kv_transfer_params") != PREFILL_TRANSFER:
            return _error(400, f"not a prefill request: kv_transfer_params {body.get('kv_transfer_params')!r}")
        if body.get("stream") is not False or body.get("max_tokens") != 1 or "stream_options" in body:
            return _error(400, "a prefill request is whole (stream false, no stream_options) with max_tokens 1")
        ids = body.get("prompt")
        if not isinstance(ids, list) or not ids or not all(type(i) is int for i in ids):
            return _error(400, "prompt must be token ids")
        await asyncio.sleep(fake.delay)
        await fake.held()
        cached = fake.cached(ids)
        rid = f"cmpl-{body.get('request_id')}-{next(_ids)}"
        params = {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": list(range(len(ids) // 64 + 1)),
                  "remote_engine_id": engine_id, "remote_request_id": rid, "remote_host": "127.0.0.1",
                  "remote_port": request.url.port, "tp_size": 1, "dcp_size": 1, "pp_size": 1, "remote_num_tokens": len(ids),
                  "remote_blocks_expiry_time": None, "transfer_mode": "pull"}
        ledger.transfers[(engine_id, rid)] = {"params": params, "prompt": ids, "read": False}
        answer = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": body.get("model"),
                  "choices": [{"index": 0, "text": "", "token_ids": [19923], "finish_reason": "length"}],
                  "usage": {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1,
                            "prompt_tokens_details": {"cached_tokens": cached}}}
        if not fake.no_params:
            answer["kv_transfer_params"] = params
        return JSONResponse(answer)

    return Starlette(routes=[*_common(fake), Route("/v1/completions", completions, methods=["POST"])])


def vllm_decode_app(fake: Fake, ledger: Ledger) -> Starlette:
    """vLLM's decode half (see the module docstring)."""
    tok = load_tokenizer()

    @_recorded(fake, ledger)
    async def completions(request: Request, body: dict[str, Any]) -> Response:
        params = body.get("kv_transfer_params")
        if not isinstance(params, dict) or params.get("do_remote_prefill") is not True:
            return _error(400, "a decode request carries the prefill's kv_transfer_params")
        entry = ledger.transfers.get((params.get("remote_engine_id"), params.get("remote_request_id")))
        if entry is None or entry["params"] != params or entry["read"]:
            return _error(400, "no KV blocks to read for these kv_transfer_params (unknown, changed or already read)")
        if entry["prompt"] != body.get("prompt"):
            return _error(400, "the prompt is not the one prefilled")
        entry["read"] = True
        if body.get("stream") is not True:
            return _error(400, "this fake decodes streams only")
        out = tok.encode_ordinary(fake.text) + [EOS]
        n = len(body["prompt"])

        async def frames() -> Any:
            base = {"id": "cmpl-d", "object": "text_completion", "created": int(time.time()), "model": body.get("model")}
            await fake.held()
            for k in range(0, len(out), 3):
                last = k + 3 >= len(out)
                yield b"data: " + orjson.dumps({**base, "choices": [{"index": 0, "text": "", "token_ids": out[k:k + 3],
                                                                      "finish_reason": "stop" if last else None}]}) + b"\n\n"
                await asyncio.sleep(fake.delay)
            usage = {"prompt_tokens": n, "completion_tokens": len(out), "total_tokens": n + len(out),
                     "prompt_tokens_details": {"cached_tokens": n}}  # all of it came from the prefill server
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[*_common(fake), Route("/v1/completions", completions, methods=["POST"])])


def _bootstrap_error(body: dict[str, Any]) -> str | None:
    host, port, room = body.get("bootstrap_host"), body.get("bootstrap_port"), body.get("bootstrap_room")
    if not isinstance(host, str) or not host:
        return "bootstrap_host missing"
    if type(port) is not int or not 0 < port < 65536:
        return "bootstrap_port missing"
    if type(room) is not int or not 0 <= room < 2**63:
        return "bootstrap_room must be an integer below 2**63"
    return None


def sglang_prefill_app(fake: Fake, ledger: Ledger) -> Starlette:
    """SGLang's prefill half (see the module docstring)."""

    @_recorded(fake, ledger)
    async def generate(request: Request, body: dict[str, Any]) -> Response:
        why = _bootstrap_error(body)
        if why is None and (body["bootstrap_host"], body["bootstrap_port"]) != ("127.0.0.1", fake.bootstrap_port):
            why = "bootstrap_host / bootstrap_port are not this prefill server's"
        if why is not None:
            return _error(400, why)
        ids = body.get("input_ids")
        await asyncio.sleep(0.05)  # the prefill takes a moment; the decode server waits for it
        ledger.transfers[body["bootstrap_room"]] = {"prompt": ids, "host": body["bootstrap_host"],
                                                     "port": body["bootstrap_port"]}
        meta = {"id": body.get("rid"), "finish_reason": {"type": "length", "length": 1}, "prompt_tokens": len(ids),
                "completion_tokens": 1, "cached_tokens": fake.cached(ids)}
        return JSONResponse({"text": "", "output_ids": [19923], "meta_info": meta})

    return Starlette(routes=[*_common(fake), Route("/generate", generate, methods=["POST"])])


def sglang_decode_app(fake: Fake, ledger: Ledger) -> Starlette:
    """SGLang's decode half (see the module docstring): waits up to 3 s for the room's prefill."""
    tok = load_tokenizer()

    @_recorded(fake, ledger)
    async def generate(request: Request, body: dict[str, Any]) -> Response:
        why = _bootstrap_error(body)
        if why is not None:
            return _error(400, why)
        out = tok.encode_ordinary(fake.text) + [EOS]
        ids = body.get("input_ids")

        async def frames() -> Any:
            deadline = time.monotonic() + 3
            entry = None
            while entry is None and time.monotonic() < deadline:
                entry = ledger.transfers.get(body["bootstrap_room"])
                await asyncio.sleep(0.01)
            ok = entry is not None and entry["prompt"] == ids and (entry["host"], entry["port"]) == (
                body["bootstrap_host"], body["bootstrap_port"])
            if not ok:
                meta = {"id": body.get("rid"), "finish_reason": {"type": "abort", "message": "KV transfer failed"},
                        "prompt_tokens": len(ids), "completion_tokens": 0, "cached_tokens": 0}
                yield b"data: " + orjson.dumps({"text": "", "output_ids": [], "meta_info": meta}) + b"\n\n"
                yield b"data: [DONE]\n\n"
                return
            for k in range(0, len(out), 3):
                end = min(k + 3, len(out))
                meta = {"id": body.get("rid"), "finish_reason": {"type": "stop", "matched": EOS} if end == len(out) else None,
                        "prompt_tokens": len(ids), "completion_tokens": end, "cached_tokens": len(ids)}
                yield b"data: " + orjson.dumps({"text": "", "output_ids": out[:end], "meta_info": meta}) + b"\n\n"
                await asyncio.sleep(fake.delay)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def abort(request: Request) -> Response:
        ledger.seen.append((f"{fake.name}:abort", orjson.loads(await request.body())))
        return Response(status_code=200)

    return Starlette(routes=[*_common(fake), Route("/generate", generate, methods=["POST"]),
                             Route("/abort_request", abort, methods=["POST"])])


def generate_prefill_app(fake: Fake, ledger: Ledger) -> Starlette:
    """vLLM's ``/inference/v1/generate`` as a prefill server: the same exchange as
    :func:`vllm_prefill_app` with a ``GenerateRequest`` (``max_tokens`` inside ``sampling_params``)."""
    engine_id = f"engine-{fake.name}"

    @_recorded(fake, ledger)
    async def generate(request: Request, body: dict[str, Any]) -> Response:
        sp = body.get("sampling_params") or {}
        if body.get("kv_transfer_params") != PREFILL_TRANSFER or body.get("stream") is not False or sp.get("max_tokens") != 1:
            return _error(400, "not a prefill GenerateRequest (kv_transfer_params, stream false, max_tokens 1)")
        ids = body["token_ids"]
        rid = f"generate-tokens-{body.get('request_id')}"
        params = {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [0],
                  "remote_engine_id": engine_id, "remote_request_id": rid, "remote_host": "127.0.0.1",
                  "remote_port": request.url.port, "tp_size": 1}
        ledger.transfers[(engine_id, rid)] = {"params": params, "prompt": ids, "read": False}
        return JSONResponse({"request_id": body.get("request_id"), "model": body.get("model"), "choices": [
            {"index": 0, "token_ids": [19923], "finish_reason": "length", "logprobs": None}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1,
                      "prompt_tokens_details": {"cached_tokens": fake.cached(ids)}},
            "kv_transfer_params": params})

    return Starlette(routes=[*_common(fake), Route("/inference/v1/generate", generate, methods=["POST"])])


def generate_decode_app(fake: Fake, ledger: Ledger) -> Starlette:
    """vLLM's ``/inference/v1/generate`` as a decode server (the prefill's parameters, read once; the
    generate stream: new ids per frame, a usage frame, ``[DONE]``)."""
    tok = load_tokenizer()

    @_recorded(fake, ledger)
    async def generate(request: Request, body: dict[str, Any]) -> Response:
        params = body.get("kv_transfer_params") or {}
        entry = ledger.transfers.get((params.get("remote_engine_id"), params.get("remote_request_id")))
        if entry is None or entry["params"] != params or entry["read"] or entry["prompt"] != body.get("token_ids"):
            return _error(400, "no KV blocks to read for these kv_transfer_params")
        entry["read"] = True
        out = tok.encode_ordinary(fake.text) + [EOS]
        n = len(body["token_ids"])

        async def frames() -> Any:
            for k in range(0, len(out), 3):
                fin = "stop" if k + 3 >= len(out) else None
                yield b"data: " + orjson.dumps({"request_id": body["request_id"], "choices": [
                    {"index": 0, "token_ids": out[k:k + 3], "finish_reason": fin, "logprobs": None}]}) + b"\n\n"
            usage = {"prompt_tokens": n, "completion_tokens": len(out), "total_tokens": n + len(out),
                     "prompt_tokens_details": {"cached_tokens": n}}
            yield b"data: " + orjson.dumps({"request_id": body["request_id"], "choices": [], "usage": usage}) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[*_common(fake), Route("/inference/v1/generate", generate, methods=["POST"])])
