"""Hypothesis differential test, DeepSeek-V4.1: random requests of all three APIs through recipe and
through deepseek-recipe 0.2.0's V4.1 path give the same prompt text (special ranges, image sources,
conversion, token ids with the synthetic V4.1-shaped vocabulary) or the same rejection (stage; the
message of a conversion error). The default options answer every request deepseek-recipe accepts
the same way (docs/clients.md)."""

from __future__ import annotations

import json

from hypothesis import event, given, settings

import oracle
from recipe.api.responses import namespace_tool_map, parse_responses_request
from recipe.encodings.deepseek_v41 import ENCODING
from recipe.options import DEFAULT_OPTIONS
from v41_strategies import chat_v41_requests, messages_v41_requests, responses_v41_requests
from v41_support import compare, ours


def _check(api: str, body: dict) -> bool:
    wire = json.dumps(body, ensure_ascii=False)  # both sides read the same wire bytes
    mine = compare(api, wire)
    event("accepted" if mine["ok"] else f"rejected at {mine['stage']}")
    if mine["ok"]:
        assert ours(api, wire, DEFAULT_OPTIONS) == mine
    return mine["ok"]


@settings(max_examples=300)
@given(chat_v41_requests())
def test_chat_v41_matches_deepseek_recipe(body):
    _check("chat", body)


@settings(max_examples=250)
@given(responses_v41_requests())
def test_responses_v41_matches_deepseek_recipe(body):
    if not _check("responses", body):
        return
    wire = json.dumps(body, ensure_ascii=False)
    req = parse_responses_request(wire)
    theirs = oracle.dr.ResponsesRequest(wire).namespace_tool_map(oracle.options())
    assert namespace_tool_map(req, ENCODING.request) == dict(theirs)


@settings(max_examples=250)
@given(messages_v41_requests())
def test_messages_v41_matches_deepseek_recipe(body):
    _check("messages", body)
