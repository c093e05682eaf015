"""Output-parser robustness: random and mutated outputs, chunking invariance, raw public outputs."""

from __future__ import annotations

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
    summary,
    tok,
)

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
    # corrupted spellings (recovery candidates)
    "<｜｜DSML｜｜ calls>\n", "</｜｜DSML｜｜ calls>", "</｜｜DSML｜｜ invoke>\n", "<｜DSML｜ invoke name=\"g\">\n",
    "<｜｜DSML｜｜ parameter name=\"a\" string=\"true\">", "</｜｜DSML｜｜ parameter>\n", "< | DSML | invoke name=\"f\">",
    "</ | DSML | invoke>", "<|", "< |", "<｜DSML｜function_calls>\n", "<｜DSML｜tool_calls\n",
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


def _same_in_every_chunking_no_lost_text(o: ParsingOptions, ids: list[int], seed: int, text: str, words: list[str]):
    """Every chunking gives the first one's content, reasoning, calls and finish; every sentinel
    word lands in exactly one field, once; every call's arguments are a JSON object. Returns the
    first chunking's result."""
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
    return r


@settings(max_examples=120)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.sampled_from(range(len(OPTION_SETS))))
def test_mutated_dsml_invariance_and_no_lost_text(seed, n, k):
    """Any chunking gives the same result; every sentinel word lands in exactly one field, once."""
    rnd = random.Random(seed)
    text, words = _mutated_output(rnd, n)
    ids = tok().encode_with_special_tokens(text)
    r = _same_in_every_chunking_no_lost_text(OPTION_SETS[k], ids, seed, text, words)
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


def _words(raw: str, recovered: bool) -> list[str]:
    """Non-markup words of a raw output (DSML tags removed: exact ones, and corrupted ones when recovered)."""
    stripped = re.sub(r'</?｜DSML｜(?:tool_calls|invoke|parameter)(?: [a-z]+="[^"]*")*>', " ", raw)
    if recovered:
        stripped = re.sub(r'< ?/? ?(?:[｜|] ?){1,2}DSML ?(?:[｜|] ?){1,2}(?:tool_calls|function_calls|calls|invoke|'
                          r'parameter)(?: [a-z]+="[^"]*")* ?>?', " ", stripped)
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
    for w in _words(raw, "recovered_dsml" in r.notes):
        assert w.strip('"') in hay, w
    if thinking and "tool_call_in_reasoning" in r.notes:
        # a complete, well-formed block in the reasoning: the calls of the same block in the answer
        answer = run_ids(chat_options(dict(row["request"], reasoning_effort="none")), [ids])
        assert [(c.name, c.arguments) for c in r.tool_calls] == [(c.name, c.arguments) for c in answer.tool_calls]
        assert r.tool_calls
    elif thinking:  # any other DSML inside reasoning stays reasoning, byte for byte (minus leading newlines)
        assert not r.tool_calls and r.reasoning_content == raw.lstrip("\n")


RAW_EXPECT = {
    # id: (content, calls as (name, arguments) or names, recovered from a corrupted spelling?)
    "sglang-35736-tool_choice-none-leak": ("", [("Bash", {"command": "pwd"})], False),
    "command-code-909-v41-doubled-bars": (
        "I'll run a grilling session. First, let me read the skill and gather the facts.",
        [("read", {"path": "/Users/xiaodi/.agents/skills/grill-me/SKILL.md"})], True),
    "opencode-24566-unclosed-opener-bad-json": ("", ["question"], True),  # opener missing ">": markup
    "pi-3712-partial-opener-in-text": (None, [], False),  # a lone opener: content byte for byte
    "nigel-agent-three-parallel-invokes": (
        "The room's fully intact — and I can see exactly where the thread stands.\n\n"
        "Let me close the loop first this time — reschedule before anything else:",
        ["schedule_wakeup", "chatroom_post", "record_observation"], False),
    "ds4-167-dsml-inside-thinking": ("", [("bash", {"command": "sed -n '7,9p' main.go"})], False),
    "vllm-test-v4-rejects-v32-function_calls-block": ("", [("search", {"query": "vllm"})], True),
}


def test_every_raw_output_has_an_expectation():
    assert sorted(RAW_EXPECT) == sorted(r["id"] for r in RAW)


@pytest.mark.parametrize("rid", sorted(RAW_EXPECT))
@pytest.mark.parametrize("how", ["one", "all", "text"])
def test_raw_outputs_expected(rid, how):
    (row,) = [r for r in RAW if r["id"] == rid]
    o = chat_options(row["request"])
    ids = tok().encode_with_special_tokens(row["raw_output"])
    r = run_text(o, decoded_pieces(ids)) if how == "text" else run_ids(o, split_ids(ids, how))
    content, calls, recovered = RAW_EXPECT[rid]
    assert r.content == (row["raw_output"] if content is None else content)
    if calls and isinstance(calls[0], tuple):
        assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == calls
    else:
        assert [c.name for c in r.tool_calls] == calls
    assert ("recovered_dsml" in r.notes) == recovered
    if calls:
        assert r.finish_reason == "tool_calls"


def test_raw_invalid_json_in_string_false_becomes_string():
    (row,) = [r for r in RAW if r["id"] == "opencode-24566-unclosed-opener-bad-json"]
    r = run_ids(chat_options(row["request"]), [tok().encode_with_special_tokens(row["raw_output"])])
    (call,) = r.tool_calls
    args = json.loads(call.arguments)
    assert call.name == "question" and isinstance(args["questions"], str) and args["questions"].startswith("[{")
    assert "invalid_json_argument" in r.notes
    assert r.content == ""  # the opener missing its ">" is recovered as markup


# ---------------------------------------------------------------- corrupted spellings, structured

_SPELLINGS = [("<｜DSML｜", "</｜DSML｜", ""), ("<｜｜DSML｜｜", "</｜｜DSML｜｜", " "), ("<｜DSML｜", "</｜DSML｜", " "),
              ("< | DSML | ", "</ | DSML | ", ""), ("<|DSML|", "</|DSML|", "")]


def _corrupted_output(rnd: random.Random) -> tuple[str, list[str]]:
    """Prose and tool blocks whose tags use random (mixed) spellings; sentinel words everywhere."""
    words: list[str] = []

    def word() -> str:
        w = _sentinel(len(words) + 100 * rnd.randint(0, 99))
        words.append(w)
        return w

    def tag(kind: str, closing: bool = False, attrs: str = "") -> str:
        o, c, sp = rnd.choice(_SPELLINGS)
        return f"{c if closing else o}{sp}{kind}{attrs}>"

    parts = []
    for _ in range(rnd.randint(1, 4)):
        parts.append(f"{word()} text.\n\n")
        block = [tag(rnd.choice(["tool_calls", "calls", "function_calls"])) + "\n"]
        if rnd.random() < 0.2:
            block[0] = block[0][:-2] + "\n"  # opener missing its ">"
        for _ in range(rnd.randint(1, 3)):
            name = rnd.choice(["f", "g", "undeclared"])
            inv = [tag("invoke", attrs=f' name="{name}"') + "\n"]
            for k in range(rnd.randint(0, 3)):
                is_str = rnd.random() < 0.6
                pick = rnd.choice(["1", "[1, 2]", ""])
                val = f"{word()} \"q\" \\ x" if is_str else pick or word()
                inv.append(tag("parameter", attrs=f' name="p{k}" string="{"true" if is_str else "false"}"') + val
                           + tag("parameter", True) + "\n")
            if rnd.random() < 0.15:
                inv.append(f"{word()}\n")  # text between tags: not structurally complete
            if rnd.random() > 0.1:
                inv.append(tag("invoke", True) + "\n")
            block += inv
        if rnd.random() < 0.7:
            block.append(tag(rnd.choice(["tool_calls", "calls"]), True))
        parts.append("".join(block))
    text = "".join(parts)
    if rnd.random() < 0.3:
        text = text[: rnd.randint(0, len(text))]
        words = [w for w in words if w in text]
    return text, words


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_corrupted_blocks_invariance_no_lost_text_declared_only(seed):
    rnd = random.Random(seed)
    text, words = _corrupted_output(rnd)
    ids = tok().encode_with_special_tokens(text)
    r = _same_in_every_chunking_no_lost_text(opts(tools=["f", "g"]), ids, seed, text, words)
    exact = re.compile(r'<｜DSML｜ ?invoke name="undeclared">')  # V4's or V4.1's spelling: markup
    if "recovered_dsml" not in r.notes or not exact.search(text):
        assert all(c.name in ("f", "g") for c in r.tool_calls) or exact.search(text)
    if r.tool_calls and not any(sp != ("<｜DSML｜", "</｜DSML｜", "") and sp[0] in text for sp in _SPELLINGS):
        assert "recovered_dsml" not in r.notes  # exact spelling only: nothing is "recovered"


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_well_formed_blocks_in_any_spelling_are_all_recovered(seed):
    """Structurally complete blocks of declared tools between prose, each invoke (and the block
    opener / closer) in a random spelling, exact or corrupted: every invoke becomes a call, in
    order, and only the prose is content. (Spellings are consistent inside one invoke; an
    all-exact block keeps an exact closer.)"""
    rnd = random.Random(seed)

    def tag(sp: tuple[str, str, str], kind: str, closing: bool = False, attrs: str = "") -> str:
        return f"{sp[1] if closing else sp[0]}{sp[2]}{kind}{attrs}>"

    parts, prose, names = [], [], []
    for b in range(rnd.randint(1, 4)):
        words = f"Prose{b} {_sentinel(b)}."
        prose.append(words)
        parts.append(words + rnd.choice(["\n\n", "\n", " "]))
        opener = rnd.choice(_SPELLINGS)
        parts.append(tag(opener, rnd.choice(["tool_calls", "calls", "function_calls"])) + "\n")
        used = {opener}
        for _ in range(rnd.randint(1, 3)):
            sp = rnd.choice(_SPELLINGS)
            used.add(sp)
            name = rnd.choice(["f", "g"])
            names.append(name)
            parts.append(tag(sp, "invoke", attrs=f' name="{name}"') + "\n")
            for k in range(rnd.randint(0, 2)):
                parts.append(tag(sp, "parameter", attrs=f' name="p{k}" string="true"') + f"v{k}"
                             + tag(sp, "parameter", True) + "\n")
            parts.append(tag(sp, "invoke", True) + "\n")
        closer = rnd.choice(sorted(used)) if used != {_SPELLINGS[0]} else _SPELLINGS[0]
        parts.append(tag(closer, rnd.choice(["tool_calls", "calls"]), True) + rnd.choice(["", "\n", "\n\n"]))
    text = "".join(parts)
    ids = tok().encode_with_special_tokens(text)
    for how, r in _all_chunkings(opts(tools=["f", "g"]), ids, seed):
        assert [c.name for c in r.tool_calls] == names, (how, text)
        assert "".join(r.content.split()) == "".join("".join(prose).split()), (how, text, r.content)
        assert r.finish_reason == "tool_calls"
