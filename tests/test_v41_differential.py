"""Hypothesis differential test, DeepSeek-V4.1: random requests of all three APIs through recipe and
through deepseek-recipe 0.2.0's V4.1 path give the same prompt text (special ranges, image sources,
conversion, token ids with the synthetic V4.1-shaped vocabulary) or the same rejection (stage; the
message of a conversion error). The default options answer every request deepseek-recipe accepts
the same way (docs/clients.md), but for the Messages fields recipe honours where it drops them
(``tool_choice {"type": "any"}``, ``strict`` tools, ``output_config.format``)."""

from __future__ import annotations

import json

from hypothesis import event, given, settings

import oracle
from recipe.api.responses import namespace_tool_map, parse_responses_request
from recipe.encodings.deepseek_v41 import ENCODING
from real_clients_support import reads_differently
from recipe.options import DEFAULT_OPTIONS
from v41_strategies import chat_v41_requests, messages_v41_requests, responses_v41_requests
from v41_support import compare, ours, synthetic_v41_tokenizer


def _check(api: str, body: dict) -> bool:
    wire = json.dumps(body, ensure_ascii=False)  # both sides read the same wire bytes
    mine = compare(api, wire)
    event("accepted" if mine["ok"] else f"rejected at {mine['stage']}")
    if mine["ok"] and not reads_differently(api, body):  # Messages `any`, strict tools, output_config.format: honoured by default
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


def test_system_message_images_carry_the_message_path():
    """Found by the property above: an image in a Messages ``role: "system"`` message is reported at
    ``messages.{i}`` by deepseek-recipe (a user message's at ``messages.{i}.content[{j}]``); the error
    for a bad one still names the block."""
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    body = {"model": "deepseek-v4.1-flash", "messages": [
        {"role": "user", "content": [{"type": "text", "text": ""}]},
        {"role": "system", "content": [{"type": "text", "text": "a"}, img, img]}],
        "tools": [{"name": "0", "input_schema": {"type": "object", "properties": {}}}]}
    mine = compare("messages", body)
    assert [s["path"] for s in mine["image_sources"]] == ["messages.1", "messages.1"]
    bad = {"type": "image", "source": {"type": "url", "url": "ftp://x"}}
    mine = compare("messages", {**body, "messages": [body["messages"][0], {"role": "system", "content": [{"type": "text", "text": "a"}, bad]}]})
    assert mine["message"] == 'messages.1.content[1]: invalid url: "ftp://x"'


def test_first_message_prefix_continues_in_the_answer():
    """Found by this file's property (seed-dependent): an empty system message (dropped) before a
    prefix assistant. deepseek-recipe renders the first-message prefix after ``</think>`` (V4 would
    open ``<think>``); recipe renders the same prompt and parses the output as the answer
    (docs/streaming.md, deviation 22), so text the model writes there is content, not reasoning."""
    import recipe

    for msgs, tail in (
        ([{"role": "system", "content": ""}, {"role": "assistant", "content": "", "prefix": True}], "<｜Assistant｜></think>"),
        ([{"role": "assistant", "content": "", "reasoning_content": "r", "prefix": True}], "<｜Assistant｜></think>"),
        ([{"role": "assistant", "content": "ab", "reasoning_content": "r", "prefix": True}], "<｜Assistant｜></think>ab"),
    ):
        body = {"model": "deepseek-v4.1-flash", "messages": msgs, "temperature": 0.0}
        mine = compare("chat", body)  # same prompt as deepseek-recipe; the stage per deviation 22
        assert mine["prompt"].endswith(tail) and mine["conversion"]["thinking_stage"] == "content_continuation"
        tok = synthetic_v41_tokenizer()
        prep = recipe.prepare(body, tokenizer=tok)
        answer = recipe.response(prep, tok.encode_ordinary("Hello"), tokenizer=tok)
        message = answer["choices"][0]["message"]
        assert message["content"] == "Hello" and not message.get("reasoning_content")
    # a prefix after a system message keeps V4's thinking continuation, as deepseek-recipe does
    later = compare("chat", {"model": "deepseek-v4.1-flash", "messages": [
        {"role": "system", "content": "s"}, {"role": "assistant", "content": "", "reasoning_content": "r", "prefix": True}]})
    assert later["prompt"].endswith("<｜Assistant｜><think>r") and later["conversion"]["thinking_stage"] == "reasoning_continuation"


def test_empty_system_messages_after_a_prefix_are_dropped_before_the_prefix_rule():
    """Found by this file's property (seed-dependent): deepseek-recipe drops empty system messages
    before it checks that a prefix assistant is the final message (V4 and V4.1); a non-empty one
    (or any other message) after the prefix is still refused."""
    import recipe

    for model in ("deepseek-v4-pro", "deepseek-v4.1-flash"):
        for tail, ok in (
            ([{"role": "system", "content": ""}], True),
            ([{"role": "system", "content": []}, {"role": "system", "content": [{"type": "text", "text": ""}]}], True),
            ([{"role": "system", "content": "x"}], False),
            ([{"role": "system", "content": ""}, {"role": "user", "content": ""}], False),
        ):
            body = {"model": model, "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "prefix": True}, *tail]}
            theirs = oracle.convert("chat", json.dumps(body))
            assert theirs["ok"] is ok
            if ok:
                assert recipe.prepare(body).prompt.text == theirs["prompt"]
                assert recipe.prepare(body).prompt.text.endswith("</think>a")
            else:
                try:
                    recipe.prepare(body)
                except recipe.RequestError as err:
                    assert err.message == theirs["message"] and err.param == "messages[1].prefix"
                else:
                    raise AssertionError("accepted a prefix that is not the final message")
