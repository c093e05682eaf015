"""The tool-definition memo (recipe.api.common.build_tool) never hands out a schema the caller edited later."""

from __future__ import annotations

import copy

import pytest

import recipe


def _body(model: str, api: str, schema: dict) -> dict:
    if api == "chat":
        return {"model": model, "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": schema}}]}
    if api == "responses":
        return {"model": model, "input": "hi",
                "tools": [{"type": "function", "name": "get_weather", "description": "d", "parameters": schema}]}
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "get_weather", "description": "d", "input_schema": schema}]}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_caller_edits_after_prepare_do_not_reach_a_later_equal_request(api: str) -> None:
    # a schema nobody else in the test session uses, so the first prepare is a memo miss
    original = {"type": "object", "properties": {"city_tm": {"type": "string", "description": f"memo test {api}"}}}
    schema = copy.deepcopy(original)
    first = recipe.prepare(_body("deepseek-v4-pro", api, schema), api=api)
    # the caller reuses and edits its own dict in place (nested level, then top level)
    schema["properties"]["city_tm"]["description"] = "EDITED"
    schema["required"] = ["city_tm"]
    again = recipe.prepare(_body("deepseek-v4-pro", api, copy.deepcopy(original)), api=api)
    assert "EDITED" not in again.prompt.text
    assert again.prompt.text == first.prompt.text
    assert again.token_ids == first.token_ids
    edited = recipe.prepare(_body("deepseek-v4-pro", api, schema), api=api)
    assert "EDITED" in edited.prompt.text and '"required": ["city_tm"]' in edited.prompt.text.replace('":["', '": ["')
