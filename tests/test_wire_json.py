"""API output never breaks on numbers orjson refuses (integers beyond 64 bits) in clients' schemas or tool arguments."""

from __future__ import annotations

import json

import pytest

from recipe.output.driver import CompletionStream, response
from recipe.jsonfmt import copy_json, dumps_wire
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

BIG = 123456789012345678901234567890
CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="n" string="false">'
        f"{BIG}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "maximum": BIG}}}
REQUESTS = {
    "chat": {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"},
             "tools": [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}]},
    "responses": {"model": "deepseek-v4-pro", "input": "x", "reasoning": {"effort": "none"},
                  "tools": [{"type": "function", "name": "f", "parameters": SCHEMA}]},
    "messages": {"model": "deepseek-v4-pro", "max_tokens": 100, "messages": [{"role": "user", "content": "x"}],
                 "thinking": {"type": "disabled"}, "tools": [{"name": "f", "input_schema": SCHEMA}]},
}


def test_dumps_wire_and_copy_json_keep_big_integers():
    value = {"a": [BIG, 1.5, float("inf")], "b": "é"}
    assert json.loads(dumps_wire(value)) == {"a": [BIG, 1.5, None], "b": "é"}
    assert copy_json({"a": [BIG]}) == {"a": [BIG]}


@pytest.mark.parametrize("api", list(REQUESTS))
def test_big_integers_survive_every_api(api):
    body = json.loads(json.dumps(REQUESTS[api]))
    prep = prepare(body, api)
    ids = load_tokenizer().encode_with_special_tokens(CALL)
    final = response(prep, ids, seed=1)
    text = json.dumps(final)
    assert str(BIG) in text
    cs = CompletionStream(prep, seed=1)
    sse = cs.sse(cs.start() + cs.push(ids) + cs.finish("stop"))
    assert str(BIG).encode() in sse
