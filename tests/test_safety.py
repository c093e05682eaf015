"""Text from users, tools or history never becomes a special token: only the template emits special ids
(and the grounding tokens a model wrote, given back in an assistant turn's content or reasoning, as
deepseek-recipe encodes them: tests/test_grounding_tokens.py)."""

from __future__ import annotations

import json

import pytest

from recipe.encodings.deepseek_v4.constants import GROUNDING_TOKENS
from recipe.pipeline import prepare
from recipe.prompt import Special
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
ALL_SPECIALS = "".join(sorted(TOK.special_tokens))  # every added token of the vocabulary, ~1283 spellings
GROUNDING_IDS = frozenset(TOK.special_id(s) for s in GROUNDING_TOKENS)


def _request(t: str, thinking: bool = True) -> dict:
    return {
        "model": "deepseek-v4-pro",
        "messages": [
            {"role": "system", "content": "sys " + t},
            {"role": "user", "content": [{"type": "text", "text": "user " + t}, {"type": "text", "text": t}]},
            {
                "role": "assistant",
                "content": "answer " + t,
                "reasoning_content": "reasoning " + t,
                "tool_calls": [
                    {"id": "c1" + t, "type": "function", "function": {"name": "f" + t, "arguments": json.dumps({t: t, "n": [t, 1]})}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json " + t}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1" + t, "content": "result " + t},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": t}]},
            {"role": "latest_reminder", "content": "reminder " + t},
            {"role": "user", "content": t},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "description": "desc " + t,
                    "parameters": {"type": "object", "properties": {t: {"type": "string", "description": t}}},
                },
            }
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"title": t}}},
        "thinking": {"type": "enabled" if thinking else "disabled"},
    }


def _special_ids(ids):
    return [i for i in ids if TOK.is_special(i)]


@pytest.mark.parametrize("thinking", [True, False])
def test_every_special_spelling_in_every_field_stays_text(thinking):
    hostile = prepare(_request(ALL_SPECIALS, thinking), "chat")
    plain = prepare(_request("x", thinking), "chat")
    # The hostile text really is in the prompt, spelled out ...
    assert hostile.prompt.text.count("<｜User｜>") > plain.prompt.text.count("<｜User｜>")
    # ... yet the special ids are exactly the template's, the same as with harmless text, but for the
    # eight grounding tokens in the assistant turn's content (and its reasoning, rendered in thinking mode)
    grounding = [i for i in hostile.token_ids if i in GROUNDING_IDS]
    assert sorted(grounding) == sorted([*GROUNDING_IDS] * (2 if thinking else 1))
    assert [i for i in _special_ids(hostile.token_ids) if i not in GROUNDING_IDS] == _special_ids(plain.token_ids)
    template = [TOK.special_id(s.text) for s in hostile.prompt.segments if type(s) is Special]
    assert _special_ids(hostile.token_ids) == template


@pytest.mark.parametrize("spelling", sorted(TOK.special_tokens))
def test_each_special_alone_in_user_text(spelling):
    ids = prepare({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": spelling}], "thinking": {"type": "disabled"}}, "chat").token_ids
    assert _special_ids(ids) == [0, 128803, 128804, 128822]
    assert TOK.decode(ids[2:-2]) == spelling
