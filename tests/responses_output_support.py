"""Helpers for the Responses output tests: recorded rows, structural comparison, delta merging, an
event-stream folder (the SDK's accumulation rules, api-wire-formats §3.4), an invariant checker,
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
DELTAS = {
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
}


def responses_rows() -> list[dict[str, Any]]:
    """The Responses rows of deepseek-recipe 0.2.0's recorded completions."""
    with open(FIX, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["api"] == "responses"]


def recording_kwargs(row: dict[str, Any] | None = None, seed: int = 11) -> dict[str, Any]:
    """CompletionStream arguments matching the recording (id, model echo, prompt usage)."""
    pu = row["prompt_usage"] if row else {"prompt_tokens": 20, "prompt_cache_hit_tokens": 5}
    return dict(prompt_tokens=pu["prompt_tokens"], cached_tokens=pu["prompt_cache_hit_tokens"],
                response_id="resp_test", model="m", seed=seed, created=1700000000)


def stream_payloads(body: dict[str, Any], chunks: Sequence[Sequence[int]], finish: str, **kw: Any) -> list[dict[str, Any]]:
    """Our payloads for ``chunks`` of completion ids pushed in order (stopping once finished), then finish."""
    cs = CompletionStream(prepare(body), **kw)
    out: list[dict[str, Any]] = cs.start()
    for c in chunks:
        if cs.finished:
            break
        out += cs.push(c)
    out += cs.finish(finish)
    return out


def our_response(body: dict[str, Any], ids: Sequence[int], finish: str, **kw: Any) -> dict[str, Any]:
    return response(prepare(body), ids, finish=finish, **kw)


def structural(obj: Any) -> Any:
    """Copy of ``obj`` with call ids checked and replaced by ``CALL``, ``created_at`` / ``completed_at``
    checked (ints, completed ≥ created) and set to 0."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("created_at", "completed_at") and v is not None:
                assert type(v) is int, (k, v)
                v = 0
            elif k == "call_id":
                assert CALL_ID.match(v), v
                v = "CALL"
            out[k] = structural(v)
        if isinstance(obj.get("completed_at"), int):
            assert obj["completed_at"] >= obj["created_at"]
        return out
    if isinstance(obj, list):
        return [structural(v) for v in obj]
    return obj


def merged(payloads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent delta events of the same type and item joined into one (``delta`` concatenated,
    ``logprobs`` lists joined) and sequence numbers renumbered: two streams that differ only in
    delta granularity compare equal."""
    out: list[dict[str, Any]] = []
    for p in payloads:
        prev = out[-1] if out else None
        if p["type"] in DELTAS and prev is not None and prev["type"] == p["type"] and prev["item_id"] == p["item_id"]:
            prev["delta"] += p["delta"]
            if "logprobs" in p:
                prev["logprobs"] = prev["logprobs"] + p["logprobs"]
            continue
        out.append(dict(p))
    for k, p in enumerate(out):
        p["sequence_number"] = k
    return out


def strip_notes(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop ``recipe`` from the final event's response (the notes deviation)."""
    last = dict(payloads[-1])
    last["response"] = {k: v for k, v in last["response"].items() if k != "recipe"}
    return [*payloads[:-1], last]


def fold(payloads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output items rebuilt from the events alone (added item, parts, deltas, then the
    ``output_item.done`` item checked against what the deltas built)."""
    items: dict[int, dict[str, Any]] = {}
    done: dict[int, dict[str, Any]] = {}
    for p in payloads:
        t = p["type"]
        if t == "response.output_item.added":
            items[p["output_index"]] = json.loads(json.dumps(p["item"]))
        elif t == "response.content_part.added":
            items[p["output_index"]]["content"].append(json.loads(json.dumps(p["part"])))
        elif t in ("response.output_text.delta", "response.reasoning_text.delta"):
            part = items[p["output_index"]]["content"][p["content_index"]]
            part["text"] += p["delta"]
            if "logprobs" in p:
                part["logprobs"] += p["logprobs"]
        elif t == "response.function_call_arguments.delta":
            items[p["output_index"]]["arguments"] += p["delta"]
        elif t == "response.custom_tool_call_input.delta":
            items[p["output_index"]]["input"] += p["delta"]
        elif t == "response.output_item.done":
            built = dict(items[p["output_index"]], status=p["item"]["status"])
            if "phase" in built:
                built["phase"] = p["item"]["phase"]
            assert built == p["item"], (built, p["item"])
            done[p["output_index"]] = p["item"]
    assert sorted(done) == sorted(items)
    return [done[i] for i in sorted(done)]


def check_invariants(payloads: Sequence[dict[str, Any]]) -> None:
    """The emitter checklist (api-wire-formats §7) and the SDK's checks (§3.4) on one stream."""
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert payloads[0]["type"] == "response.created" and payloads[0]["response"]["output"] == []
    assert payloads[1]["type"] == "response.in_progress"
    last = payloads[-1]
    assert last["type"] in ("response.completed", "response.incomplete")
    assert last["response"]["status"] == last["type"].split(".")[1]
    assert all(p["type"] not in ("response.completed", "response.incomplete") for p in payloads[:-1])
    rid = payloads[0]["response"]["id"]
    assert all(p["response"]["id"] == rid for p in payloads if "response" in p)
    added = [p for p in payloads if p["type"] == "response.output_item.added"]
    assert [p["output_index"] for p in added] == list(range(len(added)))
    open_idx = None
    parts: set[int] = set()
    for p in payloads[2:-1]:
        t = p["type"]
        if t == "response.output_item.added":
            assert open_idx is None
            open_idx = p["output_index"]
            assert p["item"]["status"] == "in_progress"
        elif t == "response.output_item.done":
            assert p["output_index"] == open_idx
            a = added[open_idx]["item"]
            assert (a["type"], a["id"], a.get("call_id")) == (p["item"]["type"], p["item"]["id"], p["item"].get("call_id"))
            open_idx = None
        else:
            assert p["output_index"] == open_idx, p
            assert p["item_id"] == added[open_idx]["item"]["id"]
            if t == "response.content_part.added":
                parts.add(open_idx)
            elif t in ("response.output_text.delta", "response.reasoning_text.delta"):
                assert open_idx in parts
    assert open_idx is None
    out = fold(payloads)
    assert out == last["response"]["output"]
    for it in out:
        if it["type"] == "function_call":
            assert isinstance(json.loads(it["arguments"]), dict)
    for it in out[:-1]:
        assert it["status"] == "completed"
    if out:
        assert out[-1]["status"] == ("completed" if last["response"]["status"] == "completed" else "incomplete")
    for k, it in enumerate(out):
        if it["type"] == "message":
            follows_call = k + 1 < len(out) and out[k + 1]["type"] in ("function_call", "custom_tool_call")
            assert it["phase"] == ("commentary" if follows_call else "final_answer")


def parse_sse(data: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    """SSE bytes → (event name, JSON data) per frame (strict: every frame has a data line)."""
    out = []
    for frame in data.decode("utf-8").split("\n\n"):
        if not frame:
            continue
        name, body = None, []
        for line in frame.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            else:
                assert field == "data", line
                body.append(value)
        out.append((name, json.loads("\n".join(body))))
    return out


# ---------------------------------------------------------------- deepseek-recipe oracle


def oracle_run(body: dict[str, Any], chunks: Sequence[Any], finish: str = "stop", prompt: int = 20,
               cached: int = 5, logprobs: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """deepseek-recipe's events (``to_json`` of each) for the same output; the last one's
    ``response`` is its accumulated response. ``chunks``: lists of ids or strings (1 token each)."""
    import deepseek_recipe as dr
    from oracle import options

    from recipe.tokenizer import default_tokenizer_path

    fin = {"stop": dr.InferenceFinishReason.Stop, "length": dr.InferenceFinishReason.Length,
           "content_filter": dr.InferenceFinishReason.ContentFilter}
    tok = dr.Tokenizer.from_file(str(default_tokenizer_path()))
    req = dr.ResponsesRequest(body)
    echo = req.echo()
    names = req.namespace_tool_map(options())
    cr = req.convert(options())
    gen = req.chunk_generator(cr, "resp_test", "m").with_echo(echo)
    if names:
        gen = gen.with_namespace_tool_map(names)
    sp = dr.StreamProcessor(gen, cr.parsing_options, tok)
    out = list(sp.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=prompt, prompt_cache_hit_tokens=cached))))
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
    return [json.loads(c.to_json()) for c in out]
