"""``vllm+http://HOST:PORT``: vLLM's OpenAI-compatible ``POST /v1/completions`` with a token-id prompt.

Wire format (vLLM v0.12 and later; ``vllm/entrypoints/openai/completion/protocol.py``): the request
sends ``prompt`` as token ids, ``max_tokens`` always (vLLM defaults it to 16), ``stream`` with
``stream_options.include_usage``, ``return_token_ids`` (each chunk's ``choices[0].token_ids`` holds
that chunk's new ids), ``skip_special_tokens: false``, ``stop_token_ids``, sampling (``temperature``,
``top_p``, ``seed`` and the request's ``top_k``, ``min_p``, ``presence_penalty``,
``frequency_penalty``, ``repetition_penalty``, ``logit_bias``, ``min_tokens``, ``n``), ``logprobs``
with ``return_tokens_as_token_ids`` (alternatives keyed ``"token_id:N"``), ``cache_salt`` (the
tenant's) and the constraint in ``structured_outputs`` — exactly one of its fields (the ``guided_*``
fields were removed in v0.12 and would be ignored): the turn grammar as ``structural_tag`` (the
structural-tag JSON text; vLLM's xgrammar backend, which its default ``auto`` picks for it) or, with
``&grammar=lark``, as ``grammar`` (the llguidance Lark; start vLLM with
``--structured-outputs-config.backend guidance``: under ``auto`` vLLM first runs a Lark grammar
through its own Lark-to-EBNF conversion for xgrammar, which this grammar is not written for); or a
``response_format`` as
``json`` / ``json_object`` / ``regex``. The usage chunk (``choices: []``) carries
``prompt_tokens_details.cached_tokens`` when vLLM runs with ``--enable-prompt-tokens-details``; the
connector holds the finishing delta until it arrives, so the final usage has the engine's count.
Cancelling closes the HTTP stream: vLLM aborts a request whose client went away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from recipe.conversation import ExtraSampling
from recipe.serve.engines.base import VOCABULARY_PROBE, EngineDelta, EngineError, EngineInfo, EngineRequest
from recipe.serve.engines.http import (HTTPEngine, choice_list, count, error_frame, rank_headers, sse_objects,
                                        structured_output, token_ids)

if TYPE_CHECKING:
    from recipe.schema.turn import OutputGrammar

__all__ = ["VLLMEngine", "vllm_body"]

_FINISH = {"stop": "stop", "length": "length"}


#: GrammarForm -> the OutputGrammar.engine_fields name whose ``structured_outputs`` carries it.
_FIELDS = {"structural_tag": "vllm", "lark": "vllm-guidance"}


def vllm_body(req: EngineRequest, model: str | None = None, grammar: OutputGrammar | None = None,
              form: str = "structural_tag") -> dict[str, Any]:
    """The ``/v1/completions`` request body for ``req``: with ``grammar`` (the turn grammar, sent as
    ``form``) its ``structured_outputs``, else the plain format fields when they apply."""
    body: dict[str, Any] = {
        "prompt": list(req.token_ids),
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
        "skip_special_tokens": False,
        "stop_token_ids": list(req.stop_token_ids),
        "request_id": req.request_id,
    }
    if model is not None:
        body["model"] = model
    if req.seed is not None:
        body["seed"] = req.seed
    if req.logprobs is not None:
        body["logprobs"] = req.logprobs
        body["return_tokens_as_token_ids"] = True
    if req.cache_salt:
        body["cache_salt"] = req.cache_salt
    x = req.extra
    if x is not None:
        _extra_fields(body, x)
    if grammar is not None:
        fields = grammar.engine_fields(_FIELDS[form])  # type: ignore[arg-type]
        body["structured_outputs"] = fields["structured_outputs"]
        body["stop_token_ids"] = list(dict.fromkeys([*req.stop_token_ids, *fields["stop_token_ids"]]))
        return body
    so = structured_output(req)
    if so is not None:
        kind, value = so
        body["structured_outputs"] = {"json_object": True} if kind == "json_object" else {kind: value}
    return body


def _extra_fields(body: dict[str, Any], x: ExtraSampling) -> None:
    """The request's further sampling fields under vLLM's names (``SamplingParams``; the same names
    on ``/v1/completions``); ``n`` only when above 1."""
    for name in ("top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens"):
        value = getattr(x, name)
        if value is not None:
            body[name] = value
    if x.logit_bias is not None:
        body["logit_bias"] = {str(tid): bias for tid, bias in x.logit_bias}
    if x.n > 1:
        body["n"] = x.n


def _token_id(key: Any) -> int:
    if isinstance(key, str) and key.startswith("token_id:") and key[9:].isascii() and key[9:].isdigit():
        return int(key[9:])
    raise EngineError("protocol", f"vLLM logprob token {key!r} is not 'token_id:N' (return_tokens_as_token_ids)")


def _logprobs(lp: Any, n: int, top_n: int) -> list[tuple[float, list[tuple[int, float]]]] | None:
    """Completions logprobs ``{tokens, token_logprobs, top_logprobs}`` of ``n`` ids as CompletionStream
    pairs, with the ``top_n`` most likely alternatives per token: vLLM's ``top_logprobs`` holds the
    top N *and* the sampled token when that is not among them (N + 1 entries; one for N = 0), where
    the APIs promise exactly N."""
    if not isinstance(lp, dict):
        return None
    values: Sequence[Any] = lp.get("token_logprobs") or []
    tops: Sequence[Any] = lp.get("top_logprobs") or [None] * len(values)
    if not isinstance(values, list) or not isinstance(tops, list) or len(values) != n or len(tops) != n:
        return None
    out = []
    for value, top in zip(values, tops):
        if not isinstance(top or {}, dict) or not all(_number(v) for v in (top or {}).values()) or not (
                value is None or _number(value)):
            raise EngineError("protocol", f"vLLM logprobs entry is not numbers: {str((value, top))[:200]}")
        alts = [(_token_id(k), float(v)) for k, v in (top or {}).items()]
        if len(alts) > top_n:
            alts = sorted(alts, key=lambda a: -a[1])[:top_n] if top_n > 0 else []
        out.append((float(value) if value is not None else 0.0, alts))
    return out


def _number(value: Any) -> bool:
    return type(value) in (int, float)


class VLLMEngine(HTTPEngine):
    """A vLLM server (see the module docstring). Arguments as :class:`HTTPEngine`."""

    path = "/v1/completions"
    serves_n = True

    async def probe_ids(self, info: EngineInfo) -> tuple[int, ...] | None:
        """vLLM's ids for :data:`~recipe.serve.engines.base.VOCABULARY_PROBE`: ``POST /tokenize``
        (``add_special_tokens`` false: no BOS; special tokens in the text are encoded as such), or
        None when it does not answer a token list (an engine started with ``--skip-tokenizer-init``,
        an older server). Never raises."""
        body: dict[str, Any] = {"prompt": VOCABULARY_PROBE, "add_special_tokens": False}
        if info.models:
            body["model"] = info.models[0]
        try:
            response = await self._client.post("/tokenize", json=body, timeout=self._info_timeout)
            tokens = orjson.loads(response.content).get("tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, orjson.JSONDecodeError, AttributeError):
            return None
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            return None
        return tuple(tokens)

    def attempt(self, req: EngineRequest, grammar: OutputGrammar | None,
                fields: Mapping[str, Any] | None = None) -> AsyncIterator[EngineDelta]:
        """One ``/v1/completions`` stream for ``req`` (see :meth:`HTTPEngine.generate`); with
        ``extra.n`` > 1 its choices' deltas, each tagged with its ``index``. ``fields`` are added to
        the body's top level (P/D's ``kv_transfer_params``: :mod:`recipe.serve.engines.disagg`)."""
        return self._attempt(req, grammar, req.extra.n if req.extra is not None and req.extra.n > 1 else 1, fields)

    async def _attempt(self, req: EngineRequest, grammar: OutputGrammar | None, n: int,
                       fields: Mapping[str, Any] | None = None) -> AsyncIterator[EngineDelta]:
        """The stream of an ``n``-choice request (one choice: ``n`` = 1): chunks carry
        ``choices[k].index``; each choice's finishing delta is held until the usage chunk, which ends
        the request (its prompt and cached counts go on the last one)."""
        body = vllm_body(req, self.model, grammar, self.grammar_form)
        body.update(fields or {})
        async with self.stream(self.path, body, rank_headers(req)) as response:
            held: dict[int, EngineDelta] = {}
            prompt: int | None = None
            objects = sse_objects(response)
            async for obj in objects:
                err = obj.get("error")
                if err:  # vLLM reports a refusal it finds after the 200 (an invalid grammar …) in the stream
                    raise error_frame(err)
                if isinstance(obj.get("usage"), dict) and len(held) == n:
                    usage = obj["usage"]
                    details = usage.get("prompt_tokens_details")
                    try:
                        for k in range(n - 1):
                            yield held[k]
                        d = held[n - 1]
                        yield EngineDelta(d.token_ids, d.logprobs, d.finish, count(usage.get("prompt_tokens", prompt)),
                                          count(details.get("cached_tokens")) if isinstance(details, dict) else None,
                                          None, d.index)
                    finally:  # the request is over: read its [DONE], so the connection serves the next one
                        await objects.finish()
                    return
                for c in choice_list(obj.get("choices"), "vLLM"):
                    k = c.get("index")
                    if type(k) is not int or not 0 <= k < n:
                        raise EngineError("protocol", f"vLLM choice index {k!r} outside 0..{n - 1}")
                    if k in held:
                        continue  # ids after that choice's finish: an engine's finish is final
                    if prompt is None and isinstance(c.get("prompt_token_ids"), list):
                        prompt = len(c["prompt_token_ids"])
                    ids = token_ids(c.get("token_ids"), "vLLM")
                    lps = _logprobs(c.get("logprobs"), len(ids), req.logprobs) if req.logprobs is not None else None
                    reason = c.get("finish_reason")
                    if reason is not None:
                        finish = _FINISH.get(reason) if isinstance(reason, str) else None
                        if finish is None:
                            raise EngineError("failed", f"vLLM ended the request: finish_reason {reason!r} "
                                                        f"(stop_reason {c.get('stop_reason')!r})")
                        held[k] = EngineDelta(ids, lps, finish, prompt, None, None, k)
                    elif ids:
                        yield EngineDelta(ids, lps, None, prompt, None, None, k)
            if len(held) < n:
                raise EngineError("unavailable", "vLLM closed the stream before the output finished")
            await objects.finish()
            for k in range(n):
                yield held[k]
