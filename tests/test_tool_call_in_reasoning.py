"""A complete, well-formed tool-call block written inside the reasoning (before ``</think>``) is a call,
as deepseek-recipe makes it; any other block there stays reasoning text. Every family with DSML or
``<｜tool▁calls▁begin｜>`` syntax, the three APIs, streamed = non-streamed, every chunking
(docs/streaming.md, "Tool calls inside the reasoning")."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from output_parity_support import ids_of, split_at, stream_payloads
from output_support import opts, run_ids, split_ids

import chat_output_support as chat_support
import messages_output_support as messages_support
import responses_output_support as responses_support
from recipe.conversation import ParsingOptions, ToolArguments
from recipe.output.driver import response
from recipe.pipeline import prepare
from recipe.tokenizer import load_v3_tokenizer

V4_CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">x</｜DSML｜parameter>\n'
           '<｜DSML｜parameter name="n" string="false">[1, 2]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
V41_CALL = V4_CALL.replace("｜tool_calls", "｜ calls").replace("｜invoke", "｜ invoke").replace("｜parameter", "｜ parameter")
V32_CALL = V4_CALL.replace("tool_calls", "function_calls")
FENCED_CALL = ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"a": "x", "n": [1, 2]}\n```'
               '<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
BARE_CALL = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": "x", "n": [1, 2]}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
ARGS = {"a": "x", "n": [1, 2]}

#: model -> (the well-formed block in its syntax, V3 vocabulary?)
MODELS = {
    "deepseek-v4-pro": (V4_CALL, False),
    "deepseek-v4.1-flash": (V41_CALL, False),
    "deepseek-v3.2": (V32_CALL, True),
    "deepseek-r1": (FENCED_CALL, True),
    "deepseek-v3.1": (BARE_CALL, True),
}


def _ids(model: str, text: str) -> list[int]:
    return load_v3_tokenizer().encode_with_special_tokens(text) if MODELS[model][1] else ids_of(text)


def _broken(model: str, how: str) -> str:
    """The model's well-formed block, spoiled one way (each must stay reasoning)."""
    block = MODELS[model][0]
    dsml = block.startswith("<｜DSML")
    if how == "undeclared":
        return block.replace('name="f"', 'name="rm"') if dsml else block.replace(">f", ">rm")
    if how == "no_closer":
        return block[: block.rindex("</" if dsml else "<｜tool▁calls▁end")]
    if how == "text_inside":
        return block.replace(">x<", ">x<", 1).replace("\n</", "\nI wonder\n</", 1) if dsml else block.replace(
            "<｜tool▁call▁end｜>", "<｜tool▁call▁end｜> I wonder ", 1)
    if how == "empty":
        return block[: block.index(">") + 1] + "\n" + block[block.rindex("</" if dsml else "<｜tool▁calls▁end"):]
    raise AssertionError(how)


# ---------------------------------------------------------------- the parser, against deepseek-recipe


def test_block_then_think_end_is_deepseek_recipes_call():
    """The reported shape: reasoning, a complete block, ``</think>``. deepseek-recipe's accumulated
    Chat response (reasoning before the block, the call, no content) is ours, plus the note."""
    pytest.importorskip("deepseek_recipe")
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "q"}], "reasoning_effort": "high",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    ids = ids_of("Let me check.\n\n" + V4_CALL + "</think>")
    theirs = chat_support.oracle_run(body, [ids], "stop")[1]["choices"][0]
    for how in ("one", "all", 3, 5):
        payloads = chat_support.stream_payloads(body, split_ids(ids, how), "stop", seed=3)
        ours = chat_support.accumulate_chunks(payloads)
        assert ours["recipe"] == {"notes": ["tool_call_in_reasoning"]}
        m, t = ours["choices"][0], theirs
        assert m["finish_reason"] == t["finish_reason"] == "tool_calls"
        assert m["message"]["reasoning_content"] == t["message"]["reasoning_content"] == "Let me check."
        assert (m["message"].get("content") or "") == t["message"]["content"] == ""
        got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m["message"]["tool_calls"]]
        want = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in t["message"]["tool_calls"]]
        assert got == want == [("f", ARGS)]


def test_reasoning_around_the_block_is_kept():
    """deepseek-recipe drops everything after the block; ours keeps the rest of the reasoning and the
    answer (the call is the same)."""
    r = run_ids(opts(True, tools=["f"]), [ids_of("Plan.\n\n" + V4_CALL + "\n\nThen answer.</think>Done.")])
    assert (r.reasoning_content, r.content) == ("Plan.\n\nThen answer.", "Done.")
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("f", ARGS)]
    assert r.notes == ("tool_call_in_reasoning",) and r.finish_reason == "tool_calls"


@pytest.mark.parametrize("text", [
    "I could write <｜DSML｜tool_calls> here.",
    'A bare <｜DSML｜invoke name="f">\n</｜DSML｜invoke> is not a block.',
    V4_CALL.replace('string="true"', "") + " (no string attribute)",
    V4_CALL.replace('name="n"', 'name="a"') + " (a parameter twice)",
])
def test_anything_else_stays_reasoning_with_a_note(text):
    for how in ("one", "all", 2):
        r = run_ids(opts(True, tools=["f"]), split_ids(ids_of("R " + text + "</think>A"), how))
        assert (r.reasoning_content, r.content, r.tool_calls) == ("R " + text, "A", ())
        assert r.notes == ("dsml_in_reasoning",) and r.finish_reason == "stop"


def test_without_declared_tools_the_block_is_reasoning_without_a_note():
    r = run_ids(opts(True), [ids_of("R " + V4_CALL + "</think>A")])
    assert (r.reasoning_content, r.content, r.tool_calls, r.notes) == ("R " + V4_CALL, "A", (), ())


def test_a_strict_tool_needs_its_required_parameters():
    strict = ParsingOptions(parse_tool_calls=True, thinking_stage="reasoning", tool_names=("f",),
                            tool_arguments={"f": ToolArguments(required=frozenset({"a", "b"}))})
    r = run_ids(strict, [ids_of("R " + V4_CALL + "</think>A")])
    assert (r.reasoning_content, r.tool_calls, r.notes) == ("R " + V4_CALL, (), ("dsml_in_reasoning",))
    strict = ParsingOptions(parse_tool_calls=True, thinking_stage="reasoning", tool_names=("f",),
                            tool_arguments={"f": ToolArguments(required=frozenset({"a", "n"}))})
    r = run_ids(strict, [ids_of("R " + V4_CALL + "</think>A")])
    assert [c.name for c in r.tool_calls] == ["f"] and r.reasoning_content == "R "


def test_block_ids_are_reasoning_tokens():
    """The block comes before ``</think>``: its ids count as reasoning tokens, in every chunking."""
    ids = ids_of("R\n\n" + V4_CALL + "\n\nmore</think>A")
    want = len(ids_of("R\n\n" + V4_CALL + "\n\nmore"))
    for how in ("one", "all", 2, 7):
        assert run_ids(opts(True, tools=["f"]), split_ids(ids, how)).reasoning_tokens == want


# ---------------------------------------------------------------- every family, every API, every chunking


def _body(api: str, model: str) -> dict:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "array"}}}
    if api == "chat":
        return {"model": model, "messages": [{"role": "user", "content": "q"}], "thinking": {"type": "enabled"},
                "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    if api == "responses":
        return {"model": model, "input": "q", "reasoning": {"effort": "high"},
                "tools": [{"type": "function", "name": "f", "parameters": schema, "strict": False}]}
    return {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "q"}],
            "thinking": {"type": "enabled", "budget_tokens": 1024}, "tools": [{"name": "f", "input_schema": schema}]}


def _stream_vs_response(api: str, model: str, ids: list[int], cuts: list[int]) -> dict:
    """The folded stream (these cuts) equals the non-streamed response; returns the response."""
    prep = prepare(_body(api, model), api)
    kw = {"seed": 5, "response_id": "r_1", "created": 1700000000, "prompt_tokens": 10}
    if MODELS[model][1] is False and model.startswith("deepseek-v4.1"):
        from v41_support import synthetic_v41_tokenizer

        kw["tokenizer"] = synthetic_v41_tokenizer()
    payloads = stream_payloads(prep, split_at(ids, cuts), "stop", start=True, **kw)
    whole = response(prep, ids, finish="stop", **kw)
    if api == "chat":
        folded = chat_support.accumulate_chunks(payloads)
        assert folded["choices"] == whole["choices"] and folded.get("recipe") == whole.get("recipe")
        m = whole["choices"][0]["message"]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m.get("tool_calls") or []]
        return {"reasoning": m.get("reasoning_content") or "", "content": m["content"] or "", "calls": calls,
                "notes": (whole.get("recipe") or {}).get("notes", [])}
    if api == "responses":
        responses_support.check_invariants(payloads)
        assert payloads[-1]["response"]["output"] == whole["output"]
        assert payloads[-1]["response"].get("recipe") == whole.get("recipe")
        out = whole["output"]
        return {"reasoning": "".join(p["text"] for it in out if it["type"] == "reasoning" for p in it["content"]),
                "content": "".join(p["text"] for it in out if it["type"] == "message" for p in it["content"]),
                "calls": [(it["name"], json.loads(it["arguments"])) for it in out if it["type"] == "function_call"],
                "notes": (whole.get("recipe") or {}).get("notes", [])}
    folded = messages_support.fold(payloads)
    assert folded["content"] == whole["content"] and folded.get("recipe") == whole.get("recipe")
    c = whole["content"]
    return {"reasoning": "".join(b["thinking"] for b in c if b["type"] == "thinking"),
            "content": "".join(b["text"] for b in c if b["type"] == "text"),
            "calls": [(b["name"], b["input"]) for b in c if b["type"] == "tool_use"],
            "notes": (whole.get("recipe") or {}).get("notes", [])}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("model", list(MODELS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(0, 10_000), max_size=12), after=st.sampled_from(["", "\n\nmore thought"]))
def test_complete_block_is_a_call_in_every_api_and_chunking(api, model, cuts, after):
    text = "Plan it.\n\n" + MODELS[model][0] + after + "</think>Answer."
    got = _stream_vs_response(api, model, _ids(model, text), cuts)
    assert got["calls"] == [("f", ARGS)]
    assert got["reasoning"] == "Plan it." + after
    assert got["content"] == "Answer."
    assert "tool_call_in_reasoning" in got["notes"] and "dsml_in_reasoning" not in got["notes"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("how", ["undeclared", "no_closer", "text_inside", "empty"])
def test_broken_block_stays_reasoning_in_every_api_and_chunking(api, model, how):
    block = _broken(model, how)
    text = "Plan it.\n\n" + block + "</think>Answer."
    ids = _ids(model, text)
    rnd = random.Random(f"{api}{model}{how}")
    for cuts in ([], list(range(len(ids))), [rnd.randrange(len(ids)) for _ in range(5)]):
        got = _stream_vs_response(api, model, ids, cuts)
        assert got["calls"] == []
        assert got["reasoning"] == ("Plan it.\n\n" + block).rstrip("\n")  # (newlines before </think> are dropped)
        assert got["content"] == "Answer."
        assert "dsml_in_reasoning" in got["notes"] and "tool_call_in_reasoning" not in got["notes"]
