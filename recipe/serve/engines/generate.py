"""``generate+http://HOST:PORT``: the token-in/token-out ``POST /inference/v1/generate`` protocol.

vLLM serves it with ``--enable-scale-out`` (or ``--tokens-only``, vLLM 0.32); llm-d's inference
simulator and engines behind llm-d / Dynamo speak it too. Wire format (vLLM 0.32,
``vllm/entrypoints/scale_out/token_in_token_out/``):

- request: a ``GenerateRequest`` (:func:`generate_body`, the same body ``recipe serve``'s render
  routes answer): ``token_ids``, ``sampling_params`` (``max_tokens``, sampling, the EOS ids in
  ``stop_token_ids``, ``logprobs``, the output grammar in ``structured_outputs``), ``stream: true``
  with ``stream_options.include_usage``, ``output_mode: "tokens"``, ``cache_salt``;
- response: SSE ``data:`` frames, each ``{request_id, choices: [{index, token_ids, finish_reason,
  logprobs}]}`` with the new ids only (vLLM streams deltas), then one usage frame (``choices: []``,
  ``usage.prompt_tokens``, ``usage.prompt_tokens_details.cached_tokens`` when the engine runs with
  ``--enable-prompt-tokens-details``), then ``data: [DONE]``; an error is a frame ``{"error": {…}}``;
  logprobs are ``{content: [{token_id, logprob, top_logprobs: [{token_id, logprob}]}]}``;
- cancelling closes the stream (vLLM aborts a request whose client went away) and, to be sure, posts
  ``POST /inference/v1/abort_requests {"request_ids": ["generate-tokens-<id>"]}`` (the engine
  prefixes the id it was sent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from recipe.serve.engines.base import EngineDelta, EngineError, EngineRequest
from recipe.serve.engines.http import (HTTPEngine, choice_list, count, error_frame, rank_headers, sse_objects,
                                        structured_output, token_ids)

if TYPE_CHECKING:
    from recipe.schema.turn import OutputGrammar

__all__ = ["GenerateEngine", "generate_body", "sampling_params", "GENERATE_REQUEST_FIELDS"]

#: vLLM 0.32's ``GenerateRequest`` fields, in ``model_dump()`` order.
GENERATE_REQUEST_FIELDS = ("request_id", "token_ids", "token_offsets", "features", "content_parts", "sampling_params",
                           "model", "reasoning_ended", "reasoning_parser_kwargs", "return_token_ids", "output_mode",
                           "stream", "stream_options", "cache_salt", "priority", "kv_transfer_params",
                           "ec_transfer_params")

#: ``StructuredOutputsParams`` as vLLM 0.32 writes it inside ``sampling_params``: every field, in order.
_STRUCTURED_FIELDS: dict[str, Any] = {
    "json": None, "regex": None, "choice": None, "grammar": None, "json_object": None, "disable_any_whitespace": False,
    "disable_additional_properties": False, "whitespace_pattern": None, "structural_tag": None, "_backend": None,
    "_backend_was_auto": False}
#: vLLM's ``RequestOutputKind``: DELTA for a streamed request, FINAL_ONLY otherwise.
_DELTA, _FINAL_ONLY = 1, 2


def sampling_params(req: EngineRequest, structured: Mapping[str, Any] | None, stream: bool,
                    extra_args: bool = False) -> dict[str, Any]:
    """``req``'s sampling as vLLM 0.32's render writes its ``SamplingParams``: the keys its
    ``to_sampling_params`` sets, in the struct's field order (``presence_penalty``,
    ``frequency_penalty``, ``repetition_penalty``, ``temperature``, ``top_p``, ``top_k`` when set,
    ``min_p``, ``seed`` when set, ``stop``, ``stop_token_ids``, ``max_tokens``, ``min_tokens`` and
    ``logprobs`` when set, ``output_kind``, ``skip_clone``, ``structured_outputs`` when a grammar or
    format applies, ``logit_bias`` when set, ``extra_args`` for Responses, ``bad_words``,
    ``skip_reading_prefix_cache``), ``n`` first when above 1. The request's penalties and ``min_p``
    replace vLLM's defaults (0, 0, 1, 0).

    Args:
        req: the engine request.
        structured: the ``structured_outputs`` fields (one of vLLM's keys), or None.
        stream: the request streams.
        extra_args: write ``extra_args: {}`` (vLLM's Responses render does).
    """
    x = req.extra
    out: dict[str, Any] = {}
    if x is not None and x.n > 1:
        out["n"] = x.n

    def given(name: str, default: float) -> float:
        value = getattr(x, name, None) if x is not None else None
        return float(value) if value is not None else default

    out.update(presence_penalty=given("presence_penalty", 0.0), frequency_penalty=given("frequency_penalty", 0.0),
               repetition_penalty=given("repetition_penalty", 1.0), temperature=float(req.temperature),
               top_p=float(req.top_p))
    if x is not None and x.top_k is not None:
        out["top_k"] = x.top_k
    out["min_p"] = given("min_p", 0.0)
    if req.seed is not None:
        out["seed"] = req.seed
    out.update(stop=[], stop_token_ids=list(req.stop_token_ids), max_tokens=req.max_tokens)
    if x is not None and x.min_tokens is not None:
        out["min_tokens"] = x.min_tokens
    if req.logprobs is not None:
        out["logprobs"] = req.logprobs
    out.update(output_kind=_DELTA if stream else _FINAL_ONLY, skip_clone=True)
    if structured:
        out["structured_outputs"] = {**_STRUCTURED_FIELDS, **structured}
    if x is not None and x.logit_bias is not None:
        out["logit_bias"] = {str(tid): bias for tid, bias in x.logit_bias}
    if extra_args:
        out["extra_args"] = {}
    out.update(bad_words=[], skip_reading_prefix_cache=False)
    return out


def _structured(req: EngineRequest, grammar: OutputGrammar | None, form: str) -> tuple[dict[str, Any] | None, list[int]]:
    """The ``structured_outputs`` fields and the stop ids for ``req`` (the vLLM connector's rule: the
    turn grammar as a structural tag or Lark, else a plain JSON / regex ``response_format``)."""
    stops = list(req.stop_token_ids)
    if grammar is not None:
        fields = grammar.engine_fields("vllm-guidance" if form == "lark" else "vllm")
        return dict(fields["structured_outputs"]), list(dict.fromkeys([*stops, *fields["stop_token_ids"]]))
    so = structured_output(req)
    if so is None:
        return None, stops
    kind, value = so
    return ({"json_object": True} if kind == "json_object" else {kind: value}), stops


def generate_body(req: EngineRequest, grammar: OutputGrammar | None = None, *, form: str = "structural_tag",
                  model: str | None = None, stream: bool = True, stream_options: dict[str, Any] | None = None,
                  priority: int = 0, extra_args: bool = False) -> dict[str, Any]:
    """The ``GenerateRequest`` for ``req``: vLLM 0.32's fields in its order (see the module docstring).

    Args:
        req: the engine request (its ``request_id``, ids, sampling, ``cache_salt``).
        grammar: the turn grammar to send (None: the plain ``response_format`` fields, if any).
        form: ``structural_tag`` or ``lark``.
        model: the ``model`` field (None: left null, the engine serves its own).
        stream: ask for a stream (``output_kind`` DELTA).
        stream_options: the ``stream_options`` object, or None.
        priority: vLLM's scheduling priority.
        extra_args: write ``sampling_params.extra_args: {}`` (as vLLM's Responses render).
    """
    structured, stops = _structured(req, grammar, form)
    if stops != list(req.stop_token_ids):
        req = replace(req, stop_token_ids=tuple(stops))
    return {
        "request_id": req.request_id,
        "token_ids": list(req.token_ids),
        "token_offsets": None,
        "features": None,
        "content_parts": None,
        "sampling_params": sampling_params(req, structured, stream, extra_args),
        "model": model,
        # the grammar covers the reasoning too: an engine with a reasoning parser applies it from token 0
        "reasoning_ended": True if structured else None,
        "reasoning_parser_kwargs": None,
        "return_token_ids": None,
        "output_mode": "tokens",
        "stream": stream,
        "stream_options": stream_options,
        "cache_salt": req.cache_salt or None,
        "priority": priority,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
    }


def token_logprobs(lp: Any, n: int) -> list[tuple[float, list[tuple[int, float]]]] | None:
    """A generate choice's ``logprobs`` (``{content: [{token_id, logprob, top_logprobs}]}``) as the
    output driver's pairs, one per new id; None when absent or not one entry per id.

    Raises:
        EngineError: ``protocol`` for an entry without numbers.
    """
    content = lp.get("content") if isinstance(lp, Mapping) else None
    if not isinstance(content, list) or len(content) != n:
        return None
    out = []
    for entry in content:
        try:
            alts = [(int(a["token_id"]), float(a["logprob"])) for a in entry.get("top_logprobs") or ()]
            out.append((float(entry["logprob"]), alts))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise EngineError("protocol", f"generate logprobs entry without token_id / logprob: {str(entry)[:200]}") from None
    return out


class GenerateEngine(HTTPEngine):
    """An engine reached through ``/inference/v1/generate`` (see the module docstring). Arguments as
    :class:`HTTPEngine`."""

    path = "/inference/v1/generate"

    def attempt(self, req: EngineRequest, grammar: OutputGrammar | None,
                fields: Mapping[str, Any] | None = None) -> AsyncIterator[EngineDelta]:
        """One ``/inference/v1/generate`` stream for ``req`` (see :meth:`HTTPEngine.generate`), with
        ``fields`` added to the body's top level (P/D's ``kv_transfer_params``:
        :mod:`recipe.serve.engines.disagg`)."""
        return self._attempt(req, grammar, fields)

    async def _attempt(self, req: EngineRequest, grammar: OutputGrammar | None,
                       fields: Mapping[str, Any] | None = None) -> AsyncIterator[EngineDelta]:
        if req.extra is not None and req.extra.n > 1:
            raise EngineError("bad_request", "n > 1 is not served over /inference/v1/generate by recipe's connector: "
                                             "send n separate requests")
        body = generate_body(req, grammar, form=self.grammar_form, model=self.model,
                             stream_options={"include_usage": True, "continuous_usage_stats": False})
        body.update(fields or {})
        finished = False
        try:
            async with self.stream(self.path, body, rank_headers(req)) as response:
                held: EngineDelta | None = None
                objects = sse_objects(response)
                async for obj in objects:
                    err = obj.get("error")
                    if err:
                        finished = True
                        raise error_frame(err)
                    usage = obj.get("usage")
                    choices = choice_list(obj.get("choices"), "generate")
                    if not choices and isinstance(usage, dict):
                        if held is not None:
                            details = usage.get("prompt_tokens_details")
                            finished = True
                            try:
                                yield EngineDelta(held.token_ids, held.logprobs, held.finish, count(usage.get("prompt_tokens")),
                                                  count(details.get("cached_tokens")) if isinstance(details, dict) else None)
                            finally:  # the request is over: its [DONE] is read, so the connection serves the next one
                                await objects.finish()
                            return
                        continue
                    if not choices or held is not None:
                        continue  # nothing new, or frames after the finish: an engine's finish is final
                    c = choices[0]
                    new = token_ids(c.get("token_ids"), "generate")
                    lps = token_logprobs(c.get("logprobs"), len(new)) if req.logprobs is not None else None
                    fin = c.get("finish_reason")
                    if fin is not None and (not isinstance(fin, str) or fin not in ("stop", "length")):
                        finished = True
                        raise EngineError("failed", f"the engine ended the request: {fin}")
                    if fin is not None:
                        held = EngineDelta(new, lps, fin)  # wait for the usage frame (its prompt / cached counts)
                        continue
                    if new:
                        yield EngineDelta(new, lps)
                if held is not None:
                    finished = True
                    yield held
                    return
                raise EngineError("unavailable", "the engine closed the stream before the output finished")
        finally:
            if not finished:
                await self.post("/inference/v1/abort_requests", {"request_ids": [f"generate-tokens-{req.request_id}"]})
