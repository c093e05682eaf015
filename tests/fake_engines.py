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

Grammars are checked the way each engine's grammar backend takes them (``backend=``):

- vLLM (``vllm/v1/structured_output/backend_{xgrammar,guidance}.py``, ``SamplingParams.
  _validate_structured_outputs``): ``xgrammar`` takes ``structural_tag`` (JSON text: the
  ``{"type": "structural_tag", "format": …}`` shape or the legacy ``structures`` / ``triggers``
  one) and ``grammar`` only as EBNF or Lark it can convert to EBNF (not llguidance's ``<[id]>``
  token references, ``&`` / ``~`` or ``%json``); ``guidance`` takes ``grammar`` as llguidance Lark
  (checked with llguidance itself) and only the legacy ``structural_tag`` shape; ``auto`` (vLLM's
  default) tries xgrammar, then guidance; ``outlines`` takes neither. A refusal is a 400.
- SGLang (``constrained/{xgrammar,llguidance}_backend.py``, ``grammar_manager.py``): ``xgrammar``
  (default) takes ``structural_tag`` (both shapes) and ``ebnf`` as EBNF; ``llguidance`` takes
  ``ebnf`` as Lark or GBNF (``grammar_from("ebnf")``) and only the legacy ``structural_tag``;
  ``none`` (also what ``--skip-tokenizer-init`` gives) takes no grammar. SGLang compiles grammars in
  its scheduler, so a refusal comes inside the stream: ``data: {"error": …}`` before any id. Here a
  ``structural_tag`` beside ``json_schema`` / ``regex`` / ``ebnf`` is refused too (SGLang would
  silently drop it for the other).

Where llguidance is installed, a fake also holds its output to the constraint it received, as a
constraining engine would: a Lark grammar (vLLM ``grammar``, SGLang ``ebnf``), a JSON schema
(vLLM ``json`` / ``json_object``, SGLang ``json_schema``) or a ``regex`` is compiled with llguidance
on recipe's vocabulary (DeepSeek-V4, EOS id 1). A scripted output the grammar rejects is answered
with an error frame naming the id and recorded in :attr:`Seen.violations` (a real engine could never
have sampled it); with ``Script(sample=True)`` the fake samples its own output under the grammar's
mask (a seeded random walk, as a constrained decoder would). The structural tag is checked for shape
only (its matcher, xgrammar, is not a test dependency).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
import importlib.util
import random
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


# ----------------------------------------------------------------------------- grammar backends

#: xgrammar structural-tag format types (xgrammar 0.2.9 ``structural_tag.py``) -> required fields.
_TAG_FORMATS: dict[str, dict[str, Any]] = {
    "const_string": {"value": str}, "token": {"token": (int, str)}, "any_text": {}, "regex": {"pattern": str},
    "grammar": {"grammar": str}, "json_schema": {"json_schema": (dict, bool)}, "sequence": {"elements": list},
    "or": {"elements": list}, "optional": {"content": dict}, "star": {"content": dict}, "plus": {"content": dict},
    "tag": {"begin": (str, dict), "content": dict, "end": (str, dict, list)},
    "triggered_tags": {"triggers": list, "tags": list}, "tags_with_separator": {"tags": list, "separator": str},
}
VOCAB = 129280


def _check_format(node: Any, path: str) -> None:
    if not isinstance(node, dict) or node.get("type") not in _TAG_FORMATS:
        raise ValueError(f"{path}: not a structural-tag format: {str(node)[:80]}")
    for key, typ in _TAG_FORMATS[node["type"]].items():
        if not isinstance(node.get(key), typ):
            raise ValueError(f"{path}.{key}: missing or of the wrong type")
    if node["type"] == "token" and isinstance(node["token"], int) and not 0 <= node["token"] < VOCAB:
        raise ValueError(f"{path}.token: id {node['token']} outside the vocabulary")
    if node["type"] == "any_text" and not all(isinstance(e, str) for e in node.get("excludes", [])):
        raise ValueError(f"{path}.excludes: want strings")
    if node["type"] == "grammar" and "root ::=" not in node["grammar"]:
        raise ValueError(f"{path}.grammar: EBNF without a root rule")
    for key in ("elements", "tags"):
        for i, child in enumerate(node.get(key) or []):
            _check_format(child, f"{path}.{key}[{i}]")
    for key in ("content", "begin", "end"):
        if isinstance(node.get(key), dict):
            _check_format(node[key], f"{path}.{key}")


def check_structural_tag(text: Any, legacy_only: bool = False) -> None:
    """Raise ValueError unless ``text`` is structural-tag JSON text a backend takes."""
    if not isinstance(text, str):
        raise ValueError("structural_tag must be JSON text")
    obj = orjson.loads(text)
    if isinstance(obj, dict) and isinstance(obj.get("structures"), list) and isinstance(obj.get("triggers"), list):
        return
    if legacy_only:
        raise ValueError("Invalid grammar specification: 'triggers'")
    if not isinstance(obj, dict) or obj.get("type") != "structural_tag":
        raise ValueError("Invalid structural tag specification: no \"type\": \"structural_tag\"")
    _check_format(obj.get("format"), "format")


def _llguidance_only(grammar: str) -> bool:
    """Lark that xgrammar's Lark-to-EBNF conversion cannot take (llguidance token references,
    regex intersection / negation, ``%json``)."""
    return any(t in grammar for t in ("<[", "%json", " & ", "~/")) or grammar.lstrip().startswith("%llguidance")


def check_lark(grammar: str) -> None:
    """Raise ValueError unless llguidance compiles ``grammar`` (Lark or GBNF)."""
    from llguidance import LLMatcher, grammar_from

    err = LLMatcher.validate_grammar(grammar_from("grammar", grammar), None)
    if err:
        raise ValueError(f"Grammar error: {err.splitlines()[0]}")


def check_vllm_grammar(so: dict[str, Any], backend: str) -> None:
    """Raise ValueError where vLLM's ``backend`` refuses ``structured_outputs`` (its 400)."""
    def xgrammar() -> None:
        if so.get("grammar") is not None and _llguidance_only(so["grammar"]):
            raise ValueError("Failed to convert the grammar from Lark to EBNF.")
        if so.get("structural_tag") is not None:
            check_structural_tag(so["structural_tag"])

    def guidance() -> None:
        if so.get("grammar") is not None:
            check_lark(so["grammar"])
        if so.get("structural_tag") is not None:
            check_structural_tag(so["structural_tag"], legacy_only=True)

    if backend == "xgrammar":
        xgrammar()
    elif backend == "guidance":
        guidance()
    elif backend == "auto":
        try:
            xgrammar()
        except ValueError:
            guidance()
    elif so.get("grammar") is not None or so.get("structural_tag") is not None:
        raise ValueError(f"the {backend} backend does not support grammars or structural tags")


def sglang_grammar_error(sp: dict[str, Any], backend: str) -> str | None:
    """Why SGLang's ``backend`` aborts a request with this grammar (None: it compiles)."""
    given = [k for k in ("json_schema", "regex", "ebnf", "structural_tag") if sp.get(k) is not None]
    if not given:
        return None
    if backend == "none":
        return ("Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the "
                "server is launched with --grammar-backend none")
    try:
        if sp.get("ebnf") is not None:
            if backend == "xgrammar" and _llguidance_only(sp["ebnf"]):
                raise ValueError("EBNF parse error")
            if backend == "llguidance":
                check_lark(sp["ebnf"])
        if sp.get("structural_tag") is not None:
            check_structural_tag(sp["structural_tag"], legacy_only=backend == "llguidance")
    except ValueError as exc:
        return f"Invalid grammar request: key=({given[0]!r}, …): {exc}"
    return None


# ----------------------------------------------------------------------------- sampling under a grammar

HAVE_LLGUIDANCE = importlib.util.find_spec("llguidance") is not None
_EOS = 1


def ll_spec(fields: dict[str, Any]) -> str | None:
    """The llguidance grammar for the constraint in ``fields`` (a vLLM ``structured_outputs`` or an
    SGLang ``sampling_params``), or None (none given, a structural tag, or no llguidance)."""
    if not HAVE_LLGUIDANCE:
        return None
    from llguidance import LLMatcher

    lark = fields.get("grammar") if fields.get("grammar") is not None else fields.get("ebnf")
    if lark is not None:
        return LLMatcher.grammar_from_lark(lark)
    schema = fields.get("json") if fields.get("json") is not None else fields.get("json_schema")
    if fields.get("json_object"):
        schema = {"type": "object"}
    if schema is not None:
        return LLMatcher.grammar_from_json_schema(schema if isinstance(schema, str) else orjson.dumps(schema).decode())
    if fields.get("regex") is not None:
        return LLMatcher.grammar_from_regex(fields["regex"])
    return None


class GrammarMatcher:
    """llguidance's matcher for one output, with the interface ``grammar_support.walk`` samples with."""

    def __init__(self, spec: str) -> None:
        import llguidance
        from recipe.schema.constrain import ll_tokenizer
        from recipe.tokenizer import load_tokenizer

        tok = load_tokenizer()
        self.n_vocab = tok.n_vocab
        self.m = llguidance.LLMatcher(ll_tokenizer(tok), spec, log_level=0)
        if self.m.is_error():
            raise ValueError(f"llguidance: {self.m.get_error()}")
        self.finished = False

    def accept(self, t: int) -> bool:
        if self.finished:
            return False
        if t == _EOS:
            self.finished = bool(self.m.is_accepting() and self.m.consume_token(t))
            return self.finished
        return self.m.try_consume_tokens([t]) == 1

    def forced(self) -> list[int]:
        return [] if self.finished else list(self.m.compute_ff_tokens())

    def mask(self) -> Any:
        import numpy as np

        out = np.zeros((self.n_vocab + 31) // 32, dtype=np.int32)
        self.m.unsafe_compute_mask_ptr(out.ctypes.data, out.nbytes)
        return out

    def allowed(self, mask: Any) -> Any:
        import numpy as np

        return np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.n_vocab])


def constrained_output(script: Script, seen: Seen, fields: dict[str, Any] | None) -> tuple[list[int], str | None]:
    """The ids this request generates and, if the scripted ones break its grammar, why (see the
    module docstring)."""
    spec = ll_spec(fields) if fields else None
    if spec is None:
        return script.ids, None
    m = GrammarMatcher(spec)
    if script.sample:
        from grammar_support import walk

        ids = walk(m, random.Random(script.seed), script.budget)
        if ids is None:
            seen.violations.append("the sampled output did not end within the budget")
            return [], seen.violations[-1]
        seen.sampled.append(ids)
        return ids, None
    for k, t in enumerate(script.ids):
        if not m.accept(t):
            seen.violations.append(f"id {t} at {k} is outside the grammar: {m.m.get_error() or 'not allowed there'}")
            return script.ids[:k], seen.violations[-1]
    seen.checked += 1
    return script.ids, None


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
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    min_tokens: int | None = None
    n: int = Field(1, ge=1)
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
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    min_new_tokens: int | None = None
    sampling_seed: int | None = None
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
        if self.structural_tag is not None and any(v is not None for v in (self.json_schema, self.regex, self.ebnf)):
            raise ValueError("structural_tag beside json_schema / regex / ebnf would be ignored")
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
            ``error_frame``, ``status429``, ``refusal_frame`` (vLLM: a 400 error object inside the 200
            stream before any output, as it reports an invalid grammar).
        after: frames sent before a mid-stream fault.
        delay: seconds between frames.
        incremental: SGLang: delta ``output_ids`` instead of cumulative.
        sample: with a grammar llguidance takes, sample the output under its mask instead of
            playing ``ids`` (seeded by ``seed``, at most ``budget`` ids).
        choices: for a request with ``n`` > 1, choice k's ids (default: ``ids`` for each).
        max_model_len: vLLM: the context window ``GET /v1/models`` reports (None: none reported) and
            that a request's prompt plus ``max_tokens`` must fit (else vLLM's 400).
        vocabulary: vLLM: the vocabulary its ``POST /tokenize`` encodes with (``v4``: DeepSeek-V4's,
            ``v3``: DeepSeek-V3's, through recipe's tokenizer), or None: no ``/tokenize`` route.
        text: vLLM: each frame's ``text`` is its ids' decoded text (as vLLM sends it: UTF-8, with
            U+2028 / U+2029 / U+0085 unescaped), else ``""``.
    """

    ids: list[int]
    chunk: int = 1
    cached: int = 0
    finish: str = "stop"
    fault: str | None = None
    after: int = 2
    delay: float = 0.0
    incremental: bool = False
    sample: bool = False
    seed: int = 0
    budget: int = 300
    choices: list[list[int]] | None = None
    max_model_len: int | None = None
    vocabulary: str | None = "v4"
    text: bool = False


@dataclass
class Seen:
    """What a fake engine recorded."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    gone: list[float] = field(default_factory=list)  # perf_counter when a streaming client went away
    aborts: list[tuple[float, str]] = field(default_factory=list)
    finished: int = 0
    checked: int = 0  # scripted outputs llguidance accepted under the request's grammar
    violations: list[str] = field(default_factory=list)  # scripted outputs it rejected
    sampled: list[list[int]] = field(default_factory=list)  # outputs sampled under the grammar
    peers: list[Any] = field(default_factory=list)  # vLLM: each generation request's client (host, port)
    ranks: list[str | None] = field(default_factory=list)  # vLLM: each request's X-data-parallel-rank header


def _decoded(ids: list[int]) -> str:
    from recipe.tokenizer import load_tokenizer

    return load_tokenizer().decode(ids)


def _frame(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _broken(why: str) -> Any:
    """A stream that ends at once with an error frame: the scripted output broke the grammar."""
    yield _frame({"error": {"message": f"fake engine: the scripted output breaks the request's grammar: {why}",
                            "type": "InternalServerError", "code": 500}})
    yield b"data: [DONE]\n\n"


def _invalid(exc: Exception) -> Response:
    return JSONResponse({"error": {"message": str(exc), "type": "BadRequestError", "param": None, "code": 400}}, status_code=400)


async def _frames(script: Script, seen: Seen, make: Any, ids: list[int]) -> Any:
    """The body iterator shared by both fakes: frames of ``ids`` from ``make(start, end, last)``, faults."""
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


def _outputs(script: Script, n: int) -> list[list[int]]:
    """Each choice's ids for a request with ``n`` choices."""
    outs = script.choices or [script.ids] * n
    if len(outs) < n:
        outs = [*outs, *[script.ids] * (n - len(outs))]
    return outs[:n]


async def _vllm_choices(script: Script, seen: Seen, req: VLLMCompletionRequest, base: dict[str, Any]) -> Any:
    """vLLM's stream for ``n`` > 1: each chunk one choice's delta (``choices[0].index`` = k), choices
    interleaved; each ends with its finish; then the usage chunk and ``[DONE]``."""
    outs = _outputs(script, req.n)
    longest = max(map(len, outs))
    for start in range(0, max(longest, 1), script.chunk):
        for k, out in enumerate(outs):
            if start >= len(out) and not (start == 0 and not out):
                continue
            ids = out[start:start + script.chunk]
            last = start + script.chunk >= len(out)
            choice = {"index": k, "text": "", "token_ids": ids, "finish_reason": script.finish if last else None,
                      "stop_reason": None, "logprobs": None}
            if start == 0:
                choice["prompt_token_ids"] = req.prompt
            yield _frame({**base, "choices": [choice], "usage": None})
        await asyncio.sleep(script.delay)
    total = sum(map(len, outs))
    if req.stream_options and req.stream_options.include_usage:
        yield _frame({**base, "choices": [], "usage": {"prompt_tokens": len(req.prompt), "completion_tokens": total,
                                                       "total_tokens": len(req.prompt) + total,
                                                       "prompt_tokens_details": {"cached_tokens": script.cached}}})
    yield b"data: [DONE]\n\n"
    seen.finished += 1


async def _sglang_choices(script: Script, seen: Seen, req: SGLangGenerateRequest) -> Any:
    """SGLang's stream for ``n`` > 1: one sub-request per choice (``meta_info.id`` ``{rid}_{k}``),
    frames tagged ``index`` = k, each choice's ``output_ids`` cumulative; then ``[DONE]``."""
    n = req.sampling_params.n
    outs = _outputs(script, n)
    for start in range(0, max(max(map(len, outs)), 1), script.chunk):
        for k, out in enumerate(outs):
            if start >= len(out) and not (start == 0 and not out):
                continue
            end = min(start + script.chunk, len(out))
            fin = {"type": script.finish, "matched": 1} if end >= len(out) else None
            meta = {"id": f"{req.rid}_{k}", "finish_reason": fin, "prompt_tokens": len(req.input_ids),
                    "completion_tokens": end, "cached_tokens": script.cached}
            yield _frame({"output_ids": out[:end], "meta_info": meta, "index": k})
        await asyncio.sleep(script.delay)
    yield b"data: [DONE]\n\n"
    seen.finished += 1


def vllm_app(script: Script, seen: Seen, backend: str = "auto") -> Starlette:
    """A fake vLLM ``/v1/completions`` with the structured-outputs ``backend`` (``--structured-outputs-config.
    backend``: auto, xgrammar, guidance, outlines; see the module docstring)."""

    async def completions(request: Request) -> Response:
        raw = await request.json()
        seen.bodies.append(raw)
        seen.peers.append(tuple(request.client) if request.client else None)
        seen.ranks.append(request.headers.get("x-data-parallel-rank"))
        try:
            req = VLLMCompletionRequest.model_validate(raw)
            if req.structured_outputs is not None:
                check_vllm_grammar(raw["structured_outputs"], backend)
        except Exception as exc:
            return _invalid(exc)
        if script.fault == "status500":
            return JSONResponse({"error": {"message": "engine crashed", "type": "InternalServerError", "param": None,
                                           "code": 500}}, status_code=500)
        if script.fault == "status429":
            return JSONResponse({"error": {"message": "queue full", "type": "TooManyRequests", "code": 429}}, status_code=429)
        if not req.stream:
            return _invalid(ValueError("this fake only streams"))
        window = script.max_model_len
        if window is not None and len(req.prompt) + req.max_tokens > window:  # vllm/renderers/params.py
            return _invalid(ValueError(
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{req.max_tokens} output tokens and your prompt contains {len(req.prompt)} input tokens, for a "
                f"total of {len(req.prompt) + req.max_tokens} tokens. Please reduce the length of the input prompt "
                f"or the number of requested output tokens."))
        if script.fault == "refusal_frame":  # vLLM's create_streaming_error_response after the 200
            async def refused() -> Any:
                yield _frame({"error": {"message": "Invalid grammar specification.", "type": "BadRequestError",
                                        "param": None, "code": 400}})
                yield b"data: [DONE]\n\n"
            return StreamingResponse(refused(), media_type="text/event-stream")
        out, broken = constrained_output(script, seen, raw.get("structured_outputs"))
        if broken is not None:
            return StreamingResponse(_broken(broken), media_type="text/event-stream")
        base = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": req.model or "m"}
        if req.n > 1:
            return StreamingResponse(_vllm_choices(script, seen, req, base), media_type="text/event-stream")

        def make(start: int, end: int, last: bool | None) -> list[bytes]:
            if last is None:
                usage = {"prompt_tokens": len(req.prompt), "completion_tokens": len(out),
                         "total_tokens": len(req.prompt) + len(out),
                         "prompt_tokens_details": {"cached_tokens": script.cached}}
                return ([_frame({**base, "choices": [], "usage": usage})] if req.stream_options and req.stream_options.include_usage
                        else []) + [b"data: [DONE]\n\n"]
            ids = out[start:end]
            text = _decoded(ids) if script.text else ""
            choice: dict[str, Any] = {"index": 0, "text": text, "token_ids": ids, "finish_reason": script.finish if last else None,
                                      "stop_reason": None, "logprobs": None}
            if start == 0:
                choice["prompt_token_ids"] = req.prompt
            if req.logprobs is not None:  # as vLLM: the top N alternatives and the sampled token (N + 1 at most)
                def top(i: int) -> dict[str, float]:
                    alts = {f"token_id:{7 + k}": -0.1 - k / 100 for k in range(req.logprobs)}
                    return {f"token_id:{i}": -0.5, **alts}  # (vLLM: the sampled token first)
                choice["logprobs"] = {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": [-0.5] * len(ids),
                                      "top_logprobs": [top(i) for i in ids], "text_offset": [0] * len(ids)}
            return [_frame({**base, "choices": [choice], "usage": None})]

        return StreamingResponse(_frames(script, seen, make, out), media_type="text/event-stream")

    async def models(request: Request) -> Response:  # vLLM's OpenAI-compatible model list
        card: dict[str, Any] = {"id": "fake-model", "object": "model", "created": 1, "owned_by": "vllm", "root": "/m"}
        if script.max_model_len is not None:
            card["max_model_len"] = script.max_model_len
        return JSONResponse({"object": "list", "data": [card]})

    async def tokenize(request: Request) -> Response:  # vLLM's /tokenize: special tokens in the text encoded
        from recipe.tokenizer import load_tokenizer, load_v3_tokenizer

        if script.vocabulary is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        raw = await request.json()
        tok = {"v4": load_tokenizer, "v3": load_v3_tokenizer}[script.vocabulary]()
        ids = tok.encode_with_special_tokens(raw["prompt"])
        if raw.get("add_special_tokens", True):
            ids = [tok.special_tokens["<｜begin▁of▁sentence｜>"], *ids]
        return JSONResponse({"count": len(ids), "max_model_len": script.max_model_len or 163840, "tokens": ids,
                             "token_strs": None})

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]),
                             Route("/v1/models", models, methods=["GET"]),
                             Route("/tokenize", tokenize, methods=["POST"])])


def sglang_app(script: Script, seen: Seen, backend: str = "xgrammar", refusal: str = "error_frame") -> Starlette:
    """A fake SGLang ``/generate`` + ``/abort_request`` with the grammar ``backend`` (``--grammar-backend``:
    xgrammar, llguidance, none; see the module docstring). ``refusal``: how a refused grammar comes
    back — ``error_frame`` (``data: {"error": …}``, SGLang raising ``ValueError`` in the stream) or
    ``abort`` (a frame whose ``finish_reason`` is the abort with ``status_code`` 400)."""

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
        refused = sglang_grammar_error(raw["sampling_params"], backend)
        if refused is not None:  # the scheduler aborts it (FINISH_ABORT, 400) before any id
            async def error() -> Any:
                if refusal == "abort":  # newer SGLang: the abort finish itself, in the stream
                    fin = {"type": "abort", "message": refused, "status_code": 400, "err_type": "BadRequestError"}
                    yield _frame({"output_ids": [], "meta_info": {"id": req.rid, "finish_reason": fin,
                                  "prompt_tokens": 1, "completion_tokens": 0, "cached_tokens": 0}})
                else:  # the tokenizer manager raises ValueError: an error frame
                    yield _frame({"error": {"message": refused}})
                yield b"data: [DONE]\n\n"
            return StreamingResponse(error(), media_type="text/event-stream")
        if req.sampling_params.n > 1:
            return StreamingResponse(_sglang_choices(script, seen, req), media_type="text/event-stream")
        ids, broken = constrained_output(script, seen, raw["sampling_params"])
        if broken is not None:
            return StreamingResponse(_broken(broken), media_type="text/event-stream")

        def make(start: int, end: int, last: bool | None) -> list[bytes]:
            if last is None:
                return [b"data: [DONE]\n\n"]
            out = ids[start:end] if script.incremental else ids[:end]
            fin = None
            if last:
                fin = {"type": script.finish, "matched": 1} if script.finish == "stop" else (
                    {"type": "length", "length": end} if script.finish == "length"
                    else {"type": "abort", "message": "aborted by scheduler", "status_code": 500})
            meta: dict[str, Any] = {"id": req.rid, "finish_reason": fin, "prompt_tokens": len(req.input_ids),
                                    "completion_tokens": end, "cached_tokens": script.cached}
            if req.return_logprob:
                span = range(start, end) if script.incremental else range(end)
                meta["output_token_logprobs"] = [[-0.25, ids[i], None] for i in span]
                meta["output_top_logprobs"] = [[[-0.25, ids[i], None], [-3.0, 9, None]] for i in span]
            return [_frame({"output_ids": out, "meta_info": meta})]

        return StreamingResponse(_frames(script, seen, make, ids), media_type="text/event-stream")

    async def abort(request: Request) -> Response:
        body = await request.json()
        seen.aborts.append((time.perf_counter(), body.get("rid")))
        return JSONResponse({})

    return Starlette(routes=[Route("/generate", generate, methods=["POST"]), Route("/abort_request", abort, methods=["POST"])])


Kind = Literal["vllm", "sglang"]
APPS = {"vllm": vllm_app, "sglang": sglang_app}
