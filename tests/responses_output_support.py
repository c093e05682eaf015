"""Helpers for the Responses output tests: recorded rows, structural comparison, delta merging, an
event-stream folder (the SDK's accumulation rules, api-wire-formats §3.4), an invariant checker,
and deepseek-recipe (test oracle) runs of the same output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import output_parity_support as shared
from output_parity_support import (
    CALL_ID,
    int_time,
    recorded_rows,
    structural_copy,
    without_notes,
)

from recipe.output.driver import response
from recipe.pipeline import prepare

DELTAS = {
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
}


def responses_rows() -> list[dict[str, Any]]:
    """The Responses rows of deepseek-recipe 0.2.0's recorded completions."""
    return recorded_rows("responses")


def recording_kwargs(row: dict[str, Any] | None = None, seed: int = 11) -> dict[str, Any]:
    """CompletionStream arguments matching the recording (id, model echo, prompt usage)."""
    pu = row["prompt_usage"] if row else {"prompt_tokens": 20, "prompt_cache_hit_tokens": 5}
    return dict(prompt_tokens=pu["prompt_tokens"], cached_tokens=pu["prompt_cache_hit_tokens"],
                response_id="resp_test", model="m", seed=seed, created=1700000000)


def stream_payloads(body: dict[str, Any], chunks: Sequence[Any], finish: str, **kw: Any) -> list[dict[str, Any]]:
    """Our payloads (``start`` first) for ``chunks`` (lists of completion ids, or decoded strings of 1
    token each) pushed in order (pushes after the end add nothing), then finish."""
    return shared.stream_payloads(prepare(body), chunks, finish, start=True, **kw)


def our_response(body: dict[str, Any], ids: Sequence[int], finish: str, **kw: Any) -> dict[str, Any]:
    return response(prepare(body), ids, finish=finish, **kw)


def _time(v: Any) -> Any:
    return v if v is None else int_time(v)


def _call_id(v: Any) -> str:
    assert CALL_ID.match(v), v
    return "CALL"


def _completed_after_created(d: dict[str, Any]) -> None:
    if isinstance(d.get("completed_at"), int):
        assert d["completed_at"] >= d["created_at"]


def _input_details(v: Any) -> Any:
    """``usage.input_tokens_details`` without ``cache_write_tokens`` (deviation R9: we send it, as the
    SDK's strict model requires, always 0; deepseek-recipe does not)."""
    if not isinstance(v, dict) or "cache_write_tokens" not in v:
        return v
    assert v["cache_write_tokens"] == 0, v
    return {k: x for k, x in v.items() if k != "cache_write_tokens"}


def _tool_choice(v: Any) -> Any:
    """A hosted ``web_search`` tool choice as we echo it (deviation R10: ``"auto"``, what it does)."""
    return "auto" if isinstance(v, dict) and v.get("type") in ("web_search", "web_search_2025_08_26") else v


def _tools(v: Any) -> Any:
    """Echoed tools with a namespace tool's missing description as we echo it (deviation R11: ``""``)."""
    if not isinstance(v, list):
        return v
    return [dict(t, description="") if isinstance(t, dict) and t.get("type") == "namespace" and t.get("description") is None
            else t for t in v]


_STRUCTURAL = {"created_at": _time, "completed_at": _time, "call_id": _call_id, "input_tokens_details": _input_details,
               "tool_choice": _tool_choice, "tools": _tools}


def structural(obj: Any) -> Any:
    """Copy of ``obj`` with call ids checked and replaced by ``CALL``, ``created_at`` / ``completed_at``
    checked (ints, completed ≥ created) and set to 0, ``cache_write_tokens`` checked (0) and dropped, and
    the echo fields the SDK's strict models made us change (deviations R10, R11) written our way."""
    return structural_copy(obj, _STRUCTURAL, _completed_after_created)


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


def final_without_notes(payloads: list[dict[str, Any]], expect: list[str] | None) -> list[dict[str, Any]]:
    """Assert the final event's response carries ``recipe == {"notes": expect}`` (no ``recipe`` when
    ``expect`` is None, see ``output_parity_support.without_notes``); the events without it."""
    return [*payloads[:-1], {**payloads[-1], "response": without_notes(payloads[-1]["response"], expect)}]


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
    from oracle import options

    def decorate(req: Any) -> Any:
        echo = req.echo()
        names = req.namespace_tool_map(options())

        def apply(gen: Any) -> Any:
            gen = gen.with_echo(echo)
            return gen.with_namespace_tool_map(names) if names else gen

        return apply

    return shared.oracle_run("responses", body, chunks, finish, response_id="resp_test", prompt=prompt, cached=cached,
                             logprobs=logprobs, decorate=decorate)[0]
