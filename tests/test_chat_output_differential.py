"""Hypothesis differential of the output side: well-formed DeepSeek-V4 outputs (reasoning, content,
DSML blocks calling declared tools with typed parameters, EOS or not) give deepseek-recipe 0.2.0's
accumulated Chat response — content, reasoning, calls (name and parsed arguments), finish reason,
completion tokens — for every chunking, streamed and not (docs/streaming.md; EOS as text is
deviation 5, the newline after a trailing ``<`` deviation 23)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chat_output_support as cos
from output_parity_support import ids_of

pytest.importorskip("deepseek_recipe")

EOS = "<｜end▁of▁sentence｜>"
BLOCK = '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="t0">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
TOOL_BODY = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none",
             "tools": [{"type": "function", "function": {"name": "t0", "parameters": {"type": "object", "properties": {}}}}]}

text = st.lists(st.sampled_from([*"ab c\n\t{}[]\"':,<>/&=09é中🤖\\", "\n\n", "  ", "</", "<x>", "string"]), max_size=20).map("".join)
ident = st.text(alphabet="abcxyz_", min_size=1, max_size=6)
value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=False, allow_infinity=False), text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(ident, inner, max_size=3)), max_leaves=6)
TYPES = {"string": text, "integer": st.integers(-(10**20), 10**20), "number": st.floats(allow_nan=False, allow_infinity=False),
         "boolean": st.booleans(), "object": st.dictionaries(ident, value, max_size=3), "array": st.lists(value, max_size=3)}


@st.composite
def outputs(draw):
    """(request body, model output text, finish)."""
    tools = [{"name": f"t{k}", "props": draw(st.dictionaries(ident, st.sampled_from(list(TYPES)), max_size=4))}
             for k in range(draw(st.integers(1, 3)))]
    thinking = draw(st.booleans())
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"type": "function", "function": {"name": t["name"], "parameters": {
                "type": "object", "properties": {p: {"type": ty} for p, ty in t["props"].items()}}}} for t in tools]}
    if not thinking:
        body["reasoning_effort"] = "none"
    out = (draw(text) + "</think>" if thinking else "") + draw(text)
    if draw(st.integers(0, 3)):
        out += "\n\n<｜DSML｜tool_calls>\n"
        for _ in range(draw(st.integers(1, 3))):
            t = draw(st.sampled_from(tools))
            out += f'<｜DSML｜invoke name="{t["name"]}">\n'
            for p, ty in t["props"].items():
                if draw(st.booleans()):
                    v = draw(TYPES[ty])
                    raw = v if ty == "string" else json.dumps(v, ensure_ascii=draw(st.booleans()))
                    out += f'<｜DSML｜parameter name="{p}" string="{"true" if ty == "string" else "false"}">{raw}</｜DSML｜parameter>\n'
            out += "</｜DSML｜invoke>\n"
        out += "</｜DSML｜tool_calls>"
    out += draw(st.sampled_from([EOS, ""]))
    finish = "stop" if out.endswith(EOS) else draw(st.sampled_from(["stop", "length"]))
    return body, out, finish


def _summary(resp: dict) -> dict:
    choice = resp["choices"][0]
    msg = choice["message"]
    return {"content": msg.get("content"), "reasoning": msg.get("reasoning_content"),
            "calls": [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg.get("tool_calls") or []],
            "finish": choice["finish_reason"], "completion_tokens": resp["usage"]["completion_tokens"]}


@settings(max_examples=150, deadline=None)
@given(outputs(), st.integers(1, 7))
def test_well_formed_outputs_accumulate_as_deepseek_recipe(case, size):
    body, out, finish = case
    ids = ids_of(out)
    theirs = _summary(cos.oracle_run(body, [ids], finish)[1])
    for key in ("content", "reasoning"):  # deviation 5: deepseek-recipe prints EOS as text
        if isinstance(theirs[key], str) and theirs[key].endswith(EOS):
            theirs[key] = theirs[key][: -len(EOS)]
    if isinstance(theirs["content"], str) and theirs["content"].endswith("<\n") and theirs["calls"]:
        theirs["content"] = theirs["content"][:-1]  # deviation 23
    streamed = cos.accumulate_chunks(cos.stream_payloads(body, [ids[i:i + size] for i in range(0, len(ids), size)], finish))
    assert _summary(streamed) == theirs
    assert _summary(cos.our_response(body, ids, finish)) == theirs


@pytest.mark.parametrize("before, theirs", [("<", "<\n"), ("<\n\n\n", "<\n"), ("x<", "x<\n"), ("<\n", "<\n"), ("<<", "<<\n")])
def test_deviation_23_no_newline_kept_after_a_trailing_lt_before_a_tool_block(before, theirs):
    """Content ending in ``<`` right before a tool block: deepseek-recipe keeps one newline of the
    separator after it (``"<\\n"``); recipe trims the separator as after any other character."""
    out = before + ("" if before.endswith("\n") else "\n\n") + BLOCK + EOS
    ids = ids_of(out)
    oracle_resp = cos.oracle_run(TOOL_BODY, [ids], "stop")[1]
    assert oracle_resp["choices"][0]["message"]["content"] == theirs
    assert cos.oracle_run(TOOL_BODY, [ids_of("a" + out[len(before.rstrip(chr(10))):])], "stop")[1]["choices"][0]["message"]["content"] == "a"
    for chunks in ([ids], [[i] for i in ids]):
        ours = cos.accumulate_chunks(cos.stream_payloads(TOOL_BODY, chunks, "stop"))
        assert ours["choices"][0]["message"]["content"] == before.rstrip("\n")
        assert ours["choices"][0]["message"]["tool_calls"][0]["function"] == {"name": "t0", "arguments": "{}"}
    assert cos.our_response(TOOL_BODY, ids, "stop")["choices"][0]["message"]["content"] == before.rstrip("\n")
