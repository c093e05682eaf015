"""Streaming tool calls: ``CompletionStream.push_sse`` (plain argument tokens framed from the parser's
per-vocabulary plain entries and the encoder's call template, no event built; held-tag completions
memoised) gives exactly the bytes of ``sse(push(…))`` (payload dicts, then orjson), push by push.

Random tool-call outputs: one or more blocks of invokes of declared and undeclared tools, string and
non-string parameters (and ones without ``string=``), values holding markup-like text (``<``, ``</``,
``">``, DSML openers and closers, EOS and role spellings), quotes, backslashes, control and non-ASCII
characters and newlines, both DSML spellings (DeepSeek-V4's and V4.1's, mixed), outputs cut
mid-call; for Chat, Responses and Messages, V4 and V4.1 models, thinking or not, stop strings;
one id per push, random chunkings or all at once. The parser's ``push_fragments`` is also checked
against ``push`` directly: same events once its plain entries are read back as argument deltas.
"""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from output_parity_support import ids_of, split_at

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.output.driver import CompletionStream
from recipe.output.events import ToolCallArgumentsDelta
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

TOOLS = ("get_weather", "run")
MODELS = ("deepseek-v4-pro", "deepseek-v4.1-flash")

#: (block, invoke, parameter) tag names: DeepSeek-V4's spelling and V4.1's spaced one
SPELLINGS = (("tool_calls", "invoke", "parameter"), (" calls", " invoke", " parameter"))

#: pieces of argument values: ordinary text and everything that could be read as markup
VALUE_PIECES = [
    "Paris", " and", " more words", "東京 ü", "🤖", "a < b", "c > d", "<", "</", ">", '">', '"', "\\", "\\n",
    "\n", "\n\n", "\t", "\x01", "\u2028", "{", "}", '{"k": [1, 2]}', "42", " 3.5 ", "true", "null",
    "<｜DSML｜", "</｜DSML｜", "｜DSML｜", "<｜DSML｜parameter", "</｜DSML｜parameter", "</｜DSML｜parameter>",
    "</｜DSML｜ parameter>", "</｜DSML｜invoke>", "<｜DSML｜invoke name=\"run\">", "</think>", "<｜User｜>",
    "<｜end▁of▁sentence｜>", "STOP", "<p>x</p>", 'name="x" string="true"',
]


def _request(api: str, model: str, thinking: bool, stop: bool) -> dict:
    if api == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": "Go."}], "stream": True,
                "reasoning_effort": "high" if thinking else "none",
                "tools": [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in TOOLS]}
        if stop:
            body["stop"] = ["STOP"]
    elif api == "responses":
        body = {"model": model, "input": "Go.", "stream": True, "reasoning": {"effort": "high" if thinking else "none"},
                "tools": [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in TOOLS]}
    else:
        body = {"model": model, "max_tokens": 4000, "messages": [{"role": "user", "content": "Go."}], "stream": True,
                "thinking": {"type": "enabled" if thinking else "disabled"},
                "tools": [{"name": n, "input_schema": {"type": "object"}} for n in TOOLS]}
        if stop:
            body["stop_sequences"] = ["STOP"]
    return body


@st.composite
def tool_outputs(draw) -> str:
    """Model output text: optional reasoning, prose, then blocks of invokes (random spellings and values)."""
    out = []
    if draw(st.booleans()):
        out.append("Thinking about it.</think>")
    out.append(draw(st.sampled_from(["", "Sure.", "Let me check.\n\n", "a STOP b "])))
    for _ in range(draw(st.integers(1, 2))):
        block = draw(st.sampled_from(SPELLINGS))[0]
        out.append(f"<｜DSML｜{block}>\n")
        for _ in range(draw(st.integers(1, 3))):
            _, inv, par = draw(st.sampled_from(SPELLINGS))
            name = draw(st.sampled_from([*TOOLS, "other"]))
            out.append(f'<｜DSML｜{inv} name="{name}">\n')
            for k in range(draw(st.integers(0, 3))):
                kind = draw(st.sampled_from(['string="true"', 'string="false"', "", 'string="maybe"']))
                value = "".join(draw(st.lists(st.sampled_from(VALUE_PIECES), max_size=8)))
                value += draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6))
                attrs = f' name="p{k}"' + (f" {kind}" if kind else "")
                out.append(f"<｜DSML｜{par}{attrs}>{value}</｜DSML｜{par}>\n")
            out.append(f"</｜DSML｜{inv}>\n")
        out.append(f"</｜DSML｜{block}>")
        out.append(draw(st.sampled_from(["", "\n\nDone.", " trailing STOP text"])))
    return "".join(out)


@pytest.fixture(autouse=True, scope="module")
def _warm_tables():
    """Token texts, then plain entries, are tabled per vocabulary at a token's first sights: read the
    value pieces three times first, so the examples take the shortcuts from their first push."""
    text = '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="run">\n<｜DSML｜parameter name="a" string="true">{}' \
        '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'.format(" ".join(VALUE_PIECES) + " Go. Sure")
    for _ in range(3):
        p = OutputParser(ParsingOptions(parse_tool_calls=True, tool_names=TOOLS), load_tokenizer(), tool_call_id=1)
        for i in ids_of(text):
            p.push((i,))


_COMPLETED_AT = re.compile(rb'"completed_at":\d+')


def _run(api: str, body: dict, chunks: list[list[int]], fast: bool, finish: str) -> list[bytes]:
    cs = CompletionStream(prepare(body, api), seed=5, created=9, prompt_tokens=10, response_id="resp-t")
    out = [cs.sse(cs.start())]
    for c in chunks:
        out.append(cs.push_sse(c) if fast else cs.sse(cs.push(c)))
    out.append(cs.sse(cs.finish(finish)))
    return [_COMPLETED_AT.sub(b'"completed_at":0', b) for b in out]


@settings(max_examples=150, deadline=None)
@given(tool_outputs(), st.sampled_from(["chat", "responses", "messages"]), st.sampled_from(MODELS), st.booleans(),
       st.booleans(), st.sampled_from(["one", "one", "random", "all"]), st.lists(st.integers(0, 10_000), max_size=40),
       st.integers(0, 10_000), st.sampled_from(["stop", "length"]))
def test_push_sse_tool_calls_equal_sse_of_push(text, api, model, thinking, stop, how, cuts, cut_end, finish):
    body = _request(api, model, thinking, stop)
    ids = ids_of(text)
    if cut_end % 3 == 0:  # an output cut short (max tokens): mid-call, mid-tag, mid-value
        ids = ids[: cut_end % (len(ids) + 1)]
    if how == "one":
        chunks = [[i] for i in ids]
    elif how == "all":
        chunks = [ids] if ids else []
    else:
        chunks = split_at(ids, cuts)
    assert _run(api, body, chunks, True, finish) == _run(api, body, chunks, False, finish)


@settings(max_examples=100, deadline=None)
@given(tool_outputs(), st.booleans())
def test_push_fragments_is_push(text, declared):
    """Fed one id at a time, ``push_fragments`` gives ``push``'s events, a tuple ``f`` (a plain entry,
    or a tag completion's argument piece) standing for ``ToolCallArgumentsDelta(open_call, f[1])``
    (the JSON literal of that text in ``f[4]``)."""
    tok = load_tokenizer()
    opts = ParsingOptions(parse_tool_calls=True, tool_names=TOOLS if declared else ())
    a = OutputParser(opts, tok, tool_call_id=1)
    b = OutputParser(opts, tok, tool_call_id=1)
    for i in ids_of(text):
        want = a.push((i,))
        got = b.push_fragments((i,))
        if type(got) is tuple:
            assert orjson.loads(got[4]) == got[1] and got[4] == orjson.dumps(got[1])
            got = [ToolCallArgumentsDelta(b.open_call, got[1])]
        assert got == want
    assert b.finish() == a.finish()


def test_fragments_really_run():
    """Plain tokens of a string value come back as plain entries, and push_sse frames them without
    the encoder's general methods."""
    text = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="run">\n<｜DSML｜parameter name="cmd" string="true">'
            'cd /tmp && ls -la "some dir" | head</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    for _ in range(3):  # (texts, then plain entries, are tabled per vocabulary at a token's first sights)
        p = OutputParser(ParsingOptions(parse_tool_calls=True, tool_names=TOOLS), load_tokenizer(), tool_call_id=1)
        kinds = [type(p.push_fragments((i,))) for i in ids_of(text)]
    assert kinds.count(tuple) >= 8, kinds
    for api in ("chat", "responses", "messages"):
        cs = CompletionStream(prepare(_request(api, MODELS[0], False, False), api), seed=1, created=1)
        cs.sse(cs.start())
        framed = []
        frag = cs._frag_sse
        cs._frag_sse = lambda t, js: framed.append(t) or frag(t, js)
        frames = b"".join(cs.push_sse((i,)) for i in ids_of(text))
        assert len(framed) >= 8 and all(orjson.dumps(t) in frames for t in framed), (api, framed)


@settings(max_examples=100, deadline=None)
@given(tool_outputs(), st.booleans(), st.sampled_from(["one", "random"]), st.lists(st.integers(0, 10_000), max_size=30))
def test_shortcuts_give_the_general_events(text, declared, how, cuts):
    """The one-token shortcuts (plain entries, memoised tag completions) and the bulk invokes give the
    events of the general tag-by-tag scan (shortcuts off), push by push, on these outputs."""
    tok = load_tokenizer()
    opts = ParsingOptions(parse_tool_calls=True, tool_names=TOOLS if declared else ())
    ids = ids_of(text)
    chunks = [[i] for i in ids] if how == "one" else split_at(ids, cuts)
    fast = OutputParser(opts, tok, tool_call_id=1)
    general = OutputParser(opts, tok, tool_call_id=1)
    general._fast_ok = False  # (as tests/test_output_fastpath.py switches them off)
    general._fast_texts = {}
    general._fast_plain = {}
    general._re_run = None
    for c in chunks:
        assert fast.push(c) == general.push(c)
    assert fast.finish("length") == general.finish("length")


def test_end_id_in_a_long_push():
    """A push of many ids is cut at its first end id (found by id; the byte test only skips the scan
    when no end id's bytes occur); the EOS spelling written with ordinary tokens is not an end id
    (it ends the output by its text, the id count goes on to the end id), and an id outside the
    vocabulary after the end id is never decoded (as before the byte test)."""
    tok = load_tokenizer()
    opts = ParsingOptions(parse_tool_calls=True, tool_names=TOOLS)
    body = ids_of('Sure.<｜DSML｜tool_calls>\n<｜DSML｜invoke name="run">\n<｜DSML｜parameter name="a" string="true">x'
                  '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    eos = tok.special_id("<｜end▁of▁sentence｜>")
    spelled = tok.encode_ordinary("<｜end▁of▁sentence｜>")  # the spelling as text tokens
    assert eos not in spelled

    def run(ids):
        p = OutputParser(opts, tok, tool_call_id=1)
        return p.push(ids) + p.finish("length")

    whole = run(body + [eos] + body)
    assert whole[-1].reason == "stop" and whole[-1].tool_calls == 1 and whole[-1].completion_tokens == len(body) + 1
    assert whole == run(body + [eos])
    cut = run([*ids_of("Hi "), *spelled, *ids_of(" there")] + [eos, 10**9])  # no KeyError: never decoded
    assert cut[-1].reason == "stop" and cut[-1].completion_tokens == len(ids_of("Hi ")) + len(spelled) + len(ids_of(" there")) + 1
    assert [e.text for e in cut[:-1]] == ["Hi "]  # (the spelling in text ends the output too, by its text)
    with pytest.raises(KeyError):
        run(body + [10**9])
