"""A served request leaves no reference cycles: everything it built is freed by reference counting.

``recipe serve`` runs with ``gc.freeze()`` and lives on the young generation's collections; an
object graph with a cycle per request (the output parser once kept its state handlers as bound
methods: 30 objects a request) makes collections more frequent and longer under load (issue 13,
time to first token).
"""

from __future__ import annotations

import gc

import pytest

import recipe

_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
_BODIES = {
    "chat": {"messages": [{"role": "user", "content": "Hi"}],
             "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": _SCHEMA}}]},
    "responses": {"input": "Hi", "tools": [{"type": "function", "name": "get_weather", "parameters": _SCHEMA}]},
    "messages": {"max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}],
                 "tools": [{"name": "get_weather", "input_schema": _SCHEMA}]},
}
_OUTPUT = {
    "tool_calls": "look it up</think>Hello<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                  "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                  "</｜DSML｜tool_calls><｜end▁of▁sentence｜>",
    "broken_markup": "hm</think>a <｜DSML｜invoke name=\"nope\"> b</｜DSML｜tool_calls> c<｜end▁of▁sentence｜>",
}


def _request(api: str, ids: list[int]) -> None:
    prep = recipe.prepare({"model": "deepseek-v4-pro", "stream": True, **_BODIES[api]}, api=api)
    stream = recipe.CompletionStream(prep, cached_tokens=0)
    for i in ids:
        stream.push_sse([i])
    stream.sse(stream.finish("stop"))
    other = recipe.CompletionStream(prep, cached_tokens=0)
    other.sse(other.push(ids))
    recipe.response(prep, ids)


@pytest.mark.parametrize("output", sorted(_OUTPUT))
@pytest.mark.parametrize("api", sorted(_BODIES))
def test_a_streamed_request_leaves_no_cycles(api: str, output: str) -> None:
    ids = recipe.load_tokenizer().encode_with_special_tokens(_OUTPUT[output])
    for _ in range(3):  # first calls fill module-level caches (kept on purpose, not garbage)
        _request(api, ids)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _request(api, ids)
        found = gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert found == 0, f"{found} objects in reference cycles: {kinds}"
