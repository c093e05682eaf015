"""The output grammar on recipe's vocabulary with llguidance (the ``constrain`` extra; skipped without it).

Completeness: every well-formed golden turn (fixtures, real model outputs, hypothesis-rendered turns
in three APIs) is accepted token by token with the golden id inside the mask at every step, and no
special id other than the ones the format allows there. Soundness: hand-made wrong outputs are
rejected at the offending token; whatever a random mutation or a mask-guided random walk gets
through parses with no note, declared tools, schema-valid arguments and the tool choice honoured.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("llguidance")

import recipe  # noqa: E402
from fixtures import jsonl  # noqa: E402
from grammar_support import (  # noqa: E402
    DSML_ID,
    EOS_ID,
    THINK_END_ID,
    TOK,
    assert_sound,
    golden_turn,
    mutate,
    out_ids,
    parse,
    prepared,
    request,
    tools,
    walk,
    word,
    object_schema,
)
from recipe import OutputMatcher, check_output, output_grammar  # noqa: E402

_ALLOWED_SPECIALS = {EOS_ID, DSML_ID, THINK_END_ID}


def _bit(mask: np.ndarray, i: int) -> bool:
    return bool((int(mask[i // 32]) >> (i % 32)) & 1)


def assert_golden(prep, ids, args="auto"):
    """Every id of ``ids`` is in the mask when its turn comes (and only format specials are), the
    matcher accepts it, and the turn is complete at the end."""
    m = OutputMatcher(prep, args)
    special_ids = np.array(sorted(TOK._special_ids))
    for k, tid in enumerate(ids):
        mask = m.mask()
        assert _bit(mask, tid), (k, tid, TOK.decode(ids[:k + 1])[-80:])
        bits = (mask[special_ids // 32].astype(np.int64) >> (special_ids % 32)) & 1
        assert set(special_ids[bits == 1].tolist()) <= _ALLOWED_SPECIALS, (k, TOK.decode(ids[:k])[-60:])
        assert m.accept(tid), (k, m.error)
    assert m.accepting, TOK.decode(ids)[-80:]
    if not ids or ids[-1] != EOS_ID:
        assert m.accept(EOS_ID)
    assert m.finished


# ---------------------------------------------------------------------------------------------
# goldens from fixtures
# ---------------------------------------------------------------------------------------------

def _recorded():
    rows = jsonl("api/completions.jsonl") + jsonl("completions/chat_completions.jsonl")
    out = []
    for r in rows:
        if r["backend_finish"] != "stop" or r["scenario"] == "no_think_end":  # cut short / unclosed reasoning
            continue
        if r["api"] == "messages" and r["scenario"] == "required_choice":
            continue  # {"type": "any"} is auto (deepseek-recipe): the prompt opens no block for this mid-block text
        out.append(pytest.param(r, id=f"{r['api']}-{r['scenario']}"))
    return out


@pytest.mark.parametrize("row", _recorded())
def test_recorded_completions_accepted_token_by_token(row):
    prep = recipe.prepare(row["request"], row["api"])
    assert parse(prep, row["completion_token_ids"])[2].notes == ()
    assert_golden(prep, row["completion_token_ids"])


def _reference_request(row):
    names = sorted({c["function"]["name"] for c in row["message"]["tool_calls"]}) or ["unused"]
    return {
        "model": "deepseek-v4-pro",
        "messages": [{"role": "user", "content": "Go."}],
        "thinking": {"type": "enabled" if row["thinking_mode"] == "thinking" else "disabled"},
        "tools": [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names],
    }


@pytest.mark.parametrize("row", jsonl("completions/deepseek_v4_completions.jsonl"), ids=lambda r: r["name"])
def test_reference_encoder_completions_accepted(row):
    prep = recipe.prepare(_reference_request(row))
    assert_golden(prep, row["completion_token_ids"])


def _official_turns():
    """Every assistant turn of DeepSeek's official V4 vectors, with a request declaring the vector's tools."""
    from fixtures import FIXTURES

    out = []
    for n in (1, 2, 3, 4):
        data = json.loads((FIXTURES / f"deepseek_v4_official/test_input_{n}.json").read_text(encoding="utf-8"))
        tools = data["tools"] if isinstance(data, dict) else next((m.get("tools") for m in data if m.get("tools")), None)
        text = (FIXTURES / f"deepseek_v4_official/test_output_{n}.txt").read_text(encoding="utf-8")
        for k, turn in enumerate(text.split("<｜Assistant｜>")[1:]):
            turn = turn[: turn.index("<｜end▁of▁sentence｜>") + len("<｜end▁of▁sentence｜>")]
            thinking = turn.startswith("<think>")
            body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Go."}],
                    "thinking": {"type": "enabled" if thinking else "disabled"}}
            if tools:
                body["tools"] = tools
            out.append(pytest.param(body, turn[len("<think>" if thinking else "</think>"):], id=f"official{n}-{k}"))
    return out


@pytest.mark.parametrize("body,turn", _official_turns())
@pytest.mark.parametrize("args", ["auto", "schema"])
def test_official_vector_turns_accepted(body, turn, args):
    prep = recipe.prepare(body)
    ids = out_ids(turn)
    assert parse(prep, ids)[2].notes == ()
    assert_golden(prep, ids, args)


def _raw_rows():
    return [pytest.param(r, id=r["id"]) for r in jsonl("completions/raw_outputs.jsonl")]


@pytest.mark.parametrize("row", _raw_rows())
def test_real_model_outputs(row):
    """Well-formed real outputs are accepted; malformed ones are rejected, and so is any call under
    tool_choice none; nothing accepted parses badly."""
    prep = recipe.prepare(row["request"])
    ids = out_ids(row["raw_output"])
    calls, _, fin = parse(prep, ids)
    res = check_output(prep, ids)
    raw = row["raw_output"]
    if fin.notes == () and ("DSML" not in raw or "</｜DSML｜tool_calls>" in raw):
        assert res.ok, res
        assert_golden(prep, ids)
        assert_sound(prep, ids)
    else:
        assert not res.ok, fin.notes
    if "<｜DSML｜" in row["raw_output"] or "DSML" in row["raw_output"]:
        assert not check_output(recipe.prepare({**row["request"], "tool_choice": "none"}), ids).ok


def test_well_formed_real_outputs_are_in_the_corpus():
    rows = jsonl("completions/raw_outputs.jsonl")
    clean = [r["id"] for r in rows if check_output(recipe.prepare(r["request"]), out_ids(r["raw_output"])).ok]
    assert len(clean) >= 2 and any("three-parallel" in i for i in clean)


# ---------------------------------------------------------------------------------------------
# hypothesis-rendered turns in three APIs
# ---------------------------------------------------------------------------------------------


@st.composite
def _case(draw):
    api = draw(st.sampled_from(["chat", "responses", "messages"]))
    ts = draw(tools())
    choice = draw(st.sampled_from(["auto", "auto", "none", "required", ts[0]["name"]]))
    answer = None
    if api != "messages" and draw(st.integers(0, 3)) == 0:
        answer = draw(object_schema(True).filter(lambda s: s["properties"]))
    body = request(api, ts, choice, draw(st.booleans()), draw(st.booleans()), answer)
    prep = prepared(body, api)
    return prep, draw(golden_turn(prep))


@settings(max_examples=60)
@given(_case(), st.sampled_from(["auto", "schema", "syntax"]))
def test_rendered_turns_accepted_token_by_token(case, args):
    prep, ids = case
    assert parse(prep, ids)[2].notes == ()
    assert_golden(prep, ids, args)


# ---------------------------------------------------------------------------------------------
# negatives: rejected at the offending token
# ---------------------------------------------------------------------------------------------

_WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"], "additionalProperties": False}
_OPEN = "\n\n<｜DSML｜tool_calls>\n"
_INV = '<｜DSML｜invoke name="get_weather">\n'
_CITY = '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
_DAYS = '<｜DSML｜parameter name="days" string="false">{}</｜DSML｜parameter>\n'
_CLOSE = "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"


def _body(thinking=False, choice="auto", parallel=True, fmt=None):
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Weather?"}],
            "thinking": {"type": "enabled" if thinking else "disabled"},
            "tools": [{"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": _WEATHER}}],
            "tool_choice": choice}
    if not parallel:
        body["parallel_tool_calls"] = False
    if fmt is not None:
        body = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "W", "strict": True, "schema": fmt}}
    return body


_TEMP = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"], "additionalProperties": False}
_STR = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"], "additionalProperties": False}

#: (case, request body, accepted prefix (spelled text), rest with the fault, the fault's character in rest,
#:  rest spelled in ordinary tokens (byte-spelled markers))
NEGATIVES = [
    ("undeclared_tool", _body(), _OPEN + '<｜DSML｜invoke name="', 'launch">\n', 0, False),
    ("missing_required", _body(), _OPEN + _INV + _CITY, _CLOSE, 1, False),
    ("repeated_parameter", _body(), _OPEN + _INV + _CITY, _CITY, len('<｜DSML｜parameter name="'), False),
    ("wrong_type", _body(), _OPEN + _INV + _CITY + '<｜DSML｜parameter name="days" string="false">', '"three"', 0, False),
    ("string_flag_wrong", _body(), _OPEN + _INV + _CITY + '<｜DSML｜parameter name="days" string="', 'true">3', 0, False),
    ("byte_spelled_dsml", _body(), "Let me check.\n\n<", "｜DSML｜tool_calls>", len("｜DSM"), True),
    ("byte_spelled_role_in_content", _body(), "Hi ", "<｜User｜>", len("<｜User｜"), True),
    ("byte_spelled_think_end", _body(thinking=True), "Let me think.", "</think>Done", len("</think>") - 1, True),
    ("role_token_in_content", _body(), "Hi", "<｜User｜>", 0, False),
    ("role_token_in_reasoning", _body(thinking=True), "Hmm", "<｜Assistant｜>", 0, False),
    ("bos_in_reasoning", _body(thinking=True), "", "<｜begin▁of▁sentence｜>", 0, False),
    ("eos_inside_call", _body(), _OPEN + _INV + '<｜DSML｜parameter name="city" string="true">Par', "<｜end▁of▁sentence｜>", 0, False),
    ("integer_300_digits", _body(), _OPEN + _INV + _CITY + '<｜DSML｜parameter name="days" string="false">', "1" * 300, 19, False),
    ("number_1e999", _body(fmt={"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
                               "additionalProperties": False}), '{"x": 1e99', "9}", 0, False),
    ("text_after_calls", _body(), _OPEN + _INV + _CITY + _DAYS.format(3) + _CLOSE, "Done.", 0, False),
    ("call_with_tool_choice_none", _body(choice="none"), "Sure.\n\n<", "｜DSML｜", 0, False),
    ("second_call_parallel_off", _body(parallel=False), _OPEN + _INV + _CITY + _DAYS.format(3) + "</｜DSML｜invoke>\n<",
     "｜DSML｜", 0, False),
    ("ascii_bar_dsml_in_content", _body(), "See < | DSM", "L | invoke>", 0, True),
    ("json_answer_wrong_type", _body(fmt=_TEMP), '{"temp": ', '"hot"}', 0, False),
    ("unclosed_block_then_eos", _body(), _OPEN + _INV + _CITY + _DAYS.format(3) + "</｜DSML｜invoke>\n",
     "<｜end▁of▁sentence｜>", 0, False),
    ("content_before_required_block", _body(thinking=True, choice="required"), "R</think>", "Sure", 0, False),
    ("byte_spelled_dsml_in_raw_value", _body(), _OPEN + _INV + '<｜DSML｜parameter name="city" string="true">Par',
     "is｜DSML｜x", len("is｜DSML"), True),
    ("byte_spelled_think_end_in_raw_value", _body(), _OPEN + _INV + '<｜DSML｜parameter name="city" string="true">a',
     "</think>b", len("</think"), True),
    ("byte_spelled_role_in_json_string", _body(fmt=_STR), '{"s": "a', '｜User｜>b"}', len("｜User｜"), True),
]


def _spell(text: str, ordinary: bool) -> list[int]:
    return TOK.encode_ordinary(text) if ordinary else out_ids(text) if "<｜User｜>" not in text and "<｜Assistant｜>" not in text and "begin" not in text else TOK.encode_with_special_tokens(text)


@pytest.mark.parametrize("case,body,prefix,rest,fault,ordinary", NEGATIVES, ids=[n[0] for n in NEGATIVES])
def test_negative_rejected_at_the_offending_token(case, body, prefix, rest, fault, ordinary):
    options = recipe.Options(forced_tool_choice_thinking="constrain") if case == "content_before_required_block" else None
    prep = recipe.prepare(body, options=options) if options else recipe.prepare(body)
    head = out_ids(prefix)
    tail = _spell(rest, ordinary)
    # the token holding the fault character
    at, seen = 0, ""
    for k in range(len(tail)):
        seen = TOK.decode(tail[: k + 1])
        if len(seen) > fault:
            at = k
            break
    res = check_output(prep, head + tail)
    assert not res.ok
    assert res.index == len(head) + at, (res, TOK.decode(head + tail[: at + 1])[-40:])


def test_incomplete_outputs_are_not_ok():
    prep = recipe.prepare(_body(thinking=True))
    res = check_output(prep, out_ids("I keep thinking"))
    assert (res.ok, res.index, res.complete) == (False, None, False)
    prep = recipe.prepare(_body())
    assert not check_output(prep, out_ids(_OPEN + _INV + _CITY)).ok


# ---------------------------------------------------------------------------------------------
# mutations and random walks
# ---------------------------------------------------------------------------------------------

_MUTATION_BODIES = [
    _body(), _body(thinking=True), _body(parallel=False), _body(fmt=_TEMP),
    {**_body(), "response_format": {"type": "json_schema", "json_schema": {"name": "W", "strict": True, "schema": _TEMP}}},
]


@settings(max_examples=40)
@given(st.data())
def test_accepted_mutants_parse_cleanly(data):
    body = data.draw(st.sampled_from(_MUTATION_BODIES))
    prep = recipe.prepare(body)
    golden = data.draw(golden_turn(prep))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(10):
        ids = mutate(golden, rng)
        if check_output(prep, ids).ok:
            assert_sound(prep, ids)


def test_most_mutants_of_a_call_are_rejected():
    prep = recipe.prepare(_body())
    golden = out_ids(_OPEN + _INV + _CITY + _DAYS.format(3) + _CLOSE + "<｜end▁of▁sentence｜>")
    rng = random.Random(14)
    results = [check_output(prep, mutate(golden, rng)).ok for _ in range(200)]
    assert results.count(False) > 120, results.count(False)


_WALK_BODIES = [
    ("auto+thinking", _body(thinking=True)),
    ("auto", _body()),
    ("required", _body(choice="required")),
    ("named", _body(choice={"type": "function", "function": {"name": "get_weather"}})),
    ("parallel_off", _body(parallel=False)),
    ("none", _body(choice="none")),
    ("json", _body(fmt=_TEMP)),
    ("tools+json", {**_body(), "response_format": {"type": "json_schema", "json_schema": {"name": "W", "strict": True, "schema": _TEMP}}}),
    ("syntax_args", {**_body(), "tools": [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]}),
]


@pytest.mark.parametrize("name,body", _WALK_BODIES, ids=[w[0] for w in _WALK_BODIES])
def test_mask_guided_random_walks_parse_cleanly(name, body):
    prep = recipe.prepare(body)
    rng = random.Random(name)
    finished = with_calls = 0
    for _ in range(30):
        m = OutputMatcher(prep)
        ids = walk(m, rng)
        if ids is None:
            continue
        finished += 1
        assert check_output(prep, ids).ok
        assert_sound(prep, ids)
        with_calls += bool(parse(prep, ids)[0])
    assert finished >= 23, finished  # ≥ 200 finished walks over the 9 modes
    if name not in ("none", "json"):
        assert with_calls, "the walks never reached a tool call"


# ---------------------------------------------------------------------------------------------
# the matcher's API
# ---------------------------------------------------------------------------------------------


def test_matcher_api_forced_rollback_and_mask_layout():
    prep = recipe.prepare(_body(choice={"type": "function", "function": {"name": "get_weather"}}))
    g = output_grammar(prep)
    assert (g.mode, g.starts_in) == ("tools_named", "tool_block")
    m = OutputMatcher(prep)
    assert m.forced()[:2] == out_ids("<｜DSML｜")  # the invoke opener is forced
    mask = m.mask()
    assert mask.dtype == np.int32 and mask.shape == ((TOK.n_vocab + 31) // 32,)
    out = np.zeros_like(mask)
    assert m.mask(out) is out and (out == mask).all()
    assert m.allowed().tolist() == out_ids("<")
    ids = out_ids(_INV + _CITY)
    assert m.accept_many(ids) == len(ids)
    assert not m.accept(EOS_ID) and m.error is None  # refused, state unchanged
    m.rollback(len(ids))
    assert m.allowed().tolist() == out_ids("<")
    with pytest.raises(ValueError):
        m.mask(np.zeros(3, dtype=np.int32))
    m.reset()
    assert not m.finished and not m.accepting


def test_matcher_compiles_once_per_key(monkeypatch):
    import recipe.schema.constrain as c

    prep = recipe.prepare(_body())
    OutputMatcher(prep)
    built = []
    real = c._llguidance

    def counting():
        built.append(1)
        return real()

    monkeypatch.setattr(c, "_llguidance", counting)
    a, b = OutputMatcher(prep), OutputMatcher(prep)
    assert built == []
    assert a.accept(out_ids("Hi")[0]) and b.allowed().size > 1000  # independent copies


# ---------------------------------------------------------------------------------------------
# the Lark forms of free text (grammar_ir.text_terminal) match what they say
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("words,suffix", [(("</a", "b>"), "</"), (("a<",), "</"), (("/b",), "</"), (("<",), "<")])
def test_text_terminal_is_text_without_the_words_then_the_suffix(words, suffix):
    """Every string up to 5 characters over ``ab</>`` is matched by the printed terminal exactly when
    it is (text) + suffix and contains none of the words, whichever form the printer chose."""
    import itertools

    import llguidance as llg

    from recipe.schema.constrain import ll_tokenizer
    from recipe.schema.grammar_ir import Grammar, Text, to_lark

    lark = to_lark(Grammar(Text(words, suffix)))
    m = llg.LLMatcher(ll_tokenizer(TOK), llg.LLMatcher.grammar_from_lark(lark), log_level=0)
    assert not m.is_error(), m.get_error()
    for n in range(1, 6):
        for chars in itertools.product("ab</>", repeat=n):
            s = "".join(chars)
            ids = TOK.encode_ordinary(s)
            m.reset()
            got = m.try_consume_tokens(ids) == len(ids) and m.is_accepting()
            assert got == (s.endswith(suffix) and not any(w in s for w in words)), (lark, s)
