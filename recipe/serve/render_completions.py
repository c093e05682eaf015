"""vLLM's ``/v1/completions/render`` and ``/v1/completions/derender`` with DeepSeek-exact token ids.

A Completions request has no chat template: its ``prompt`` is the model's input as written. vLLM
0.32 (``vllm/entrypoints/scale_out/render/serving.py``, ``render_completion_request``) answers a
**list** of ``GenerateRequest`` bodies, one per prompt: ``prompt`` may be one text, a list of texts,
one list of token ids or a list of them (OpenAI's four forms). recipe answers the same list, field
for field (:data:`~recipe.serve.engines.generate.GENERATE_REQUEST_FIELDS`), with these rules:

- **ids**: a text is encoded as ordinary text in the model's vocabulary (the model the request names,
  its family's vocabulary or the server's ``--tokenizer``); DeepSeek's tokenizer configuration adds no
  BOS (``add_bos_token: false``), so nothing is prepended. A special token's spelling inside a text
  stays text (recipe never turns client text into special ids; vLLM's tokenizer would): a caller
  that means a special token sends ids. Token ids are taken as given, each checked against the
  vocabulary.
- **sampling_params**: what vLLM's ``CompletionRequest.to_sampling_params`` builds, written as its
  ``SamplingParams`` serialises (``msgspec`` with ``omit_defaults``: the fields that differ from the
  struct's defaults, in the struct's order, and always the penalties, ``temperature``, ``top_p`` and
  ``min_p``, which it sets afresh; ``top_p`` and ``min_p`` not for greedy sampling, which resets
  them): the OpenAI defaults (temperature 1, top_p 1, …),
  ``max_tokens`` 16 unless given, lowered to the room the context window leaves (vLLM's
  ``get_max_tokens``), ``stop`` / ``stop_token_ids`` / ``bad_words`` as lists,
  ``output_kind`` 1 (streamed) or 2, ``skip_clone: true``, ``skip_reading_prefix_cache: false``.
- **request ids**: ``cmpl-`` + the ``X-Request-Id`` header, else the body's ``request_id``, else 16
  hex digits; with several prompts each gets ``-<index>`` appended.
- Fields recipe does not honour are a 400 naming the field when set (``suffix``, ``echo``,
  ``prompt_embeds``, ``use_beam_search``, ``response_format``, ``structured_outputs``,
  ``prompt_logprobs``, ``truncate_prompt_tokens``, …) rather than dropped.

Derender (``POST /v1/completions/derender``, vLLM's ``DerenderCompletionRequest``):
``{generate_responses: [GenerateResponse, …], prompt_tokens?: [int, …], completion_request?, model?}``
→ one ``text_completion`` (vLLM's ``CompletionResponse`` fields, in order): each choice's text is its
``token_ids`` decoded (special ids left out unless ``completion_request.skip_special_tokens`` is
false), cut at the first of ``completion_request.stop``'s strings (vLLM's derender leaves that to
the engine, which in ``tokens`` mode does not cut), with OpenAI's completion ``logprobs`` when the
generate choice carries them. Streaming derender is not served.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ConfigDict

from recipe.api.common import check_model
from recipe.api.wire import WireModel, parse_body
from recipe.encodings.table import get_encoding
from recipe.errors import RequestError
from recipe.options import Options
from recipe.serve.errors import ServeError
from recipe.tokenizer import MissingSpecialTokenError, TokenIdError, Tokenizer

__all__ = ["CompletionRenderRequest", "render_completion", "derender_completion", "completion_sampling_params",
           "SAMPLING_DEFAULTS", "COMPLETION_RESPONSE_FIELDS"]

#: vLLM 0.32's ``SamplingParams`` fields that a Completions render can set, in the struct's order,
#: with the struct's defaults (``vllm/sampling_params.py``); a value equal to its default is not written.
SAMPLING_DEFAULTS: dict[str, Any] = {
    "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "temperature": 1.0,
    "top_p": 1.0, "top_k": 0, "min_p": 0.0, "seed": None, "stop": None, "stop_token_ids": None, "ignore_eos": False,
    "max_tokens": 16, "min_tokens": 0, "logprobs": None, "skip_special_tokens": True,
    "spaces_between_special_tokens": True, "include_stop_str_in_output": False, "output_kind": 0, "skip_clone": False,
    "output_text_buffer_length": 0, "logit_bias": None, "allowed_token_ids": None, "bad_words": None,
    "skip_reading_prefix_cache": None,
}
#: vLLM 0.32's ``CompletionResponse`` fields, in order.
COMPLETION_RESPONSE_FIELDS = ("id", "object", "created", "model", "choices", "service_tier", "system_fingerprint",
                              "usage", "kv_transfer_params", "ec_transfer_params", "metrics")
_CHOICE_FIELDS = ("index", "text", "logprobs", "finish_reason", "stop_reason", "token_ids", "prompt_logprobs",
                  "prompt_token_ids", "routed_experts")
#: Fields of vLLM's ``CompletionRequest`` recipe does not honour: set to anything but their default, a 400.
_NOT_SERVED: dict[str, Any] = {
    "suffix": None, "echo": False, "prompt_embeds": None, "use_beam_search": False, "best_of": None,
    "response_format": None, "structured_outputs": None, "prompt_logprobs": None, "logprob_token_ids": None,
    "truncate_prompt_tokens": None, "watermarking": None, "repetition_detection": None,
    "thinking_token_budget": None, "kv_transfer_params": None, "ec_transfer_params": None, "vllm_xargs": None,
    "stream_interval": None,
}
#: The floats vLLM's ``SamplingParams`` always writes (from_optional passes new float objects, which
#: msgspec's ``omit_defaults`` does not take for the default); ``top_p`` and ``min_p`` are reset to
#: the defaults themselves for greedy sampling (temperature 0) and then left out.
_ALWAYS = frozenset({"presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "min_p"})
_MAX_N = 128
_SAMPLING_EPS = 1e-5


class CompletionRenderRequest(WireModel):
    """The fields of an OpenAI Completions request (and vLLM's extensions) that the render honours;
    other keys are ignored except those in ``_NOT_SERVED``, refused when set. Types as vLLM's
    ``CompletionRequest``; ``prompt`` is required."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    model: str
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = 16
    temperature: float | int | None = None
    top_p: float | int | None = None
    top_k: int | None = None
    min_p: float | int | None = None
    presence_penalty: float | int | None = None
    frequency_penalty: float | int | None = None
    repetition_penalty: float | int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    n: int = 1
    logprobs: int | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: dict[str, float | int] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    add_special_tokens: bool = True
    request_id: str | None = None
    priority: int = 0
    user: str | None = None


def _bad(message: str, param: str) -> ServeError:
    return ServeError("invalid_request", message, param)


def _check(req: CompletionRenderRequest, body: Mapping[str, Any]) -> None:
    """The range checks vLLM makes (``SamplingParams._verify_args``, the request model's bounds)."""
    for name, default in _NOT_SERVED.items():
        value = body.get(name, default)
        if value is not None and value != default:
            raise _bad(f"{name} is not served by recipe's completions render", name)
    if not 1 <= req.n <= _MAX_N:
        raise _bad(f"n must be between 1 and {_MAX_N}", "n")
    if req.max_tokens is not None and req.max_tokens < 1:
        raise _bad("max_tokens must be at least 1", "max_tokens")
    for name in ("presence_penalty", "frequency_penalty"):
        value = getattr(req, name)
        if value is not None and not -2.0 <= value <= 2.0:
            raise _bad(f"{name} must be in [-2, 2], got {value}", name)
    if req.repetition_penalty is not None and not req.repetition_penalty > 0:
        raise _bad("repetition_penalty must be greater than 0", "repetition_penalty")
    if req.temperature is not None and not 0 <= req.temperature <= 2:
        raise _bad("temperature must be between 0 and 2", "temperature")
    if req.top_p is not None and not 0 < req.top_p <= 1:
        raise _bad("top_p must be in (0, 1]", "top_p")
    if req.min_p is not None and not 0 <= req.min_p <= 1:
        raise _bad("min_p must be in [0, 1]", "min_p")
    if req.top_k is not None and req.top_k < -1:
        raise _bad("top_k must be -1 (disable) or at least 0", "top_k")
    if req.logprobs is not None and not 0 <= req.logprobs <= 20:
        raise _bad("logprobs must be between 0 and 20", "logprobs")
    if req.min_tokens < 0 or (req.max_tokens is not None and req.min_tokens > req.max_tokens):
        raise _bad("min_tokens must be at least 0 and at most max_tokens", "min_tokens")
    if req.seed is not None and not -(2**63) <= req.seed < 2**63:
        raise _bad("seed must be a 64-bit integer", "seed")
    if not -(2**63) <= req.priority < 2**63:
        raise _bad("priority must be between -2**63 and 2**63-1", "priority")
    if req.n > 1 and req.temperature is not None and req.temperature < _SAMPLING_EPS:
        raise _bad("n must be 1 when using greedy sampling (temperature 0)", "n")
    for key in req.logit_bias or {}:
        if not key.lstrip("-").isdigit():
            raise _bad(f"logit_bias keys must be token ids, got {key!r}", f"logit_bias.{key}")
    if isinstance(req.prompt, list) and not req.prompt:
        raise _bad("prompt must not be empty", "prompt")


def _prompts(req: CompletionRenderRequest) -> list[str | list[int]]:
    p = req.prompt
    if isinstance(p, str):
        return [p]
    if all(isinstance(x, int) for x in p):
        return [list(p)]  # type: ignore[arg-type]
    return list(p)  # type: ignore[arg-type]


def vocabulary(model: str, options: Options, tokenizer: Tokenizer | None) -> Tokenizer:
    """The vocabulary ``model``'s prompts are encoded in: ``tokenizer`` (the server's) or the family's.

    Raises:
        RequestError: an unknown model (400 on ``model``).
        ServeError: the vocabulary lacks the family's special tokens (V4.1 without its vocabulary).
    """
    opts = options.for_model(model)
    enc = get_encoding(check_model(model, opts))
    tok = tokenizer if tokenizer is not None else enc.tokenizer()
    missing = enc.missing_special(tok)
    if missing is not None:
        note = MissingSpecialTokenError(missing, enc.name, enc.vocabulary_hint)
        raise _bad(f"The model {model} cannot be rendered with this server's vocabulary: {note}", "model")
    return tok


def completion_sampling_params(req: CompletionRenderRequest, max_tokens: int) -> dict[str, Any]:
    """``req``'s ``SamplingParams`` as vLLM 0.32's Completions render writes them (see the module
    docstring): the fields that differ from :data:`SAMPLING_DEFAULTS` and the sampling floats, in
    that order."""
    def pick(value: Any, default: float) -> float:
        return float(value) if value is not None else default

    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    values: dict[str, Any] = {
        "n": req.n, "presence_penalty": pick(req.presence_penalty, 0.0),
        "frequency_penalty": pick(req.frequency_penalty, 0.0),
        "repetition_penalty": pick(req.repetition_penalty, 1.0), "temperature": pick(req.temperature, 1.0),
        "top_p": pick(req.top_p, 1.0), "top_k": req.top_k if req.top_k is not None else 0,
        "min_p": pick(req.min_p, 0.0), "seed": None if req.seed == -1 else req.seed, "stop": stop,
        "stop_token_ids": list(dict.fromkeys(req.stop_token_ids or [])), "ignore_eos": req.ignore_eos,
        "max_tokens": max_tokens, "min_tokens": req.min_tokens, "logprobs": req.logprobs,
        "skip_special_tokens": req.skip_special_tokens,
        "spaces_between_special_tokens": req.spaces_between_special_tokens,
        "include_stop_str_in_output": req.include_stop_str_in_output, "output_kind": 1 if req.stream else 2,
        "skip_clone": True,
        "output_text_buffer_length": max(len(s) for s in stop) - 1 if stop and not req.include_stop_str_in_output else 0,
        "logit_bias": {k: min(100.0, max(-100.0, float(b))) for k, b in req.logit_bias.items()}
        if req.logit_bias is not None else None,
        "allowed_token_ids": req.allowed_token_ids, "bad_words": list(dict.fromkeys(req.bad_words or [])),
        "skip_reading_prefix_cache": False,
    }
    greedy = values["temperature"] < _SAMPLING_EPS
    if greedy:  # vLLM resets the other samplers to their defaults
        values.update(top_p=1.0, top_k=0, min_p=0.0)
    written = _ALWAYS - {"top_p", "min_p"} if greedy else _ALWAYS
    return {k: v for k, v in values.items() if k in written or v != SAMPLING_DEFAULTS[k]}


def render_completion(body: Mapping[str, Any], options: Options, tokenizer: Tokenizer | None, *,
                      header_id: str | None = None, cache_salt: str | None = None) -> list[dict[str, Any]]:
    """The ``GenerateRequest`` list vLLM's ``/v1/completions/render`` answers for ``body``, with
    recipe's ids (see the module docstring).

    Args:
        body: the Completions request (a JSON object).
        options: the server's options (model table, aliases, context window: ``context_limit``).
        tokenizer: the server's vocabulary, or None for the model family's.
        header_id: the ``X-Request-Id`` header, if any.
        cache_salt: the tenant's prefix-cache salt.

    Raises:
        RequestError: a malformed body or an unknown model (400 naming the field).
        ServeError: a value out of range, a field recipe does not serve, a token id outside the
            vocabulary, or a prompt longer than the context window (400 naming the field).
    """
    from recipe.serve.engines.generate import GENERATE_REQUEST_FIELDS

    req: CompletionRenderRequest = parse_body(CompletionRenderRequest, dict(body))
    _check(req, body)
    tok = vocabulary(req.model, options, tokenizer)
    base = "cmpl-" + (header_id if header_id is not None else req.request_id or random_id())
    prompts = _prompts(req)
    window = options.context_limit
    stream_options = None
    if req.stream and req.stream_options is not None:
        stream_options = {"include_usage": bool(req.stream_options.get("include_usage", True)),
                          "continuous_usage_stats": bool(req.stream_options.get("continuous_usage_stats", False))}
    out = []
    for i, prompt in enumerate(prompts):
        where = "prompt" if len(prompts) == 1 else f"prompt[{i}]"
        if isinstance(prompt, str):
            ids = tok.encode_ordinary(prompt)
        else:
            try:
                tok.check_ids(prompt)
            except TokenIdError as err:
                raise _bad(f"token id outside the vocabulary: {err}", where) from None
            ids = list(prompt)
        if not ids:
            raise _bad("the prompt renders no token ids", where)
        if len(ids) >= window:
            raise ServeError("context_length_exceeded", f"This model's maximum context length is {window} tokens. "
                             f"However, your prompt resulted in {len(ids)} tokens. Please reduce the length of the "
                             "prompt.", where)
        max_tokens = min(window - len(ids), req.max_tokens if req.max_tokens is not None else 16)
        gen = {
            "request_id": base if len(prompts) == 1 else f"{base}-{i}",
            "token_ids": ids, "token_offsets": None, "features": None, "content_parts": None,
            "sampling_params": completion_sampling_params(req, max_tokens), "model": req.model,
            "reasoning_ended": None, "reasoning_parser_kwargs": None, "return_token_ids": None,
            "output_mode": "tokens", "stream": bool(req.stream), "stream_options": stream_options,
            "cache_salt": cache_salt or None, "priority": req.priority, "kv_transfer_params": None,
            "ec_transfer_params": None,
        }
        assert tuple(gen) == GENERATE_REQUEST_FIELDS
        out.append(gen)
    return out


def random_id() -> str:
    """16 hex digits: 64 random bits, as vLLM's ``random_uuid``."""
    return f"{uuid.uuid4().int & (2**64 - 1):016x}"


def _int_list(value: Any, n: int, field: str) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != n or not all(type(v) is int and v >= 0 for v in value):
        raise _bad(f"{field} must hold one non-negative integer per generate response ({n})", field)
    return value


def _text(tok: Tokenizer, ids: Sequence[int], skip_special: bool) -> str:
    return tok.decode([i for i in ids if not (skip_special and tok.is_special(i))])


def _logprobs(tok: Tokenizer, lp: Any, ids: Sequence[int], where: str) -> dict[str, Any] | None:
    """A generate choice's ``logprobs.content`` as OpenAI's completion logprobs (``text_offset``,
    ``token_logprobs``, ``tokens``, ``top_logprobs``)."""
    if lp is None:
        return None
    content = lp.get("content") if isinstance(lp, Mapping) else None
    if not isinstance(content, list) or len(content) != len(ids):
        raise _bad(f"logprobs.content must hold one entry per token id ({len(ids)})", f"{where}.logprobs")
    out: dict[str, Any] = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    offset = 0
    n = tok.n_vocab
    for k, entry in enumerate(content):
        alts = entry.get("top_logprobs") if isinstance(entry, Mapping) else None
        alts = [] if alts is None else alts
        if (not isinstance(entry, Mapping) or not _entry(entry, n) or not isinstance(alts, list)
                or not all(_entry(a, n) for a in alts)):
            raise _bad("each entry needs token_id (an id of the vocabulary) and logprob (a finite number), and "
                       "top_logprobs a list of such entries", f"{where}.logprobs.content[{k}]")
        token = tok.decode([entry["token_id"]])
        logprob = float(entry["logprob"])
        top = {tok.decode([a["token_id"]]): float(a["logprob"]) for a in alts}
        out["text_offset"].append(offset)
        out["token_logprobs"].append(logprob)
        out["tokens"].append(token)
        out["top_logprobs"].append(top)
        offset += len(token)
    return out


def _entry(value: Any, n_vocab: int) -> bool:
    """A logprobs entry ``{token_id, logprob}``: an id of the vocabulary and a finite number (no bools)."""
    if not isinstance(value, Mapping):
        return False
    tid, lp = value.get("token_id"), value.get("logprob")
    return type(tid) is int and 0 <= tid < n_vocab and type(lp) in (int, float) and math.isfinite(lp)


def derender_completion(body: Mapping[str, Any], options: Options, tokenizer: Tokenizer | None) -> dict[str, Any]:
    """The ``text_completion`` for ``body`` (vLLM's ``DerenderCompletionRequest``; see the module docstring).

    Raises:
        RequestError, ServeError: a malformed body (400 naming the field).
    """
    if body.get("stream") is True:
        raise _bad("streaming derender is not served: derender the whole generate responses (stream false)", "stream")
    gens = body.get("generate_responses")
    if not isinstance(gens, list) or not gens or not all(isinstance(g, Mapping) for g in gens):
        raise _bad("generate_responses must be a non-empty list of generate responses", "generate_responses")
    prompt_tokens = _int_list(body.get("prompt_tokens"), len(gens), "prompt_tokens")
    original = body.get("completion_request")
    if original is not None and not isinstance(original, Mapping):
        raise _bad("completion_request must be the request that was rendered (an object)", "completion_request")
    model = body.get("model") if isinstance(body.get("model"), str) and body.get("model") else None
    req: CompletionRenderRequest | None = None
    if original is not None:
        try:
            req = parse_body(CompletionRenderRequest, {"prompt": "", **original, "model": original.get("model") or model})
        except RequestError as err:
            raise RequestError(err.message, param=f"completion_request.{err.param}" if err.param else "completion_request",
                               stage=err.stage) from None
    name = model or (req.model if req is not None else None)
    if name is None:
        raise _bad("model is required (or completion_request.model)", "model")
    tok = vocabulary(name, options, tokenizer)
    skip_special = req.skip_special_tokens if req is not None else True
    stops = ([req.stop] if isinstance(req.stop, str) else list(req.stop or [])) if req is not None else []
    keep_stop = req.include_stop_str_in_output if req is not None else False
    choices, completion = [], 0
    for g, gen in enumerate(gens):
        if gen.get("output_mode", "tokens") != "tokens":
            raise _bad("only output_mode 'tokens' responses can be derendered", f"generate_responses[{g}].output_mode")
        cs = gen.get("choices")
        if not isinstance(cs, list) or not cs or not all(isinstance(c, Mapping) for c in cs):
            raise _bad("choices must be a non-empty list", f"generate_responses[{g}].choices")
        for k, c in enumerate(cs):
            where = f"generate_responses[{g}].choices[{k}]"
            ids = c.get("token_ids")
            if not isinstance(ids, list) or not ids or not all(type(i) is int and i >= 0 for i in ids):
                raise _bad("token_ids must be a non-empty list of token ids", f"{where}.token_ids")
            try:
                tok.check_ids(ids)
            except TokenIdError as err:
                raise _bad(f"token id outside the vocabulary: {err}", f"{where}.token_ids") from None
            text = _text(tok, ids, skip_special)
            finish, stop_reason = c.get("finish_reason"), c.get("stop_reason")
            cut = min(((text.find(s), s) for s in stops if s and s in text), default=None)
            if cut is not None:
                text = text[:cut[0] + (len(cut[1]) if keep_stop else 0)]
                finish, stop_reason = "stop", cut[1]
            choice = dict.fromkeys(_CHOICE_FIELDS)
            choice.update(index=len(choices), text=text, logprobs=_logprobs(tok, c.get("logprobs"), ids, where),
                          finish_reason=finish, stop_reason=stop_reason)
            choices.append(choice)
            completion += len(ids)
    prompt = sum(prompt_tokens) if prompt_tokens is not None else 0
    kv = gens[0].get("kv_transfer_params")
    first_id = gens[0].get("request_id")
    return {
        "id": first_id if isinstance(first_id, str) and first_id else f"cmpl-{random_id()}",
        "object": "text_completion", "created": int(time.time()), "model": name, "choices": choices,
        "service_tier": None, "system_fingerprint": None,
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
                  "prompt_tokens_details": None, "completion_tokens_details": None},
        "kv_transfer_params": kv if all(x.get("kv_transfer_params") == kv for x in gens) else None,
        "ec_transfer_params": None, "metrics": None,
    }
