"""The request path's shortcuts keep their checks: a JSON text body is depth-checked once (by the
parser) and a dict body by the walk; detection reads Mapping messages that are not dicts."""

from __future__ import annotations

import json
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
    prepare({"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}]})
    assert len(calls) == 1  # a dict body: by the adapter's parse


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
