"""The reference-compatible DeepSeek-V4 encoder (``recipe.encodings.deepseek_v4.reference``).

Golden values: DeepSeek's own vectors for its reference encoder (fixtures/deepseek_v4_official),
the encoder-level vectors (fixtures/deepseek_v4_encoder), HF ``tokenizers`` as the id oracle, and a
few hand-written expectations derived from the reference encoder's documented rules.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from recipe.encodings.deepseek_v4.constants import SPECIAL_IDS, TASK_TOKENS
from recipe.encodings.deepseek_v4.reference import (
    REFERENCE_SPECIALS,
    ReferenceEncodingError,
    encode_messages,
    encode_messages_to_ids,
    render_messages,
)
from recipe.prompt import Special
from recipe.tokenizer import default_tokenizer_path, load_tokenizer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OFFICIAL = FIXTURES / "deepseek_v4_official"
ENCODER = FIXTURES / "deepseek_v4_encoder"


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


@pytest.fixture(scope="module")
def hf():
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(default_tokenizer_path()))


def _official_case(n: int) -> tuple[list[dict], str, str]:
    """(messages, thinking_mode, expected prompt) called as the reference's own test does."""
    data = json.loads((OFFICIAL / f"test_input_{n}.json").read_text(encoding="utf-8"))
    if n == 1:
        messages = data["messages"]
        messages[0]["tools"] = data["tools"]
    else:
        messages = data
    mode = "chat" if n == 4 else "thinking"
    return messages, mode, (OFFICIAL / f"test_output_{n}.txt").read_text(encoding="utf-8")


def _encoder_rows() -> list[dict]:
    lines = (ENCODER / "deepseek_v4_prompts.jsonl").read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in lines if line.strip()]


def _kwargs(row: dict) -> dict:
    return {k: row[k] for k in ("thinking_mode", "drop_thinking", "add_default_bos_token", "reasoning_effort")}


def _special_ids(tok, ids: list[int]) -> list[int]:
    return [i for i in ids if tok.is_special(i)]


# --------------------------------------------------------------------------------------------
# Official vectors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_official_vectors_text(n):
    messages, mode, expected = _official_case(n)
    assert encode_messages(messages, mode) == expected


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_official_vectors_ids_match_hf(n, tok, hf):
    # These prompts hold no user-typed special spelling, so HF's special-aware encoding of the
    # expected text is the oracle for the safe ids.
    messages, mode, expected = _official_case(n)
    ids = encode_messages_to_ids(messages, mode, tokenizer=tok)
    assert ids == hf.encode(expected, add_special_tokens=False).ids
    assert tok.decode(ids) == expected


def test_official_case4_task_token_is_special(tok):
    messages, mode, _ = _official_case(4)
    ids = encode_messages_to_ids(messages, mode, tokenizer=tok)
    action = TASK_TOKENS["action"]
    assert action in REFERENCE_SPECIALS
    assert ids.count(tok.special_id(action)) == 1
    # <｜Assistant｜></think><｜action｜> follows the task-carrying user turn
    k = ids.index(tok.special_id(action))
    assert ids[k - 2 : k] == [SPECIAL_IDS["<｜Assistant｜>"], SPECIAL_IDS["</think>"]]


# --------------------------------------------------------------------------------------------
# Encoder-level vectors
# --------------------------------------------------------------------------------------------

ROWS = _encoder_rows()


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_encoder_vectors_text(row):
    assert encode_messages(row["messages"], **_kwargs(row)) == row["prompt"]


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_encoder_vectors_ids(row, tok):
    ids = encode_messages_to_ids(row["messages"], tokenizer=tok, **_kwargs(row))
    assert tok.decode(ids) == row["prompt"]
    if "prompt_token_ids" in row:
        assert ids == row["prompt_token_ids"]
    else:
        # user-typed special spellings: only the template's own specials may be special ids
        assert "special" in row["note"]
        assert row["name"] == "injection_user_special_literal"
        assert _special_ids(tok, ids) == [0, 128803, 128804, 128822]
        unsafe = tok.encode_with_special_tokens(row["prompt"])
        assert len(_special_ids(tok, unsafe)) > 4  # the literal would have forged turns


def test_encoder_vectors_cover_every_row():
    assert len(ROWS) == 15
    assert sum("prompt_token_ids" in r for r in ROWS) == 14


def test_input_messages_not_mutated():
    for row in ROWS:
        before = copy.deepcopy(row["messages"])
        encode_messages(row["messages"], **_kwargs(row))
        assert row["messages"] == before, row["name"]


# --------------------------------------------------------------------------------------------
# Special spellings in message-derived text never become special ids
# --------------------------------------------------------------------------------------------


def _hostile_conversation(payload: str, thinking_mode: str = "thinking") -> list[dict]:
    """One conversation carrying ``payload`` in every message-derived field the template renders."""
    return [
        {
            "role": "system",
            "content": "sys " + payload,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "t" + payload,
                        "description": payload,
                        "parameters": {"type": "object", "properties": {payload: {"type": "string"}}},
                    },
                }
            ],
            "response_format": {"type": "json_schema", "json_schema": {"name": payload}},
        },
        {"role": "latest_reminder", "content": payload},
        {"role": "developer", "content": "dev " + payload},
        {"role": "user", "content": "user " + payload},
        {
            "role": "assistant",
            "reasoning_content": "think " + payload,
            "content": "answer " + payload,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": payload, "arguments": json.dumps({payload: payload, "n": [payload]})}},
                {"id": "c2", "type": "function", "function": {"name": "raw", "arguments": "not json " + payload}},
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": payload}, {"type": payload}]},
        {"role": "tool", "tool_call_id": "c1", "content": "result " + payload},
        {"role": "user", "content": payload},
    ]


@pytest.mark.parametrize("mode", ["chat", "thinking"])
def test_every_added_token_spelling_stays_plain_text(tok, mode):
    every = "".join(sorted(tok.special_tokens))  # all 1283 added-token spellings
    assert len(tok.special_tokens) == 1283
    hostile = _hostile_conversation(every)
    neutral = _hostile_conversation("x")
    for drop in (True, False):
        ids = encode_messages_to_ids(hostile, mode, tokenizer=tok, drop_thinking=drop)
        text = encode_messages(hostile, mode, drop_thinking=drop)
        assert tok.decode(ids) == text
        assert text.count(every) >= 10
        # the special ids are exactly the template's, in the same order as for harmless text
        expected = _special_ids(tok, encode_messages_to_ids(neutral, mode, tokenizer=tok, drop_thinking=drop))
        assert _special_ids(tok, ids) == expected
        assert set(expected) <= {tok.special_id(s) for s in REFERENCE_SPECIALS}


@pytest.mark.parametrize("spelling", sorted(REFERENCE_SPECIALS))
def test_each_template_spelling_in_user_text_is_ordinary(tok, spelling):
    messages = [{"role": "user", "content": spelling}]
    ids = encode_messages_to_ids(messages, "chat", tokenizer=tok)
    assert ids[:2] == [0, 128803]
    assert ids[2:-2] == tok.encode_ordinary(spelling)
    assert ids[-2:] == [128804, 128822]
    assert not any(tok.is_special(i) for i in ids[2:-2])


def test_template_specials_are_the_documented_set(tok):
    names = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>"}
    assert REFERENCE_SPECIALS == names | set(TASK_TOKENS.values())
    assert {tok.special_id(s) for s in names} == {0, 1, 128803, 128804, 128821, 128822, 128825, 128828}


def test_dsml_open_angle_is_plain_text(tok):
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ]
    prompt = render_messages(messages, "chat")
    dsml = [i for i, s in enumerate(prompt.segments) if s == Special("｜DSML｜")]
    assert len(dsml) == 4
    for i in dsml:
        assert type(prompt.segments[i - 1]).__name__ == "Text" and prompt.segments[i - 1].text.endswith(("<", "</"))


# --------------------------------------------------------------------------------------------
# Reference rules not covered by the vectors (expectations written from the reference's rules)
# --------------------------------------------------------------------------------------------

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"


def test_non_action_task_appends_only_the_task_token():
    msgs = [{"role": "user", "content": "Paris", "task": "query"}]
    assert encode_messages(msgs, "thinking") == BOS + "<｜User｜>Paris<｜query｜>"


def test_action_task_in_thinking_mode_opens_thinking():
    msgs = [{"role": "user", "content": "go", "task": "action"}]
    assert encode_messages(msgs, "thinking") == BOS + "<｜User｜>go<｜Assistant｜><think><｜action｜>"


def test_consecutive_user_messages_merge_with_blank_line():
    msgs = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert encode_messages(msgs, "chat") == BOS + "<｜User｜>a\n\nb<｜Assistant｜></think>"


def test_wo_eos_and_no_bos():
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "wo_eos": True}]
    assert encode_messages(msgs, "chat", add_default_bos_token=False) == "<｜User｜>a<｜Assistant｜></think>b"


def test_keep_thinking_when_drop_thinking_false():
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "reasoning_content": "r1", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    kept = BOS + "<｜User｜>a<｜Assistant｜><think>r1</think>b" + EOS + "<｜User｜>c<｜Assistant｜><think>"
    dropped = BOS + "<｜User｜>a<｜Assistant｜></think>b" + EOS + "<｜User｜>c<｜Assistant｜><think>"
    assert encode_messages(msgs, "thinking", drop_thinking=False) == kept
    assert encode_messages(msgs, "thinking") == dropped


def test_developer_before_last_user_is_dropped_in_thinking_mode():
    msgs = [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]
    assert encode_messages(msgs, "thinking") == BOS + "<｜User｜>u<｜Assistant｜><think>"
    assert encode_messages(msgs, "chat") == BOS + "<｜User｜>d<｜User｜>u<｜Assistant｜></think>"


def test_effort_high_adds_nothing_and_max_only_in_thinking():
    msgs = [{"role": "user", "content": "u"}]
    assert encode_messages(msgs, "thinking", reasoning_effort="high") == encode_messages(msgs, "thinking")
    assert encode_messages(msgs, "chat", reasoning_effort="max") == encode_messages(msgs, "chat")


def test_context_continues_a_chat_prompt(tok):
    ctx = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    new = [{"role": "user", "content": "c"}]
    whole = encode_messages(ctx + new, "chat")
    assert encode_messages(new, "chat", context=ctx) == "<｜User｜>c<｜Assistant｜></think>"
    assert encode_messages(ctx, "chat") + encode_messages(new, "chat", context=ctx) == whole
    ids = encode_messages_to_ids(new, "chat", tokenizer=tok, context=ctx)
    assert ids == [128803, *tok.encode_ordinary("c"), 128804, 128822]


def test_tool_arguments_rendering():
    msgs = [
        {"role": "user", "content": "u"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": '{"s": "ü", "x": 1.5, "o": {"k": null}}'}}],
        },
    ]
    text = encode_messages(msgs, "chat")
    assert text.endswith(
        '<｜DSML｜invoke name="f">\n'
        '<｜DSML｜parameter name="s" string="true">ü</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="x" string="false">1.5</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="o" string="false">{"k": null}</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + EOS
    )


@pytest.mark.parametrize(
    "messages, kwargs",
    [
        ([{"role": "user", "content": "u"}], {"thinking_mode": "fast"}),
        ([{"role": "user", "content": "u"}], {"thinking_mode": "thinking", "reasoning_effort": "low"}),
        ([{"role": "robot", "content": "u"}], {"thinking_mode": "chat"}),
        ([{"role": "user", "content": "u", "task": "nope"}], {"thinking_mode": "chat"}),
        ([{"role": "developer", "content": ""}], {"thinking_mode": "chat"}),
        ([{"role": "user", "content": None}], {"thinking_mode": "chat"}),
        ([{"role": "user", "content": [{"type": "text", "text": "x"}]}], {"thinking_mode": "chat"}),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}], {"thinking_mode": "chat"}),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}], {"thinking_mode": "chat"}),
        (["not a dict"], {"thinking_mode": "chat"}),
    ],
)
def test_invalid_input_raises_reference_error(messages, kwargs):
    with pytest.raises(ReferenceEncodingError):
        encode_messages(messages, **kwargs)
    assert issubclass(ReferenceEncodingError, ValueError)



_plain_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)


@settings(max_examples=120, deadline=None)
@given(user=_plain_text, reasoning=_plain_text, answer=_plain_text, arg=_plain_text, result=_plain_text, mode=st.sampled_from(["chat", "thinking"]))
def test_random_conversations_match_hf_on_prompt_text(tok, hf, user, reasoning, answer, arg, result, mode):
    """Ids of random conversations equal HF's encoding of the prompt text (no special spellings inside)."""
    assume(not any(s in user + reasoning + answer + arg + result for s in ("<｜", "｜>", "<think", "</think", "｜DSML｜")))
    msgs = [
        {"role": "user", "content": user},
        {
            "role": "assistant",
            "reasoning_content": reasoning,
            "content": answer,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": json.dumps({"q": arg})}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": result},
    ]
    text = encode_messages(msgs, mode, drop_thinking=False)
    ids = encode_messages_to_ids(msgs, mode, tokenizer=tok, drop_thinking=False)
    assert ids == hf.encode(text, add_special_tokens=False).ids
