"""DeepSeek V3 / R1 / V3.1 / V3.2 prompts: ``apply_chat_template`` and the family reference renderers.

Oracles (never recipe's own output): DeepSeek-V3.2's official encoder fixtures and model-card
example; the V3.1 model-card examples; the conformance sample (official templates rendered with
transformers, ids with the V3 vocabulary); transformers' jinja renderer running the published
template strings (``fixtures/deepseek_v3x/templates.json``) on generated conversations; HF
``tokenizers`` for ids of text without special-token spellings.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recipe
from recipe.encodings.chat_template import REVISIONS, ChatTemplateError, apply_chat_template, render_chat_template
from recipe.encodings.deepseek_v3_2.reference import encode_messages, encode_messages_to_ids
from recipe.prompt import Special
from recipe.tokenizer import load_v3_tokenizer
from v3x_support import FIXTURES, JINJA_REVISIONS, hf_v3, jinja_render, rows

pytest.importorskip("transformers")

OFFICIAL = FIXTURES / "deepseek_v3_2_official"
ALL_ROWS = [r for g in ("v3", "r1", "v3.1", "v3.2") for r in rows(g)]


# ---------------------------------------------------------------------------------------------
# Official vectors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "_search_wo_date", "_search_w_date"])
def test_v32_official_fixtures(name):
    data = json.loads((OFFICIAL / f"test_input{name}.json").read_text(encoding="utf-8"))
    messages = data["messages"]
    if "tools" in data:
        messages[0]["tools"] = data["tools"]
    expected = (OFFICIAL / f"test_output{name}.txt").read_text(encoding="utf-8").strip()
    before = json.dumps(messages)
    assert encode_messages(messages, thinking_mode="thinking", drop_thinking=True, add_default_bos_token=True) == expected
    assert apply_chat_template(messages, template="V3.2", thinking_mode="thinking") == expected
    assert json.dumps(messages) == before  # never mutated
    ids = encode_messages_to_ids(messages, "thinking")
    tok = load_v3_tokenizer()
    assert tok.decode(ids) == expected
    # the fixtures' text has no special-token spellings of its own: HF's encode of the text agrees
    assert ids == hf_v3().encode(expected, add_special_tokens=False).ids


def test_v32_model_card_example():
    card = json.loads((OFFICIAL / "readme_example.json").read_text(encoding="utf-8"))
    cfg = card["encode_config"]
    assert encode_messages(card["messages"], **cfg) == card["prompt"]
    assert encode_messages_to_ids(card["messages"], **cfg) == card["token_ids"]
    assert apply_chat_template(card["messages"], template="V3.2", tokenize=True, **cfg) == card["token_ids"]


def test_v31_model_card_examples():
    card = json.loads((FIXTURES / "deepseek_v3_1_official" / "readme_examples.json").read_text(encoding="utf-8"))
    for case in card["cases"]:
        kw = case["kwargs"]
        prompt = apply_chat_template(card["messages"], template="V3.1", **kw)
        assert prompt == case["prompt"]
        ids = apply_chat_template(card["messages"], template="V3.1", tokenize=True, **kw)
        assert ids == hf_v3().encode(case["prompt"], add_special_tokens=False).ids


def _call(row):
    opts = dict(row["options"])
    template = opts.pop("template", "V3.2")
    tools = row["tools"] if opts.pop("tools_rendering", None) == "v31_readme_system_message" else None
    opts.pop("assistant_content_none_sent_as", None)
    opts.pop("tools_message_index", None)
    return row["messages"], dict(template=template, tools=tools, **opts)


@pytest.mark.parametrize("row", ALL_ROWS, ids=[r["id"] for r in ALL_ROWS])
def test_conformance_row(row):
    messages, kw = _call(row)
    assert apply_chat_template(messages, **kw) == row["prompt"]
    assert apply_chat_template(messages, tokenize=True, **kw) == row["token_ids"]


def test_conformance_sample_covers_every_revision():
    seen = {_call(r)[1]["template"] for r in ALL_ROWS}
    assert seen == set(REVISIONS) - {"V4"}


def test_facade_exports():
    assert recipe.apply_chat_template is apply_chat_template
    assert recipe.ChatTemplateError is ChatTemplateError


# ---------------------------------------------------------------------------------------------
# The published templates themselves (transformers' jinja renderer) on generated conversations
# ---------------------------------------------------------------------------------------------

_SPELLINGS = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜end▁of▁sentence｜>", "<｜tool▁sep｜>",
              "<｜tool▁calls▁begin｜>", "<｜tool▁output▁end｜>", "｜DSML｜"]
_text = st.lists(st.one_of(st.sampled_from(["a", " ", "\n", "```", "json", "é", "中", "\n\n", "{", "}"] + _SPELLINGS),
                           st.text(max_size=4)), max_size=6).map("".join)
_args = st.one_of(st.sampled_from(['{"city": "Paris"}', "{}", '{"a":1,"b":[true,null]}', "not json"]),
                  st.dictionaries(st.sampled_from(["x", "y"]), st.integers(), max_size=2).map(json.dumps))
_call_st = st.fixed_dictionaries({"id": st.sampled_from(["call_1", "call_2"]), "type": st.just("function"),
                                  "function": st.fixed_dictionaries({"name": st.sampled_from(["get_weather", "f_2"]),
                                                                     "arguments": _args})})


@st.composite
def _message(draw, last: bool):
    role = draw(st.sampled_from(["system", "user", "user", "assistant", "assistant", "tool"]))
    if role == "assistant":
        msg = {"role": role, "content": draw(st.one_of(st.none(), st.just(""), _text))}
        if draw(st.booleans()):
            msg["tool_calls"] = draw(st.lists(_call_st, min_size=1, max_size=3))
        elif draw(st.booleans()) and msg["content"] is None:
            msg["tool_calls"] = None
        if draw(st.booleans()):
            msg["reasoning_content"] = draw(_text)
        if last and draw(st.booleans()):
            msg["prefix"] = True
        return msg
    if role == "tool":
        return {"role": "tool", "tool_call_id": "call_1", "content": draw(_text)}
    return {"role": role, "content": draw(_text)}


@st.composite
def _conversation(draw):
    n = draw(st.integers(0, 7))
    return [draw(_message(i == n - 1)) for i in range(n)]


_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather <think> ✓",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
          {"type": "function", "function": {"name": "f_2", "parameters": {}}}]


def _ours(revision, messages, **kw):
    try:
        return render_chat_template(messages, template=revision, **kw)
    except ChatTemplateError:
        return None


def _theirs(revision, messages, **kw):
    try:
        return jinja_render(revision, messages, **kw)
    except Exception:  # noqa: BLE001 - jinja / transformers raise many types; only "it raised" matters
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(revision=st.sampled_from(JINJA_REVISIONS), messages=_conversation(), mode=st.sampled_from(["gen", "nogen", "cont"]),
       thinking=st.booleans(), with_tools=st.booleans())
def test_jinja_templates_agree(revision, messages, mode, thinking, with_tools):
    kw = dict(add_generation_prompt=mode == "gen", continue_final_message=mode == "cont", thinking=thinking,
              tools=_TOOLS if with_tools and mode != "cont" else None)
    ours = _ours(revision, messages, **kw)
    theirs = _theirs(revision, messages, **kw)
    assert (ours.text if ours is not None else None) == theirs
    if ours is None:
        return
    ids = apply_chat_template(messages, template=revision, tokenize=True, **kw)
    tok = load_v3_tokenizer()
    assert tok.decode(ids) == theirs
    specials = [s.text for s in ours.segments if type(s) is Special]
    assert [tok.special_name(i) for i in ids if tok.is_special(i)] == specials
    if not any(sp in json.dumps([messages, kw["tools"]], ensure_ascii=False) for sp in _SPELLINGS):
        assert ids == hf_v3().encode(theirs, add_special_tokens=False).ids


# ---------------------------------------------------------------------------------------------
# Quirks reproduced on the apply_chat_template path
# ---------------------------------------------------------------------------------------------

_CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}


def test_v3_2412_single_call_never_closed():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [_CALL]},
            {"role": "tool", "content": "r"}]
    text = apply_chat_template(msgs, template="V3-2412")
    assert "<｜tool▁calls▁end｜>" not in text
    assert text.endswith('```<｜tool▁call▁end｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>r<｜tool▁output▁end｜><｜tool▁outputs▁end｜>')


def test_v3_2412_empty_content_drops_calls():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [_CALL]}]
    assert apply_chat_template(msgs, template="V3-2412") == (
        "<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜><｜end▁of▁sentence｜><｜Assistant｜>")


def test_r1_0528_content_none_raises():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [_CALL]}]
    with pytest.raises(ChatTemplateError, match="content"):
        apply_chat_template(msgs, template="R1-0528")
    msgs[1]["content"] = ""
    assert "<｜tool▁calls▁begin｜>" in apply_chat_template(msgs, template="R1-0528")


def test_dict_arguments_raise_in_jinja_templates_but_not_v32():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    for rev in ("V3-0324", "R1-0528", "V3.1", "V3.2-Exp"):
        with pytest.raises(ChatTemplateError, match="arguments"):
            apply_chat_template(msgs, template=rev)
    assert '<｜DSML｜parameter name="a" string="false">1</｜DSML｜parameter>' in apply_chat_template(msgs, template="V3.2")


def test_v32_drop_thinking_with_developer_before_last_user_fails_like_the_reference():
    msgs = [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]
    with pytest.raises(ChatTemplateError, match="out of range"):
        apply_chat_template(msgs, template="V3.2", thinking=True)
    assert apply_chat_template(msgs, template="V3.2", thinking=True, drop_thinking=False).endswith("u<｜Assistant｜><think>")


def test_v32_tools_argument_attaches_to_first_system_message():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}]
    text = apply_chat_template(msgs, template="V3.2", tools=tools)
    assert text.startswith("<｜begin▁of▁sentence｜>S\n\n## Tools\n\n") and '{"name": "f", "parameters": {}}' in text
    assert "tools" not in msgs[0]
    bare = apply_chat_template([{"role": "user", "content": "u"}], template="V3.2", tools=tools)
    assert bare.startswith("<｜begin▁of▁sentence｜>\n\n## Tools")


def test_thinking_argument_and_thinking_mode():
    msgs = [{"role": "user", "content": "u"}]
    assert apply_chat_template(msgs, template="V3.2").endswith("<｜Assistant｜></think>")
    assert apply_chat_template(msgs, template="V3.2", thinking=True).endswith("<｜Assistant｜><think>")
    assert apply_chat_template(msgs, template="V3.2", thinking_mode="thinking").endswith("<think>")
    with pytest.raises(ValueError):
        apply_chat_template(msgs, template="V3.2", thinking=False, thinking_mode="thinking")
    assert apply_chat_template(msgs, template="V3.1", thinking=True).endswith("<｜Assistant｜><think>")
    assert apply_chat_template(msgs, template="V3-0324", thinking=True).endswith("<｜User｜>u<｜Assistant｜>")
    assert apply_chat_template(msgs, template="V4", thinking=True).endswith("<｜Assistant｜><think>")


def test_argument_errors():
    msgs = [{"role": "user", "content": "u"}]
    with pytest.raises(ValueError, match="unknown template"):
        apply_chat_template(msgs, template="V2.5")
    with pytest.raises(TypeError):
        apply_chat_template(msgs, template="V3.1", enable_thinking=True)
    with pytest.raises(ValueError):
        apply_chat_template(msgs, template="V3.1", continue_final_message=True)
    with pytest.raises(ValueError, match="generation-prompt"):
        apply_chat_template(msgs, template="V3.2", add_generation_prompt=False)
    done = msgs + [{"role": "assistant", "content": "a"}]
    assert apply_chat_template(done, template="V3.2", add_generation_prompt=False).endswith("a<｜end▁of▁sentence｜>")


def test_continue_final_message_reference_encoders():
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "Soft rain ", "reasoning_content": "r"}]
    assert apply_chat_template(msgs, template="V3.2", thinking=True, add_generation_prompt=False,
                               continue_final_message=True).endswith("<think>r</think>Soft rain ")
    assert apply_chat_template(msgs, template="V4", thinking=True, add_generation_prompt=False,
                               continue_final_message=True).endswith("r</think>Soft rain ")


# ---------------------------------------------------------------------------------------------
# Special-token injection: every added token of the V3 vocabulary x every text field stays text
# ---------------------------------------------------------------------------------------------

_FIELDS = ("system", "user", "assistant", "reasoning", "tool_name", "arguments", "result", "tool_description")


def _injected(field: str, payload: str):
    args = json.dumps({"q": payload}) if field == "arguments" else '{"q": 1}'
    name = payload if field == "tool_name" else "f"
    msgs = [
        {"role": "system", "content": payload if field == "system" else "S"},
        {"role": "user", "content": payload if field == "user" else "U"},
        {"role": "assistant", "content": "", "reasoning_content": payload if field == "reasoning" else "R",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c1", "content": payload if field == "result" else "T"},
        {"role": "assistant", "content": payload if field == "assistant" else "A", "reasoning_content": "R"},
        {"role": "user", "content": "again"},
    ]
    tools = [{"type": "function", "function": {"name": name, "description": payload if field == "tool_description" else "d",
                                               "parameters": {"type": "object"}}}]
    return msgs, tools


@pytest.mark.parametrize("revision", [r for r in REVISIONS if r != "V4"])
@pytest.mark.parametrize("field", _FIELDS)
def test_every_added_token_in_every_field_stays_text(revision, field):
    tok = load_v3_tokenizer()
    spellings = list(tok.special_tokens)
    assert len(spellings) == 818
    payload = "x".join(spellings) + "".join(spellings)  # separated and adjacent
    msgs, tools = _injected(field, payload)
    kw = {"thinking": True, "tools": tools}
    prompt = render_chat_template(msgs, template=revision, **kw)
    ids = apply_chat_template(msgs, template=revision, tokenize=True, **kw)
    assert tok.decode(ids) == prompt.text
    template_specials = [s.text for s in prompt.segments if type(s) is Special]
    assert [tok.special_name(i) for i in ids if tok.is_special(i)] == template_specials
    baseline = render_chat_template(*(_injected(field, "plain")[:1]), template=revision, tools=_injected(field, "plain")[1],
                                    thinking=True)
    assert template_specials == [s.text for s in baseline.segments if type(s) is Special]


def test_older_revisions_render_plain_conversations_alike():
    """docs/earlier-generations.md: without tool calls V3-2412 = V3-0324 and R1-2501 = R1-0528."""
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>x</think>a"},
            {"role": "user", "content": "q2"}]
    assert apply_chat_template(msgs, template="V3-2412") == apply_chat_template(msgs, template="V3-0324")
    assert apply_chat_template(msgs, template="R1-2501") == apply_chat_template(msgs, template="R1-0528")
    assert apply_chat_template(msgs, template="R1-2502") == apply_chat_template(msgs, template="R1-0528") + "<think>\n"
