"""Helpers for the Chat output tests: recorded rows, structural comparison, a chunk accumulator,
and deepseek-recipe (test oracle) runs of the same output."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe.completion import CompletionStream, response
from recipe.pipeline import prepare

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "api" / "completions.jsonl"
CALL_ID = re.compile(r"^call_\d\d_[A-Za-z0-9]{20}\d{4}$")


def chat_rows() -> list[dict[str, Any]]:
    """The Chat Completions rows of deepseek-recipe 0.2.0's recorded completions."""
    with open(FIX, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["api"] == "chat"]


def recording_kwargs(row: dict[str, Any], seed: int = 11) -> dict[str, Any]:
    """CompletionStream arguments matching the recording (ids, model echo, prompt usage)."""
    pu = row["prompt_usage"]
    return dict(
        prompt_tokens=pu["prompt_tokens"],
        cached_tokens=pu["prompt_cache_hit_tokens"],
        response_id="chatcmpl-test",
        system_fingerprint="fp_test",
        model="m",
        seed=seed,
    )


def stream_payloads(body: dict[str, Any], chunks: Sequence[Sequence[int]], finish: str, **kw: Any) -> list[dict[str, Any]]:
    """Our payloads for ``chunks`` of completion ids pushed in order, then finish."""
    cs = CompletionStream(prepare(body), **kw)
    out: list[dict[str, Any]] = []
    for c in chunks:
        out += cs.push(c)
    out += cs.finish(finish)
    return out


def our_response(body: dict[str, Any], ids: Sequence[int], finish: str, **kw: Any) -> dict[str, Any]:
    return response(prepare(body), ids, finish=finish, **kw)


def structural(obj: Any) -> Any:
    """Copy of ``obj`` with call ids checked and replaced by ``CALL``, ``created`` checked and set to 0."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "created":
                assert type(v) is int, v
                v = 0
            elif k == "id" and isinstance(v, str) and v.startswith("call_"):
                assert CALL_ID.match(v), v
                v = "CALL"
            out[k] = structural(v)
        return out
    if isinstance(obj, list):
        return [structural(v) for v in obj]
    return obj


def segments(payloads: Sequence[dict[str, Any]]) -> list[tuple]:
    """Chunk stream → merged segments: adjacent content / reasoning / same-call argument chunks
    joined, so two streams that differ only in delta granularity compare equal."""
    segs: list[list[Any]] = []
    for p in payloads:
        ch = p["choices"][0] if p["choices"] else None
        if ch is None:
            segs.append(["usage", json.dumps(p.get("usage"), sort_keys=True)])
            continue
        d = ch["delta"]
        if ch["finish_reason"] is not None:
            segs.append(["final", json.dumps(structural(p), sort_keys=True)])
        elif "role" in d:
            segs.append(["role", json.dumps(d, sort_keys=True)])
        elif "tool_calls" in d:
            tc = d["tool_calls"][0]
            if "id" in tc:
                segs.append(["header", json.dumps(structural(tc), sort_keys=True)])
            elif segs and segs[-1][0] == "args" and segs[-1][1] == tc["index"]:
                segs[-1][2] += tc["function"]["arguments"]
            else:
                segs.append(["args", tc["index"], tc["function"]["arguments"]])
        else:
            kind = "reasoning" if d.get("reasoning_content") is not None else "content"
            text = d["reasoning_content"] if kind == "reasoning" else d["content"]
            if segs and segs[-1][0] == kind:
                segs[-1][1] += text
            else:
                segs.append([kind, text])
    return [tuple(s) for s in segs]


def accumulate_chunks(payloads: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A ``chat.completion`` folded from chunks by the SDK's rules (api-wire-formats §2.4):
    strings concatenate, tool calls merge by index, ``usage``/fingerprint taken from the last
    chunk carrying them; None-valued message keys dropped; ``recipe`` kept from the final chunk."""
    msg: dict[str, Any] = {}
    calls: dict[int, dict[str, Any]] = {}
    lp: dict[str, list] | None = None
    finish = None
    usage = None
    first = payloads[0]
    extra = None
    for p in payloads:
        if p.get("usage") is not None:
            usage = p["usage"]
        if "recipe" in p:
            extra = p["recipe"]
        for ch in p["choices"]:
            for k, v in ch["delta"].items():
                if k == "tool_calls":
                    for tc in v:
                        cur = calls.setdefault(tc["index"], {"index": tc["index"]})
                        for key in ("id", "type"):
                            if key in tc:
                                cur[key] = cur.get(key, "") + tc[key] if key == "id" else tc[key]
                        f = cur.setdefault("function", {})
                        for fk, fv in tc["function"].items():
                            f[fk] = f.get(fk, "") + fv
                elif v is not None:
                    msg[k] = msg[k] + v if isinstance(msg.get(k), str) else v
            if ch["logprobs"]:
                lp = lp or {}
                for k, v in ch["logprobs"].items():
                    lp.setdefault(k, []).extend(v)
            if ch["finish_reason"] is not None:
                finish = ch["finish_reason"]
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    if lp is not None:
        lp.setdefault("content", [])
    out = {
        "id": first["id"],
        "object": "chat.completion",
        "created": first["created"],
        "model": first["model"],
        "choices": [{"index": 0, "message": msg, "logprobs": lp, "finish_reason": finish}],
        "usage": usage,
        "system_fingerprint": payloads[-1]["system_fingerprint"],
    }
    if extra is not None:
        out["recipe"] = extra
    return out


# ---------------------------------------------------------------- deepseek-recipe oracle


def oracle_run(body: dict[str, Any], chunks: Sequence[Any], finish: str = "stop", logprobs: Sequence[Any] | None = None,
               prompt: int = 20, cached: int = 5, fp: str | None = "fp_test") -> tuple[list[dict], dict]:
    """deepseek-recipe's chunks (``to_json`` of each) and accumulated response for the same output.
    ``chunks``: lists of ids (token mode) or strings (text mode, 1 token each)."""
    import deepseek_recipe as dr

    from oracle import options
    from recipe.tokenizer import default_tokenizer_path

    fin = {"stop": dr.InferenceFinishReason.Stop, "length": dr.InferenceFinishReason.Length,
           "content_filter": dr.InferenceFinishReason.ContentFilter}
    tok = dr.Tokenizer.from_file(str(default_tokenizer_path()))
    req = dr.ChatCompletionRequest(body)
    cr = req.convert(options())
    sp = dr.StreamProcessor(req.chunk_generator(cr, "chatcmpl-test", "m"), cr.parsing_options, tok)
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
    acc = dr.ChatCompletionResponse("chatcmpl-test", "m", 1700000000, prompt, cached)
    payloads = [json.loads(c.to_json()) for c in out]
    for c in out:
        acc.accumulate(c)
    return payloads, json.loads(acc.to_json())
