"""Grounding tokens (``<｜ref｜>`` … ``<｜/polygon｜>``) the model wrote, given back in an assistant turn's
content or reasoning, are their special ids again, as deepseek-recipe encodes them; in user, system and
tool text and in tool-call arguments they stay text. DeepSeek-V4 (embedded vocabulary) and V4.1 (the
synthetic V4.1-shaped vocabulary), the three APIs (docs/prompt-format.md, "Grounding tokens")."""

from __future__ import annotations

import pytest
from output_parity_support import ids_of
from v41_support import synthetic_v41_tokenizer

import oracle
from recipe.encodings.deepseek_v4.constants import GROUNDING_TOKENS
from recipe.output.driver import response
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

G = "See <｜ref｜>the cat<｜/ref｜><｜box｜>[[10,20,30,40]]<｜/box｜>, <｜point｜>(5,6)<｜/point｜> <｜polygon｜>[1,2]<｜/polygon｜>."
GROUNDING_IDS = {load_tokenizer().special_tokens[s] for s in GROUNDING_TOKENS}
MODELS = ["deepseek-v4-pro", "deepseek-v4.1-flash"]
FIELDS = ["content", "reasoning", "user", "system", "tool", "arguments"]


def _kw(model):
    return {"tokenizer": synthetic_v41_tokenizer()} if "4.1" in model else {}


def _text(where, field):
    return G if where == field else field[:1]


def _chat(model, where):
    a = {"role": "assistant", "content": _text(where, "content"), "reasoning_content": _text(where, "reasoning"),
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": "%s"}' % _text(where, "arguments")}}]}
    return {"model": model, "reasoning_effort": "high",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "messages": [{"role": "system", "content": _text(where, "system")}, {"role": "user", "content": _text(where, "user")},
                         a, {"role": "tool", "tool_call_id": "c1", "content": _text(where, "tool")}]}


def _responses(model, where):
    return {"model": model, "reasoning": {"effort": "high"}, "instructions": _text(where, "system"),
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            "input": [{"role": "user", "content": _text(where, "user")},
                      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": _text(where, "reasoning")}]},
                      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": _text(where, "content")}]},
                      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"q": "%s"}' % _text(where, "arguments")},
                      {"type": "function_call_output", "call_id": "c1", "output": _text(where, "tool")}]}


def _messages(model, where):
    return {"model": model, "max_tokens": 100, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "system": _text(where, "system"), "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": _text(where, "user")},
                         {"role": "assistant", "content": [
                             {"type": "thinking", "thinking": _text(where, "reasoning"), "signature": "s"},
                             {"type": "text", "text": _text(where, "content")},
                             {"type": "tool_use", "id": "c1", "name": "f", "input": {"q": _text(where, "arguments")}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": _text(where, "tool")}]}]}


BODIES = {"chat": _chat, "responses": _responses, "messages": _messages}


@pytest.mark.parametrize("where", FIELDS)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("api", list(BODIES))
def test_grounding_ids_equal_deepseek_recipes(api, model, where):
    body = BODIES[api](model, where)
    theirs = oracle.convert(api, body)
    assert theirs["ok"], theirs
    ours = prepare(body, api, **_kw(model))
    assert ours.prompt.text == theirs["prompt"]
    assert ours.token_ids == theirs["token_ids"]
    assert [list(r) for r in ours.prompt.special_ranges] == theirs["special_ranges"]
    specials = [i for i in ours.token_ids if i in GROUNDING_IDS]
    assert len(specials) == (8 if where in ("content", "reasoning") else 0), where


@pytest.mark.parametrize("model", MODELS)
def test_the_models_own_grounding_output_comes_back_as_its_ids(model):
    """The answer's ids (grounding tokens included) are the next prompt's ids for that turn: the prefix
    cache can hit the turn the model generated."""
    kw = _kw(model)
    tok = kw.get("tokenizer") or load_tokenizer()
    body = {"model": model, "reasoning_effort": "none", "messages": [{"role": "user", "content": "Where is the cat?"}]}
    answer = tok.encode_with_special_tokens(G)
    assert answer == ids_of(G) and len([i for i in answer if i in GROUNDING_IDS]) == 8
    content = response(prepare(body, **kw), [*answer, 1], finish="stop", **kw)["choices"][0]["message"]["content"]
    assert content == G
    nxt = prepare({**body, "messages": [*body["messages"], {"role": "assistant", "content": content},
                                        {"role": "user", "content": "Thanks"}]}, **kw)
    ids = nxt.token_ids
    k = next(i for i in range(len(ids)) if ids[i:i + len(answer)] == answer)
    assert ids[k + len(answer)] == 1  # the answer's ids, then its EOS, as generated


def test_a_vocabulary_without_grounding_tokens_keeps_them_text():
    """The earlier generations' vocabulary has no such tokens: their families render them as text."""
    body = {"model": "deepseek-v3.1", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": G},
                                                    {"role": "user", "content": "n"}]}
    prep = prepare(body)
    assert G in prep.prompt.text
    from recipe.tokenizer import load_v3_tokenizer

    v3 = load_v3_tokenizer()
    assert all(v3.special_tokens.get(s) is None for s in GROUNDING_TOKENS)
