"""Output-parser robustness: random and mutated outputs, chunking invariance, raw public outputs."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from output_support import chat_options, decoded_pieces, opts, rows, run_ids, run_text, split_ids, summary, tok
from recipe.conversation import ParsingOptions

OPTION_SETS = [
    opts(),
    opts(True),
    opts(tools=["f", "g"]),
    opts(True, tools=["f", "g"]),
    opts(tools=["f", "g"], required=True),
    opts(stage="reasoning_continuation", tools=["f"]),
    opts(stage="content_continuation"),
]

FRAGMENTS = [
    "<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"f\">\n", "<｜DSML｜invoke name=\"g\">",
    "</｜DSML｜invoke>\n", "<｜DSML｜parameter name=\"a\" string=\"true\">", "<｜DSML｜parameter name=\"b\" string=\"false\">",
    "</｜DSML｜parameter>\n", "</think>", "<think>", "<｜DSML｜", "</｜DSML｜", "<｜DSML｜tool_calls", "<｜｜DSML｜｜ invoke name=\"f\">",
    "\n", "\n\n", " ", "<", ">", "\"", "{\"k\": [1, 2]}", "2", "\\", "<｜User｜>", "｜DSML｜", "é", "🤖", "\t",
]


def _sentinel(k: int) -> str:
    return f"Q{k:04d}Z"


def _mutated_output(rnd: random.Random, n: int) -> tuple[str, list[str]]:
    parts, words = [], []
    for k in range(n):
        if rnd.random() < 0.35:
            w = _sentinel(k)
            words.append(w)
            parts.append(w)
        else:
            parts.append(rnd.choice(FRAGMENTS))
    return "".join(parts), words


def _haystack(r) -> str:
    return r.content + r.reasoning_content + "".join(c.name + c.arguments for c in r.tool_calls)


def _all_chunkings(o: ParsingOptions, ids: list[int], seed: int):
    yield "one", run_ids(o, split_ids(ids, "one"))
    yield "all", run_ids(o, split_ids(ids, "all"))
    yield "rand", run_ids(o, split_ids(ids, random.Random(seed)))
    yield "text", run_text(o, decoded_pieces(ids))


@settings(max_examples=120)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.sampled_from(range(len(OPTION_SETS))))
def test_mutated_dsml_invariance_and_no_lost_text(seed, n, k):
    """Any chunking gives the same result; every sentinel word lands in exactly one field, once."""
    rnd = random.Random(seed)
    text, words = _mutated_output(rnd, n)
    ids = tok().encode_with_special_tokens(text)
    o = OPTION_SETS[k]
    results = list(_all_chunkings(o, ids, seed))
    base = summary(results[0][1])
    for how, r in results[1:]:
        assert summary(r)[:4] == base[:4], (how, text)
    r = results[0][1]
    hay = _haystack(r)
    for w in words:
        assert hay.count(w) == 1, (w, text, r)
    for c in r.tool_calls:
        assert isinstance(json.loads(c.arguments), dict)
    assert r.completion_tokens == len(ids)


@settings(max_examples=80)
@given(st.lists(st.integers(0, 128830), min_size=1, max_size=60), st.sampled_from(range(len(OPTION_SETS))),
       st.integers(0, 1000))
def test_random_token_ids_never_raise(ids, k, seed):
    """Random ids (special ids included): no exception, valid JSON arguments, no EOS text, chunk-invariant."""
    t = tok()
    ids = [i for i in ids if i < t.n_vocab]
    specials = sorted(t.special_tokens.values())
    rnd = random.Random(seed)
    for _ in range(rnd.randint(0, 4)):  # sprinkle template / DSML / EOS specials
        ids.insert(rnd.randint(0, len(ids)), rnd.choice(specials + [128822, 128825, 1]))
    o = OPTION_SETS[k]
    results = [r for _, r in _all_chunkings(o, ids, seed)]
    for r in results:
        assert "<｜end▁of▁sentence｜>" not in _haystack(r)
        for c in r.tool_calls:
            assert isinstance(json.loads(c.arguments), dict)
    # token modes agree exactly; text mode agrees on everything it can know
    assert summary(results[0]) == summary(results[1]) == summary(results[2])
    assert summary(results[3])[:4] == summary(results[0])[:4]


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_truncation_at_every_point_keeps_json_valid(finish):
    text = ("Intro.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">"
            "va\"lue</｜DSML｜parameter>\n<｜DSML｜parameter name=\"b\" string=\"false\">{\"x\": [1, 2]}</｜DSML｜parameter>\n"
            "</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
    ids = tok().encode_with_special_tokens(text)
    for cut in range(len(ids) + 1):
        r = run_ids(opts(tools=["f"]), [ids[:cut]], finish)
        for c in r.tool_calls:
            assert isinstance(json.loads(c.arguments), dict)
        assert "Intro."[: len(r.content)] == r.content[:6]


RAW = rows("raw_outputs.jsonl")


def _words(raw: str) -> list[str]:
    """Non-markup words of a raw output (exact-format DSML tags removed)."""
    stripped = re.sub(r'</?｜DSML｜(?:tool_calls|invoke|parameter)(?: [a-z]+="[^"]*")*>', " ", raw)
    return [w for w in stripped.split() if w]


@pytest.mark.parametrize("row", RAW, ids=[r["id"] for r in RAW])
@pytest.mark.parametrize("thinking", [False, True])
def test_raw_outputs_properties(row, thinking):
    req = dict(row["request"], reasoning_effort="high" if thinking else "none")
    o = chat_options(req)
    raw = row["raw_output"]
    ids = tok().encode_with_special_tokens(raw)
    results = [r for _, r in _all_chunkings(o, ids, 1)]
    for r in results[1:]:
        assert summary(r)[:4] == summary(results[0])[:4]
    r = results[0]
    declared = set(o.tool_names)
    for c in r.tool_calls:
        args = json.loads(c.arguments)
        assert isinstance(args, dict)
        assert c.name in declared
    assert "truncated_tool_call" not in r.notes
    hay = r.content + r.reasoning_content + " ".join(
        c.name + " " + " ".join(str(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                                for v in json.loads(c.arguments).values()) for c in r.tool_calls)
    for w in _words(raw):
        assert w.strip('"') in hay, w
    if thinking:  # DSML inside reasoning stays reasoning, byte for byte (minus leading newlines)
        assert not r.tool_calls and r.reasoning_content == raw.lstrip("\n")


RAW_EXPECT = {
    "sglang-35736-tool_choice-none-leak": ("", [("Bash", {"command": "pwd"})]),
    "command-code-909-v41-doubled-bars": (None, []),  # corrupted spelling: content byte for byte
    "pi-3712-partial-opener-in-text": (None, []),
    "nigel-agent-three-parallel-invokes": (
        "The room's fully intact — and I can see exactly where the thread stands.\n\n"
        "Let me close the loop first this time — reschedule before anything else:",
        ["schedule_wakeup", "chatroom_post", "record_observation"]),
}


@pytest.mark.parametrize("rid", sorted(RAW_EXPECT))
def test_raw_outputs_expected(rid):
    (row,) = [r for r in RAW if r["id"] == rid]
    o = chat_options(row["request"])
    r = run_ids(o, [tok().encode_with_special_tokens(row["raw_output"])])
    content, calls = RAW_EXPECT[rid]
    assert r.content == (row["raw_output"] if content is None else content)
    if calls and isinstance(calls[0], tuple):
        assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == calls
    else:
        assert [c.name for c in r.tool_calls] == calls


def test_raw_invalid_json_in_string_false_becomes_string():
    (row,) = [r for r in RAW if r["id"] == "opencode-24566-unclosed-opener-bad-json"]
    r = run_ids(chat_options(row["request"]), [tok().encode_with_special_tokens(row["raw_output"])])
    (call,) = r.tool_calls
    args = json.loads(call.arguments)
    assert call.name == "question" and isinstance(args["questions"], str) and args["questions"].startswith("[{")
    assert "invalid_json_argument" in r.notes
    assert r.content == "<｜DSML｜tool_calls"  # the opener missing its ">" stays text
