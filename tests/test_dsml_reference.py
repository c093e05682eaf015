"""The DSML-family reference encoders (V3.2, V4, V4.1) through their shared helpers
(recipe/encodings/dsml_reference.py): malformed tool calls are each family's own refusal, never a
TypeError; encode_messages / encode_messages_to_ids take render_messages' arguments (positional or
keyword) and show them in their signature; every family record is made by the one factory."""

from __future__ import annotations

import importlib
import inspect

import pytest

from recipe.encodings.base import family_record
from recipe.encodings.deepseek_v3_2 import reference as v32
from recipe.encodings.deepseek_v4 import reference as v4
from recipe.encodings.deepseek_v41 import reference as v41
from recipe.encodings.table import FAMILIES
from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.prompt import encode_prompt
from recipe.tokenizer import load_tokenizer

FAMILY_ERRORS = [(v32, ChatTemplateError), (v4, v4.ReferenceEncodingError), (v41, v4.ReferenceEncodingError)]
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}}


def _turn(calls):
    return [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": calls}]


@pytest.mark.parametrize("module, error", FAMILY_ERRORS)
@pytest.mark.parametrize("calls, names", [
    (5, "tool_calls"), (2.5, "tool_calls"), ([5], "tool call"), ([{"type": "function"}], "function"),
    ([{"function": {"arguments": "{}"}}], "name"), ([{"function": {"name": "f"}}], "arguments"),
])
def test_a_malformed_tool_call_is_the_familys_refusal(module, error, calls, names):
    with pytest.raises(error, match=names):
        module.encode_messages(_turn(calls), "chat")


@pytest.mark.parametrize("module, tags", [
    (v32, ("function_calls", "invoke", "parameter")),
    (v4, ("tool_calls", "invoke", "parameter")),
    (v41, (" calls", " invoke", " parameter")),
])
def test_each_family_writes_its_own_call_tags_and_parameters(module, tags):
    calls, invoke, parameter = tags
    text = module.encode_messages(_turn([CALL]), "chat")
    block = (f"\n\n<｜DSML｜{calls}>\n<｜DSML｜{invoke} name=\"get_weather\">\n"
             f"<｜DSML｜{parameter} name=\"city\" string=\"true\">Paris</｜DSML｜{parameter}>\n"
             f"<｜DSML｜{parameter} name=\"days\" string=\"false\">2</｜DSML｜{parameter}>\n"
             f"</｜DSML｜{invoke}>\n</｜DSML｜{calls}><｜end▁of▁sentence｜>")
    assert text.endswith(block)


def test_the_entry_points_take_render_messages_arguments_positionally_and_by_name():
    msgs = [{"role": "user", "content": "Hi"}]
    by_name = v4.encode_messages(msgs, "thinking", reasoning_effort="max")
    assert v4.encode_messages(msgs, "thinking", None, True, True, "max") == by_name
    assert by_name != v4.encode_messages(msgs, "thinking") and by_name.endswith("<｜User｜>Hi<｜Assistant｜><think>")
    ids = v4.encode_messages_to_ids(msgs, "thinking", None, True, True, "max", tokenizer=load_tokenizer())
    assert ids == encode_prompt(load_tokenizer(), v4.render_messages(msgs, "thinking", reasoning_effort="max"))
    assert ids[0] == 0 and ids[-4:] == [128803, 23166, 128804, 128821]  # BOS … <｜User｜>Hi<｜Assistant｜><think>


@pytest.mark.parametrize("module", [v32, v4, v41])
def test_the_entry_points_show_render_messages_signature(module):
    render = inspect.signature(module.render_messages).parameters
    text = inspect.signature(module.encode_messages).parameters
    ids = inspect.signature(module.encode_messages_to_ids).parameters
    assert list(render)[:5] == ["messages", "thinking_mode", "context", "drop_thinking", "add_default_bos_token"]
    assert set(render) <= set(text) and set(ids) == set(render) | {"tokenizer"}
    assert ids["tokenizer"].kind is inspect.Parameter.KEYWORD_ONLY and ids["tokenizer"].default is None
    assert module.encode_messages_to_ids.__name__ == "encode_messages_to_ids" and module.encode_messages_to_ids.__doc__


def test_every_record_is_named_after_its_package_and_stops_at_eos():
    for row in FAMILIES:
        record = importlib.import_module(row.package).ENCODING
        assert record.name == row.package.rpartition(".")[2] and record.stop_tokens == ("<｜end▁of▁sentence｜>",)
        assert callable(record.encode_messages) and callable(record.encode_messages_to_ids)


def test_the_factory_takes_the_packages_reference_module_unless_given():
    record = family_record("recipe.encodings.deepseek_v3_2", v32.render_messages, None, {}, load_tokenizer, ("m",))
    msgs = [{"role": "user", "content": "Hi"}]
    assert record.encode_messages(msgs, "chat") == v32.encode_messages(msgs, "chat")
    assert record.encode_messages(msgs, "chat").endswith("<｜User｜>Hi<｜Assistant｜></think>")
    given = family_record("recipe.encodings.x", v32.render_messages, None, {}, load_tokenizer, ("m",),
                          encode_messages=len, encode_messages_to_ids=len, stop_tokens=("<stop>",))
    assert (given.name, given.encode_messages, given.stop_tokens, given.models) == ("x", len, ("<stop>",), ("m",))
