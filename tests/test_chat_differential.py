"""Hypothesis differential test: generated Chat requests through recipe and through deepseek-recipe 0.2.0."""

from __future__ import annotations

import json

from hypothesis import given, settings

import oracle
from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, PARITY_OPTIONS
from recipe.pipeline import prepare
from strategies import chat_requests


def _ours(body, options=PARITY_OPTIONS):
    try:
        prep = prepare(body, "chat", options=options)
    except RequestError as err:
        return {"ok": False, "stage": err.stage, "message": err.message}
    conversion = prep.conversion()
    for key in ("encoding", "reasoning_effort", "tool_choice", "response_format"):
        del conversion[key]
    return {
        "ok": True,
        "prompt": prep.prompt.text,
        "special_ranges": [list(r) for r in prep.prompt.special_ranges],
        "token_ids": prep.token_ids,
        "conversion": conversion,
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
    # The default options accept more (docs/clients.md) but never change what deepseek-recipe accepts.
    default = _ours(wire, DEFAULT_OPTIONS)
    assert default == ours
