"""Chat conversion rules found by probing deepseek-recipe 0.2.0, each checked live against it."""

from __future__ import annotations

import pytest

import oracle
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import prepare

U = {"role": "user", "content": "hi json"}
P = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"], "additionalProperties": False}
STRICT = [{"type": "function", "function": {"name": "f", "parameters": P, "strict": True}}]
LOOSE = [{"type": "function", "function": {"name": "f", "parameters": P}}]
CALL = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
RESULT = {"role": "tool", "tool_call_id": "c", "content": "r"}


def prefix(content="x", **kw):
    return {"role": "assistant", "content": content, "prefix": True, **kw}


CASES = {
    "thinking+tools forces top_p 0.95": {"messages": [U], "tools": LOOSE},
    "thinking+tool_choice none keeps top_p 1": {"messages": [U], "tools": LOOSE, "tool_choice": "none"},
    "prefix after tool calls in history": {"messages": [U, CALL, RESULT, prefix()]},
    "prefix with json_object": {"messages": [U, prefix()], "response_format": {"type": "json_object"}},
    "prefix with json_schema": {"messages": [U, prefix()], "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {}}}},
    "prefix, empty content, reasoning": {"messages": [U, prefix("", reasoning_content="r")]},
    "prefix, empty content, no reasoning": {"messages": [U, prefix("")]},
    "prefix flag on a user message is ignored": {"messages": [{**U, "prefix": True}]},
    "strict tools with a text response_format": {"messages": [U], "tools": STRICT, "response_format": {"type": "text"}},
    "strict tools with json_object": {"messages": [U], "tools": STRICT, "response_format": {"type": "json_object"}},
    "strict tools, choice none, json_object": {"messages": [U], "tools": STRICT, "tool_choice": "none", "response_format": {"type": "json_object"}},
    "loose tools with strict json_schema": {"messages": [U], "tools": LOOSE, "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": P, "strict": True}}},
    "top_p that rounds to 0 in f32": {"messages": [U], "top_p": 1e-50, "thinking": {"type": "disabled"}},
    "temperature beyond f32": {"messages": [U], "temperature": 1e39, "thinking": {"type": "disabled"}},
    "required without tools": {"messages": [U], "tool_choice": "required"},
    "named choice unknown before thinking check": {"messages": [U], "tools": LOOSE, "tool_choice": {"type": "function", "function": {"name": "g"}}},
}


@pytest.mark.parametrize("name", list(CASES))
def test_rule_matches_deepseek_recipe(name):
    body = {"model": "deepseek-v4-pro", **CASES[name]}
    theirs = oracle.convert("chat", body)
    try:
        prep = prepare(body, "chat", options=PARITY_OPTIONS)
    except RequestError as err:
        assert not theirs["ok"], err.message
        assert (err.stage, err.message) == (theirs["stage"], theirs["message"])
        return
    assert theirs["ok"], theirs.get("message")
    assert prep.prompt.text == theirs["prompt"] and prep.token_ids == theirs["token_ids"]
    ours = prep.conversion()
    assert {k: ours[k] for k in theirs["conversion"] if k in ours and k != "output_constraint"} == {
        k: v for k, v in theirs["conversion"].items() if k in ours and k != "output_constraint"
    }
