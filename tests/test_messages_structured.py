"""Messages forced tools, strict tools and structured outputs get the same turn grammar as Chat.

- ``tool_choice {"type": "any"}`` forces a call (Chat's ``required``); ``{"type": "tool"}`` forces
  the named one; a tool with ``strict: true`` has its arguments held to its ``input_schema``
  (Anthropic strict tool use), so a ``tool_use`` with ``{}`` input that misses a required property
  is outside the grammar. The parity options restore deepseek-recipe's readings.
- ``output_config.format`` (Anthropic structured outputs) gives the prompt, output constraint and
  grammar of the equivalent Chat ``response_format`` json_schema; a malformed format is a 400 naming
  the field.
- Through ``recipe serve`` and the official anthropic SDK, against a fake vLLM that samples at random
  under the Lark it received: forced calls come back schema-valid, a format answer as schema-valid JSON.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from fake_engines import HAVE_LLGUIDANCE, Script, Seen, vllm_app
from grammar_support import out_ids
from serve_support import running

import recipe
import recipe.serve
from recipe.errors import RequestError
from recipe.options import DEFAULT_OPTIONS, PARITY_OPTIONS
from recipe.serve.config import ServeConfig

MODEL = "deepseek-v4-pro"
DAYS = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"], "additionalProperties": False}
FORECAST = {"name": "forecast", "description": "Forecast.", "input_schema": DAYS, "strict": True}
LOOSE = {"name": "note", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
ANSWER = {"type": "object", "properties": {"city": {"type": "string"}, "ok": {"type": "boolean"}},
          "required": ["city", "ok"], "additionalProperties": False}


def body(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 512, "messages": [{"role": "user", "content": "Weather in Paris?"}], **extra}


def invoke(name: str, **params: Any) -> str:
    """One invoke and the block's close, as written after a prompt that opened the call block."""
    ps = "".join(f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                 f'{v if isinstance(v, str) else json.dumps(v)}</｜DSML｜parameter>\n' for k, v in params.items())
    return f'<｜DSML｜invoke name="{name}">\n{ps}</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>'


needs_matcher = pytest.mark.skipif(not HAVE_LLGUIDANCE, reason="the matcher needs llguidance (test extra)")


def test_any_forces_a_call_like_chats_required():
    prep = recipe.prepare(body(tools=[FORECAST, LOOSE], tool_choice={"type": "any"}), "messages")
    chat = recipe.prepare({"model": MODEL, "messages": body()["messages"], "tool_choice": "required", "tools": [
        {"type": "function", "function": {"name": t["name"], "description": t.get("description"),
                                          "parameters": t["input_schema"], "strict": t.get("strict")}}
        for t in (FORECAST, LOOSE)]}, "chat")
    g = recipe.output_grammar(prep)
    assert (g.mode, g.starts_in, g.tool_names) == ("tools_required", "tool_block", ("forecast", "note"))
    assert prep.output_constraint.kind == "tool_call_required" and prep.parsing.starts_in_tool_calls
    assert g.lark == recipe.output_grammar(chat).lark  # (the prompts differ: Chat strict-normalises the schema)
    parity = recipe.prepare(body(tools=[FORECAST, LOOSE], tool_choice={"type": "any"}), "messages", options=PARITY_OPTIONS)
    assert recipe.output_grammar(parity).mode == "tools_auto" and parity.output_constraint.kind == "tool_call"


@needs_matcher
def test_any_refuses_plain_text_and_accepts_a_call():
    prep = recipe.prepare(body(tools=[FORECAST, LOOSE], tool_choice={"type": "any"}), "messages")
    text = recipe.check_output(prep, out_ids("It is sunny.<｜end▁of▁sentence｜>"))
    assert not text.ok and text.index == 0
    assert recipe.check_output(prep, out_ids(invoke("note", text="hi"))).ok
    parity = recipe.prepare(body(tools=[FORECAST, LOOSE], tool_choice={"type": "any"}), "messages", options=PARITY_OPTIONS)
    assert recipe.check_output(parity, out_ids("</think>It is sunny.<｜end▁of▁sentence｜>")).ok


@needs_matcher
def test_a_forced_strict_tool_holds_its_input_to_the_schema():
    prep = recipe.prepare(body(tools=[FORECAST, LOOSE], tool_choice={"type": "tool", "name": "forecast"}), "messages")
    g = recipe.output_grammar(prep)
    assert (g.mode, g.tool_names) == ("tools_named", ("forecast",))
    empty = recipe.check_output(prep, out_ids(invoke("forecast")))
    assert not empty.ok and empty.index is not None  # `{}` input: the required `city` is missing
    assert not recipe.check_output(prep, out_ids(invoke("forecast", city="Paris", days="three"))).ok
    assert recipe.check_output(prep, out_ids(invoke("forecast", city="Paris", days=3))).ok
    # without strict (or under parity) Anthropic promises no schema: any well-formed parameters
    loose = recipe.prepare(body(tools=[LOOSE], tool_choice={"type": "tool", "name": "note"}), "messages")
    assert recipe.check_output(loose, out_ids(invoke("note"))).ok
    parity = recipe.prepare(body(tools=[FORECAST], tool_choice={"type": "tool", "name": "forecast"},
                                 thinking={"type": "disabled"}), "messages", options=PARITY_OPTIONS)
    assert recipe.check_output(parity, out_ids(invoke("forecast"))).ok


def _chat_format(schema: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": body()["messages"],
            "response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": schema}}}


@pytest.mark.parametrize("thinking", [True, False])
def test_output_config_format_is_chats_json_schema(thinking):
    think = {"thinking": {"type": "enabled", "budget_tokens": 1024} if thinking else {"type": "disabled"}}
    prep = recipe.prepare(body(output_config={"format": {"type": "json_schema", "schema": ANSWER}}, **think), "messages")
    chat = recipe.prepare({**_chat_format(ANSWER), "thinking": think["thinking"]["type"] == "enabled" and
                           {"type": "enabled"} or {"type": "disabled"}}, "chat")
    assert prep.output_constraint == chat.output_constraint and prep.output_constraint.kind == "json"
    assert prep.token_ids == chat.token_ids and prep.conversation.response_format.schema == ANSWER
    g, gc = recipe.output_grammar(prep), recipe.output_grammar(chat)
    assert (g.mode, g.lark, g.structural_tag) == ("json", gc.lark, gc.structural_tag)
    ignored = recipe.prepare(body(output_config={"format": {"type": "json_schema", "schema": ANSWER}}, **think), "messages",
                             options=PARITY_OPTIONS)
    assert ignored.output_constraint is None and ignored.token_ids != prep.token_ids


@pytest.mark.parametrize("fmt, field", [
    ({"type": "text"}, "output_config.format.type"),
    ({"type": "json_schema"}, "output_config.format.schema"),
    ({"type": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "nope"}}}}, "output_config.format.schema"),
    ({"type": "json_schema", "schema": {"$ref": "#/$defs/missing"}}, "output_config.format.schema"),
    ("json", "output_config.format"),
])
def test_a_malformed_output_format_is_a_400_naming_the_field(fmt, field):
    with pytest.raises(RequestError) as err:
        recipe.prepare(body(output_config={"format": fmt}), "messages")
    assert err.value.status == 400 and err.value.param == field


@needs_matcher
def test_output_format_answers_are_held_to_the_schema():
    prep = recipe.prepare(body(output_config={"format": {"type": "json_schema", "schema": ANSWER}},
                               thinking={"type": "disabled"}), "messages")
    assert recipe.check_output(prep, out_ids('{"city": "Paris", "ok": true}<｜end▁of▁sentence｜>')).ok
    assert not recipe.check_output(prep, out_ids('Sunny.<｜end▁of▁sentence｜>')).ok
    assert not recipe.check_output(prep, out_ids('{"city": "Paris"}<｜end▁of▁sentence｜>')).ok


@pytest.mark.skipif(not HAVE_LLGUIDANCE, reason="sampling under the grammar needs llguidance (test extra)")
def test_through_the_sdk_forced_and_formatted_answers_are_schema_valid():
    """A fake vLLM (guidance backend) samples at random under the Lark recipe sends: ``tool`` and
    ``any`` give a strict tool's schema-valid input, ``output_config.format`` schema-valid JSON text;
    the engine received exactly ``recipe.output_grammar`` of each request."""
    anthropic = pytest.importorskip("anthropic")
    seen = Seen()
    script = Script([], sample=True, seed=5, chunk=3)
    asked = [body(tools=[FORECAST], tool_choice={"type": "tool", "name": "forecast"}),
             body(tools=[FORECAST], tool_choice={"type": "any"}),
             body(output_config={"format": {"type": "json_schema", "schema": ANSWER}})]
    with running(vllm_app(script, seen, "guidance")) as fake:
        app = recipe.serve.app(f"vllm+{fake.url}?grammar=lark", options=DEFAULT_OPTIONS, config=ServeConfig())
        with running(app) as s:
            client = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0, timeout=60)
            answers = [client.messages.create(**b) for b in asked]
    assert seen.violations == [] and len(seen.bodies) == 3
    for sent, b in zip(seen.bodies, asked):
        assert sent["structured_outputs"] == {"grammar": recipe.output_grammar(recipe.prepare(b, "messages")).lark}
    for m in answers[:2]:
        uses = [c for c in m.content if c.type == "tool_use"]
        assert m.stop_reason == "tool_use" and uses and all(u.name == "forecast" for u in uses)
        for u in uses:
            jsonschema.validate(u.input, DAYS)
    text = "".join(c.text for c in answers[2].content if c.type == "text")
    jsonschema.validate(json.loads(text), ANSWER)
