"""Cross-format equivalence: one conversation written as a Chat, a Responses and a Messages request
encodes to identical token ids (and matches deepseek-recipe 0.2.0 for each API)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import prepare

words = st.text(alphabet=st.sampled_from(list("abcdef xyz.,!?中文é🤖\n")), min_size=1, max_size=25).filter(lambda s: s.strip())
TOOL_NAMES = ["get_weather", "search", "read_file"]
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]}


@st.composite
def conversations(draw) -> dict[str, Any]:
    """API-neutral: system text, turns of user text / assistant (reasoning, text, parallel calls) /
    tool results, thinking on/off with an effort."""
    turns: list[dict[str, Any]] = [{"user": draw(words)}]
    call_no = 0
    for _ in range(draw(st.integers(0, 3))):
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            args = {"q": draw(words)}
            if draw(st.booleans()):
                args["n"] = draw(st.integers(-5, 1000))
            calls.append({"id": f"call_{call_no:02d}", "name": draw(st.sampled_from(TOOL_NAMES)), "args": args})
            call_no += 1
        turn = {
            "reasoning": draw(st.one_of(st.none(), words)),
            "text": draw(st.one_of(st.none(), words)) if calls else draw(words),
            "calls": calls,
            "results": [draw(words) for _ in calls],
            "user": draw(st.one_of(st.none(), words)) if calls else draw(words),
        }
        turns.append(turn)
    return {
        "system": draw(st.one_of(st.none(), words)),
        "turns": turns,
        "thinking": draw(st.booleans()),
        "effort": draw(st.sampled_from(["low", "medium", "high", "max"])),
    }


def _tools_chat():
    return [{"type": "function", "function": {"name": n, "description": f"The {n} tool", "parameters": SCHEMA}} for n in TOOL_NAMES]


def as_chat(c: dict) -> dict:
    msgs: list[dict] = [{"role": "system", "content": c["system"]}] if c["system"] else []
    for t in c["turns"]:
        if "calls" in t:
            m: dict[str, Any] = {"role": "assistant", "content": t["text"]}
            if t["reasoning"] is not None:
                m["reasoning_content"] = t["reasoning"]
            if t["calls"]:
                m["tool_calls"] = [{"id": k["id"], "type": "function", "function": {"name": k["name"], "arguments": json.dumps(k["args"])}} for k in t["calls"]]
            msgs.append(m)
            msgs += [{"role": "tool", "tool_call_id": k["id"], "content": r} for k, r in zip(t["calls"], t["results"])]
        if t.get("user") is not None:
            msgs.append({"role": "user", "content": t["user"]})
    return {"model": "deepseek-v4-pro", "messages": msgs, "tools": _tools_chat(),
            "reasoning_effort": c["effort"] if c["thinking"] else "none"}


def as_responses(c: dict) -> dict:
    items: list[dict] = []
    for t in c["turns"]:
        if "calls" in t:
            if t["reasoning"] is not None:
                items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": t["reasoning"]}]})
            if t["text"] is not None:
                items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t["text"]}]})
            items += [{"type": "function_call", "call_id": k["id"], "name": k["name"], "arguments": json.dumps(k["args"])} for k in t["calls"]]
            items += [{"type": "function_call_output", "call_id": k["id"], "output": r} for k, r in zip(t["calls"], t["results"])]
        if t.get("user") is not None:
            items.append({"role": "user", "content": t["user"]})
    body = {"model": "deepseek-v4-pro", "input": items, "reasoning": {"effort": c["effort"] if c["thinking"] else "none"},
            "tools": [{"type": "function", "name": n, "description": f"The {n} tool", "parameters": SCHEMA} for n in TOOL_NAMES]}
    if c["system"]:
        body["instructions"] = c["system"]
    return body


def as_messages(c: dict) -> dict:
    msgs: list[dict] = []
    for t in c["turns"]:
        if "calls" in t:
            blocks: list[dict] = []
            if t["reasoning"] is not None:
                blocks.append({"type": "thinking", "thinking": t["reasoning"], "signature": "sig"})
            if t["text"] is not None:
                blocks.append({"type": "text", "text": t["text"]})
            blocks += [{"type": "tool_use", "id": k["id"], "name": k["name"], "input": k["args"]} for k in t["calls"]]
            msgs.append({"role": "assistant", "content": blocks})
            user_blocks = [{"type": "tool_result", "tool_use_id": k["id"], "content": r} for k, r in zip(t["calls"], t["results"])]
            if t.get("user") is not None:
                user_blocks.append({"type": "text", "text": t["user"]})
            if user_blocks:
                msgs.append({"role": "user", "content": user_blocks})
        else:
            msgs.append({"role": "user", "content": t["user"]})
    body = {"model": "deepseek-v4-pro", "max_tokens": 4096, "messages": msgs,
            "tools": [{"name": n, "description": f"The {n} tool", "input_schema": SCHEMA} for n in TOOL_NAMES],
            "thinking": {"type": "enabled" if c["thinking"] else "disabled"}}
    if c["thinking"]:
        body["output_config"] = {"effort": c["effort"]}
    if c["system"]:
        body["system"] = c["system"]
    return body


@settings(max_examples=150)
@given(conversations())
def test_same_conversation_same_ids_in_every_api(conv):
    bodies = {"chat": as_chat(conv), "responses": as_responses(conv), "messages": as_messages(conv)}
    ids = {api: prepare(body, api).token_ids for api, body in bodies.items()}
    assert ids["chat"] == ids["responses"] == ids["messages"]
    for api, body in bodies.items():  # and each is what deepseek-recipe produces for that API
        assert prepare(body, api, options=PARITY_OPTIONS).token_ids == ids[api]
        theirs = oracle.convert(api, body)
        assert theirs["ok"], theirs.get("message")
        assert theirs["token_ids"] == ids[api]
