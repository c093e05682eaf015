"""The request path's shortcuts keep their checks: a JSON text body is depth-checked once (by the
parser) and a dict body by the walk; detection reads Mapping messages that are not dicts; the
default path reads no file after the first call."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from types import MappingProxyType

import pytest

import recipe.jsonfmt as jsonfmt
from recipe.api.wire import DEPTH_CHECKED, parse_body
from recipe.api.chat_wire import ChatCompletionRequest
from recipe.errors import RequestError
from recipe.pipeline import detect_api, prepare


def _deep_body(levels: int) -> dict:
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "metadata": {}}
    node = body["metadata"]
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return body


@pytest.mark.parametrize("form", ["dict", "text", "bytes"])
def test_over_deep_bodies_are_refused_in_every_form(form):
    body = _deep_body(130)
    wire = body if form == "dict" else json.dumps(body) if form == "text" else json.dumps(body).encode()
    with pytest.raises(RequestError, match="recursion limit exceeded") as info:
        prepare(wire)
    assert info.value.stage == "parse"
    assert prepare(_deep_body(120) if form == "dict" else json.dumps(_deep_body(120))).token_ids


def test_a_text_body_is_walked_once(monkeypatch):
    calls = []
    real = jsonfmt.too_deep
    monkeypatch.setattr(jsonfmt, "too_deep", lambda v, *a: calls.append(1) or real(v, *a))
    import recipe.api.wire as wire

    monkeypatch.setattr(wire, "too_deep", jsonfmt.too_deep)
    prepare(json.dumps({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "[" * 200 + "x"}]}))
    assert len(calls) == 1  # by the parser; the adapter's parse trusts it
    calls.clear()
    prepare({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "[" * 200 + "x"}]})
    assert len(calls) == 1  # a dict body: by the adapter's parse (its JSON text has > 127 brackets)
    calls.clear()
    prepare({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}]})
    assert calls == []  # at most 127 brackets in its JSON text: it cannot nest deeper, no walk


@pytest.mark.parametrize("levels", [124, 125, 126])
def test_a_dict_body_at_the_depth_limit(levels):
    """A dict body nested exactly at the limit is accepted and one level more refused, with or
    without brackets inside its strings (they only decide whether the walk runs): the body,
    ``metadata`` and ``levels`` nested objects nest ``levels + 2`` deep."""
    for padding in ("", "[" * 300):
        body = _deep_body(levels)
        body["messages"][0]["content"] = "x" + padding
        if levels + 2 > 127:
            with pytest.raises(RequestError, match="recursion limit exceeded"):
                prepare(body)
        else:
            assert prepare(body).token_ids


def test_the_mark_applies_only_to_the_body_it_names():
    token = DEPTH_CHECKED.set(id(object()))
    try:
        with pytest.raises(RequestError, match="recursion limit"):
            parse_body(ChatCompletionRequest, _deep_body(130))
    finally:
        DEPTH_CHECKED.reset(token)


def test_detection_reads_mapping_messages():
    tool_use = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    body = {"model": "m", "messages": [MappingProxyType({"role": "assistant", "content": [tool_use]})]}
    assert detect_api(body) == "messages"
    assert detect_api({"model": "m", "messages": [OrderedDict(role="assistant", content=[tool_use])]}) == "messages"


def test_the_default_path_touches_no_file_after_the_first_call(monkeypatch):
    """``prepare(body)`` as the README shows it (default vocabulary, caches) resolves nothing on
    disk once the first call has loaded the vocabulary (issue 16, item 1)."""
    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}]}
    first = prepare(body).token_ids
    calls: list[str] = []
    for name in ("stat", "lstat", "readlink", "open", "listdir", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    monkeypatch.setattr("builtins.open", lambda *a, **k: calls.append("open()") or pytest.fail("open() on the request path"))
    for text in ("hi", "again", "and a third"):
        prep = prepare({**body, "messages": [{"role": "user", "content": text}]})
        assert prep.token_ids and prep.token_ids[:2] == first[:2]
    assert calls == []


LONE = [  # (api, body as JSON text with a lone-surrogate escape, the field path named)
    ("chat", '{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"a\\ud800b"}]}', "messages[0].content"),
    ("responses", '{"model":"deepseek-v4-pro","instructions":"i\\ud800","input":"x"}', "instructions"),
    ("messages", '{"model":"deepseek-v4-pro","max_tokens":5,"system":"s\\udfff","messages":[{"role":"user","content":"a"}]}', "system"),
    ("chat", '{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"a"}],"metadata":{"k\\udfff":"v"}}', "metadata.k\\udfff"),
]


@pytest.mark.parametrize("api,text,path", LONE)
def test_lone_surrogates_are_refused_in_every_body_form(api, text, path):
    """A dict body (``json.loads`` keeps lone surrogates) is refused as its JSON text is: before,
    Chat turned the surrogate into U+FFFD ids silently and Responses' output side raised."""
    with pytest.raises(RequestError) as as_dict:
        prepare(json.loads(text), api)
    assert as_dict.value.param == path and as_dict.value.status == 400
    assert "lone surrogate" in str(as_dict.value)
    str(as_dict.value).encode("utf-8")  # the message itself is valid Unicode
    with pytest.raises(RequestError):
        prepare(text, api)
    assert jsonfmt.surrogate_path(json.loads(text.replace("\\ud800", "\\ud83d\\ude00").replace("\\udfff", "\\ud83d\\ude00"))) is None


# (schema, strict): a strict schema is re-built, not checked against the meta-schema (as deepseek-recipe),
# so a bad keyword value is refused only for a non-strict tool
BAD_SCHEMAS = [(p, strict) for p in ({"type": "object", "properties": {"a": {"type": "strange"}}}, "notobj") for strict in (False, True)]
BAD_SCHEMAS.append(({"type": "object", "minimum": "x"}, False))


@pytest.mark.parametrize("schema,strict", BAD_SCHEMAS)
@pytest.mark.parametrize("api,body,path", [
    ("chat", lambda p, s: {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function", "function": {"name": "f", "parameters": p, "strict": s}}]},
     "tools[0].function.parameters"),
    ("responses", lambda p, s: {"model": "deepseek-v4-pro", "input": "x",
                                "tools": [{"type": "function", "name": "g", "parameters": {"type": "object"}},
                                          {"type": "function", "name": "f", "parameters": p, "strict": s}]},
     "tools[1].parameters"),
])
def test_an_invalid_tool_schema_names_the_tools_parameters(api, body, path, schema, strict):
    """The schema rules (deepseek-recipe's messages) name no field; the error names the tool's
    ``parameters``, as Messages names ``tools.0.input_schema``."""
    from recipe.options import Options

    opts = Options(mixed_strict_tools="accept")
    with pytest.raises(RequestError) as err:
        prepare(body(schema, strict), api, options=opts)
    assert err.value.param == path and err.value.status == 400 and "schema" in err.value.message.lower()
