"""The DeepSeek-V4.1 reference encoder (``recipe.encodings.deepseek_v41.reference``).

No official V4.1 vectors are public, so the oracle is deepseek-recipe 0.2.0's ``DeepseekV41Encoding``
on the same conversation wherever the two implement the same rules (generated conversations: system
with tools first, users, assistants with reasoning and calls, tool results, mid-conversation systems,
both modes, every effort), plus hand-written expectations for the rules where the release encoder
differs from deepseek-recipe (kept reasoning after the last user, double-encoded arguments, every
reminder, ``<｜deepseek_image｜>``), each taken from the encoder's documented behaviour.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
from recipe.encodings.deepseek_v41.reference import (
    REFERENCE_SPECIALS,
    ReferenceEncodingError,
    encode_messages,
    encode_messages_to_ids,
    render_messages,
)
from recipe.encodings.table import get_encoding
from recipe.prompt import Special
from recipe.tokenizer import MissingSpecialTokenError
from strategies import SPECIAL_SPELLINGS
from v41_support import synthetic_v41_tokenizer

dr = oracle.dr
BOS, S, U, A, EOS = "<｜begin▁of▁sentence｜>", "<｜System｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"
EFFORT = "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n"
TOOL = {"type": "function", "function": {"name": "get_w", "description": "Weather", "parameters": {"type": "object", "properties": {"x": {"type": "number", "minimum": 1e-06}}}}}

# --------------------------------------------------------------------------- the oracle cross-check

words = st.lists(st.sampled_from(list("ab \n{}\"':,0123中🤖") + SPECIAL_SPELLINGS + ["<｜System｜>", "<｜DSML｜ calls>"]), max_size=8).map("".join)
arg_values = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), words, st.lists(st.integers(0, 3), max_size=2))


@st.composite
def conversations(draw):
    """(reference messages, deepseek-recipe Conversation, thinking_mode, effort) for one conversation
    ending with a user turn (tool results or a mid-conversation system count as one)."""
    tools = draw(st.booleans())
    msgs, theirs = [], []
    if draw(st.booleans()) or tools:
        text = draw(words)
        msgs.append({"role": "system", "content": text, **({"tools": [TOOL]} if tools else {})})
        theirs.append(dr.SystemMessage(text))
    n_calls = 0
    for _ in range(draw(st.integers(1, 4))):
        text = draw(words)
        msgs.append({"role": "user", "content": text})
        theirs.append(dr.UserMessage(text))
        if draw(st.booleans()):
            answer, reasoning = draw(words), draw(words)
            calls = []
            for _ in range(draw(st.integers(0, 2)) if tools else 0):
                n_calls += 1
                args = json.dumps(draw(st.dictionaries(st.sampled_from(["city", "n", "q"]), arg_values, max_size=2)), ensure_ascii=False)
                calls.append((f"c{draw(st.integers(0, 9))}{n_calls}", "get_w", args))
            msgs.append({"role": "assistant", "content": answer, "reasoning_content": reasoning,
                         "tool_calls": [{"id": i, "type": "function", "function": {"name": f, "arguments": a}} for i, f, a in calls]})
            theirs.append(dr.AssistantMessage(answer, reasoning, [dr.ToolCall(i, f, a) for i, f, a in calls] or None))
            for i, _, _ in draw(st.permutations(calls)):
                result = draw(words)
                msgs.append({"role": "tool", "tool_call_id": i, "content": result})
                theirs.append(dr.ToolMessage(result, i))
            if draw(st.booleans()):
                text = draw(words)
                msgs.append({"role": "system", "content": text})
                theirs.append(dr.SystemMessage(text))
    if msgs[-1]["role"] == "assistant":
        text = draw(words)
        msgs.append({"role": "user", "content": text})
        theirs.append(dr.UserMessage(text))
    thinking = draw(st.booleans())
    effort = draw(st.sampled_from([None, "low", "high", "max"]))
    tool_defs = [dr.ToolDefinition(TOOL["function"]["name"], TOOL["function"]["description"], TOOL["function"]["parameters"])] if tools else None
    conv = dr.Conversation(theirs, thinking_mode=thinking, tools=tool_defs, reasoning_effort=effort if thinking else None)
    return msgs, conv, "thinking" if thinking else "chat", effort


@settings(max_examples=200)
@given(conversations())
def test_matches_deepseek_recipe_where_the_rules_agree(case):
    msgs, conv, mode, effort = case
    theirs = dr.DeepseekV41Encoding().render_conversation(conv)
    prompt = render_messages(msgs, mode, reasoning_effort=effort)
    assert prompt.text == theirs.prompt
    assert prompt.special_ranges == [tuple(r) for r in theirs.special_ranges]
    ids = encode_messages_to_ids(msgs, mode, reasoning_effort=effort, tokenizer=synthetic_v41_tokenizer())
    assert ids == list(oracle.encoder_v41().encode(conv))


# --------------------------------------------------------------------------- the release encoder's rules


def test_effort_line_numbers_and_placement():
    user = [{"role": "user", "content": "Hi"}]
    for effort, n in ((None, 75), ("low", 50), ("high", 75), ("max", 100), (1, 1), (100, 100)):
        assert encode_messages(user, "thinking", reasoning_effort=effort) == f"{BOS}{S}{EFFORT.format(n)}{U}Hi{A}<think>"
    assert encode_messages(user, "chat", reasoning_effort="max") == f"{BOS}{U}Hi{A}</think>"
    sys = [{"role": "system", "content": "S1"}, *user]
    assert encode_messages(sys, "thinking") == f"{BOS}{S}{EFFORT.format(75)}S1{U}Hi{A}<think>"
    assert encode_messages(sys, "chat") == f"{BOS}{S}S1{U}Hi{A}</think>"
    for bad in ("xhigh", "medium", 0, 101, 50.0, True):
        with pytest.raises(ReferenceEncodingError):
            encode_messages(user, "chat", reasoning_effort=bad)  # validated in either mode


def test_mid_system_opens_the_next_turn_and_counts_as_last_user():
    msgs = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A1", "reasoning_content": "R1"},
            {"role": "system", "content": "S2"}]
    assert encode_messages(msgs, "thinking") == f"{BOS}{S}{EFFORT.format(75)}{U}Q{A}</think>A1{EOS}{S}S2{A}<think>"
    # reasoning after the last user message is kept (deepseek-recipe drops it)
    kept = msgs[:2] + [{"role": "assistant", "content": "A2", "reasoning_content": "R2"}]
    assert encode_messages(kept, "thinking").endswith(f"{U}Q{A}<think>R1</think>A1{EOS}R2</think>A2{EOS}")


def test_tool_calls_in_request_order_spaced_dsml_and_lenient_arguments():
    calls = [{"id": "z", "function": {"name": "f", "arguments": json.dumps(json.dumps({"a": 1}))}},  # encoded twice
             {"id": "a", "function": {"name": "g", "arguments": "{}"}},
             {"id": "m", "function": {"name": "h", "arguments": "[1]"}},
             {"id": "k", "function": {"name": "k", "arguments": {"b": "x"}}}]
    msgs = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "a", "content": "ra"}, {"role": "tool", "tool_call_id": "z", "content": "rz"}]
    text = encode_messages(msgs, "chat")
    d = "｜DSML｜"
    assert (f'<{d} calls>\n<{d} invoke name="f">\n<{d} parameter name="a" string="false">1</{d} parameter>\n</{d} invoke>\n'
            f'<{d} invoke name="g">\n\n</{d} invoke>\n'
            f'<{d} invoke name="h">\n<{d} parameter name="arguments" string="true">[1]</{d} parameter>\n</{d} invoke>\n'
            f'<{d} invoke name="k">\n<{d} parameter name="b" string="true">x</{d} parameter>\n</{d} invoke>\n</{d} calls>{EOS}') in text
    assert text.endswith(f"{U}<tool_result>rz</tool_result>\n\n<tool_result>ra</tool_result>{A}</think>")


def test_every_latest_reminder_is_rendered():
    msgs = [{"role": "user", "content": "Q"}, {"role": "latest_reminder", "content": "r1"}, {"role": "latest_reminder", "content": "r2"}]
    assert encode_messages(msgs, "chat") == f"{BOS}{U}Q{A}</think><｜latest_reminder｜>r1<｜latest_reminder｜>r2"


def test_images_are_placeholders_and_records_in_prompt_order():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                                         {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r"}, {"type": "image_url", "image_url": "u3"}]}]
    text, media = encode_messages(msgs, "chat", return_multi_modal_data=True)
    img = "<｜deepseek_image｜>"
    assert text.startswith(f"{BOS}{U}look\n\n{img}\n\n{img}{A}</think>")
    assert text.endswith(f"{U}<tool_result>r\n\n{img}</tool_result>{A}</think>")
    assert media == {"images": [{"type": "image", "url": "https://x/a.png"}, {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
                                {"type": "image", "url": "u3"}]}
    specials = [s.text for s in render_messages(msgs, "chat").segments if type(s) is Special]
    assert specials.count(img) == 3
    tok = synthetic_v41_tokenizer()
    ids = encode_messages_to_ids(msgs, "chat", tokenizer=tok, image_placeholder="<｜image｜>")
    assert ids.count(129264) == 3 and ids[:2] == [0, 128803]


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "a <｜deepseek_image｜>"}],
    [{"role": "user", "content": [{"type": "text", "text": "<｜deepseek_image｜>"}]}],
    [{"role": "assistant", "content": "", "reasoning_content": "<｜deepseek_image｜>"}],
    [{"role": "user", "content": [{"type": "image"}]}],
    [{"role": "developer", "content": "D"}],
    [{"role": "tool_x", "content": "D"}],
    [{"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}],
])
def test_inputs_the_release_encoder_rejects(messages):
    with pytest.raises(ReferenceEncodingError):
        encode_messages(messages, "chat")


def test_ids_need_a_v41_vocabulary():
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    with pytest.raises(MissingSpecialTokenError) as info:
        encode_messages_to_ids(msgs, "chat")  # the embedded (V4) vocabulary has no <｜System｜>
    assert info.value.token == S
    assert encode_messages_to_ids(msgs, "chat", tokenizer=synthetic_v41_tokenizer())[:2] == [0, 128799]


@pytest.mark.parametrize("spelling", sorted(REFERENCE_SPECIALS | {"<｜deepseek_image｜>", "<｜image｜>", "<｜DSML｜ calls>"}))
def test_special_spellings_in_message_text_stay_ordinary(spelling):
    if spelling == "<｜deepseek_image｜>":
        return  # refused (test_inputs_the_release_encoder_rejects)
    tok = synthetic_v41_tokenizer()
    msgs = [{"role": "system", "content": spelling}, {"role": "user", "content": f"x{spelling}y"},
            {"role": "assistant", "content": spelling, "reasoning_content": spelling}, {"role": "user", "content": "z"}]
    ids = encode_messages_to_ids(msgs, "thinking", tokenizer=tok, drop_thinking=False)
    specials = [tok.special_tokens[s.text] for s in render_messages(msgs, "thinking", drop_thinking=False).segments if type(s) is Special]
    assert [i for i in ids if tok.is_special(i)] == specials


def test_input_messages_not_mutated():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}]},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "user", "content": "b", "task": "query"}]
    before = copy.deepcopy(msgs)
    encode_messages(msgs, "thinking", context=[{"role": "user", "content": "ctx"}])
    assert msgs == before


def test_record_exports_the_reference_encoder():
    enc = get_encoding("deepseek_v41")
    msgs = [{"role": "user", "content": "Hi"}]
    assert enc.encode_messages(msgs, "chat") == f"{BOS}{U}Hi{A}</think>"
    assert enc.encode_messages_to_ids(msgs, "chat") == [0, 128803, 23166, 128804, 128822]
