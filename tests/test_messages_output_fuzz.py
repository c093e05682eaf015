"""Fuzzing the Messages output path: random and mutated completion ids (special ids included), any
chunking, any finish. Never an exception; every stream passes the order checks of ``fold`` (dense
indexes, matching delta types, signature before a thinking stop, one ping, one message_delta), every
frame is ``event:`` + valid JSON, every tool input is an object, and the stream folds to the
non-streamed message."""

from __future__ import annotations

import json

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messages_output_support import TOOLS, body, fold, messages_rows, parse_sse
from output_parity_support import ids_of
from recipe.output.driver import CompletionStream, response
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
SPECIAL = sorted(TOK.special_tokens.values())
MARKUP = sorted(set(ids_of(
    '</think><｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">'
    'x</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    '</｜DSML｜tool_calls><｜end▁of▁sentence｜> END 🤖 \n\n')))
ROWS = messages_rows()
REQUESTS = [
    body(), body(thinking=True), body(tools=TOOLS), body(thinking=True, tools=TOOLS),
    body(stop_sequences=["END", "\n\n"]), body(tools=TOOLS, tool_choice={"type": "tool", "name": "get_w"}),
]
PREPS = [prepare(r, "messages") for r in REQUESTS]

token = st.one_of(st.integers(0, TOK.n_vocab - 1), st.sampled_from(SPECIAL), st.sampled_from(MARKUP))


@st.composite
def outputs(draw):
    """(prep index, ids): random ids, or a recorded output with random edits."""
    if draw(st.booleans()):
        ids = draw(st.lists(token, max_size=60))
    else:
        row = draw(st.sampled_from(ROWS))
        ids = list(row["completion_token_ids"])
        for _ in range(draw(st.integers(1, 6))):
            pos = draw(st.integers(0, len(ids)))
            op = draw(st.sampled_from(["insert", "delete", "replace"]))
            if op == "insert":
                ids.insert(pos, draw(token))
            elif ids and pos < len(ids):
                if op == "delete":
                    del ids[pos]
                else:
                    ids[pos] = draw(token)
    return draw(st.integers(0, len(PREPS) - 1)), ids


def _check(prep, ids, cuts, finish):
    cs = CompletionStream(prep, seed=1, response_id="msg_f", prompt_tokens=50, cached_tokens=10)
    data = cs.sse(cs.start())
    bounds = [0, *sorted({c % (len(ids) + 1) for c in cuts}), len(ids)]
    for a, b in zip(bounds, bounds[1:]):
        if b > a and not cs.finished:
            data += cs.sse(cs.push(ids[a:b]))
    data += cs.sse(cs.finish(finish))
    frames = parse_sse(data)
    assert all(name == p["type"] for name, p in frames)
    msg = fold([p for _, p in frames])
    want = response(prep, ids, finish=finish, seed=1, response_id="msg_f", prompt_tokens=50, cached_tokens=10)
    json.loads(orjson.dumps(want))  # the response serialises to valid JSON
    if prep.parsing.stop_sequences and msg["usage"] != want["usage"]:
        assert msg["usage"]["output_tokens"] > want["usage"]["output_tokens"]
        msg["usage"] = want["usage"]
    assert msg == want
    for block in msg["content"]:
        assert block["type"] in ("text", "thinking", "tool_use")
        if block["type"] == "tool_use":
            assert isinstance(block["input"], dict) and block["name"]
        if block["type"] == "thinking":
            assert block["signature"] == "msg_f"
        if block["type"] == "text":
            assert block["text"] and "<｜end▁of▁sentence｜>" not in block["text"]
    assert msg["stop_reason"] in ("end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence")


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(out=outputs(), cuts=st.lists(st.integers(0, 200), max_size=8),
       finish=st.sampled_from(["stop", "length", "content_filter"]))
def test_random_and_mutated_outputs(out, cuts, finish):
    k, ids = out
    _check(PREPS[k], ids, cuts, finish)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(0, len(PREPS) - 1), text=st.text(max_size=40), finish=st.sampled_from(["stop", "length"]))
def test_text_pushes(k, text, finish):
    """Text mode: arbitrary decoded text (any code points) in two pushes."""
    cs = CompletionStream(PREPS[k], seed=1)
    ev = cs.start() + cs.push_text(text[: len(text) // 2], 1) + cs.push_text(text[len(text) // 2:], 1) + cs.finish(finish)
    msg = fold(ev)
    for p in ev:
        json.loads(orjson.dumps(p))
    assert all(isinstance(b.get("input", {}), dict) for b in msg["content"])
