"""``sglang+http://HOST:PORT``: SGLang's native ``POST /generate`` with ``input_ids``.

Wire format (SGLang 0.5 ``GenerateReqInput`` and ``docs/basic_usage/sampling_params.md``): the
request sends ``input_ids``, ``sampling_params`` (``max_new_tokens`` always, ``temperature``,
``top_p``, ``stop_token_ids``, ``skip_special_tokens: false``, ``no_stop_trim: true``, the seed as
``sampling_seed``, the request's ``top_k``, ``min_p``, ``presence_penalty``, ``frequency_penalty``,
``repetition_penalty``, ``logit_bias``, ``min_tokens`` as ``min_new_tokens``, ``n``, and one
constraint: the turn grammar as ``structural_tag`` (JSON text; SGLang's default xgrammar backend)
or, with ``&grammar=lark``, as ``ebnf`` (the llguidance Lark; ``--grammar-backend llguidance``), or a
``response_format`` as ``json_schema`` / ``regex``), ``stream``, ``rid`` (the request id), logprob fields and
``cache_salt``. Each ``data:`` frame carries ``output_ids`` — cumulative by default, only the new
ids with ``incremental_streaming_output``; both are handled (new ids are ``output_ids[seen:]`` when
``len(output_ids) == meta_info.completion_tokens``, else all of ``output_ids``) — and ``meta_info``
(``finish_reason`` ``{"type": "stop"|"length"|"abort", …}``, ``prompt_tokens``, ``cached_tokens``).
SGLang aborts a disconnected stream only after 2 s, so closing a request early also sends
``POST /abort_request {"rid": …}``. SGLang compiles grammars in
its scheduler, after the stream has started, so it refuses one (a grammar it cannot compile; any
grammar with ``--grammar-backend none`` or ``--skip-tokenizer-init``) inside the stream: an
``error`` frame (its tokenizer manager raising ``ValueError``) or, in newer versions, an ``abort``
finish with ``status_code`` 400 (``FINISH_ABORT(…, BAD_REQUEST)``), before any id. Both are the
engine refusing the request (``bad_request``: the client's 400), like vLLM's 400.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from recipe.conversation import ExtraSampling
from recipe.serve.engines.base import EngineDelta, EngineError, EngineRequest
from recipe.serve.engines.http import HTTPEngine, count, refusal, sse_objects, structured_output

if TYPE_CHECKING:
    from recipe.schema.turn import OutputGrammar

__all__ = ["SGLangEngine", "sglang_body"]


def sglang_body(req: EngineRequest, grammar: OutputGrammar | None = None, form: str = "structural_tag") -> dict[str, Any]:
    """The ``/generate`` request body for ``req``: with ``grammar`` (the turn grammar, sent as
    ``form``) its ``structural_tag`` / ``ebnf``, else the plain format fields when they apply."""
    params: dict[str, Any] = {
        "max_new_tokens": req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stop_token_ids": list(req.stop_token_ids),
        "skip_special_tokens": False,
        "no_stop_trim": True,
    }
    if req.seed is not None:
        params["sampling_seed"] = req.seed
    x = req.extra
    if x is not None:
        _extra_params(params, x)
    so = None if grammar is not None else structured_output(req)
    if grammar is not None:
        if form == "lark":
            params["ebnf"] = grammar.lark
        else:
            params["structural_tag"] = grammar.engine_fields("sglang")["structural_tag"]
        params["stop_token_ids"] = list(dict.fromkeys([*req.stop_token_ids, *grammar.stop_token_ids]))
    elif so is not None:
        kind, value = so
        if kind == "regex":
            params["regex"] = value
        else:
            params["json_schema"] = value or '{"type": "object"}'
    body: dict[str, Any] = {"input_ids": list(req.token_ids), "sampling_params": params, "stream": True,
                            "rid": req.request_id}
    if req.logprobs is not None:
        body["return_logprob"] = True
        body["top_logprobs_num"] = req.logprobs
        body["logprob_start_len"] = -1
    if req.cache_salt:
        body["cache_salt"] = req.cache_salt
    return body


def _extra_params(params: dict[str, Any], x: ExtraSampling) -> None:
    """The request's further sampling fields under SGLang's ``sampling_params`` names
    (``min_tokens`` is ``min_new_tokens``); ``n`` only when above 1."""
    for name in ("top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"):
        value = getattr(x, name)
        if value is not None:
            params[name] = value
    if x.min_tokens is not None:
        params["min_new_tokens"] = x.min_tokens
    if x.logit_bias is not None:
        params["logit_bias"] = {str(tid): bias for tid, bias in x.logit_bias}
    if x.n > 1:
        params["n"] = x.n


def _pairs(meta: dict[str, Any], start: int, end: int) -> list[tuple[float, list[tuple[int, float]]]] | None:
    """``meta_info.output_token_logprobs`` ``[[logprob, id, text], …]`` (+ ``output_top_logprobs``)
    entries ``start:end`` as CompletionStream pairs, or None when absent or short."""
    vals = meta.get("output_token_logprobs")
    if not isinstance(vals, list) or len(vals) < end:
        return None
    tops = meta.get("output_top_logprobs")
    out = []
    try:
        for i in range(start, end):
            top = tops[i] if isinstance(tops, list) and i < len(tops) and tops[i] else []
            out.append((_logprob(vals[i]), [(_id(t), _logprob(t)) for t in top]))
    except (TypeError, IndexError, KeyError):
        raise EngineError("protocol", f"SGLang logprobs are not [logprob, id, text] entries: {str(vals[start:end])[:200]}") from None
    return out


def _logprob(entry: Any) -> float:
    value = entry[0]
    if type(value) not in (int, float):
        raise TypeError
    return float(value)


def _id(entry: Any) -> int:
    value = entry[1]
    if type(value) is not int:
        raise TypeError
    return value


class SGLangEngine(HTTPEngine):
    """An SGLang server (see the module docstring). Arguments as :class:`HTTPEngine`."""

    path = "/generate"
    serves_n = True
    #: the port of this server's P/D bootstrap server (``--disaggregation-bootstrap-port``; the spec's
    #: ``&bootstrap_port=``), which a prefill replica of a P/D pool names to the decode replica
    bootstrap_port: int | None = None

    def attempt(self, req: EngineRequest, grammar: OutputGrammar | None,
                fields: Mapping[str, Any] | None = None) -> AsyncIterator[EngineDelta]:
        """One ``/generate`` stream for ``req`` (see :meth:`HTTPEngine.generate`), with ``fields``
        added to the body's top level (P/D: :mod:`recipe.serve.engines.disagg`)."""
        return self._attempt(req, grammar, fields)

    async def _attempt(self, req: EngineRequest, grammar: OutputGrammar | None,
                       fields: Mapping[str, Any] | None = None) -> AsyncIterator[EngineDelta]:
        # with n > 1 SGLang runs one sub-request per choice: each frame names its choice in
        # ``index`` (and its sub-request in ``meta_info.id``), each choice's output_ids are its own
        n = req.extra.n if req.extra is not None else 1
        finished = False
        rids = {req.request_id}
        try:
            body = sglang_body(req, grammar, self.grammar_form)
            body.update(fields or {})
            async with self.stream(self.path, body) as response:
                seen = [0] * n
                done: set[int] = set()
                objects = sse_objects(response)
                async for obj in objects:
                    err = obj.get("error")
                    if err:
                        finished = True
                        message = err.get("message") if isinstance(err, dict) else str(err)
                        if not any(seen):  # a ValueError before any output: SGLang refused the request
                            raise refusal(400, str(message))
                        raise EngineError("failed", f"engine error: {message}")
                    out = obj.get("output_ids")
                    meta = obj.get("meta_info") or {}
                    if not isinstance(out, list) or not all(type(i) is int and i >= 0 for i in out) or not isinstance(meta, dict):
                        raise EngineError("protocol", f"SGLang frame without output_ids / meta_info: {str(obj)[:200]}")
                    k = obj.get("index", 0) if n > 1 else 0
                    if type(k) is not int or not 0 <= k < n:
                        raise EngineError("protocol", f"SGLang frame index {k!r} outside 0..{n - 1}")
                    if n > 1 and isinstance(meta.get("id"), str):
                        rids.add(meta["id"])
                    if k in done:
                        continue  # ids after that choice's finish
                    s = seen[k]
                    total = meta.get("completion_tokens")
                    cumulative = total is not None and len(out) == total and len(out) >= s
                    new = out[s:] if cumulative else out
                    lps = None
                    if req.logprobs is not None:
                        lps = _pairs(meta, s, len(out)) if cumulative else _pairs(meta, 0, len(out))
                    seen[k] = s + len(new)
                    fin = meta.get("finish_reason")
                    finish = None
                    if fin is not None:
                        done.add(k)
                        finished = len(done) == n
                        kind = fin.get("type") if isinstance(fin, dict) else fin
                        if kind not in ("stop", "length"):  # (with n > 1 the other choices are aborted)
                            message = fin.get("message") if isinstance(fin, dict) else None
                            status = fin.get("status_code") if isinstance(fin, dict) else None
                            if kind == "abort" and status == 400 and not any(seen):
                                raise refusal(400, str(message))
                            raise EngineError("failed", f"SGLang ended the request: {kind}{f': {message}' if message else ''}")
                        finish = kind
                    if finished:  # the request is over: its [DONE] is read, so the connection serves the next one
                        try:
                            yield EngineDelta(new, lps, finish, count(meta.get("prompt_tokens")), count(meta.get("cached_tokens")), None, k)
                        finally:
                            await objects.finish()
                        return
                    if new or finish is not None:
                        yield EngineDelta(new, lps, finish, count(meta.get("prompt_tokens")), count(meta.get("cached_tokens")),
                                          None, k)
                raise EngineError("unavailable", "SGLang closed the stream before the output finished")
        finally:
            if not finished:
                for rid in sorted(rids):
                    await self.post("/abort_request", {"rid": rid})
