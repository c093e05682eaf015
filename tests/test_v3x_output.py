"""Output parsers of DeepSeek V3 / R1 / V3.1 (``<｜tool▁calls▁begin｜>`` syntaxes) and V3.2 (DSML
``function_calls`` read as text): hand-written and template-generated outputs, every chunking,
no lost text, valid JSON arguments, calls only of declared tools."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from v3x_output_support import encode, opts, parse_all_ways, parse_ids, summary
from v3x_support import FIXTURES, jinja_render

from recipe.encodings.deepseek_v3_2.reference import encode_messages
from recipe.encodings.v3_shared.json_stream import JsonStream

TCS, TCE, TC, TE, SEP = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                         "<｜tool▁call▁end｜>", "<｜tool▁sep｜>")
EOS = "<｜end▁of▁sentence｜>"
TOOLS = ("get_weather", "get_time")


def fenced(name: str, args: str) -> str:
    return f"{TC}function{SEP}{name}\n```json\n{args}\n```{TE}"


def bare(name: str, args: str) -> str:
    return f"{TC}{name}{SEP}{args}{TE}"


# ---------------------------------------------------------------------------------------------
# Hand-written outputs
# ---------------------------------------------------------------------------------------------


def test_v3_two_calls_after_content():
    out = "Checking.\n\n" + TCS + fenced("get_weather", '{"city": "Paris"}') + "\n" + fenced("get_time", '{"tz": "UTC"}') + TCE + EOS
    r = parse_all_ways("deepseek_v3", opts(tools=TOOLS), out)
    assert r.content == "Checking."
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}')]
    assert r.finish_reason == "tool_calls" and not r.notes
    assert r.completion_tokens == len(encode(out))


def test_r1_reasoning_then_call():
    out = "<think>\nNeed weather.\n</think>\n\n" + TCS + fenced("get_weather", '{"city": "Oslo"}') + TCE + EOS
    r = parse_all_ways("deepseek_r1", opts(True, tools=TOOLS), out)
    assert r.reasoning_content == "Need weather." and r.content == ""
    assert r.tool_calls[0].arguments == '{"city": "Oslo"}'
    ids = encode(out)
    assert r.reasoning_tokens == ids.index(128799)  # every id before </think>


def test_r1_without_opening_tag_and_without_thinking():
    r = parse_all_ways("deepseek_r1", opts(True), "Prefilled reasoning\n</think>\n\nAnswer." + EOS)
    assert (r.reasoning_content, r.content) == ("Prefilled reasoning", "Answer.")
    r = parse_all_ways("deepseek_r1", opts(True), "<think>\n\n</think>\n\n4" + EOS)
    assert (r.reasoning_content, r.content) == ("", "4")


def test_v31_bare_syntax_and_thinking():
    out = "Thought</think>Sure." + TCS + bare("get_weather", '{"city": "Rome"}') + bare("get_time", "{}") + TCE + EOS
    r = parse_all_ways("deepseek_v3_1", opts(True, tools=TOOLS), out)
    assert (r.reasoning_content, r.content) == ("Thought", "Sure.")
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("get_weather", '{"city": "Rome"}'), ("get_time", "{}")]


def test_truncated_call_is_closed():
    out = TCS + fenced("get_weather", '{"city": "Par')[: -len("\n```" + TE)]
    r = parse_all_ways("deepseek_v3", opts(tools=TOOLS), out)
    assert r.tool_calls[0].arguments == '{"city": "Par"}'
    assert "truncated_tool_call" in r.notes
    r = parse_ids("deepseek_v3_1", opts(tools=TOOLS), [encode(TCS + TC + "get_time" + SEP + '{"n": 1')], finish="length")
    assert r.tool_calls[0].arguments == '{"n": 1}' and r.finish_reason == "length"


def test_bare_call_without_block_opener():
    r = parse_all_ways("deepseek_v3_1", opts(tools=TOOLS), "Hi " + bare("get_time", '{"tz": "UTC"}') + EOS)
    assert r.content == "Hi " and r.tool_calls[0].name == "get_time"
    r = parse_all_ways("deepseek_v3", opts(tools=TOOLS), fenced("get_time", "{}") + EOS)
    assert r.content == "" and r.tool_calls[0].arguments == "{}"


def test_complete_block_inside_reasoning_is_a_call():
    """A complete, well-formed block of a declared tool in the reasoning is a call (the reasoning around it
    is kept; tests/test_tool_call_in_reasoning.py); a block that is not stays reasoning."""
    block = TCS + fenced("get_weather", '{"city": "X"}') + TCE
    r = parse_all_ways("deepseek_r1", opts(True, tools=TOOLS), "<think>I could write " + block + " here</think>Done." + EOS)
    assert (r.reasoning_content, r.content) == ("I could write  here", "Done.")
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("get_weather", '{"city": "X"}')]
    assert "tool_call_in_reasoning" in r.notes
    quoted = TCS + fenced("get_weather", '{"city": "X"}')
    r = parse_all_ways("deepseek_r1", opts(True, tools=TOOLS), "<think>I could write " + quoted + " here</think>Done." + EOS)
    assert r.reasoning_content == "I could write " + quoted + " here"
    assert r.content == "Done." and not r.tool_calls and "dsml_in_reasoning" in r.notes


def test_undeclared_tool_stays_text():
    call = fenced("rm_rf", '{"path": "/"}')
    out = "Ok " + TCS + call + TCE + EOS
    r = parse_all_ways("deepseek_v3", opts(tools=TOOLS), out)
    assert not r.tool_calls and r.content == "Ok " + TCS + call + TCE
    assert "undeclared_tool" in r.notes
    mixed = TCS + fenced("get_time", "{}") + "\n" + call + TCE + EOS
    r = parse_all_ways("deepseek_v3", opts(tools=TOOLS), mixed)
    assert [c.name for c in r.tool_calls] == ["get_time"] and call in r.content


def test_no_tools_declared_means_no_calls():
    out = TCS + bare("get_time", "{}") + TCE + EOS
    r = parse_all_ways("deepseek_v3_1", opts(), out)
    assert not r.tool_calls and r.content == out[: -len(EOS)] and not r.notes


def test_arguments_that_break_are_closed_and_the_rest_is_content():
    r = parse_all_ways("deepseek_v3_1", opts(tools=TOOLS), TCS + bare("get_time", '{"tz": "UTC", oops}') + TCE + EOS)
    assert r.tool_calls[0].arguments == '{"tz": "UTC"}'
    assert r.content == ", oops}" and "invalid_json_argument" in r.notes  # the held comma too: nothing is lost
    r = parse_all_ways("deepseek_v3_1", opts(tools=TOOLS), TCS + bare("get_time", "tz=UTC") + TCE + EOS)
    assert not r.tool_calls and "tz=UTC" in r.content


def test_text_after_a_block_is_kept():
    out = TCS + bare("get_time", "{}") + TCE + "\n\nMore text." + EOS
    r = parse_all_ways("deepseek_v3_1", opts(tools=TOOLS), out)
    assert r.content == "More text." and len(r.tool_calls) == 1


def test_stop_sequence_and_json_mode():
    r = parse_all_ways("deepseek_v3", opts(stop=["END"]), "abc END def" + EOS)
    assert r.content == "abc " and r.finish_reason == "stop"
    r = parse_all_ways("deepseek_v3", opts(json_mode=True), '```json\n{"a": 1}\n```' + EOS)
    assert r.content == '{"a": 1}'
    r = parse_all_ways("deepseek_v3", opts(json_mode=True), "Sure: {}" + EOS)
    assert r.content == "Sure: {}" and "json_not_found" in r.notes


def test_unclosed_reasoning_is_noted():
    r = parse_all_ways("deepseek_v3_1", opts(True), "thinking forever")
    assert r.reasoning_content == "thinking forever" and r.content == "" and "unclosed_reasoning" in r.notes


def test_v32_dsml_dialect():
    block = ('\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
             '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
             '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
             "</｜DSML｜invoke>\n</｜DSML｜function_calls>")
    r = parse_all_ways("deepseek_v3_2", opts(True, tools=TOOLS), "Plan.</think>Let me look." + block + EOS)
    assert (r.reasoning_content, r.content) == ("Plan.", "Let me look.")
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("get_weather", {"city": "Paris", "days": 3})]
    assert not r.notes
    assert "｜DSML｜" not in encode.__globals__["tok"]().special_tokens  # the dialect is text in this vocabulary
    # V4's block name in a V3.2 output is a corrupted spelling: recovered only whole, noted
    v4 = block.replace("function_calls", "tool_calls")
    r = parse_all_ways("deepseek_v3_2", opts(True, tools=TOOLS), "Plan.</think>" + v4 + EOS)
    assert [c.name for c in r.tool_calls] == ["get_weather"] and "recovered_dsml" in r.notes
    # a bare invoke
    inv = block.split("function_calls>\n", 1)[1].rsplit("\n</", 1)[0]
    r = parse_all_ways("deepseek_v3_2", opts(False, tools=TOOLS), inv + EOS)
    assert [c.name for c in r.tool_calls] == ["get_weather"]


def test_v32_truncated_and_quoted_calls():
    block = ('\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
             '<｜DSML｜parameter name="city" string="true">Par')
    r = parse_all_ways("deepseek_v3_2", opts(True, tools=TOOLS), "Plan.</think>" + block)
    assert r.tool_calls[0].arguments == '{"city": "Par"}' and "truncated_tool_call" in r.notes
    quoted = "<｜DSML｜function_calls>\n" + block.split("\n", 3)[3]
    r = parse_all_ways("deepseek_v3_2", opts(True, tools=TOOLS), "I might write " + quoted + "</think>No." + EOS)
    assert r.reasoning_content == "I might write " + quoted and r.content == "No." and not r.tool_calls


def test_v32_block_from_a_public_test():
    """vLLM's test feeding a V3.2-style block to its V4 parser (shared raw_outputs sample): the V3.2
    parser reads it as the call it is."""
    raw = ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="search">\n<｜DSML｜parameter name="query" string="true">vllm'
           '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>')
    r = parse_all_ways("deepseek_v3_2", opts(tools=("search",)), raw)
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("search", '{"query": "vllm"}')] and r.content == ""


def test_v32_official_round_trips():
    """DeepSeek's own test: the encoder's rendering of an assistant turn parses back to it."""
    data = json.loads((FIXTURES / "deepseek_v3_2_official" / "test_input.json").read_text(encoding="utf-8"))
    msgs = data["messages"]
    msgs[0]["tools"] = data["tools"]
    names = tuple(t["function"]["name"] for t in data["tools"])
    for k in (4, len(msgs) - 6):
        text = encode_messages([msgs[k]], "thinking", context=msgs[:k])
        r = parse_all_ways("deepseek_v3_2", opts(True, tools=names), text)
        want = msgs[k]
        assert r.reasoning_content == want.get("reasoning_content", "")
        assert r.content == (want.get("content") or "")
        assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [
            (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in want.get("tool_calls") or ()]


# ---------------------------------------------------------------------------------------------
# Generated outputs: an assistant turn rendered by the published template parses back to it
# ---------------------------------------------------------------------------------------------

_words = st.text(st.sampled_from("ab Zé中\n`{}\"'<>|"), min_size=1, max_size=12).filter(lambda s: s.strip())
_value = st.one_of(st.integers(-5, 10**6), st.booleans(), st.none(), _words, st.lists(st.integers(0, 3), max_size=3))
_args = st.dictionaries(st.sampled_from(["city", "n", "q"]), _value, max_size=3)


@settings(max_examples=60, deadline=None)
@given(content=st.one_of(st.just(""), _words), calls=st.lists(st.tuples(st.sampled_from(TOOLS), _args), max_size=3),
       revision=st.sampled_from(["V3-0324", "R1-0528", "V3.1"]), compact=st.booleans())
def test_template_rendered_turns_parse_back(content, calls, revision, compact):
    sep = (",", ":") if compact else None
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a, separators=sep, ensure_ascii=False)}}
                  for i, (n, a) in enumerate(calls)]
    msg = {"role": "assistant", "content": content.strip() or ("" if tool_calls else "ok")}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    user = {"role": "user", "content": "q"}
    before = jinja_render(revision, [user], add_generation_prompt=True, thinking=False)
    full = jinja_render(revision, [user, msg], add_generation_prompt=False, thinking=False)
    assert full.startswith(before)
    output = full[len(before):]
    family = {"V3-0324": "deepseek_v3", "R1-0528": "deepseek_r1", "V3.1": "deepseek_v3_1"}[revision]
    if revision == "V3.1":
        output = output.removeprefix("<｜Assistant｜></think>")
    o = opts(False, tools=TOOLS)
    r = parse_all_ways(family, o, output)
    assert r.content == msg["content"]
    assert [(c.name, c.arguments) for c in r.tool_calls] == [(c["function"]["name"], c["function"]["arguments"]) for c in tool_calls]
    assert not r.notes


# ---------------------------------------------------------------------------------------------
# Mutated outputs: every sentinel word lands in exactly one field, once, in every chunking
# ---------------------------------------------------------------------------------------------

FRAGMENTS = {
    "fenced": [TCS, TCE, TC, TE, SEP, "function", "get_weather", "get_time", "rm", "\n```json\n", "\n```", "```",
               '{"city": "', '"}', "{", "}", ", ", ": ", "[1, 2]", "tr", "ue", "\n", "\n\n", " ", "</think>", "<think>",
               "<｜User｜>", "é", "\\", '"'],
    "bare": [TCS, TCE, TC, TE, SEP, "get_weather", "get_time", "rm", '{"n": ', "1", "}", '{"q": "', '"}', "{}",
             ", ", "[", "]", "null", "\n", " ", "</think>", "<think>", "<", "｜", "\\", '"', "é"],
}


def _mutated(rnd: random.Random, frags: list[str], n: int) -> tuple[str, list[str]]:
    parts, words = [], []
    for k in range(n):
        if rnd.random() < 0.3:
            w = f"Q{k:03d}Z"
            words.append(w)
            parts.append(w)
        else:
            parts.append(rnd.choice(frags))
    return "".join(parts), words


def _well_formed(rnd: random.Random, syntax: str, thinking: bool) -> str:
    """A valid output with sentinel words in its reasoning, content and argument strings."""
    k = iter(range(1000))
    word = lambda: f"Q{next(k):03d}Z"  # noqa: E731
    out = f"<think>\n{word()} {word()}\n</think>\n\n" if thinking else ""
    out += f"{word()} text" if rnd.random() < 0.7 else ""
    calls = [(rnd.choice([*TOOLS, "rm"]), json.dumps({"q": word(), "n": rnd.randint(0, 99), "l": [word()]}))
             for _ in range(rnd.randint(1, 3))]
    make = fenced if syntax == "fenced" else bare
    out += "\n\n" + TCS + ("\n" if syntax == "fenced" else "").join(make(n, a) for n, a in calls) + TCE
    if rnd.random() < 0.3:
        out += f" {word()}"
    return out + EOS


def _mutate(rnd: random.Random, text: str, frags: list[str]) -> str:
    for _ in range(rnd.randint(0, 4)):
        at = rnd.randint(0, len(text))
        op = rnd.random()
        if op < 0.4:
            text = text[:at] + rnd.choice(frags) + text[at:]
        elif op < 0.8:
            text = text[:at] + text[at + rnd.randint(1, 12):]
        else:
            text = text[:at]
    return text


@pytest.mark.parametrize("family,syntax", [("deepseek_v3", "fenced"), ("deepseek_r1", "fenced"), ("deepseek_v3_1", "bare")])
@pytest.mark.parametrize("seed", range(40))
def test_mutated_outputs_lose_nothing(family, syntax, seed):
    rnd = random.Random(seed * 7919 + len(family))
    thinking = family != "deepseek_v3" and rnd.random() < 0.5
    if seed % 4 == 0:
        text, words = _mutated(rnd, FRAGMENTS[syntax], rnd.randint(5, 40))
    else:
        text = _mutate(rnd, _well_formed(rnd, syntax, thinking), FRAGMENTS[syntax])
        words = [f"Q{i:03d}Z" for i in range(60) if f"Q{i:03d}Z" in text]
    o = opts(thinking=thinking, tools=TOOLS)
    r = parse_all_ways(family, o, text)
    hay = r.content + r.reasoning_content + "".join(c.name + c.arguments for c in r.tool_calls)
    for w in words:
        assert hay.count(w) == 1, (w, text, summary(r))
    assert all(c.name in TOOLS for c in r.tool_calls)


DSML_FRAGMENTS = ["<｜DSML｜function_calls>\n", "</｜DSML｜function_calls>", '<｜DSML｜invoke name="get_time">\n',
                  "</｜DSML｜invoke>\n", '<｜DSML｜parameter name="a" string="true">', '<｜DSML｜parameter name="b" string="false">',
                  "</｜DSML｜parameter>\n", "</think>", "<think>", "<｜DSML｜", "｜DSML｜", "\n", " ", "<", '"', "[1, 2]", "é",
                  "<｜DSML｜tool_calls>\n", TCS, TC]


def _dsml_output(rnd: random.Random, thinking: bool) -> str:
    k = iter(range(1000))
    word = lambda: f"Q{next(k):03d}Z"  # noqa: E731
    out = f"{word()} reasoning</think>" if thinking else ""
    out += f"{word()} text" if rnd.random() < 0.7 else ""
    invokes = []
    for _ in range(rnd.randint(1, 3)):
        name = rnd.choice([*TOOLS, "rm"])
        invokes.append(f'<｜DSML｜invoke name="{name}">\n<｜DSML｜parameter name="q" string="true">{word()}</｜DSML｜parameter>\n'
                       f'<｜DSML｜parameter name="n" string="false">[{rnd.randint(0, 9)}, "{word()}"]</｜DSML｜parameter>\n</｜DSML｜invoke>')
    return out + "\n\n<｜DSML｜function_calls>\n" + "\n".join(invokes) + "\n</｜DSML｜function_calls>" + EOS


@pytest.mark.parametrize("seed", range(40))
def test_v32_mutated_outputs_lose_nothing(seed):
    rnd = random.Random(seed)
    thinking = rnd.random() < 0.5
    text = _mutate(rnd, _dsml_output(rnd, thinking), DSML_FRAGMENTS)
    words = [f"Q{i:03d}Z" for i in range(60) if f"Q{i:03d}Z" in text]
    r = parse_all_ways("deepseek_v3_2", opts(thinking=thinking, tools=TOOLS), text)
    hay = r.content + r.reasoning_content + "".join(c.name + c.arguments for c in r.tool_calls)
    for w in words:
        assert hay.count(w) == 1, (w, text, summary(r))


# ---------------------------------------------------------------------------------------------
# The JSON stream behind argument deltas
# ---------------------------------------------------------------------------------------------

_json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                                      st.text(max_size=5)),
                            lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=3), c, max_size=3)),
                            max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _json_values, max_size=4), st.integers(0, 400), st.booleans(), st.integers(1, 5))
def test_json_stream_prefixes_complete_to_json(obj, cut, spaced, step):
    text = json.dumps(obj, ensure_ascii=spaced, separators=(", ", ": ") if spaced else (",", ":"))
    js = JsonStream()
    prefix = text[:cut]
    released = "".join(js.feed(prefix[k:k + step])[0] for k in range(0, len(prefix), step))
    assert text.startswith(released)
    assert js.error < 0
    completed = released + js.close()
    assert isinstance(json.loads(completed), dict)
    if cut >= len(text):
        assert released == text and js.done and js.close() == ""


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from('{}[]":,0123456789.-+eEtruefalsn \\ux\n'), max_size=30))
def test_json_stream_any_text(text):
    js = JsonStream()
    released = ""
    for ch in text:
        out, used = js.feed(ch)
        released += out
        if js.done or js.error >= 0:
            break
    assert text.lstrip(" \t\r\n").startswith(released)  # blanks before the object are not part of it
    assert isinstance(json.loads(released + js.close()), dict)
