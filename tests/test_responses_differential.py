"""Hypothesis differential test: generated Responses requests through recipe and deepseek-recipe 0.2.0.

Compared: accept/reject and the rejecting stage; for accepted requests the prompt, special ranges,
token ids and every conversion value (thinking, output constraint, parsing options, limits,
sampling); the namespace tool map.
"""

from __future__ import annotations

import json

from hypothesis import given, settings

import oracle
from recipe.api.responses import namespace_tool_map, parse_responses_request
from responses_strategies import responses_requests, wire
from responses_support import PARITY, normalise_oracle, ours
from test_responses_fuzz import mutated


def _compare(body: dict, options=PARITY, oracle_options=None) -> dict:
    text = wire(body)
    theirs = normalise_oracle(oracle.convert("responses", text) if oracle_options is None else _convert_with(text, oracle_options))
    mine = ours(text, options)
    assert mine["ok"] == theirs["ok"], (mine.get("message"), theirs.get("message"))
    if not mine["ok"]:
        assert mine["stage"] == theirs["stage"], (mine["message"], theirs["message"])
        return mine
    assert mine["prompt"] == theirs["prompt"]
    assert mine["special_ranges"] == theirs["special_ranges"]
    assert mine["token_ids"] == theirs["token_ids"]
    assert mine["conversion"] == theirs["conversion"]
    return mine


def _convert_with(text: str, opts) -> dict:
    """oracle.convert with other ConversionOptions (accept/reject and stage only)."""
    try:
        req = oracle.dr.ResponsesRequest(text)
    except ValueError as exc:
        return {"ok": False, "stage": "parse", "message": str(exc)}
    try:
        req.convert(opts)
    except oracle.dr.ConversionError as exc:
        return {"ok": False, "stage": "convert", "message": str(exc)}
    return oracle.convert("responses", text)


@settings(max_examples=400)
@given(responses_requests())
def test_responses_match_deepseek_recipe(body):
    mine = _compare(body)
    if mine["ok"]:
        text = wire(body)
        theirs_map = oracle.dr.ResponsesRequest(text).namespace_tool_map(oracle.options())
        assert namespace_tool_map(parse_responses_request(text)) == dict(theirs_map)


@settings(max_examples=150)
@given(responses_requests())
def test_reject_reasoning_behaviour_matches(body):
    """ReasoningContentBehavior.Reject: tool-calling turns after the last user turn need reasoning."""
    from dataclasses import replace

    opts = oracle.options().with_reasoning_content_behavior(oracle.dr.ReasoningContentBehavior.Reject)
    text = wire(body)
    theirs = _convert_with(text, opts)
    mine = ours(text, replace(PARITY, reasoning_content_behavior="reject"))
    assert mine["ok"] == theirs["ok"], (mine.get("message"), theirs.get("message"))
    if not mine["ok"]:
        assert mine["stage"] == theirs["stage"], (mine["message"], theirs["message"])


def test_reject_reasoning_examples():
    from dataclasses import replace

    opts = replace(PARITY, reasoning_content_behavior="reject")
    user = {"role": "user", "content": "u"}
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c", "output": "o"}
    rs = {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r"}]}
    base = {"model": "deepseek-v4-pro"}
    assert ours({**base, "input": [user, call, out]}, opts)["message"] == (
        "The `reasoning_text` in the thinking mode must be passed back to the API."
    )
    assert ours({**base, "input": [user, rs, call, out]}, opts)["ok"]
    assert ours({**base, "input": [user, {"role": "assistant", "content": "a"}]}, opts)["ok"]  # text turns are not checked
    assert ours({**base, "input": [call, out, user]}, opts)["ok"]  # before the last user turn
    assert ours({**base, "input": [user, call, out], "reasoning": {"effort": "none"}}, opts)["ok"]


def test_output_without_call_id_right_after_user():
    text = wire({"model": "deepseek-v4-pro", "input": [{"role": "user", "content": "u"}, {"type": "function_call_output", "output": "x"}], "reasoning": {"effort": "none"}})
    theirs = oracle.convert("responses", text)
    assert theirs["prompt"] == "<｜begin▁of▁sentence｜><｜User｜>u<｜User｜><tool_result>x</tool_result><｜Assistant｜></think>"
    assert ours(text)["prompt"] == theirs["prompt"]


@settings(max_examples=250)
@given(mutated())
def test_mutated_requests_match_deepseek_recipe(body):
    """Seed vectors and generated bodies with fields deleted, retyped or duplicated: same verdict."""
    try:
        wire(body)
        json.dumps(body, allow_nan=False)
    except ValueError:  # NaN/inf are not JSON; neither side can be sent them
        return
    _compare(body)


def _call(cid: str, namespace: str | None, name: str) -> dict:
    item = {"type": "function_call", "call_id": cid, "name": name, "arguments": "{}"}
    return item if namespace is None else {**item, "namespace": namespace}


def _ns(name: str, *tools: str) -> dict:
    return {"type": "namespace", "name": name, "description": "", "tools": [{"type": "function", "name": t, "parameters": {"type": "object"}} for t in tools]}


def _fn(name: str) -> dict:
    return {"type": "function", "name": name, "parameters": {"type": "object"}}


NAMESPACE_CALLS = [  # (tools, history calls, the names deepseek-recipe 0.2.0 renders the calls under)
    ([_fn("ns__a")], [_call("c", "ns", "a")], ["ns__a_1"]),  # found by the mutation property
    ([_fn("ns__a"), _fn("ns__a_1")], [_call("c", "ns", "a")], ["ns__a_2"]),
    ([_fn("ns__a")], [_call("c", "ns", "a"), _call("d", "ns", "a")], ["ns__a_1", "ns__a_1"]),
    ([_fn("ns__a"), _ns("ns", "b")], [_call("c", "ns", "a")], ["ns__a_1"]),
    ([_ns("ns", "b"), _fn("ns__b_1")], [_call("c", "ns", "b")], ["ns__b"]),
    ([], [_call("c", "ns", "a")], ["ns__a"]),
    ([_ns("x", "y"), _fn("x__y")], [_call("c", "x", "y"), _call("d", None, "x__y")], ["x__y_1", "x__y"]),
    ([_ns("ns", "a_1"), _fn("ns__a")], [_call("c", "ns", "a")], ["ns__a_2"]),
    ([_fn("z")], [_call("c", "n", "s__a"), _call("d", "n__s", "a")], ["n__s__a", "n__s__a_1"]),
    ([_fn("ns__a")], [_call("c", None, "ns__a_1"), _call("d", "ns", "a")], ["ns__a_1", "ns__a_1"]),
]


def test_undeclared_namespace_calls_get_free_flat_names():
    """A history call in a namespace no declared tool flattens to takes the first free suffix against
    the declared names and the undeclared calls named before it (one name per pair)."""
    import re

    for tools, calls, names in NAMESPACE_CALLS:
        inputs = [{"role": "user", "content": "u"}, *calls,
                  *({"type": "function_call_output", "call_id": c["call_id"], "output": "o"} for c in calls)]
        mine = _compare({"model": "deepseek-v4-pro", "input": inputs, "tools": tools})
        assert re.findall(r'invoke name="([^"]+)"', mine["prompt"])[-len(calls):] == names, (tools, calls)
