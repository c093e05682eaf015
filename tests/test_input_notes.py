"""Input the model is not shown as sent is said in the response (``recipe.notes``), never dropped
without a word: tools on a template without a tool section (DeepSeek-V3, R1), images on a model
without image input (DeepSeek-V4), Messages ``tool_choice {"type": "any"}`` rendered as auto. The
prompt stays deepseek-recipe's; ``Options.unrendered_input="reject"`` makes each a 400 and the parity
options keep deepseek-recipe's silence."""

from __future__ import annotations

from dataclasses import replace

import pytest

import recipe
from recipe.options import DEFAULT_OPTIONS, PARITY_OPTIONS
from recipe.tokenizer import load_tokenizer, load_v3_tokenizer

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
IMAGE_CHAT = [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                           {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]
ANSWER = "It is a cat.<｜end▁of▁sentence｜>"
REJECT = replace(DEFAULT_OPTIONS, unrendered_input="reject")


def _notes(body: dict) -> list[str]:
    return (body.get("recipe") or {}).get("notes", [])


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-v3-0324", "deepseek-r1", "deepseek-r1-0528"])
def test_tools_on_a_template_without_a_tool_section_get_a_note(model):
    prep = recipe.prepare({"model": model, "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS}, "chat")
    assert "get_weather" not in prep.prompt.text and prep.parsing.parse_tool_calls
    text = ("A thought.</think>" if prep.conversation.thinking else "") + "Hello.<｜end▁of▁sentence｜>"
    body = recipe.response(prep, load_v3_tokenizer().encode_with_special_tokens(text))
    assert [n.split(":")[0] for n in _notes(body)] == ["tools_not_rendered"]
    assert "1 tool definition" in _notes(body)[0]
    with pytest.raises(recipe.RequestError) as err:
        recipe.prepare({"model": model, "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS}, "chat",
                       options=REJECT)
    assert err.value.status == 400 and err.value.param == "tools"


@pytest.mark.parametrize("model", ["deepseek-v3.1", "deepseek-v3.2", "deepseek-v4-pro"])
def test_families_that_render_tools_get_no_note(model):
    prep = recipe.prepare({"model": model, "messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS}, "chat")
    assert "get_weather" in prep.prompt.text and prep.notes == ()


#: the same image request in each API
IMAGES = {
    "chat": {"model": "deepseek-v4-pro", "messages": IMAGE_CHAT},
    "responses": {"model": "deepseek-v4-pro", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": "https://example.com/a.png"}]}]},
    "messages": {"model": "deepseek-v4-pro", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]},
}


@pytest.mark.parametrize("api", sorted(IMAGES))
def test_an_image_on_v4_keeps_deepseek_recipes_prompt_and_gets_a_note(api):
    from oracle import convert

    prep = recipe.prepare(IMAGES[api], api)
    assert "[Unsupported Image]" in prep.prompt.text
    assert prep.token_ids == convert(api, IMAGES[api])["token_ids"]  # the prompt is deepseek-recipe's
    ids = load_tokenizer().encode_with_special_tokens("A thought.</think>" + ANSWER)
    whole = recipe.response(prep, ids)
    stream = recipe.CompletionStream(prep)
    payloads = [*stream.start(), *stream.push(ids), *stream.finish("stop")]
    notes = {"chat": lambda b: _notes(b), "responses": lambda b: _notes(b), "messages": lambda b: _notes(b)}[api](whole)
    assert notes == ["image_not_rendered: this model reads no images: 1 image(s) became the text [Unsupported Image]"]
    final = [p for p in payloads if "recipe" in p or "recipe" in (p.get("response") or {}) or "recipe" in (p.get("delta") or {})]
    assert final, "the stream's final payload carries the note too"
    with pytest.raises(recipe.RequestError) as err:
        recipe.prepare(IMAGES[api], api, options=REJECT)
    assert err.value.param == ("input" if api == "responses" else "messages")


def test_a_v41_image_is_an_image_token_and_no_note():
    from v41_support import synthetic_v41_tokenizer

    body = {**IMAGES["chat"], "model": "DeepSeek-V4.1-Flash",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "What?"}, {"type": "image_url", "image_url": {
                "url": "data:image/png;base64,iVBORw0KGgo="}}]}]}
    prep = recipe.prepare(body, "chat", tokenizer=synthetic_v41_tokenizer())
    assert "[Unsupported Image]" not in prep.prompt.text and prep.notes == ()


def test_messages_tool_choice_any_rendered_as_auto_gets_a_note():
    body = {"model": "deepseek-v4-pro", "max_tokens": 100, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"}}
    assert recipe.prepare(body, "messages").notes == ()  # enforced by default: nothing is dropped
    as_auto = replace(DEFAULT_OPTIONS, anthropic_tool_choice_any="auto")
    prep = recipe.prepare(body, "messages", options=as_auto)
    assert [n.split(":")[0] for n in prep.notes] == ["tool_choice_any_as_auto"]
    with pytest.raises(recipe.RequestError) as err:
        recipe.prepare(body, "messages", options=replace(REJECT, anthropic_tool_choice_any="auto"))
    assert err.value.param == "tool_choice"


@pytest.mark.parametrize("api", sorted(IMAGES))
def test_parity_options_keep_deepseek_recipes_silence(api):
    prep = recipe.prepare(IMAGES[api], api, options=PARITY_OPTIONS)
    assert prep.notes == ()
    assert "recipe" not in recipe.response(prep, load_tokenizer().encode_with_special_tokens("x</think>" + ANSWER))


def test_through_recipe_serve_the_note_reaches_the_sdk():
    openai = pytest.importorskip("openai")
    from serve_support import running

    import recipe.serve

    with running(recipe.serve.app()) as s:
        c = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0).chat.completions.create(
            model="deepseek-v3", messages=[{"role": "user", "content": "Hi"}], tools=TOOLS)
    assert [n.split(":")[0] for n in c.model_extra["recipe"]["notes"]] == ["tools_not_rendered"]


@pytest.mark.parametrize("model, noted", [("deepseek-v3", True), ("deepseek-r1", True), ("deepseek-v3.1", True),
                                          ("deepseek-v3.2", False), ("deepseek-v4-pro", False)])
def test_a_response_format_the_template_cannot_show_gets_a_note(model, noted):
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object", "properties": {
        "city": {"type": "string"}}}}}
    prep = recipe.prepare({"model": model, "messages": [{"role": "user", "content": "Reply in JSON"}],
                           "response_format": rf}, "chat")
    assert ("city" in prep.prompt.text) is not noted
    assert [n.split(":")[0] for n in prep.notes] == (["response_format_not_rendered"] if noted else [])
