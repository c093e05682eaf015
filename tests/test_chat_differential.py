"""Hypothesis differential test: generated Chat requests through recipe and through deepseek-recipe 0.2.0."""

from __future__ import annotations

import json

from hypothesis import given, settings

import oracle
from recipe.errors import RequestError
from recipe.pipeline import prepare
from strategies import chat_requests


def _ours(body):
    try:
        prep = prepare(body, "chat")
    except RequestError as err:
        return {"ok": False, "stage": err.stage, "message": err.message}
    c = prep.conversation
    oc = prep.output_constraint
    return {
        "ok": True,
        "prompt": prep.prompt.text,
        "special_ranges": [list(r) for r in prep.prompt.special_ranges],
        "token_ids": prep.token_ids,
        "conversion": {
            "thinking": c.thinking,
            "output_constraint": None if oc is None else {"kind": oc.kind, "schema": oc.schema},
            "parse_tool_calls": prep.parsing.parse_tool_calls,
            "starts_in_tool_calls": prep.parsing.starts_in_tool_calls,
            "parse_json_output": prep.parsing.parse_json_output,
            "thinking_stage": prep.parsing.thinking_stage,
            "stop_sequences": list(c.stop),
            "max_tokens": c.max_tokens,
            "temperature": c.sampling.temperature,
            "top_p": c.sampling.top_p,
            "logprobs": c.sampling.logprobs,
            "top_logprobs": c.sampling.top_logprobs,
            "seed": c.sampling.seed,
        },
    }


@settings(max_examples=300)
@given(chat_requests())
def test_chat_matches_deepseek_recipe(body):
    wire = json.dumps(body, ensure_ascii=False)  # both sides read the same wire bytes
    theirs = oracle.convert("chat", wire)
    ours = _ours(wire)
    assert ours["ok"] == theirs["ok"], (ours.get("message"), theirs.get("message"))
    if not ours["ok"]:
        assert ours["stage"] == theirs["stage"], (ours["message"], theirs["message"])
        return
    assert ours["prompt"] == theirs["prompt"]
    assert ours["special_ranges"] == theirs["special_ranges"]
    assert ours["token_ids"] == theirs["token_ids"]
    theirs["conversion"]["output_constraint"] = theirs["conversion"]["output_constraint"] and {
        "kind": {"Json": "json", "Regex": "regex", "ToolCall": "tool_call", "ToolCallRequired": "tool_call_required"}.get(
            theirs["conversion"]["output_constraint"]["kind"].rsplit(".", 1)[-1], theirs["conversion"]["output_constraint"]["kind"]),
        "schema": theirs["conversion"]["output_constraint"]["schema"],
    }
    assert ours["conversion"] == theirs["conversion"]
