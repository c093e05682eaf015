"""``chat_template_kwargs: {"thinking": false}`` (or ``enable_thinking``), how vLLM and SGLang users
turn DeepSeek's thinking off, renders the non-thinking prompt: checked against deepseek-recipe's
prompt for the API's own switch (DeepSeek-V4) and against the published Jinja templates rendered by
transformers with ``thinking=`` (DeepSeek-V3.1, V3.2-Exp)."""

from __future__ import annotations

import pytest

import recipe
from recipe.options import PARITY_OPTIONS

HI = [{"role": "user", "content": "What is 2 + 2?"}]
MODEL = "deepseek-v4-pro"

#: per API: a body, the same body with the API's own thinking switch off
BODIES = {
    "chat": ({"model": MODEL, "messages": HI}, {"thinking": {"type": "disabled"}}),
    "responses": ({"model": MODEL, "input": HI}, {"reasoning": {"effort": "none"}}),
    "messages": ({"model": MODEL, "max_tokens": 100, "messages": HI}, {"thinking": {"type": "disabled"}}),
}


@pytest.mark.parametrize("api", sorted(BODIES))
@pytest.mark.parametrize("key", ["thinking", "enable_thinking"])
def test_thinking_false_is_deepseek_recipes_non_thinking_prompt(api, key):
    from oracle import convert

    body, off = BODIES[api]
    theirs = convert(api, {**body, **off})
    assert theirs["ok"]
    ours = recipe.prepare({**body, "chat_template_kwargs": {key: False}}, api)
    assert ours.token_ids == theirs["token_ids"] and ours.prompt.text == theirs["prompt"]
    assert ours.conversation.thinking is False and ours.parsing.thinking_stage is None
    # on: the thinking prompt (the default), the same ids as without the field
    on = recipe.prepare({**body, "chat_template_kwargs": {key: True}}, api)
    assert on.token_ids == convert(api, body)["token_ids"] and on.conversation.thinking is True


@pytest.mark.parametrize("model, revision", [("deepseek-v3.1", "V3.1"), ("deepseek-v3.2-exp", "V3.2-Exp")])
@pytest.mark.parametrize("thinking", [False, True])
def test_earlier_generations_follow_the_published_templates_thinking_argument(model, revision, thinking):
    pytest.importorskip("transformers")
    from v3x_support import jinja_render

    prep = recipe.prepare({"model": model, "messages": HI, "chat_template_kwargs": {"thinking": thinking}}, "chat")
    assert prep.prompt.text == jinja_render(revision, HI, thinking=thinking)


def test_the_apis_own_switch_wins():
    body = {"model": MODEL, "messages": HI, "thinking": {"type": "enabled"}, "chat_template_kwargs": {"thinking": False}}
    assert recipe.prepare(body, "chat").conversation.thinking is True


def test_it_turns_thinking_off_over_an_effort():
    body = {"model": MODEL, "messages": HI, "reasoning_effort": "high", "chat_template_kwargs": {"thinking": False}}
    assert recipe.prepare(body, "chat").conversation.thinking is False


@pytest.mark.parametrize("kwargs, param", [
    ("yes", "chat_template_kwargs"),
    ({"thinking": "false"}, "chat_template_kwargs.thinking"),
    ({"thinking": False, "enable_thinking": True}, "chat_template_kwargs.enable_thinking"),
])
def test_a_wrong_switch_is_a_400_naming_it(kwargs, param):
    with pytest.raises(recipe.RequestError) as err:
        recipe.prepare({"model": MODEL, "messages": HI, "chat_template_kwargs": kwargs}, "chat")
    assert err.value.status == 400 and err.value.param == param


def test_other_keys_have_no_effect():
    plain = recipe.prepare({"model": MODEL, "messages": HI}, "chat")
    other = recipe.prepare({"model": MODEL, "messages": HI, "chat_template_kwargs": {"add_generation_prompt": False}}, "chat")
    assert other.token_ids == plain.token_ids


def test_parity_options_ignore_the_field_as_deepseek_recipe():
    from oracle import convert

    body = {"model": MODEL, "messages": HI, "chat_template_kwargs": {"thinking": False}}
    prep = recipe.prepare(body, "chat", options=PARITY_OPTIONS)
    assert prep.conversation.thinking is True and prep.token_ids == convert("chat", body)["token_ids"]


def test_through_recipe_serve_the_answer_has_no_reasoning():
    openai = pytest.importorskip("openai")
    from serve_support import running

    import recipe.serve

    with running(recipe.serve.app()) as s:  # the demo engine reasons first only in thinking mode
        c = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0).chat.completions.create(
            model=MODEL, messages=HI, extra_body={"chat_template_kwargs": {"thinking": False}})
    msg = c.choices[0].message
    assert msg.content and getattr(msg, "reasoning_content", None) is None
