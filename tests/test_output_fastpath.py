"""Output-parser fast paths (bulk invoke regex, one-token shortcuts) give exactly the general path's events.

The parser has a general tag-by-tag state machine and, on top, shortcuts for the common shapes
(a whole well-formed invoke inside one push; one token completing a DSML tag; plain text tokens).
Here the same ids are fed to a parser with the shortcuts switched off and the event lists of
every push must be identical, for many outputs and chunkings.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from output_support import decoded_pieces, opts, split_ids, tok

from recipe.encodings.deepseek_v4 import output as out_mod
from recipe.encodings.deepseek_v4.output import OutputParser, make_tool_call_id


def _general(p: OutputParser) -> OutputParser:
    """Switch every shortcut off: only the general scan remains."""
    p._fast_ok = False  # keeps the one-token table empty, also after partial UTF-8
    p._fast_texts = {}
    p._fast_plain = {}
    p._re_run = None
    return p


def _per_push(o, chunks, general: bool, text_mode: bool = False, seed: int = 5):
    p = OutputParser(o, tok(), tool_call_id=seed)
    if general:
        _general(p)
    if text_mode:
        res = [p.push_text(c, 1) for c in chunks]
    else:
        res = [p.push(c) for c in chunks]
    res.append(p.finish("stop"))
    return res


def _param(k: str, v: str, s: bool) -> str:
    return f'<｜DSML｜parameter name="{k}" string="{"true" if s else "false"}">{v}</｜DSML｜parameter>\n'


VALUES = [
    ("city", 'Paris, "FR"', True), ("days", "3", False), ("n", " -2.5e3 ", False), ("ok", "true", False),
    ("opts", '{"lang": ["en", "fr"], "n": null}', False), ("bad", "three", False), ("nan", "NaN", False),
    ("path", "C:\\Users\\dev\\a b.txt", True), ("code", "def f(x):\n    return x < 2 and x > 0\n", True),
    ("empty", "", True), ("e2", "", False), ("nl", "line\n", True), ("lt", "a <b> c </d>", True),
    ("uni", "東京 🤖 é", True), ("ctl", "tab\there\x01", True), ("mention", "see <｜DSML｜ here", True),
]

PIECES = [
    "Let me look.\n\n", "<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>", "\n", "\n\n", " ", "Done. ",
    '<｜DSML｜invoke name="f">\n', '<｜DSML｜invoke name="undeclared">\n', "</｜DSML｜invoke>\n",
    '<｜DSML｜invoke name="g" extra="1">\n', "</｜DSML｜parameter>", "junk ", "<｜DSML｜", "</think>",
    "<｜end▁of▁sentence｜>", "\u3000",
    # corrupted spellings: recovery holds text back, so the shortcuts must leave that state alone
    "<｜｜DSML｜｜ calls>\n", '<｜｜DSML｜｜ invoke name="f">\n', "</｜｜DSML｜｜ invoke>\n", "</｜｜DSML｜｜ calls>",
    '< | DSML | parameter name="a" string="true">v</ | DSML | parameter>\n', "<|", "<｜DSML｜function_calls>\n",
]


def _invoke_text(rnd: random.Random) -> str:
    params = "".join(_param(*rnd.choice(VALUES)) for _ in range(rnd.randint(0, 4)))
    name = rnd.choice(["f", "g", "h"])
    return f'<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n'


def _output(rnd: random.Random) -> str:
    parts = []
    for _ in range(rnd.randint(1, 12)):
        r = rnd.random()
        if r < 0.45:
            parts.append(_invoke_text(rnd))
        elif r < 0.6:
            parts.append("Some prose, then calls:\n\n<｜DSML｜tool_calls>\n" + _invoke_text(rnd) + _invoke_text(rnd)
                         + "</｜DSML｜tool_calls>\n\n")
        else:
            parts.append(rnd.choice(PIECES))
    return "".join(parts)


OPTION_SETS = [opts(tools=["f", "g"]), opts(True, tools=["f", "g", "h"]), opts(tools=["f"], required=True),
               opts(tools=["f", "g"], stop=["Done"])]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(range(len(OPTION_SETS))))
def test_shortcuts_give_the_general_events_per_push(seed, k):
    rnd = random.Random(seed)
    text = _output(rnd)
    if k == 1:
        text = "Thinking about it.</think>" + text
    o = OPTION_SETS[k]
    ids = tok().encode_with_special_tokens(text)
    for how in ("one", "all", random.Random(seed), 64):
        chunks = split_ids(ids, how)
        assert _per_push(o, chunks, False) == _per_push(o, chunks, True), (how, text)
    pieces = decoded_pieces(ids)
    assert _per_push(o, pieces, False, True) == _per_push(o, pieces, True, True)


@pytest.mark.parametrize("blank", ["\u3000", "\x0b", "\xa0", " ", "\n"])
def test_a_held_block_opener_counts_only_ascii_blanks(blank):
    """After a held block opener the one-token shortcut takes only the blanks the hold itself
    skips (space, tab, CR, LF); a Unicode space is text and decides the hold (found by the
    property above: ``\u3000`` after ``<｜DSML｜tool_calls>``)."""
    text = f'<｜DSML｜tool_calls>\n{blank}<｜DSML｜invoke name="f">\n</｜DSML｜invoke>\n</｜DSML｜invoke>\n'
    for head, o in (("junk ", OPTION_SETS[0]), ("Thinking about it.</think>junk </think>", OPTION_SETS[1])):
        chunks = split_ids(tok().encode_with_special_tokens(head + text), "one")
        assert _per_push(o, chunks, False) == _per_push(o, chunks, True)


def test_bulk_path_really_runs_and_matches():
    """A long all-at-once block goes through the bulk regex (few calls to the tag scanner)."""
    clean = [v for v in VALUES if "｜" not in v[1]]
    invokes = [f'<｜DSML｜invoke name="{"fgh"[k % 3]}">\n' + "".join(_param(*clean[(k + j) % len(clean)]) for j in range(k % 4))
               + "</｜DSML｜invoke>\n" for k in range(50)]
    text = "Calls:\n\n<｜DSML｜tool_calls>\n" + "".join(invokes) + "</｜DSML｜tool_calls>"
    ids = tok().encode_with_special_tokens(text)
    o = opts(tools=["f", "g", "h"])
    calls = []
    p = OutputParser(o, tok(), tool_call_id=1)
    orig = p._dsml_step
    p._dsml_step = lambda *a: (calls.append(1), orig(*a))[1]
    fast = p.push(ids) + p.finish()
    assert len(calls) <= 2
    slow = _per_push(o, [ids], True, seed=1)
    assert fast == slow[0] + slow[1]
    assert sum(type(e).__name__ == "ToolCallEnd" for e in fast) == 50


def test_simple_json_shortcut_is_sound():
    """Every value the number/literal shortcut accepts is valid JSON; typical near-misses are refused."""
    for v in ["0", "-1", "2.50", " 1e5 ", "1E-3", "true", "false", "null", "\t42\n"]:
        assert out_mod._SIMPLE_JSON.fullmatch(v) and out_mod._is_json(v)
    for v in ["01", "1.", ".5", "+1", "NaN", "Infinity", "tru", "", "1 2", "0x1", "１"]:
        assert not out_mod._SIMPLE_JSON.fullmatch(v)


@given(st.text(alphabet="0123456789-+.eE truefalsn\t\n", max_size=12))
def test_simple_json_shortcut_agrees_with_json(v):
    if out_mod._SIMPLE_JSON.fullmatch(v):
        assert out_mod._is_json(v)


def test_call_ids_shape_uniform_and_seeded():
    id_re = re.compile(r"^call_\d\d_[A-Za-z0-9]{20}\d{4}$")
    rng = random.Random(0)
    ids = [make_tool_call_id(rng, i) for i in range(100)]
    assert all(id_re.match(x) for x in ids) and len(set(ids)) == 100
    stream = out_mod._IdStream(random.Random(9))
    streamed = [stream(i) for i in range(200)]
    assert all(id_re.match(x) for x in streamed[:100]) and streamed[150].startswith("call_150_")
    again = out_mod._IdStream(random.Random(9))
    assert [again(i) for i in range(200)] == streamed
    letters = "".join(x.split("_")[2][:20] for x in streamed)
    counts = {c: letters.count(c) for c in set(letters)}
    assert len(counts) == 62 and max(counts.values()) < 3 * min(counts.values())


@pytest.mark.parametrize("how", ["one", "all", 5])
def test_block_after_block_with_prose(how):
    text = ("A.\n\n<｜DSML｜tool_calls>\n" + '<｜DSML｜invoke name="f">\n' + _param("a", "1", False)
            + "</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n\nB.\n\n<｜DSML｜tool_calls>\n" + '<｜DSML｜invoke name="f">\n'
            + _param("b", "x", True) + "</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n")
    ids = tok().encode_with_special_tokens(text)
    from recipe.output.events import accumulate

    p = OutputParser(opts(tools=["f"]), tok(), tool_call_id=1)
    r = accumulate([e for c in split_ids(ids, how) for e in p.push(c)] + p.finish())
    assert r.content == "A.\n\nB."
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("f", {"a": 1}), ("f", {"b": "x"})]


def _v41(text: str, rnd: random.Random) -> str:
    """Some of the DSML tags of ``text`` in DeepSeek-V4.1's spaced spelling (mixed spellings in one block)."""
    for old, new in (("tool_calls>", " calls>"), ("｜DSML｜invoke", "｜DSML｜ invoke"), ("｜DSML｜parameter", "｜DSML｜ parameter")):
        parts = text.split(old)
        text = parts[0] + "".join((new if rnd.random() < 0.7 else old) + p for p in parts[1:])
    return text


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(range(len(OPTION_SETS))), st.booleans(), st.floats(0.3, 1.0))
def test_tag_shortcuts_one_id_per_push_match_the_general_path(seed, k, v41, keep):
    """One id per push through tool blocks: the tag-piece shortcuts (``<`` / ``</``, ``｜DSML｜``, a
    token completing a held tag, string-value pieces ending in a newline) give the general path's
    events push by push, with corrupted DSML, undeclared and strict tools, V4.1's spaced spelling
    (mixed with V4's) and the output cut at a random id (a tag left partial at the end)."""
    rnd = random.Random(seed)
    text = "Calls:\n\n<｜DSML｜tool_calls>\n" + "".join(_invoke_text(rnd) for _ in range(rnd.randint(1, 4))) + _output(rnd)
    if v41:
        text = _v41(text, rnd)
    ids = tok().encode_with_special_tokens(text)
    ids = ids[: max(1, int(len(ids) * keep))]
    o = OPTION_SETS[k]
    chunks = split_ids(ids, "one")
    assert _per_push(o, chunks, False) == _per_push(o, chunks, True), text


def test_tag_shortcuts_really_run():
    """In a well-formed block fed one id per push, almost no id reaches the general path."""
    text = "Calls:\n\n<｜DSML｜tool_calls>\n" + "".join(
        f'<｜DSML｜invoke name="f">\n' + _param("code", "def f(x):\n    return x\n", True) + _param("n", "3", False)
        + "</｜DSML｜invoke>\n" for _ in range(20)) + "</｜DSML｜tool_calls>"
    ids = tok().encode_with_special_tokens(text)
    p = OutputParser(opts(tools=["f"]), tok(), tool_call_id=1)
    p.push(ids[:5])  # (ids seen for the first time take the general path once)
    warm = OutputParser(opts(tools=["f"]), tok(), tool_call_id=1)
    for i in ids:
        warm.push((i,))
    general = []
    orig = p._push_ids
    p._push_ids = lambda t: (general.append(t), orig(t))[1]
    fast = [p.push((i,)) for i in ids[5:]] + [p.finish()]
    assert len(general) <= 2, general
    q = OutputParser(opts(tools=["f"]), tok(), tool_call_id=1)
    _general(q)
    q.push(ids[:5])
    assert fast == [q.push((i,)) for i in ids[5:]] + [q.finish()]
