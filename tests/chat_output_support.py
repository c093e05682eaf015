"""Helpers for the Chat output tests: recorded rows, structural comparison, a chunk accumulator,
and deepseek-recipe (test oracle) runs of the same output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import output_parity_support as shared
from output_parity_support import call_id, int_time, recorded_rows, structural_copy

from recipe.output.driver import response
from recipe.pipeline import prepare


def chat_rows() -> list[dict[str, Any]]:
    """The Chat Completions rows of deepseek-recipe 0.2.0's recorded completions."""
    return recorded_rows("chat")


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


def stream_payloads(body: dict[str, Any], chunks: Sequence[Any], finish: str, **kw: Any) -> list[dict[str, Any]]:
    """Our payloads for ``chunks`` (lists of completion ids, or decoded strings of 1 token each)
    pushed in order, then finish; the first push emits the role chunk."""
    return shared.stream_payloads(prepare(body), chunks, finish, start=False, **kw)


def our_response(body: dict[str, Any], ids: Sequence[int], finish: str, **kw: Any) -> dict[str, Any]:
    return response(prepare(body), ids, finish=finish, **kw)


_STRUCTURAL = {"created": int_time, "id": call_id}


def structural(obj: Any) -> Any:
    """Copy of ``obj`` with call ids checked and replaced by ``CALL``, ``created`` checked and set to 0."""
    return structural_copy(obj, _STRUCTURAL)


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
    return shared.oracle_run("chat", body, chunks, finish, response_id="chatcmpl-test", prompt=prompt, cached=cached,
                             logprobs=logprobs, fp=fp, accumulator="ChatCompletionResponse")
