"""What the Chat, Responses and Messages output tests share: the recorded rows of deepseek-recipe 0.2.0
(fixtures/api/completions.jsonl), the table of documented deviations in them, structural copies of
payloads with their random ids and timestamps checked and fixed, the ``recipe.notes`` check, our
stream fed in any chunking, and deepseek-recipe (test oracle) runs of the same output."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from fixtures import jsonl
from recipe.api.input_notes import NOTE_KINDS
from recipe.output.driver import CompletionStream
from recipe.tokenizer import load_tokenizer

#: deepseek-recipe's tool-call ids: ``call_`` + 2 digits + ``_`` + 20 alphanumerics + 4 digits.
CALL_ID = re.compile(r"^call_\d\d_[A-Za-z0-9]{20}\d{4}$")

#: recorded scenario -> deliberate deviations visible in its stream, the same for the three APIs
#: (docs/streaming.md, "Deviations").
DEVIATIONS = {
    "think_tool": {"argument_fragments"},
    "two_tools": {"argument_fragments"},
    "no_params": {"argument_fragments"},
    "required_choice": {"argument_fragments"},
    "utf8_split": {"utf8_prefix"},
    "no_think_end": {"notes"},
}


def recorded_rows(api: str) -> list[dict[str, Any]]:
    """The rows of deepseek-recipe 0.2.0's recorded completions for ``api`` (``chat`` | ``responses``
    | ``messages``), in file order."""
    return [r for r in jsonl("api/completions.jsonl") if r["api"] == api]


def ids_of(text: str) -> list[int]:
    """``text`` as completion token ids (special-token spellings become their ids)."""
    return load_tokenizer().encode_with_special_tokens(text)


def split_at(ids: list[int], cuts: list[int]) -> list[list[int]]:
    """``ids`` cut at the positions ``cuts`` (each taken modulo ``len(ids) + 1``; repeats, order and
    empty pieces ignored): the chunks of one chunking of the same output."""
    cuts = sorted({c % (len(ids) + 1) for c in cuts})
    bounds = [0, *cuts, len(ids)]
    return [ids[a:b] for a, b in pairwise(bounds) if b > a]


# ---------------------------------------------------------------- structural comparison


def call_id(v: Any) -> Any:
    """An ``id`` value: a ``call_…`` string must match :data:`CALL_ID` and becomes ``"CALL"``; other
    values are kept."""
    if isinstance(v, str) and v.startswith("call_"):
        assert CALL_ID.match(v), v
        return "CALL"
    return v


def int_time(v: Any) -> int:
    """A timestamp: must be an int; becomes 0."""
    assert type(v) is int, v
    return 0


def structural_copy(obj: Any, rules: Mapping[str, Callable[[Any], Any]],
                    check: Callable[[dict[str, Any]], None] | None = None) -> Any:
    """Copy of ``obj`` (dicts and lists copied recursively) in which the value of every dict key
    found in ``rules`` is replaced by ``rules[key](value)`` (a rule asserts the shape of a random id
    or timestamp and returns its fixed stand-in); ``check``, if given, is called on every dict."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            rule = rules.get(k)
            if rule is not None:
                v = rule(v)
            out[k] = structural_copy(v, rules, check)
        if check is not None:
            check(obj)
        return out
    if isinstance(obj, list):
        return [structural_copy(v, rules, check) for v in obj]
    return obj


def refines(fine: list[str], coarse: list[str]) -> bool:
    """Every boundary of ``coarse`` is a boundary of ``fine`` and the texts are the same."""
    def cuts(parts: list[str]) -> set[int]:
        n, out = 0, set()
        for s in parts:
            n += len(s)
            out.add(n)
        return out
    return "".join(fine) == "".join(coarse) and cuts(coarse) <= cuts(fine)


# ---------------------------------------------------------------- parser notes


#: The names of the notes about the request (recipe.api.input_notes: input the model was not shown as
#: sent, e.g. Messages tool_choice any rendered as auto), which deepseek-recipe never writes; checked
#: in tests/test_input_notes.py, set aside here.
_REQUEST_NOTES = tuple(text.split(":", 1)[0] + ":" for _, text in NOTE_KINDS.values())


def without_notes(obj: dict[str, Any], expect: list[str] | None) -> dict[str, Any]:
    """Assert ``obj`` (a response / message / final payload) carries ``recipe == {"notes": expect}``,
    or no ``recipe`` at all when ``expect`` is None (notes about the request set aside); return it
    without ``recipe``."""
    rec = obj.get("recipe")
    if isinstance(rec, dict) and any(n.startswith(_REQUEST_NOTES) for n in rec.get("notes", ())):
        kept = [n for n in rec["notes"] if not n.startswith(_REQUEST_NOTES)]
        obj = {k: v for k, v in obj.items() if k != "recipe"}
        if kept:
            obj["recipe"] = {**rec, "notes": kept}
    if expect is not None:
        assert obj.get("recipe") == {"notes": expect}
        return {k: v for k, v in obj.items() if k != "recipe"}
    assert "recipe" not in obj
    return obj


def without_recorded_notes(obj: dict[str, Any], scenario: str, expect: list[str]) -> dict[str, Any]:
    """:func:`without_notes` for a recorded scenario: the notes must be ``expect`` exactly when
    DEVIATIONS lists ``notes`` for it, else absent."""
    return without_notes(obj, expect if "notes" in DEVIATIONS.get(scenario, ()) else None)


# ---------------------------------------------------------------- our stream


def stream_payloads(prep: Any, chunks: Sequence[Any], finish: str, *, start: bool, **kw: Any) -> list[dict[str, Any]]:
    """Our payloads for ``chunks`` pushed in order, then ``finish``: a chunk is a list of completion
    ids (``push``) or a decoded string (``push_text``, 1 token). ``start``: ask for the opening
    payloads first (else the first push emits them). ``kw``: CompletionStream arguments."""
    cs = CompletionStream(prep, **kw)
    out: list[dict[str, Any]] = cs.start() if start else []
    for c in chunks:
        out += cs.push_text(c, 1) if isinstance(c, str) else cs.push(c)
    out += cs.finish(finish)
    return out


# ---------------------------------------------------------------- deepseek-recipe oracle


def oracle_run(api: str, body: dict[str, Any], chunks: Sequence[Any], finish: str, *, response_id: str,
               prompt: int = 20, cached: int = 5, logprobs: Sequence[Any] | None = None, fp: str | None = None,
               decorate: Callable[[Any], Callable[[Any], Any]] | None = None,
               accumulator: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """deepseek-recipe's payloads (``to_json`` of each) for the same output, and its accumulated
    response (None without ``accumulator``).

    ``chunks``: lists of ids (token mode; ``logprobs[k]`` for the k-th, if given) or strings (text
    mode, 1 token each), pushed until the processor finishes; ``finish``: ``stop`` | ``length`` |
    ``content_filter``. ``prompt`` / ``cached``: prompt usage; ``fp``: the system fingerprint.
    ``decorate(request)``, called before the conversion (which consumes the request), returns a
    function of the chunk generator giving the one to use (echo, signature …);
    ``accumulator``: the response class folding the chunks (``ChatCompletionResponse`` …), created
    with ``response_id``, model ``m`` and created 1700000000.
    """
    import deepseek_recipe as dr
    from oracle import REQUEST_CLASSES, options, tokenizer

    fin = {"stop": dr.InferenceFinishReason.Stop, "length": dr.InferenceFinishReason.Length,
           "content_filter": dr.InferenceFinishReason.ContentFilter}
    tok = tokenizer()
    req = getattr(dr, REQUEST_CLASSES[api])(body)
    adapt_gen = decorate(req) if decorate is not None else None
    cr = req.convert(options())
    gen = req.chunk_generator(cr, response_id, "m")
    if adapt_gen is not None:
        gen = adapt_gen(gen)
    sp = dr.StreamProcessor(gen, cr.parsing_options, tok)
    out = list(sp.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=prompt, prompt_cache_hit_tokens=cached),
                                                system_fingerprint=fp)))
    for k, c in enumerate(chunks):
        if sp.finished:
            break
        if isinstance(c, str):
            out += sp.push(dr.InferenceChunk.text(c, 1))
        else:
            out += sp.push(dr.InferenceChunk.tokens(list(c), logprobs[k] if logprobs else None))
    if not sp.finished:
        out += sp.push(dr.InferenceChunk.finish(fin[finish]))
    out += sp.finish()
    payloads = [json.loads(c.to_json()) for c in out]
    if accumulator is None:
        return payloads, None
    acc = getattr(dr, accumulator)(response_id, "m", 1700000000, prompt, cached)
    for c in out:
        acc.accumulate(c)
    return payloads, json.loads(acc.to_json())
