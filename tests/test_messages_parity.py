"""Anthropic Messages requests: the deepseek-recipe 0.2.0 conformance rows, plus hand-picked cases run
through deepseek-recipe live (the oracle) — same prompt, ranges, ids, conversion and errors."""

from __future__ import annotations

import json
from dataclasses import replace

import oracle
import pytest
from messages_support import normalise_oracle, run_messages

from fixtures import CONVERSION_KEYS, api_requests
from recipe.api.errors import error_body
from recipe.api.messages import messages_to_conversation, parse_messages_request
from recipe.conversation import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS, Options

ROWS = api_requests("messages")


def test_vectors_present():
    assert len(ROWS) >= 15
    assert sum("error" in r for r in ROWS) >= 6


@pytest.mark.parametrize("row", [r for r in ROWS if "error" not in r], ids=lambda r: r["id"])
def test_accepted_row(row):
    ours = run_messages(row["request"])
    assert ours["ok"], ours.get("message")
    assert ours["prompt"] == row["prompt"]
    assert ours["special_ranges"] == row["special_ranges"]
    assert ours["token_ids"] == row["token_ids"]
    conv = ours["conv"]
    got = dict(
        ours["conversion"],
        reasoning_effort=conv.reasoning_effort,
        tool_choice=conv.tool_choice.mode,
        response_format=conv.response_format.type,
    )
    for key in CONVERSION_KEYS:
        assert got[key] == row["conversion"][key], key


@pytest.mark.parametrize("row", [r for r in ROWS if "error" in r], ids=lambda r: r["id"])
def test_rejected_row(row):
    ours = run_messages(row["request"])
    assert not ours["ok"]
    err: RequestError = ours["error"]
    expected = row["error"]["body"]["error"]["message"]
    assert err.status == row["error"]["status"] == 400
    assert err.stage == row["error"]["stage"]
    if err.message.startswith("The supported API model names are"):
        # the list depends on the model table the vectors were made with; the tail does not
        assert err.message.rsplit(", but", 1)[1] == expected.rsplit(", but", 1)[1]
    else:
        assert err.message == expected
    assert error_body("messages", err)["error"]["type"] == row["error"]["body"]["error"]["type"]


# --- hand-picked cases, deepseek-recipe as the oracle ---------------------------------------------

OBJ = {"type": "object"}
TOOLS = [{"name": "f", "input_schema": OBJ}]
DEFERRED = {"name": "g", "input_schema": OBJ, "defer_loading": True}
IMG = {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
IMG64 = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
STU = {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
WSR = {"type": "web_search_tool_result", "tool_use_id": "s", "content": []}


def T(t, **kw):
    return {"type": "text", "text": t, **kw}


def TH(t):
    return {"type": "thinking", "thinking": t, "signature": "sig"}


def DOC(source):
    return {"type": "document", "source": source}


def TU(i, inp=None, name="f"):
    return {"type": "tool_use", "id": i, "name": name, "input": {} if inp is None else inp}


def TR(i, content=None, **kw):
    b = {"type": "tool_result", "tool_use_id": i, **kw}
    if content is not None:
        b["content"] = content
    return b


def TA(name):
    return {"type": "tool_addition", "tool": {"type": "tool_reference", "name": name}}


def U(c):
    return {"role": "user", "content": c}


def A(c):
    return {"role": "assistant", "content": c}


def S(c):
    return {"role": "system", "content": c}


def B(*msgs, **kw):
    body = {"model": "deepseek-v4-pro", "max_tokens": 100, "messages": list(msgs), "thinking": {"type": "disabled"}}
    body.update(kw)
    return {k: v for k, v in body.items() if v is not None}


CASES = {
    # system forms
    "system blocks with cache_control and an empty block": B(U("q"), system=[T("a", cache_control={"type": "ephemeral"}), T("")]),
    "system empty list": B(U("q"), system=[]),
    "system image block": B(U("q"), system=[IMG]),
    "system tool_addition": B(U("q"), system=[TA("f")], tools=TOOLS),
    "system number": B(U("q"), system=3),
    "system role string": B(U("q"), S("R")),
    "system role first": B(S("R"), U("q")),
    "system role blocks, image, document": B(U("q"), S([T("R1"), IMG, DOC({"type": "text", "media_type": "text/plain", "data": "d"})])),
    "system role empty": B(U("q"), S(""), S([]), S([T("")])),
    "system role two empty blocks": B(U("q"), S([T(""), T("")])),
    "system role tool_result": B(U("q"), S([TR("x")])),
    "system role thinking": B(S([TH("x")])),
    "system role server tool use": B(S([STU])),
    "top-level system plus system role": B(U("q"), S("mid"), system="top"),
    # user blocks
    "user blocks each a message": B(U("a"), U(""), U([T("x"), T(""), T("y")])),
    "user image and documents": B(U([IMG64, DOC({"type": "base64", "media_type": "application/pdf", "data": "A"}), DOC({"type": "url", "url": "u"}), DOC({"media_type": "zz/yy"})])),
    "user empty content list": B(U([])),
    "user thinking block": B(U([TH("x")])),
    "user tool_use block": B(U([TU("x")])),
    "user tool_addition block": B(U([TA("f")]), tools=TOOLS),
    "user web_search_tool_result": B(U([WSR])),
    "user redacted_thinking": B(U([{"type": "redacted_thinking", "data": "x"}])),
    "image media type not allowed": B(U([{"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "A"}}])),
    "document without source": B(U([{"type": "document"}])),
    "developer role": B({"role": "developer", "content": "x"}),
    "content null": B(U(None)),
    # assistant blocks
    "assistant text joined, thinking joined": B(U("q"), A([TH("T1"), T("x"), TH("T2"), T("y")]), tools=TOOLS, thinking={"type": "enabled"}),
    "assistant empty texts": B(U("q"), A([T("a"), T(""), T("b")]), A([T(""), T("b")]), A([T("a"), T("")]), A([T(""), T("")])),
    "assistant empty thinking parts": B(U("q"), A([TH(""), TH("b"), T("x")]), tools=TOOLS, thinking={"type": "enabled"}),
    "assistant only thinking": B(U("q"), A([TH("T")])),
    "assistant image": B(U("q"), A([T("see"), IMG])),
    "assistant empty list": B(U("q"), A([])),
    "assistant empty string": B(U("q"), A("")),
    "assistant null": B(U("q"), A(None)),
    "assistant tool_result": B(U("q"), A([TR("x", "r")])),
    "assistant server_tool_use": B(U("q"), A([STU])),
    "assistant web_search_tool_result": B(U("q"), A([WSR])),
    "consecutive assistants": B(U("q"), A("A"), A("B"), U("C")),
    "trailing assistant is no prefix": B(U("q"), A("prefill")),
    "assistant first": B(A("x"), U("q")),
    # tool_use / tool_result
    "tool_use input printed as prompt JSON": B(
        U("q"),
        A([TU("b", {"a": 1.0, "b": [1, 2], "c": "s\u00e9\n", "d": {"x": None}, "e": 1e-5, "g": 18446744073709551616, "h": 1.5e-7}), TU("a", "city=Paris"), TU("c", None), TU("d", 3)]),
        U([TR("b", "rb"), TR("a"), TR("c", []), TR("d", [T("x"), IMG, T(""), T("y")], is_error=True)]),
        tools=TOOLS,
    ),
    "tool_use input null": B(U("q"), A([{"type": "tool_use", "id": "a", "name": "f", "input": None}]), U([TR("a")]), tools=TOOLS),
    "tool_use unknown tool name kept": B(U("q"), A([TU("a", name="a b")]), U([TR("a", "r")]), tools=TOOLS),
    "tool_result document and tool_reference": B(U("q"), A([TU("a")]), U([TR("a", [DOC({}), {"type": "tool_reference", "tool_name": "f"}])]), tools=TOOLS),
    "tool_reference unknown": B(U("q"), A([TU("a")]), U([TR("a", [T("x"), {"type": "tool_reference", "tool_name": "zz"}])]), tools=TOOLS),
    "tool results then text": B(U("q"), A([TU("t1")]), U([TR("t1", "r"), T("more")]), tools=TOOLS),
    "tool ids sorted, results follow": B(U("q"), A([TU("call_2"), TU("call_10"), TU("B")]), U([TR("call_10", "x"), TR("B", "y"), TR("call_2", "z")]), tools=TOOLS),
    "thinking history with tools": B(U("q"), A([TH("R"), TU("a")]), U([TR("a", "r")]), A([T("done")]), U("again"), tools=TOOLS, thinking={"type": "enabled"}),
    "missing result": B(U("q"), A([TU("t1"), TU("t2"), TU("t3")]), U([TR("t2")]), tools=TOOLS),
    "missing result, last message": B(U("q"), A([TU("b"), TU("a")]), tools=TOOLS),
    "text before result": B(U("q"), A([TU("b"), TU("a"), TU("c")]), U([T("x"), TR("a")]), tools=TOOLS),
    "text between results": B(U("q"), A([TU("t1"), TU("t2")]), U([TR("t1"), T("x"), TR("t2")]), tools=TOOLS),
    "string user after tool_use": B(U("q"), A([TU("t1")]), U(""), tools=TOOLS),
    "assistant after tool_use": B(U("q"), A([TU("t1")]), A([TU("t2")]), U([TR("t1"), TR("t2")]), tools=TOOLS),
    "system role after tool_use": B(U("q"), A([TU("t1")]), S(""), U([TR("t1")]), tools=TOOLS),
    "text after tool_use": B(U("q"), A([T("pre"), TU("t1"), TU("B"), T("post")]), U([TR("t1"), TR("B")]), tools=TOOLS),
    "thinking after tool_use": B(U("q"), A([TU("t1"), TH("x")]), U([TR("t1")]), tools=TOOLS),
    "orphan result": B(U("q"), U([TR("t9")]), tools=TOOLS),
    "orphan after results": B(U("q"), A([TU("t1")]), U([TR("t1"), T("x"), TR("t9")]), tools=TOOLS),
    "results split over two turns": B(U("q"), A([TU("t1"), TU("t2")]), U([TR("t1")]), U([TR("t2")]), tools=TOOLS),
    "duplicate tool_use ids": B(U("q"), A([T("x"), TU("t1"), TU("t2"), TU("t1")]), U([TR("t1"), TR("t2")]), tools=TOOLS),
    "duplicate tool_result": B(U("q"), A([TU("t1")]), U([TR("t1"), T("x"), TR("t1")]), tools=TOOLS),
    "same id in two rounds": B(U("q"), A([TU("t1")]), U([TR("t1")]), A([TU("t1")]), U([TR("t1")]), tools=TOOLS),
    "empty content after tool_use": B(U("q"), A([TU("t1")]), U([]), tools=TOOLS),
    "tool_use without tools declared": B(U("q"), A([TU("t1")]), U([TR("t1", "r")])),
    "missing tool_use id": B(U("q"), A([{"type": "tool_use", "name": "f", "input": {}}])),
    "missing tool_use input": B(U("q"), A([{"type": "tool_use", "id": "a", "name": "f"}])),
    "tool_result content number": B(U("q"), A([TU("a")]), U([TR("a", 3)]), tools=TOOLS),
    "tool_result search_result part": B(U("q"), A([TU("a")]), U([TR("a", [{"type": "search_result"}])]), tools=TOOLS),
    # tool_addition
    "tool_addition of a deferred tool": B(U("q"), S([T("R"), TA("g"), T("R2")]), tools=TOOLS + [DEFERRED]),
    "tool_addition only": B(U("q"), S([TA("g")]), tools=TOOLS + [DEFERRED]),
    "tool_addition unknown": B(U("q"), S([TA("nope")]), tools=TOOLS),
    "tool_addition in assistant": B(U("q"), A([TU("t1"), TA("f")]), tools=TOOLS),
    "all tools deferred": B(U("q"), tools=[DEFERRED]),
    # tools
    "tool extras accepted": B(U("q"), tools=[{"name": "f", "description": None, "input_schema": {"properties": {"b": {}}, "type": "object", "x-y": 1}, "strict": "x", "cache_control": "x", "defer_loading": None}]),
    "strict ignored": B(U("q"), tools=[{"name": "f", "input_schema": {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}, "strict": True}]),
    "tool without input_schema": B(U("q"), tools=[{"name": "f"}]),
    "tool schema not an object": B(U("q"), tools=[{"name": "f", "input_schema": {"type": "string"}}]),
    "tool empty name": B(U("q"), tools=[{"name": "", "input_schema": OBJ}]),
    "tool bad name": B(U("q"), tools=[TOOLS[0], {"name": "a b", "input_schema": OBJ}]),
    "tool duplicate names": B(U("q"), tools=[TOOLS[0], {"name": "f"}]),
    "duplicate before later schema": B(U("q"), tools=[TOOLS[0], TOOLS[0], {"name": "g"}]),
    "server tool": B(U("q"), tools=[{"type": "bash_20250124", "name": "bash"}]),
    "typed custom tool": B(U("q"), tools=[{"type": "custom", "name": "f", "input_schema": OBJ}]),
    "server tool after bad schema": B(U("q"), tools=[{"name": "f"}, {"type": "web_search_20250305", "name": "w"}]),
    "bad name before messages": B(tools=[{"name": ""}]),
    "no messages": B(),
    "schema checked after messages": B(U([TR("t9")]), tools=[{"name": "f"}]),
    "defer_loading not a bool": B(U("q"), tools=[dict(DEFERRED, defer_loading="x")]),
    # tool_choice
    "tool_choice any is auto": B(U("q"), tools=TOOLS, tool_choice={"type": "any", "disable_parallel_tool_use": True}),
    "tool_choice tool": B(U("q"), tools=TOOLS + [{"name": "g", "input_schema": OBJ}], tool_choice={"type": "tool", "name": "g"}),
    "tool_choice none": B(U("q"), A([TU("a")]), U([TR("a")]), tools=TOOLS, tool_choice={"type": "none"}),
    "tool_choice none skips schemas": B(U("q"), tools=[{"name": "f"}, {"name": "f"}], tool_choice={"type": "none"}),
    "tool_choice unknown tool": B(U("q"), tools=TOOLS, tool_choice={"type": "tool", "name": "zz"}),
    "tool_choice tool without tools": B(U("q"), tool_choice={"type": "tool", "name": "zz"}),
    "tool_choice tool while thinking": B(U("q"), tools=TOOLS, tool_choice={"type": "tool", "name": "f"}, thinking={"type": "enabled"}),
    "tool_choice any while thinking": B(U("q"), tools=TOOLS, tool_choice={"type": "any"}, thinking={"type": "enabled"}),
    "tool_choice string": B(U("q"), tool_choice="auto"),
    # thinking and effort
    **{f"effort {e}": B(U("q"), thinking=None, output_config={"effort": e}) for e in ("none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max")},
    "effort as a one-key map": B(U("q"), thinking=None, output_config={"effort": {"low": None}}),
    "thinking type as a one-key map": B(U("q"), thinking={"type": {"disabled": None}}),
    "disabled wins over effort": B(U("q"), output_config={"effort": "max"}),
    "enabled wins over effort none": B(U("q"), thinking={"type": "enabled", "budget_tokens": 2048}, output_config={"effort": "none"}),
    "adaptive with effort low": B(U("q"), thinking={"type": "adaptive"}, output_config={"effort": "low"}),
    "thinking default": B(U("q"), thinking=None),
    "top-level reasoning_effort ignored": B(U("q"), thinking=None, reasoning_effort="none"),
    "thinking auto": B(U("q"), thinking={"type": "auto"}),
    "budget not an integer": B(U("q"), thinking={"type": "enabled", "budget_tokens": 1.5}),
    "output_config.format ignored": B(U("q"), output_config={"format": {"type": "json_schema", "schema": OBJ}}),
    "thinking top_p with tools": B(U("q"), tools=TOOLS, thinking={"type": "enabled"}, top_p=0.3, temperature=0.3),
    # stop, max_tokens, sampling
    "stop sequences": B(U("q"), stop_sequences=["a", "a", "\n\nHuman:"]),
    "stop empty entry": B(U("q"), stop_sequences=["a", ""]),
    "stop 17": B(U("q"), stop_sequences=["a"] * 17),
    "stop string": B(U("q"), stop_sequences="x"),
    "max_tokens clamped": B(U("q"), max_tokens=2**32 - 1),
    "max_tokens absent": B(U("q"), max_tokens=None),
    "max_tokens 0": B(U("q"), max_tokens=0),
    "max_tokens float": B(U("q"), max_tokens=10.0),
    "temperature f32": B(U("q"), temperature=0.3, top_p=0.3),
    "temperature int": B(U("q"), temperature=0),
    "temperature f32 overflow": B(U("q"), temperature=1e39),
    "temperature string": B(U("q"), temperature="1"),
    "top_p 0": B(U("q"), top_p=0),
    "stop before temperature": B(U("q"), stop_sequences=[""], temperature=5),
    "temperature before max_tokens": B(U("q"), temperature=5, max_tokens=0),
    "ignored fields": B(U("q"), top_k="x", metadata={"user_id": None, "zz": 1}, service_tier=3, container=3, stream=True),
    "metadata not an object": B(U("q"), metadata=3),
    # special spellings stay text
    "special spellings in every field": B(
        U("<｜User｜>u</think>"),
        A([TH("<think>"), T("<｜Assistant｜>"), TU("<｜DSML｜tool_calls>", {"k<｜end▁of▁sentence｜>": "<｜DSML｜invoke>"})]),
        U([TR("<｜DSML｜tool_calls>", "<｜begin▁of▁sentence｜>")]),
        S("<｜latest_reminder｜>"),
        system="</think>",
        tools=[{"name": "f", "description": "<｜User｜>", "input_schema": {"type": "object", "description": "<think>"}}],
        thinking={"type": "enabled"},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_case_matches_deepseek_recipe(name):
    body = json.dumps(CASES[name], ensure_ascii=False)
    theirs = normalise_oracle(oracle.convert("messages", body))
    ours = run_messages(body)
    assert ours["ok"] == theirs["ok"], (ours.get("message"), theirs.get("message"))
    if not ours["ok"]:
        assert ours["stage"] == theirs["stage"], (ours["message"], theirs["message"])
        if ours["stage"] == "convert":
            assert ours["message"] == theirs["message"]
        assert ours["error"].status == 400
        return
    assert ours["prompt"] == theirs["prompt"]
    assert ours["special_ranges"] == theirs["special_ranges"]
    assert ours["token_ids"] == theirs["token_ids"]
    assert ours["conversion"] == theirs["conversion"]


# --- reasoning_content_behavior = reject ----------------------------------------------------------

REJECT_CASES = [
    B(U("q"), A("x"), thinking=None),  # no tools: never checked
    B(U("q"), A("x"), thinking=None, tools=TOOLS),
    B(U("q"), A("x"), thinking=None, tools=TOOLS, tool_choice={"type": "none"}),
    B(U("q"), A("x"), tools=TOOLS),  # thinking off
    B(U("q"), A("x"), U(""), thinking=None, tools=TOOLS),  # an empty user turn still counts
    B(U("q"), A("x"), S("R"), thinking=None, tools=TOOLS),  # a system reminder is a user turn
    B(U("q"), A("x"), S(""), thinking=None, tools=TOOLS),  # an empty one is dropped
    B(U("q"), A([TH(""), TU("a")]), U([TR("a")]), A("x"), thinking=None, tools=TOOLS),  # results are no user turn
    B(U("q"), A([TH("t"), TU("a")]), U([TR("a")]), A([TH("t"), T("x")]), thinking=None, tools=TOOLS),
    B(U("q"), A("x"), thinking=None, tools=[{"name": "f"}]),  # checked before the schemas
    B(U("q"), A("x"), U([TR("zz")]), thinking=None, tools=[{"name": "f"}]),  # after the pairing
]


@pytest.mark.parametrize("body", REJECT_CASES, ids=range(len(REJECT_CASES)))
def test_reject_behaviour_matches_deepseek_recipe(body):
    opts = oracle.options().with_reasoning_content_behavior(oracle.dr.ReasoningContentBehavior.Reject)
    try:
        oracle.dr.MessagesRequest(json.dumps(body)).convert(opts)
        expected = None
    except oracle.dr.ConversionError as exc:
        expected = str(exc)
    ours = run_messages(body, replace(PARITY_OPTIONS, reasoning_content_behavior="reject"))
    assert (None if ours["ok"] else ours["message"]) == expected


# --- ids, conversation shape, field paths ---------------------------------------------------------


def _conv(body, options: Options = PARITY_OPTIONS):
    return messages_to_conversation(parse_messages_request(body), options)


def test_every_id_survives():
    """peer-failures #7: a tool_result's tool_use_id is kept, as is every tool_use id and name."""
    body = B(U("q"), A([TH("r"), T("t"), TU("toolu_B", {"x": 1}), TU("toolu_A", "s", name="g")]),
             U([TR("toolu_A", "ra"), TR("toolu_B", [T("rb")]), T("next")]), tools=TOOLS + [{"name": "g", "input_schema": OBJ}])
    conv = _conv(body)
    user, asst, tool_a, tool_b, nxt = conv.messages
    assert user == UserMessage("q")
    assert asst.tool_calls[0].id == "toolu_B" and asst.tool_calls[0].name == "f" and asst.tool_calls[0].arguments == '{"x": 1}'
    assert asst.tool_calls[1].id == "toolu_A" and asst.tool_calls[1].name == "g" and asst.tool_calls[1].arguments == '"s"'
    assert asst.content == "t" and asst.reasoning_content is None  # thinking off: reasoning dropped, as the target does
    assert tool_a == ToolMessage("toolu_A", "ra") and tool_b == ToolMessage("toolu_B", "rb")
    assert nxt == UserMessage("next")


def test_conversation_shape():
    conv = _conv(B(S("R"), U([T("a"), IMG]), A([TH("T"), T("x")]), system=[T("s1"), T("s2")], thinking={"type": "enabled"}))
    assert conv.messages == (
        SystemMessage("s1\n\ns2"),
        UserMessage("<system-reminder>\nR\n</system-reminder>"),
        UserMessage("a"),
        UserMessage("[Unsupported Image]"),
        AssistantMessage("x", "T"),
    )
    assert conv.thinking and conv.reasoning_effort == "high" and conv.max_tokens == 100


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (B(U([T("x"), {"type": "tool_use", "id": 3, "name": "f", "input": {}}])), "messages.0.content.1.id"),
        (B(U([{"type": "image", "source": {"type": "url"}}])), "messages.0.content.0.source.url"),
        (B(S([{"type": "tool_addition", "tool": {"type": "x"}}])), "messages.0.content.0.tool.type"),
        (B(U("q"), tool_choice={"type": "tool"}), "tool_choice.name"),
        (B(U("q"), tools=[{"name": 3}]), "tools.0.name"),
        (B(U("q"), output_config={"effort": "zz"}), "output_config.effort"),
    ],
)
def test_parse_error_paths(body, param):
    with pytest.raises(RequestError) as info:
        parse_messages_request(body)
    assert info.value.stage == "parse" and info.value.param == param


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (B(U("q"), A([TU("t1")]), U([TR("t1"), TR("t9")]), tools=TOOLS), "messages.2.content.1.tool_use_id"),
        (B(U("q"), A([TU("t1"), TU("t1")]), tools=TOOLS), "messages.1.content.1.id"),
        (B(U([])), "messages.0.content"),
        (B(U("q"), tools=[{"name": "a b", "input_schema": OBJ}]), "tools.0.name"),
        (B(U("q"), tools=[{"name": "f"}]), "tools.0.input_schema"),
        (B(U("q"), tools=[{"type": "bash_20250124", "name": "bash"}]), "tools.0"),
        (B(U("q"), stop_sequences=["a", ""]), "stop_sequences.1"),
        (B(U("q"), max_tokens=0), "max_tokens"),
    ],
)
def test_convert_error_paths(body, param):
    with pytest.raises(RequestError) as info:
        _conv(body)
    assert info.value.stage == "convert" and info.value.param == param


def test_anthropic_error_body_names_the_field():
    with pytest.raises(RequestError) as info:
        _conv(B(U("q"), stop_sequences=[""]))
    body = error_body("messages", info.value)
    assert body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "stop_sequences.0: Invalid 'stop[0]': empty string. Expected a string with minimum length 1, but got an empty string instead.",
        },
    }


def test_max_tokens_bound_follows_options():
    opts = replace(PARITY_OPTIONS, non_thinking_max_tokens=1000)
    assert _conv(B(U("q"), max_tokens=5000), opts).max_tokens == 1000
    assert _conv(B(U("q"), max_tokens=999), opts).max_tokens == 999
