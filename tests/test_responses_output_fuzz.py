"""Fuzzing the Responses output path: random and mutated completion ids (special ids included), in
any chunking and with any finish reason, never raise and always give a valid event stream (the
emitter checklist, items rebuilt from events equal the final output, valid SSE/JSON, function
arguments valid JSON)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from responses_output_support import check_invariants, parse_sse, responses_rows

from recipe.output.driver import CompletionStream
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
ROWS = responses_rows()
SPECIALS = sorted(TOK.special_tokens.values())
SEEDS = [r["completion_token_ids"] for r in ROWS]
BODIES = [
    {"model": "deepseek-v4-pro", "input": "x", "reasoning": {"effort": "low"}, "tools": ROWS[2]["request"]["tools"]},
    {"model": "deepseek-v4-pro", "input": "x", "reasoning": {"effort": "none"}, "tools": [
        {"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read"}]}, {"type": "custom", "name": "apply_patch"},
        *ROWS[2]["request"]["tools"]]},
    {"model": "deepseek-v4-pro", "input": "x", "reasoning": {"effort": "none"}, "tools": ROWS[2]["request"]["tools"],
     "tool_choice": "required"},
    {"model": "deepseek-v4-pro", "input": "x", "reasoning": {"effort": "high"}},
]
PREPS = [prepare(b) for b in BODIES]
# DSML / think markup pieces as ids, so mutations build near-valid tool blocks
PIECES = [TOK.encode_with_special_tokens(t) for t in (
    "</think>", "<｜DSML｜tool_calls>\n", '<｜DSML｜invoke name="get_w">\n', '<｜DSML｜invoke name="fs__read">\n',
    '<｜DSML｜invoke name="apply_patch">\n', '<｜DSML｜parameter name="city" string="true">', '<｜DSML｜parameter name="input" string="false">',
    "</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>", "\n\n", "Paris", '{"a": [1,', "🤖")]


@st.composite
def outputs(draw):
    """A mutated recorded output or a random id soup with markup pieces and special ids."""
    if draw(st.booleans()):
        ids = list(draw(st.sampled_from(SEEDS)))
        for _ in range(draw(st.integers(0, 6))):
            op = draw(st.sampled_from(["ins", "del", "swap"]))
            k = draw(st.integers(0, len(ids)))
            if op == "ins":
                ids[k:k] = draw(st.one_of(st.sampled_from(PIECES), st.lists(st.sampled_from(SPECIALS), min_size=1, max_size=2)))
            elif op == "del" and ids:
                del ids[k % len(ids)]
            elif ids:
                ids[k % len(ids)] = draw(st.integers(0, TOK.n_vocab - 1))
    else:
        parts = draw(st.lists(st.one_of(st.sampled_from(PIECES), st.lists(st.integers(0, TOK.n_vocab - 1), max_size=4),
                                        st.lists(st.sampled_from(SPECIALS), min_size=1, max_size=1)), max_size=12))
        ids = [i for p in parts for i in p]
    return ids


@settings(max_examples=250, deadline=None)
@given(prep=st.sampled_from(PREPS), ids=outputs(), cuts=st.lists(st.integers(0, 300), max_size=8),
       fin=st.sampled_from(["stop", "length", "content_filter", "abort"]))
def test_fuzz_never_raises_and_stays_valid(prep, ids, cuts, fin):
    ids = [i for i in ids if 0 <= i < TOK.n_vocab]
    cuts = sorted({c % (len(ids) + 1) for c in cuts})
    bounds = [0, *cuts, len(ids)]
    cs = CompletionStream(prep, seed=1, created=1700000000)
    payloads = cs.start()
    data = cs.sse(payloads)
    for a, b in zip(bounds, bounds[1:]):
        if b > a and not cs.finished:
            p = cs.push(ids[a:b])
            payloads += p
            data += cs.sse(p)
    p = cs.finish(fin)
    payloads += p
    data += cs.sse(p)
    check_invariants(payloads)
    frames = parse_sse(data)
    assert [d for _, d in frames] == json.loads(json.dumps(payloads))
    assert all(name == d["type"] for name, d in frames)
    for item in payloads[-1]["response"]["output"]:
        if item["type"] == "message":
            assert "<｜end▁of▁sentence｜>" not in item["content"][0]["text"]
