"""DeepSeek-V4 output parser: parity with deepseek-recipe 0.2.0, documented deviations, peer failures."""

from __future__ import annotations

import codecs
import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from output_support import (
    chat_options,
    decoded_pieces,
    opts,
    rows,
    run_ids,
    run_text,
    split_ids,
    tok,
)

from recipe.conversation import ParsingOptions
from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.output.events import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    accumulate,
    sse_done,
    sse_event,
)

ID_RE = re.compile(r"^call_\d\d_[A-Za-z0-9]{20}\d{4}$")
CHAT_ROWS = rows("chat_completions.jsonl")
ENC_ROWS = rows("deepseek_v4_completions.jsonl")


def ids_of(text: str) -> list[int]:
    return tok().encode_with_special_tokens(text)


def parse(o: ParsingOptions, text: str, how="one", finish="stop"):
    return run_ids(o, split_ids(ids_of(text), how), finish)


def block(*invokes: str) -> str:
    return "<｜DSML｜tool_calls>\n" + "".join(invokes) + "</｜DSML｜tool_calls>"


def invoke(name: str, *params: tuple[str, str, bool]) -> str:
    body = "".join(
        f'<｜DSML｜parameter name="{k}" string="{"true" if s else "false"}">{v}</｜DSML｜parameter>\n' for k, v, s in params
    )
    return f'<｜DSML｜invoke name="{name}">\n{body}</｜DSML｜invoke>\n'


# ---------------------------------------------------------------- parity: recorded vectors


@pytest.mark.parametrize("row", CHAT_ROWS, ids=[r["scenario"] for r in CHAT_ROWS])
@pytest.mark.parametrize("how", ["one", "all", "text"])
def test_chat_completions_parity(row, how):
    o = chat_options(row["request"])
    ids = row["completion_token_ids"]
    if how == "text":
        r = run_text(o, decoded_pieces(ids), row["backend_finish"])
    else:
        r = run_ids(o, split_ids(ids, how), row["backend_finish"])
    choice = row["accumulated"]["choices"][0]
    msg = choice["message"]
    assert r.content == (msg.get("content") or "")
    assert r.reasoning_content == (msg.get("reasoning_content") or "")
    want_calls = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]
    assert [(c.name, c.arguments) for c in r.tool_calls] == want_calls
    assert [c.index for c in r.tool_calls] == [c["index"] for c in msg.get("tool_calls") or []]
    assert all(ID_RE.match(c.id) for c in r.tool_calls)
    assert r.finish_reason == choice["finish_reason"]
    usage = row["accumulated"]["usage"]
    if how != "all":  # recorded one id per push; a stop match ends the count at the matching push
        assert r.completion_tokens == usage["completion_tokens"]
    if "completion_tokens_details" in usage:
        assert r.reasoning_tokens == usage["completion_tokens_details"]["reasoning_tokens"]


@pytest.mark.parametrize("row", ENC_ROWS, ids=[r["name"] for r in ENC_ROWS])
@pytest.mark.parametrize("how", ["one", "all"])
def test_reference_encoder_completions(row, how):
    o = ParsingOptions(parse_tool_calls=True, thinking_stage="reasoning" if row["thinking_mode"] == "thinking" else None)
    r = run_ids(o, split_ids(row["completion_token_ids"], how))
    m = row["message"]
    assert r.content == m["content"]
    assert r.reasoning_content == m["reasoning_content"]
    assert [(c.name, c.arguments) for c in r.tool_calls] == [
        (c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]
    ]
    assert "end▁of▁sentence" not in r.content + r.reasoning_content


# ---------------------------------------------------------------- parity: rules (oracle-checked values)

RULES = [
    # (options, text, content, reasoning, calls); rows marked "deviation" differ from deepseek-recipe
    (opts(True), "\n\nR1\n\n</think>\n\nA\n\n", "A\n\n", "R1", []),
    (opts(True), "R</think> \n\nA", " \n\nA", "R", []),
    (opts(True), "\n\nR1 \n\n", "", "R1 \n\n", []),
    # deviations 17, 21: a </think> in the answer and role tokens stay text (deepseek-recipe drops the </think>)
    (opts(), "\n \nA</think>B<think>C<｜User｜>D", " \nA</think>B<think>C<｜User｜>D", "", []),
    (opts(), "ab\r\n", "ab\r\n", "", []),
    (opts(stage="reasoning_continuation"), "\n\nx\n\n</think>\n\ny</think>z\n\n", "y</think>z\n\n", "\n\nx", []),
    (opts(stage="content_continuation"), "\n\nx\n\n</think>\n\ny</think>z\n\n",
     "\n\nx\n\n</think>\n\ny</think>z\n\n", "", []),
    (opts(), "\n\nx\n\n</think>\n\ny</think>z\n\n", "x\n\n</think>\n\ny</think>z\n\n", "", []),
    (opts(tools=["f"]), "A <｜DSML｜ inline", "A <｜DSML｜ inline", "", []),  # parity cuts at <｜DSML｜ (deviation 3)
    (opts(tools=["f"]), "A < inline <｜DS", "A < inline <｜DS", "", []),
    (opts(), block(invoke("f")), block(invoke("f")), "", []),  # no tools: DSML is text
    (opts(tools=["f", "g"]), "Checking.\n\n" + block(invoke("f", ("city", "Paris", True))), "Checking.", "",
     [("f", '{"city": "Paris"}')]),
    (opts(tools=["f"]), "Checking. \n\n" + block(invoke("f")), "Checking. ", "", [("f", "{}")]),
    # deviation 18: a repeated parameter keeps its first value, the repeat is content (deepseek-recipe
    # writes the key twice); a well-formed invoke of an undeclared tool is a call, as in deepseek-recipe
    (opts(tools=["f"]), block(invoke("f", ("x", "a", True), ("x", "b", True)), invoke("nope")),
     '<｜DSML｜parameter name="x" string="true">b</｜DSML｜parameter>', "", [("f", '{"x": "a"}'), ("nope", "{}")]),
    (opts(tools=["f"]), block(invoke("f", ("a", 'x\ty\x01\\"é', True), ("b", " 42 ", False), ("c", "2.50", False))),
     "", "", [("f", '{"a": "x\\ty\\u0001\\\\\\"é", "b":  42 , "c": 2.50}')]),
    (opts(tools=["f"], required=True), '<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">1'
     "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", "", "", [("f", '{"a": "1"}')]),
    (opts(True, tools=["f"]), "R</think>" + block(invoke("f", ("a", "x</think>y\n\n", True))), "", "R",
     [("f", '{"a": "x</think>y\\n\\n"}')]),
    (opts(stop=["END"]), "Hello END world", "Hello ", "", []),
    (opts(stop=["END"]), "Hello EN", "Hello EN", "", []),
    (opts(True, stop=["END"]), "R END</think>x END y", "x ", "R END", []),
    (opts(stop=["EN", "ND"]), "xNEND", "xN", "", []),
    (opts(tools=["f"], stop=["x"]), "A\n\nx", "A\n\n", "", []),
    (opts(stop=["é"]), "café!", "caf", "", []),
]


@pytest.mark.parametrize("case", RULES, ids=[repr(c[1])[:40] for c in RULES])
@pytest.mark.parametrize("how", ["one", "all", 3])
def test_rules(case, how):
    o, text, content, reasoning, calls = case
    r = parse(o, text, how)
    assert (r.content, r.reasoning_content, [(c.name, c.arguments) for c in r.tool_calls]) == (content, reasoning, calls)


def test_rules_agree_with_oracle_where_no_deviation():
    """The RULES values above were checked against deepseek-recipe; re-check the parity ones live."""
    oracle = pytest.importorskip("deepseek_recipe")
    from recipe.tokenizer import default_tokenizer_path

    dtok = oracle.Tokenizer.from_file(str(default_tokenizer_path()))
    stages = {None: None, "reasoning": oracle.ThinkingInitialStage.ReasoningStart,
              "reasoning_continuation": oracle.ThinkingInitialStage.ReasoningContinuation,
              "content_continuation": oracle.ThinkingInitialStage.ContentContinuation}
    for o, text, content, reasoning, calls in RULES:
        if "inline" in text or "</think>" in content or "<｜DSML｜parameter" in content:
            continue  # deviations 3, 17, 18
        po = oracle.ParsingOptions(parse_tool_calls=o.parse_tool_calls, starts_in_tool_calls=o.starts_in_tool_calls,
                                   stop_sequences=list(o.stop_sequences),
                                   thinking_initial_stage=stages[o.thinking_stage])
        gen = oracle.ChatCompletionRequest.chunk_generator(_oracle_conv(oracle, o), "c", "m")
        sp = oracle.StreamProcessor(gen, po, dtok)
        resp = oracle.ChatCompletionResponse("c", "m", 0, 0, 0)
        for chunk in (oracle.InferenceChunk.ready(), oracle.InferenceChunk.tokens(ids_of(text)),
                      oracle.InferenceChunk.finish(oracle.InferenceFinishReason.Stop)):
            if sp.finished:
                break
            for ev in sp.push(chunk):
                resp.accumulate(ev)
        m = json.loads(resp.to_json())["choices"][0]["message"]
        got = (m.get("content") or "", m.get("reasoning_content") or "",
               [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []])
        assert got == (content, reasoning, calls), text


def _oracle_conv(oracle, o):
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "q"}],
            "reasoning_effort": "high" if o.thinking_stage == "reasoning" else "none"}
    if o.tool_names:
        body["tools"] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in o.tool_names]
    opt = oracle.ConversionOptions().with_model_alias("deepseek-v4-pro", oracle.ModelVersion.DeepseekV4Pro)
    return oracle.ChatCompletionRequest(json.dumps(body)).convert(opt)


# ---------------------------------------------------------------- deviations (our values)

DEVIATIONS = [
    # missing parameter closer: next opening tag closes it (peer failure 2)
    (opts(tools=["f"]), '<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">x\n<｜DSML｜parameter name="b" '
     'string="false">2</｜DSML｜parameter>\n</｜DSML｜invoke>', "", [("f", '{"a": "x", "b": 2}')], "implicit_parameter_close"),
    # invalid JSON in string="false" becomes a JSON string; empty value too
    (opts(tools=["f"]), block(invoke("f", ("days", "three", False), ("e", "", False))), "",
     [("f", '{"days": "three", "e": ""}')], "invalid_json_argument"),
    (opts(tools=["f"]), block(invoke("f", ("n", "NaN", False))), "", [("f", '{"n": "NaN"}')], "invalid_json_argument"),
    # text after the block is kept
    (opts(tools=["f"]), "A\n\n" + block(invoke("f")) + "\n\nExtra text after.", "A\n\nExtra text after.",
     [("f", "{}")], None),
    (opts(tools=["f"]), block(invoke("f")) + "\n\n", "", [("f", "{}")], None),
    # garbage between invokes / inside an invoke is content, calls still parsed
    (opts(tools=["f", "g"]), block(invoke("f", ("a", "x", True)) + "garbage\n" + invoke("g")), "garbage",
     [("f", '{"a": "x"}'), ("g", "{}")], "text_in_tool_block"),
    (opts(tools=["f"]), '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">x'
     "</｜DSML｜parameter>junk  words<｜DSML｜parameter name=\"b\" string=\"true\">y</｜DSML｜parameter>\n</｜DSML｜invoke>",
     "junk  words", [("f", '{"a": "x", "b": "y"}')], "text_in_tool_block"),
    # truncated call is closed
    (opts(tools=["f"]), '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="city" string="true">Par',
     "", [("f", '{"city": "Par"}')], "truncated_tool_call"),
    (opts(tools=["f"]), '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="n" string="false">[1, 2',
     "", [("f", '{"n": "[1, 2"}')], "truncated_tool_call"),
    # malformed invoke (no quotes) stays content; corrupted spellings stay content byte for byte
    (opts(tools=["f"]), '<｜DSML｜invoke name=f>\n</｜DSML｜invoke>', '<｜DSML｜invoke name=f>\n</｜DSML｜invoke>', [], "stray_dsml"),
    # a corrupted spelling of a complete invoke of a declared tool is recovered (peer failure 9)
    (opts(tools=["read"]), '<｜｜DSML｜｜ invoke name="read">\n</｜｜DSML｜｜ invoke>', "", [("read", "{}")],
     "recovered_dsml"),
    # DSML inside reasoning stays reasoning
    (opts(True, tools=["f"]), "R<｜DSML｜tool_calls></think>A", "A", [], None),
]


@pytest.mark.parametrize("case", DEVIATIONS, ids=[repr(c[1])[:40] for c in DEVIATIONS])
@pytest.mark.parametrize("how", ["one", "all", 2, 7])
def test_deviations(case, how):
    o, text, content, calls, note = case
    r = parse(o, text, how, finish="length" if "truncated" in str(note) else "stop")
    assert r.content == content
    assert [(c.name, c.arguments) for c in r.tool_calls] == calls
    if note:
        assert note in r.notes
    for c in r.tool_calls:
        assert isinstance(json.loads(c.arguments), dict)


def test_dsml_inside_reasoning_is_reasoning_text():
    r = parse(opts(True, tools=["f"]), "R<｜DSML｜tool_calls></think>A")
    assert r.reasoning_content == "R<｜DSML｜tool_calls>"


# ---------------------------------------------------------------- peer failures


@pytest.mark.parametrize("text", ["2 <", "x <｜", "x <｜DSML", "y </", "z </thi", "w <｜DSML｜invoke name=\"f"])
@pytest.mark.parametrize("how", ["one", "all"])
def test_peer1_held_tail_is_flushed(text, how):
    r = parse(opts(tools=["f"]), text, how)
    assert r.content == text
    r = parse(opts(True), "R" + text, how)
    assert r.reasoning_content == "R" + text


PEER2 = ('<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="true">x\n<｜DSML｜parameter name="b" '
         'string="false">2</｜DSML｜parameter>\n</｜DSML｜invoke>')


@pytest.mark.parametrize("how", [1, 2, 3, 7, 17, "all", "rand0", "rand1", "rand2"])
def test_peer2_missing_parameter_closer_any_chunking(how):
    ids = ids_of("Let me call.\n\n<｜DSML｜tool_calls>\n" + PEER2 + "\n</｜DSML｜tool_calls>")
    chunks = split_ids(ids, random.Random(how) if str(how).startswith("rand") else how)
    r = run_ids(opts(tools=["f"]), chunks)
    assert r.content == "Let me call."
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("f", {"a": "x", "b": 2})]
    assert r.finish_reason == "tool_calls"


@pytest.mark.parametrize("how", ["one", "all", "text"])
def test_peer3_unclosed_reasoning_policy(how):
    ids = ids_of("I keep thinking\n\nand never close.") + [1]
    o = opts(True)
    r = run_text(o, decoded_pieces(ids)) if how == "text" else run_ids(o, split_ids(ids, how))
    assert r.reasoning_content == "I keep thinking\n\nand never close."
    assert r.content == ""
    assert "unclosed_reasoning" in r.notes
    assert r.completion_tokens == len(ids)
    assert r.reasoning_tokens == len(ids) - 1  # EOS is not a reasoning token


def test_peer6_streamed_arguments_equal_final():
    ids = ids_of(block(invoke("f", ("city", 'Paris, "FR"', True), ("opts", '{"u": [1, 2.50]}', False))))
    p = OutputParser(opts(tools=["f"]), tok(), tool_call_id=1)
    events = [e for i in ids for e in p.push([i])] + p.finish()
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert streamed == end.arguments == '{"city": "Paris, \\"FR\\"", "opts": {"u": [1, 2.50]}}'
    assert sum(isinstance(e, ToolCallArgumentsDelta) for e in events) > 3  # really streamed


@pytest.mark.parametrize("cut", range(1, 40))
def test_peer8_text_to_tool_switch_in_one_chunk(cut):
    text = 'Sure.<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="q" string="true">hello world</｜DSML｜parameter>\n</｜DSML｜invoke>'
    p = OutputParser(opts(tools=["f"]), tok(), tool_call_id=1)
    events = p.push_text(text[:cut], 1) + p.push_text(text[cut:], 1) + p.finish()
    r = accumulate(events)
    assert r.content == "Sure."
    assert [(c.name, c.arguments) for c in r.tool_calls] == [("f", '{"q": "hello world"}')]


# ---------------------------------------------------------------- mechanics


def test_events_and_finish_shape():
    ids = ids_of("Need weather.</think>Checking.\n\n" + block(invoke("get_w", ("city", "Paris", True))))
    p = OutputParser(opts(True, tools=["get_w"]), tok(), tool_call_id=3)
    events = p.push(ids) + p.finish("stop")
    kinds = [type(e) for e in events]
    assert kinds == [ReasoningDelta, TextDelta, ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd, Finish]
    fin = events[-1]
    assert fin == Finish("stop", len(ids), 3, None, 1, ())
    assert not fin.malformed
    assert p.finished and p.push([5]) == [] and p.finish() == []


def test_reasoning_tokens_are_exact_id_counts():
    t = tok()
    ids = [t.encode_ordinary(c)[0] for c in "abc"] + [t.special_id("</think>")] + t.encode_ordinary("x")
    for how in ("one", "all", 2):
        r = run_ids(opts(True), split_ids(ids, how))
        assert (r.completion_tokens, r.reasoning_tokens) == (5, 3)
    # </think> spelled by ordinary tokens: the token that starts the marker is not reasoning
    ids2 = t.encode_ordinary("abc</think>x")
    for how in ("one", "all"):
        r = run_ids(opts(True), split_ids(ids2, how))
        assert r.reasoning_content == "abc"
        starts_before = sum(1 for k in range(len(ids2)) if len(t.decode(ids2[:k])) < 3)
        assert r.reasoning_tokens == starts_before


_REASONING_ALPHABET = ["a", " the", "\n", "\n\n", "中文", "𝔘", "🙂", "鿯", "é", "</think>", "<", "think>", "x"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_REASONING_ALPHABET), max_size=30), st.integers(0, 30),
       st.sampled_from(["special", "spelled", "none"]), st.integers(0, 2**32))
def test_reasoning_token_count_is_the_same_in_every_chunking(pieces, at, marker, seed):
    """A push of many ids counts reasoning tokens from text lengths (summed at C speed up to the
    first id that is part of a character, then decoded id by id): the same count as one id per
    push, and the ids that start before the first </think> (per-id incremental decoding)."""
    t = tok()
    at = min(at, len(pieces))
    ids = t.encode_ordinary("".join(pieces[:at]))
    if marker == "special":
        ids.append(t.special_id("</think>"))
    elif marker == "spelled":
        ids += t.encode_ordinary("</think>")
    ids += t.encode_ordinary("".join(pieces[at:]))
    counts = {how: run_ids(opts(True), split_ids(ids, how)).reasoning_tokens
              for how in ("one", "all", 2, random.Random(seed))}
    assert len(set(counts.values())) == 1, counts
    dec, text, starts = codecs.getincrementaldecoder("utf-8")("replace"), "", []
    for i in ids:
        starts.append(len(text))
        text += dec.decode(t.encoding.decode_single_token_bytes(i))
    end = text.find("</think>")
    expected = len(ids) if end < 0 else sum(1 for p in starts if p < end)
    assert counts["all"] == expected


def test_eos_ends_output_and_is_never_text():
    t = tok()
    ids = ids_of("Hi there") + [1] + ids_of(" more")
    for how in ("one", "all", 2):
        r = run_ids(opts(), split_ids(ids, how))
        assert r.content == "Hi there"
        assert r.finish_reason == "stop"
    r = run_text(opts(True), ["R", "<｜end▁of", "▁sentence｜>", "ignored"])
    assert r.reasoning_content == "R" and r.content == ""
    # a configured stop token id
    p = OutputParser(opts(), t, eos_token_ids=(1, t.special_id("<｜User｜>")))
    r = accumulate(p.push(ids_of("A<｜User｜>B")) + p.finish())
    assert r.content == "A"


def test_stop_sequence_across_chunks_and_finish():
    p = OutputParser(opts(stop=["STOP here"]), tok())
    events = p.push_text("abc STO", 2) + p.push_text("P he", 2)
    assert accumulate(events).content == "abc "
    events += p.push_text("re tail", 2)
    assert p.finished
    r = accumulate(events)
    assert (r.content, r.matched_stop, r.finish_reason, r.completion_tokens) == ("abc ", "STOP here", "stop", 6)
    assert p.push_text("more", 1) == []


def test_utf8_split_tokens():
    t = tok()
    text = "🤖🎉 ünïcödé 𝔘 中文 ﷺ"
    ids = t.encode_ordinary(text)
    assert len(ids) > 10
    for how in ("one", "all", 3):
        assert parse(opts(), text, how).content == text
    p = OutputParser(opts(), t)
    bad = p.push([t.encode_ordinary("🤖")[0]])  # first half of the emoji only
    assert bad == []
    r = accumulate(p.finish())
    assert r.content == "\ufffd"  # deviation 8: incomplete UTF-8 at the end is not silently dropped


def test_tool_call_ids_seeded_and_callable():
    text = block(invoke("f"), invoke("g"))
    a = [c.id for c in parse(opts(tools=["f", "g"]), text).tool_calls]
    b = [c.id for c in parse(opts(tools=["f", "g"]), text, "all").tool_calls]
    assert a == b and a[0].startswith("call_00_") and a[1].startswith("call_01_") and all(ID_RE.match(x) for x in a)
    p = OutputParser(opts(tools=["f", "g"]), tok(), tool_call_id=lambda i: f"id{i}")
    assert [c.id for c in accumulate(p.push(ids_of(text)) + p.finish()).tool_calls] == ["id0", "id1"]


def test_finish_reasons():
    text = block(invoke("f"))
    assert parse(opts(tools=["f"]), text).finish_reason == "tool_calls"
    assert parse(opts(tools=["f"]), text, finish="length").finish_reason == "length"
    assert parse(opts(tools=["f"]), text, finish="content_filter").finish_reason == "content_filter"
    assert parse(opts(), "x", finish="length").finish_reason == "length"


def test_undeclared_tool_is_parsed_and_flagged():
    r = parse(opts(tools=["f"]), block(invoke("nope")))
    assert [c.name for c in r.tool_calls] == ["nope"] and "undeclared_tool" in r.notes


def _cut(text: str, cuts: list[int]) -> list[str]:
    """``text`` in consecutive pieces of the lengths ``cuts`` (shorter or empty at the end), then the rest."""
    pieces, k = [], 0
    for c in cuts:
        pieces.append(text[k:k + c])
        k += c
    pieces.append(text[k:])
    return pieces


@given(st.text(max_size=40), st.lists(st.integers(1, 12), max_size=8))
def test_text_chunking_invariance_plain(text, cuts):
    """Any split of the same text gives the same result (incl. marker prefixes in the text)."""
    o = opts(True, tools=["f"], stop=["<｜DS", "END"])
    whole = run_text(o, [text])
    r = run_text(o, _cut(text, cuts))
    assert (r.content, r.reasoning_content, r.tool_calls, r.matched_stop) == (
        whole.content, whole.reasoning_content, whole.tool_calls, whole.matched_stop)


def test_sse_framing():
    assert sse_event({"a": 1}) == b'data: {"a":1}\n\n'
    assert sse_event({"type": "x"}, event="message_start") == b'event: message_start\ndata: {"type":"x"}\n\n'
    assert sse_event("l1\nl2") == b"data: l1\ndata: l2\n\n"
    assert sse_done() == b"data: [DONE]\n\n"


# ---------------------------------------------------------------- JSON-object mode (deviation 9)

JSON_CASES = [
    # (content text, our content, our notes, deepseek-recipe all-at-once, deepseek-recipe one id per push)
    ('{"a": 1}', '{"a": 1}', (), '{"a": 1}', '{"a": 1}'),
    ("[1, 2]", "[1, 2]", (), "[1, 2]", "[1, 2]"),
    ('```json\n{"a": 1}\n```', '{"a": 1}', (), '{"a": 1}', '{"a": 1}'),
    ('```\n{"a": 1}\n```', '{"a": 1}', (), '{"a": 1}', '{"a": 1}'),
    ('{"a": 1', '{"a": 1', ("json_incomplete",), '{"a": 1', '{"a": 1'),
    ('  {"a": [1, 2]}  ', '{"a": [1, 2]}', (), ' {"a": [1, 2]}  ', '  {"a": [1, 2]}  '),
    ('\n\n{"a":1}\n\n', '{"a":1}', (), '{"a":1}\n\n', '{"a":1}\n\n'),
    ('{"a": "x"} {"b": 2}', '{"a": "x"}', ("json_trailing_text",), '{"a": "x"} {"b": 2}', '{"a": "x"} {"b": 2}'),
    ('```JSON\n{"s": "}]\\"`"}\n```\nDone.', '{"s": "}]\\"`"}', ("json_trailing_text",), ' {"s": "}]\\"`"} ',
     '   {"s": "}]\\"`"}   '),
    ('Sure:\n```json\n{"a": 1}\n```\nDone.', 'Sure:\n```json\n{"a": 1}\n```\nDone.', ("json_not_found",),
     ' {"a": 1} ', '  {"a": 1}   '),
    ('Here: {"a": 1} and more', 'Here: {"a": 1} and more', ("json_not_found",), ' {"a": 1} and more',
     '   {"a": 1} and more'),
    ("no json here", "no json here", ("json_not_found",), " ", "   "),
    ("42", "42", ("json_not_found",), " ", " "),
    ("```js\n{}", "```js\n{}", ("json_not_found",), " {}", "   {}"),
]


def _json_opts(thinking=False, stop=()):
    return ParsingOptions(parse_json_output=True, thinking_stage="reasoning" if thinking else None,
                          stop_sequences=tuple(stop))


@pytest.mark.parametrize("case", JSON_CASES, ids=[repr(c[0])[:30] for c in JSON_CASES])
@pytest.mark.parametrize("how", ["one", "all", 2, "text"])
def test_json_object_mode(case, how):
    text, content, notes, _, _ = case
    ids = ids_of(text)
    r = run_text(_json_opts(), decoded_pieces(ids)) if how == "text" else run_ids(_json_opts(), split_ids(ids, how))
    assert r.content == content
    assert tuple(n for n in r.notes if n.startswith("json")) == notes


def test_json_object_mode_vs_oracle():
    """deepseek-recipe's JSON-object output (StreamProcessor, json_object request), where we differ."""
    oracle = pytest.importorskip("deepseek_recipe")
    from recipe.tokenizer import default_tokenizer_path

    dtok = oracle.Tokenizer.from_file(str(default_tokenizer_path()))
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "answer in json"}],
            "reasoning_effort": "none", "response_format": {"type": "json_object"}}
    opt = oracle.ConversionOptions().with_model_alias("deepseek-v4-pro", oracle.ModelVersion.DeepseekV4Pro)
    conv = oracle.ChatCompletionRequest(json.dumps(body)).convert(opt)
    assert conv.parsing_options.parse_json_output

    def theirs(ids, per_token):
        sp = oracle.StreamProcessor(oracle.ChatCompletionRequest.chunk_generator(conv, "c", "m"),
                                    conv.parsing_options, dtok)
        resp = oracle.ChatCompletionResponse("c", "m", 0, 0, 0)
        chunks = [oracle.InferenceChunk.tokens([i]) for i in ids] if per_token else [oracle.InferenceChunk.tokens(ids)]
        for ch in [oracle.InferenceChunk.ready(), *chunks, oracle.InferenceChunk.finish(oracle.InferenceFinishReason.Stop)]:
            for ev in sp.push(ch):
                resp.accumulate(ev)
        return json.loads(resp.to_json())["choices"][0]["message"].get("content") or ""

    for text, ours, _, all_at_once, per_token in JSON_CASES:
        ids = ids_of(text)
        assert (theirs(ids, False), theirs(ids, True)) == (all_at_once, per_token), text
        assert run_ids(_json_opts(), [ids]).content == ours


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(['{', '}', '[', ']', '"', '\\', ' ', '\n', '`', '```', '```json\n', 'json', 'a', ':',
                                 ',', '1', 'Sure ', '</think>', 'STOP']), max_size=25),
       st.lists(st.integers(1, 6), max_size=10), st.booleans())
def test_json_object_mode_chunking_invariance(parts, cuts, thinking):
    """Any split of the same output gives the same content and notes; deltas add up to the content."""
    text = "".join(parts)
    o = _json_opts(thinking, stop=["STOP"])
    whole = run_text(o, [text])
    for r in (run_text(o, _cut(text, cuts)), run_ids(o, split_ids(ids_of(text), "one"))):
        assert (r.content, r.reasoning_content, r.notes) == (whole.content, whole.reasoning_content, whole.notes)
    if not thinking and "json_not_found" not in whole.notes and whole.content:
        assert whole.content[0] in "{["


def test_json_object_mode_reasoning_untouched_and_streams():
    p = OutputParser(_json_opts(True), tok())
    ids = ids_of('I will answer {"r": 1}.</think>\n```json\n{"a": [1, 2], "b": "x"}\n```')
    events = [e for i in ids for e in p.push([i])] + p.finish()
    r = accumulate(events)
    assert r.reasoning_content == 'I will answer {"r": 1}.'
    assert r.content == '{"a": [1, 2], "b": "x"}'
    assert sum(isinstance(e, TextDelta) for e in events) > 3  # streamed as it came, not held to the end


# ---------------------------------------------------------------- corrupted DSML recovery (peer failure 9)


def _cblock(*invokes: str, bars=("｜｜", "｜｜"), name=" calls", closer=True) -> str:
    b1, b2 = bars
    return (f"<{b1}DSML{b2}{name}>\n" + "".join(invokes) + (f"</{b1}DSML{b2}{name}>" if closer else ""))


def _cinvoke(tool: str, *params: tuple[str, str, bool], bars=("｜｜", "｜｜"), sp=" ") -> str:
    b1, b2 = bars
    body = "".join(f'<{b1}DSML{b2}{sp}parameter name="{k}" string="{"true" if s else "false"}">{v}'
                   f"</{b1}DSML{b2}{sp}parameter>\n" for k, v, s in params)
    return f'<{b1}DSML{b2}{sp}invoke name="{tool}">\n{body}</{b1}DSML{b2}{sp}invoke>\n'


RECOVERY = [
    # (text, content, calls, recovered?)
    ("Reading it.\n\n" + _cblock(_cinvoke("read", ("path", "C:\\a b\\x.md", True))), "Reading it.",
     [("read", {"path": "C:\\a b\\x.md"})], True),
    # V4.1 spelling (single bars, leading-space tag names) is markup, not a recovery
    (_cblock(_cinvoke("read", ("n", "3", False), bars=("｜", "｜")), bars=("｜", "｜")), "", [("read", {"n": 3})], False),
    # spaced ASCII bars
    (('< | DSML | invoke name="run">\n< | DSML | parameter name="cmd" string="true">echo "hi" && ls'
      "</ | DSML | parameter>\n</ | DSML | invoke>"), "", [("run", {"cmd": 'echo "hi" && ls'})], True),
    # V3.2 block name around exact invokes
    ("<｜DSML｜function_calls>\n" + invoke("read", ("path", "x", True)) + "</｜DSML｜function_calls>", "",
     [("read", {"path": "x"})], True),
    # opener missing its ">"
    ("<｜DSML｜tool_calls\n" + invoke("read", ("path", "y", True)) + "</｜DSML｜tool_calls>", "",
     [("read", {"path": "y"})], True),
    # parallel calls, text after the block is kept
    (_cblock(_cinvoke("read", ("path", "a", True)), _cinvoke("run", ("cmd", "ls", True))) + "\n\nDone.", "Done.",
     [("read", {"path": "a"}), ("run", {"cmd": "ls"})], True),
    # V4 block opener around V4.1-spelled invokes: both spellings are markup, mixed too
    ("<｜DSML｜tool_calls>\n" + _cinvoke("read", ("path", "z", True), bars=("｜", "｜")) + "</｜DSML｜tool_calls>", "",
     [("read", {"path": "z"})], False),
    # exact block closed with the V4.1 name: the closer is markup (the block ends there)
    ("<｜DSML｜tool_calls>\n" + invoke("read", ("path", "w", True)) + "</｜DSML｜calls>\n\nAfter.", "After.",
     [("read", {"path": "w"})], True),
    # second invoke names an undeclared tool: it stays content, byte for byte
    (_cblock(_cinvoke("read", ("path", "a", True)), _cinvoke("nope"), closer=False), _cinvoke("nope"),
     [("read", {"path": "a"})], True),
    # a broken closer after a recovered call ends the block; a later corrupted block is still recovered
    (_cblock(_cinvoke("read", ("p", "a", True)), closer=False) + "</｜｜DSML｜｜ calls junk\nText.\n\n"
     + _cblock(_cinvoke("run", ("c", "b", True))), "</｜｜DSML｜｜ calls junk\nText.",
     [("read", {"p": "a"}), ("run", {"c": "b"})], True),
    # an exact invoke of an undeclared tool inside a corrupted block is judged as recovery judges it:
    # refused, so it stays content byte for byte (issue 12, shape 1)
    (_cblock(_cinvoke("read", ("p", "a", True)), closer=False) + invoke("nope") + "Text.\n\n"
     + _cblock(_cinvoke("run", ("c", "b", True))), invoke("nope") + "Text.", [("read", {"p": "a"}), ("run", {"c": "b"})],
     True),
    # undeclared tool, incomplete invoke, text between tags, DSML inside a value: no recovery, text kept
    (_cblock(_cinvoke("nope", ("a", "1", False))), None, [], False),
    ('<｜｜DSML｜｜ invoke name="read">\n<｜｜DSML｜｜ parameter name="p" string="true">x', None, [], False),
    ('<｜｜DSML｜｜ invoke name="read">\nsome words\n</｜｜DSML｜｜ invoke>', None, [], False),
    (('<｜｜DSML｜｜ invoke name="read">\n<｜｜DSML｜｜ parameter name="p" string="true">a <｜｜DSML｜｜ b'
      "</｜｜DSML｜｜ parameter>\n</｜｜DSML｜｜ invoke>"), None, [], False),
    ("Use <|endoftext|> and a < | b or <｜｜ here.", None, [], False),
    ("closers only </｜｜DSML｜｜ invoke>\n</｜｜DSML｜｜ calls> stay text", None, [], False),
    ("<｜DSML｜tool_calls", None, [], False),
    ("<｜｜DSML｜｜ calls>\n", None, [], False),
]


@pytest.mark.parametrize("case", RECOVERY, ids=[repr(c[0])[:40] for c in RECOVERY])
@pytest.mark.parametrize("how", ["one", "all", 3, "text"])
def test_corrupted_dsml_recovery(case, how):
    text, content, calls, recovered = case
    o = opts(tools=["read", "run"])
    ids = ids_of(text)
    r = run_text(o, decoded_pieces(ids)) if how == "text" else run_ids(o, split_ids(ids, how))
    assert r.content == (text if content is None else content)
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == calls
    assert ("recovered_dsml" in r.notes) == recovered
    for c in r.tool_calls:
        assert c.name in ("read", "run") or '<｜DSML｜invoke name="' + c.name in text  # exact format: any name


@pytest.mark.parametrize("how", ["one", "all"])
def test_recovery_when_the_prompt_opened_the_block(how):
    """Required / named tool choice: the output starts inside the block, in a corrupted spelling."""
    text = _cinvoke("read", ("p", "x", True)) + "</｜｜DSML｜｜ calls>"
    r = run_ids(opts(tools=["read"], required=True), split_ids(ids_of(text), how))
    assert (r.content, [(c.name, c.arguments) for c in r.tool_calls]) == ("", [("read", '{"p": "x"}')])
    assert "recovered_dsml" in r.notes and r.finish_reason == "tool_calls"


def test_recovery_only_with_declared_tools_and_never_in_reasoning():
    text = _cblock(_cinvoke("read", ("path", "a", True)))
    assert parse(ParsingOptions(parse_tool_calls=True), text).content == text  # no names declared
    assert parse(opts(), text).content == text  # no tools at all
    r = parse(opts(True, tools=["read"]), "R " + text + "</think>A")
    assert (r.reasoning_content, r.content, r.tool_calls) == ("R " + text, "A", ())


def test_recovery_hold_back_is_bounded():
    """Text that only looks like a corrupted opener is released as soon as it cannot be one, or after
    MAX_HOLD characters; it is never held to the end of a long output."""
    from recipe.encodings.deepseek_v4.output_recovery import MAX_HOLD

    p = OutputParser(opts(tools=["read"]), tok())
    early = p.push_text("a <|b", 1) + p.push_text("cd and more", 1)
    assert accumulate(early).content == "a <|bcd and more"
    p = OutputParser(opts(tools=["read"]), tok())
    head = '<｜｜DSML｜｜ invoke name="read">\n<｜｜DSML｜｜ parameter name="p" string="true">'
    events = p.push_text(head, 1)
    assert events == []  # held: it may become a call
    word = "lorem ipsum "
    for _ in range(MAX_HOLD // len(word) + 2):
        events += p.push_text(word, 1)
    streamed = accumulate(events).content
    assert streamed.startswith(head) and len(streamed) > MAX_HOLD  # released before the end
    r = accumulate(events + p.finish())
    assert r.content == head + word * (MAX_HOLD // len(word) + 2) and not r.tool_calls


def test_recovered_call_streams_after_the_invoke_closes():
    text = "Ok.\n\n" + _cblock(_cinvoke("read", ("path", "a", True)), _cinvoke("run", ("cmd", "ls", True)))
    ids = ids_of(text)
    p = OutputParser(opts(tools=["read", "run"]), tok(), tool_call_id=2)
    seen = []
    for k, i in enumerate(ids):
        for ev in p.push([i]):
            seen.append((k, ev))
    ends = [k for k, ev in seen if isinstance(ev, ToolCallEnd)]
    assert len(ends) == 2 and ends[0] < ends[1] < len(ids) - 1  # each call as soon as its invoke closed
    assert [type(ev) for _, ev in seen[:1]] == [TextDelta]


# ---------------------------------------------------------------- a tag cut by an EOS spelling in text


_CUT_TAILS = ["</｜DSML｜tool", "</｜DSML｜parameter", "<｜DSML｜para", '<｜DSML｜invoke name="get']
_CUT_BODIES = ["x</｜DSML｜parameter>\n</｜DSML｜invoke>\n", "x", "x</｜DSML｜parameter>\n"]


@pytest.mark.parametrize("body", _CUT_BODIES)
@pytest.mark.parametrize("tail", _CUT_TAILS)
def test_tag_cut_by_an_eos_spelling_reads_as_cut_by_the_eos_id(tail, body):
    """An unfinished tag of a tool block followed by the EOS spelling in pushed text is dropped
    (``partial_markup``) exactly as when the EOS id cuts it: text and id feeding agree."""
    o = opts(tools=["get_weather"])
    text = ('hi\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
            '<｜DSML｜parameter name="q" string="true">' + body + tail + "<｜end▁of▁sentence｜>")

    def summary(r):
        return r.content, [(c.name, c.arguments) for c in r.tool_calls], r.notes

    by_ids = summary(parse(o, text))
    assert by_ids[0] == "hi" and by_ids[1] == [("get_weather", '{"q": "x"}')]
    assert "partial_markup" in by_ids[2]
    assert summary(run_text(o, [text])) == by_ids
    assert summary(run_text(o, list(text))) == by_ids
    # without the EOS spelling after it, a '<' that starts no EOS leaves the tag to the usual rules
    other = summary(run_text(o, list(text.replace("<｜end▁of▁sentence｜>", "<b>"))))
    assert "partial_markup" not in other[2]
    assert "</｜DSML｜" in other[0] + "".join(a for _, a in other[1]) or "<｜DSML｜" in other[0] + "".join(a for _, a in other[1])
