"""Requests real clients send that deepseek-recipe 0.2.0 rejects: accepted by default, each class
behind an option that restores the parity target's 400 (docs/clients.md)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

import oracle
from recipe.output.driver import response
from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, PARITY_OPTIONS
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
# already in strict-normalised key order, so a strict and a non-strict tool print the same line
P = {"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": False, "required": ["city"]}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": P}}
RESP_TOOL = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": P}
MSG_TOOL = {"name": "get_weather", "description": "Weather", "input_schema": P}
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "additionalProperties": False, "required": ["answer"]}


def _rejected_by_parity(body, api):
    assert not oracle.convert(api, body)["ok"]
    with pytest.raises(RequestError) as info:
        prepare(body, api, options=PARITY_OPTIONS)
    assert info.value.stage == oracle.convert(api, body)["stage"]


# --- class 1: Chat developer role -----------------------------------------------------------------


def test_chat_developer_role_is_the_responses_developer_item():
    chat = {"model": "deepseek-v4-pro", "messages": [
        {"role": "system", "content": "S"}, {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
    resp = {"model": "deepseek-v4-pro", "instructions": "S", "input": [
        {"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
    _rejected_by_parity(chat, "chat")
    theirs = oracle.convert("responses", resp)  # the parity target's own mapping of a developer item
    assert theirs["ok"]
    ours = prepare(chat, "chat")
    assert ours.token_ids == theirs["token_ids"] == prepare(resp, "responses").token_ids


# --- class 2: forced tool choice with thinking on --------------------------------------------------

FORCED = {
    "chat": {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Weather in Paris?"}],
             "tools": [CHAT_TOOL], "tool_choice": "required", "reasoning_effort": "high"},
    "responses": {"model": "deepseek-v4-pro", "input": "Weather in Paris?", "tools": [RESP_TOOL],
                  "tool_choice": {"type": "function", "name": "get_weather"}, "reasoning": {"effort": "high"}},
    "messages": {"model": "deepseek-v4-pro", "max_tokens": 100, "messages": [{"role": "user", "content": "Weather in Paris?"}],
                 "tools": [MSG_TOOL], "tool_choice": {"type": "tool", "name": "get_weather"}, "thinking": {"type": "enabled"}},
}
THINKING_OFF = {"chat": {"reasoning_effort": "none"}, "responses": {"reasoning": {"effort": "none"}}, "messages": {"thinking": {"type": "disabled"}}}


@pytest.mark.parametrize("api", list(FORCED))
def test_forced_tool_choice_in_thinking_renders_without_thinking(api):
    body = FORCED[api]
    _rejected_by_parity(body, api)
    no_thinking = {**body, **THINKING_OFF[api]}
    theirs = oracle.convert(api, no_thinking)
    prep = prepare(body, api)
    assert prep.token_ids == theirs["token_ids"]
    assert prep.prompt.text.endswith("<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n")
    assert prep.parsing.starts_in_tool_calls and prep.parsing.thinking_stage is None
    assert prep.output_constraint.kind == "tool_call_required"


@pytest.mark.parametrize("api", list(FORCED))
def test_forced_tool_choice_constrain_keeps_thinking(api):
    body = FORCED[api]
    prep = prepare(body, api, options=replace(DEFAULT_OPTIONS, forced_tool_choice_thinking="constrain"))
    auto = copy.deepcopy(body)
    auto.pop("tool_choice")
    theirs = oracle.convert(api, auto)  # same conversation, tool choice auto: the prompt to keep
    assert prep.token_ids == theirs["token_ids"]
    assert prep.prompt.text.endswith("<｜Assistant｜><think>")
    assert prep.output_constraint.kind == "tool_call_required_after_reasoning"
    assert prep.parsing.thinking_stage == "reasoning" and not prep.parsing.starts_in_tool_calls


# --- class 3: structured output together with (strict) tools ----------------------------------------

FORMAT_WITH_TOOLS = {
    "chat": {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Weather?"}],
             "tools": [{**CHAT_TOOL, "function": {**CHAT_TOOL["function"], "strict": True}}],
             "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": SCHEMA, "strict": True}}},
    "responses": {"model": "deepseek-v4-pro", "input": "Weather?", "tools": [{**RESP_TOOL, "strict": True}],
                  "text": {"format": {"type": "json_schema", "name": "out", "schema": SCHEMA, "strict": True}}},
}


@pytest.mark.parametrize("api", list(FORMAT_WITH_TOOLS))
def test_format_with_strict_tools_renders_both(api):
    body = FORMAT_WITH_TOOLS[api]
    _rejected_by_parity(body, api)
    prep = prepare(body, api)
    # the prompt deepseek-recipe renders when it accepts tools and a format together (non-strict tools),
    # with the strict tool's normalised schema in the tools block
    loose = json.loads(json.dumps(body).replace('"strict": true', '"strict": false'))
    theirs = oracle.convert(api, loose)
    assert theirs["ok"]
    assert prep.prompt.text == theirs["prompt"]
    assert prep.prompt.text.index("## Tools") < prep.prompt.text.index("## Response Format")
    assert prep.output_constraint.kind == "tool_call_or_format"
    constraint = json.loads(prep.output_constraint.schema)
    assert constraint["format"]["kind"] == "json" and json.loads(constraint["format"]["schema"]) == SCHEMA
    assert [t["function"]["name"] for t in constraint["tools"]] == ["get_weather"]


def test_final_answer_is_checked_against_the_schema_not_raised():
    prep = prepare({**FORMAT_WITH_TOOLS["chat"], "thinking": {"type": "disabled"}}, "chat")
    good = response(prep, TOK.encode_ordinary('{"answer": "sunny"}'), seed=1)
    assert "recipe" not in good
    bad = response(prep, TOK.encode_ordinary('{"answer": 3}'), seed=1)
    assert bad["choices"][0]["message"]["content"] == '{"answer": 3}'  # nothing altered
    assert bad["recipe"]["notes"][0] == "schema_mismatch" and "is not of type 'string'" in bad["recipe"]["notes"][1]


# --- class 4: strict and non-strict tools mixed -----------------------------------------------------


def test_mixed_strict_tools_normalise_only_the_strict_ones():
    strict = {"type": "function", "function": {"name": "a", "strict": True, "parameters": {"type": "object", "properties": {"x": {"type": "string", "minLength": 1}}}}}
    loose = {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"y": {"type": "string", "minLength": 1}}}}}
    base = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}]}
    body = {**base, "tools": [strict, loose]}
    _rejected_by_parity(body, "chat")
    prep = prepare(body, "chat")
    only_strict, only_loose = oracle.convert("chat", {**base, "tools": [strict]}), oracle.convert("chat", {**base, "tools": [loose]})
    line_a = next(ln for ln in only_strict["prompt"].split("\n") if ln.startswith('{"name": "a"'))
    line_b = next(ln for ln in only_loose["prompt"].split("\n") if ln.startswith('{"name": "b"'))
    assert f"{line_a}\n{line_b}" in prep.prompt.text
    tools = json.loads(prep.output_constraint.schema)
    assert [t["function"]["strict"] for t in tools] == [True, None]


# --- classes 5 and 6: Anthropic redacted_thinking, type "custom" tools ------------------------------


def _messages_turns(thinking_blocks):
    return {"model": "deepseek-v4-pro", "max_tokens": 100, "thinking": {"type": "enabled"}, "tools": [MSG_TOOL], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [*thinking_blocks, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ]}


def test_redacted_thinking_is_empty_reasoning():
    body = _messages_turns([{"type": "redacted_thinking", "data": "EqQBCgIYAhIM..."}])
    _rejected_by_parity(body, "messages")
    theirs = oracle.convert("messages", _messages_turns([{"type": "thinking", "thinking": "", "signature": "s"}]))
    assert prepare(body, "messages").token_ids == theirs["token_ids"]


def test_anthropic_custom_type_tools_are_client_tools():
    body = _messages_turns([])
    body["tools"] = [{"type": "custom", **MSG_TOOL}]
    _rejected_by_parity(body, "messages")
    assert prepare(body, "messages").token_ids == oracle.convert("messages", _messages_turns([]))["token_ids"]


def test_real_server_tools_stay_rejected():
    body = _messages_turns([])
    body["tools"] = [{"type": "web_search_20250305", "name": "web_search"}]
    with pytest.raises(RequestError):
        prepare(body, "messages")


# --- re-serialised SDK objects ----------------------------------------------------------------------


def test_null_laden_sdk_shapes_are_accepted_and_render_as_the_clean_request():
    clean = {"model": "deepseek-v4-pro", "tools": [CHAT_TOOL], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]},
    ]}
    noisy = copy.deepcopy(clean)
    noisy["messages"][1].update({"content": None, "refusal": None, "annotations": None, "audio": None, "function_call": None, "parsed": None})
    noisy["messages"][1]["tool_calls"][0].update({"index": 0})
    noisy["messages"][1]["tool_calls"][0]["function"]["parsed_arguments"] = None
    noisy.update({"max_tokens": 100, "max_completion_tokens": 100})
    assert prepare(noisy, "chat").token_ids == oracle.convert("chat", clean)["token_ids"]

    msgs = _messages_turns([{"type": "thinking", "thinking": "r", "signature": "s"}])
    noisy_m = copy.deepcopy(msgs)
    noisy_m["messages"][1]["content"].insert(1, {"type": "text", "text": "Checking.", "citations": None})
    noisy_m["messages"][1]["content"][2]["caller"] = None
    clean_m = copy.deepcopy(noisy_m)
    del clean_m["messages"][1]["content"][1]["citations"]
    del clean_m["messages"][1]["content"][2]["caller"]
    assert prepare(noisy_m, "messages").token_ids == oracle.convert("messages", clean_m)["token_ids"]


# --- tool names: duplicates always rejected, names past 128 characters rejected in parity ----------------

_LONG = "mcp__" + "x" * 124  # 129 characters


def _with_tools(api, names, tool_choice=None):
    if api == "chat":
        body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}],
                "tools": [{**CHAT_TOOL, "function": {**CHAT_TOOL["function"], "name": n}} for n in names]}
    elif api == "responses":
        body = {"model": "deepseek-v4-pro", "input": "hi", "tools": [{**RESP_TOOL, "name": n} for n in names]}
    else:
        body = {"model": "deepseek-v4-pro", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
                "tools": [{**MSG_TOOL, "name": n} for n in names]}
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    return body


_NAME_FIELD = {"chat": "tools[{}].function.name", "responses": "tools[{}].name", "messages": "tools.{}.name"}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("options", [DEFAULT_OPTIONS, PARITY_OPTIONS], ids=["default", "parity"])
def test_duplicate_tool_names_are_rejected_as_deepseek_recipe(api, options):
    """Two tools of one name render twice under "Available Tool Schemas": a call would be ambiguous.
    Rejected in every API and mode with deepseek-recipe's message (Chat accepted them before)."""
    body = _with_tools(api, ["get_weather", "other", "get_weather"])
    theirs = oracle.convert(api, body)
    assert theirs["message"] == "Tool names must be unique."
    with pytest.raises(RequestError) as info:
        prepare(body, api, options=options)
    assert info.value.message == theirs["message"] and info.value.param == _NAME_FIELD[api].format(2)
    none = {"chat": "none", "responses": "none", "messages": {"type": "none"}}[api]
    body = _with_tools(api, ["get_weather", "get_weather"], tool_choice=none)  # the tools are dropped: accepted
    assert oracle.convert(api, body)["ok"]
    assert prepare(body, api, options=options).token_ids == oracle.convert(api, body)["token_ids"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_tool_names_past_128_characters_accepted_by_default_rejected_in_parity(api):
    body = _with_tools(api, ["get_weather", _LONG])
    theirs = oracle.convert(api, body)
    assert not theirs["ok"] and "string too long" in theirs["message"]
    with pytest.raises(RequestError) as info:
        prepare(body, api, options=PARITY_OPTIONS)
    assert info.value.message == theirs["message"] and info.value.param == _NAME_FIELD[api].format(1)
    assert replace(DEFAULT_OPTIONS, long_tool_names="reject").long_tool_names == PARITY_OPTIONS.long_tool_names
    prep = prepare(body, api)  # default: accepted, the name rendered as given
    assert _LONG in prep.prompt.text
    short = _with_tools(api, ["get_weather", "x" * 128])
    assert prepare(short, api, options=PARITY_OPTIONS).token_ids == oracle.convert(api, short)["token_ids"]


# --- class 9: Chat max_completion_tokens without max_tokens ---------------------------------------


def test_max_completion_tokens_limits_the_completion_by_default_ignored_in_parity():
    """LangChain's ChatOpenAI and the openai SDK's current field: deepseek-recipe ignores it (no limit:
    the engine may generate to the end of the window); recipe uses it as ``max_tokens``."""
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 7}
    theirs = oracle.convert("chat", body)
    assert theirs["ok"] and theirs["conversion"]["max_tokens"] is None
    parity = prepare(body, "chat", options=PARITY_OPTIONS)
    assert parity.conversion()["max_tokens"] is None and parity.engine.max_tokens == 393216
    ours = prepare(body, "chat")
    assert ours.token_ids == theirs["token_ids"] == parity.token_ids  # the prompt is the same
    assert ours.conversion()["max_tokens"] == 7 and ours.engine.max_tokens == 7
    # max_tokens wins when both are given (deepseek-recipe reads only it)
    both = prepare({**body, "max_tokens": 9}, "chat")
    assert both.engine.max_tokens == 9 == oracle.convert("chat", {**body, "max_tokens": 9})["conversion"]["max_tokens"]
    for bad, words in [("7", "valid integer (got str)"), (7.0, "valid integer (got float)"), (True, "valid integer (got bool)"),
                       (-1, "greater than or equal to 0"), (2**32, "less than or equal to 4294967295")]:
        assert oracle.convert("chat", json.dumps({**body, "max_completion_tokens": bad}))["ok"]  # ignored there
        with pytest.raises(RequestError) as info:
            prepare({**body, "max_completion_tokens": bad}, "chat")
        assert info.value.param == "max_completion_tokens" and words in info.value.message
        assert prepare({**body, "max_completion_tokens": bad}, "chat", options=PARITY_OPTIONS).engine.max_tokens == 393216
    with pytest.raises(RequestError) as info:
        prepare({**body, "max_completion_tokens": 0}, "chat")
    assert info.value.param == "max_completion_tokens" and "[1, 393216]" in info.value.message


# --- class 13: histories interleaved around pending tool calls ------------------------------------

CALL1 = {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}
CALL2 = {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'}
OUT1 = {"type": "function_call_output", "call_id": "c1", "output": "18C"}
OUT2 = {"type": "function_call_output", "call_id": "c2", "output": "24C"}
HOOK = {"role": "developer", "content": "A hook: the user is in a hurry."}


def _reasoning(text, rid):
    return {"type": "reasoning", "id": rid, "summary": [], "content": [{"type": "reasoning_text", "text": text}]}


def _said(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _responses(items, model="deepseek-v4-pro"):
    return {"model": model, "tools": [RESP_TOOL], "input": [{"role": "user", "content": "Weather?"}, *items]}


def _chat(messages, model="deepseek-v4-pro"):
    calls = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    return {"model": model, "tools": [CHAT_TOOL], "messages": [
        {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": calls}, *messages]}


#: interleaved history (accepted by default) -> the order deepseek-recipe accepts, which it renders as
INTERLEAVED = {
    "responses-developer_between_call_and_output": (
        "responses", _responses([CALL1, HOOK, OUT1]), _responses([CALL1, OUT1, HOOK])),
    "responses-system_between_two_outputs": (
        "responses", _responses([CALL1, CALL2, OUT1, {"role": "system", "content": "S"}, OUT2]),
        _responses([CALL1, CALL2, OUT1, OUT2, {"role": "system", "content": "S"}])),
    "responses-reasoning_and_calls_interleaved": (
        "responses", _responses([_reasoning("think 1", "rs1"), _said("Checking."), CALL1, _reasoning("think 2", "rs2"), CALL2, OUT1, OUT2]),
        _responses([_reasoning("think 1", "rs1"), _reasoning("think 2", "rs2"), _said("Checking."), CALL1, CALL2, OUT1, OUT2])),
    "responses-message_between_calls_then_developer": (
        "responses", _responses([CALL1, _said("And Rome."), CALL2, HOOK, OUT2, OUT1]),
        _responses([_said("And Rome."), CALL1, CALL2, OUT2, OUT1, HOOK])),
    "chat-system_between_tool_calls_and_tool_message": (
        "chat", _chat([{"role": "system", "content": "A hook."}, {"role": "tool", "tool_call_id": "c1", "content": "18C"}]),
        _chat([{"role": "tool", "tool_call_id": "c1", "content": "18C"}, {"role": "system", "content": "A hook."}])),
    "chat-developer_between_tool_calls_and_tool_message": (
        "chat", _chat([{"role": "developer", "content": "A hook."}, {"role": "tool", "tool_call_id": "c1", "content": "18C"},
                       {"role": "user", "content": "And?"}]),
        _chat([{"role": "tool", "tool_call_id": "c1", "content": "18C"}, {"role": "user", "content": "A hook."},
               {"role": "user", "content": "And?"}])),
}


@pytest.mark.parametrize("case", list(INTERLEAVED))
@pytest.mark.parametrize("thinking", [True, False])
def test_interleaved_history_is_accepted_by_default_rejected_in_parity(case, thinking):
    """Codex with a hook (a developer message before the call's output), pi-ai (reasoning, message and calls
    interleaved): OpenAI accepts them, deepseek-recipe answers 400. recipe renders them as deepseek-recipe
    renders the same history in the order the template needs (results right after their calls, the turn's
    reasoning / text / calls as one assistant turn)."""
    api, body, reordered = INTERLEAVED[case]
    effort = {"chat": {"reasoning_effort": "high" if thinking else "none"},
              "responses": {"reasoning": {"effort": "high" if thinking else "none"}}}[api]
    body, reordered = {**body, **effort}, {**reordered, **effort}
    _rejected_by_parity(body, api)
    theirs = oracle.convert(api, reordered)
    assert theirs["ok"], theirs
    ours = prepare(body, api)
    assert ours.prompt.text == theirs["prompt"]
    assert ours.token_ids == theirs["token_ids"] == prepare(reordered, api, options=PARITY_OPTIONS).token_ids


@pytest.mark.parametrize("case", list(INTERLEAVED))
def test_interleaved_history_on_v41(case):
    """DeepSeek-V4.1 (system messages in place): the same reordering, compared as prompts with
    deepseek-recipe's V4.1 path (the ids need V4.1's vocabulary)."""
    api, body, reordered = INTERLEAVED[case]
    body, reordered = {**body, "model": "deepseek-v4.1-flash"}, {**reordered, "model": "deepseek-v4.1-flash"}
    if api == "chat":  # a Chat developer message is a system message on V4.1 (class 1)
        reordered["messages"] = [dict(m, role="system") if m.get("content") == "A hook." else m for m in reordered["messages"]]
    theirs = oracle.convert(api, reordered)
    assert theirs["ok"], theirs
    assert prepare(body, api).prompt.text == theirs["prompt"]
    with pytest.raises(RequestError):
        prepare(body, api, options=PARITY_OPTIONS)


@pytest.mark.parametrize("items, param", [
    ([CALL1, {"role": "user", "content": "late"}, OUT1], "input[2]"),  # a user message still needs the outputs first
    ([CALL1, HOOK], "input[3]"),  # an output that never comes
    ([CALL1, HOOK, {"type": "function_call_output", "call_id": "c9", "output": "?"}], "input[3].call_id"),
])
def test_interleaved_history_still_needs_every_output(items, param):
    with pytest.raises(RequestError) as info:
        prepare(_responses(items), "responses")
    assert info.value.param == param


def test_interleaved_chat_history_still_needs_every_tool_message():
    with pytest.raises(RequestError) as info:
        prepare(_chat([{"role": "system", "content": "A hook."}, {"role": "user", "content": "And?"}]))
    assert info.value.param == "messages[3]" and "tool_call_id" in info.value.message
