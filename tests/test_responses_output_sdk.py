"""The official ``openai`` SDK against our Responses output, over real HTTP on 127.0.0.1.

A stdlib HTTP server (one thread, module lifetime, socket timeouts) answers ``POST /v1/responses``
with :class:`CompletionStream` SSE (one token id per push, as an engine would) or :func:`response`
JSON for the scenario named in the ``x-scenario`` header. For every scenario the SDK must consume
both without error: ``responses.create(stream=True)`` yields typed events whose final
``response.completed`` / ``response.incomplete`` object equals the non-streamed ``Response``, and
``responses.stream()`` (``ResponseStreamState``) accumulates the same object
(``get_final_response()``; for ``incomplete`` the SDK refuses by design and the yielded
``response.incomplete`` event carries it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sdk_server import by_scenario, openai_view, serve
from responses_output_support import responses_rows

from recipe.output.driver import response
from recipe.pipeline import prepare
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")

ROWS = {r["scenario"]: r for r in responses_rows()}
TOOLS = ROWS["think_tool"]["request"]["tools"]
CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="{name}">\n<｜DSML｜parameter name="{param}" string="true">{value}'
        '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
EXTRA = {
    # scenario: (request fields besides model/input, completion text, finish)
    "namespace_tool": ({"reasoning": {"effort": "low"}, "tools": [
        {"type": "namespace", "name": "fs", "description": "files", "tools": [
            {"type": "function", "name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]},
        *TOOLS]}, "Read it.</think>Reading." + CALL.format(name="fs__read", param="path", value="/etc/hosts"), "stop"),
    "apply_patch": ({"reasoning": {"effort": "none"}, "tools": [{"type": "custom", "name": "apply_patch"}]},
                    CALL.format(name="apply_patch", param="input", value="*** Begin Patch\n*** End Patch\n"), "stop"),
    "text_after_call": ({"reasoning": {"effort": "none"}, "tools": TOOLS},
                        "Go." + CALL.format(name="get_w", param="city", value="Paris") + "\nDone.", "stop"),
    "truncated_call": ({"reasoning": {"effort": "low"}, "tools": TOOLS},
                       "R.</think>" + CALL.format(name="get_w", param="city", value="Paris")[:120], "length"),
    "json_schema": ({"reasoning": {"effort": "none"}, "text": {"format": {
        "type": "json_schema", "name": "w", "strict": True, "schema": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}},
                    '{"city": "Paris"}', "stop"),
}
KW = dict(seed=3, created=1700000000, prompt_tokens=20, cached_tokens=5)
SCENARIOS = [*ROWS, *EXTRA]


def _output(scenario: str) -> tuple[list[int], str]:
    if scenario in ROWS:
        return ROWS[scenario]["completion_token_ids"], ROWS[scenario]["backend_finish"]
    _, text, fin = EXTRA[scenario]
    return load_tokenizer().encode_with_special_tokens(text), fin


def _request(scenario: str) -> dict[str, Any]:
    if scenario in ROWS:
        return dict(ROWS[scenario]["request"])
    return {"model": "deepseek-v4-pro", "input": "Weather in Paris?", **EXTRA[scenario][0]}


@pytest.fixture(scope="module")
def client():
    with serve(by_scenario(_output), **KW) as server:
        yield openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=20)


def _view(obj: Any) -> dict:
    """SDK object → comparable dict: None values and SDK-only parse fields dropped; ``completed_at``
    checked (int ≥ created_at) and zeroed (it is the completion second of each request)."""
    d = openai_view(obj)
    assert isinstance(d["completed_at"], (int, float)) and d["completed_at"] >= d["created_at"] == 1700000000
    d["completed_at"] = 0
    return d


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sdk_stream_equals_response(client, scenario):
    req = _request(scenario)
    hdr = {"x-scenario": scenario}
    full = client.responses.create(**req, extra_headers=hdr)
    assert type(full).__name__ == "Response"
    want = _view(full)
    _, fin = _output(scenario)
    assert want["status"] == ("completed" if fin == "stop" else "incomplete")

    # raw events: every one parsed into its typed SDK class, the terminal one carrying the response
    events = list(client.responses.create(**req, extra_headers=hdr, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    names = {type(e).__name__ for e in events}
    assert all(n.startswith("Response") and n.endswith("Event") for n in names), names
    assert events[0].type == "response.created" and events[-1].type == f"response.{want['status']}"
    assert _view(events[-1].response) == want

    # the accumulating helper (ResponseStreamState)
    with client.responses.stream(**req, extra_headers=hdr) as s:
        helper_events = list(s)
        if want["status"] == "completed":
            final = _view(s.get_final_response())
            assert final == want
            assert s.get_final_response().output_text == full.output_text
        else:
            with pytest.raises(RuntimeError, match="response.completed"):
                s.get_final_response()
    assert _view(helper_events[-1].response) == want
    kinds = [e.type for e in helper_events]
    out = want["output"]
    assert kinds.count("response.output_item.done") == len(out)
    for item in out:
        if item["type"] == "function_call":
            assert isinstance(json.loads(item["arguments"]), dict)
    if any(o["type"] == "message" for o in out):
        assert "response.output_text.done" in kinds
    if any(o["type"] == "function_call" for o in out):
        assert "response.function_call_arguments.done" in kinds
    # usage and extras are readable as attributes
    assert (full.usage.input_tokens, full.usage.input_tokens_details.cached_tokens) == (20, 5)
    assert full.usage.total_tokens == 20 + full.usage.output_tokens


def test_namespace_and_custom_calls_through_the_sdk(client):
    ns = client.responses.create(**_request("namespace_tool"), extra_headers={"x-scenario": "namespace_tool"})
    call = ns.output[-1]
    assert (call.type, call.name, call.namespace, json.loads(call.arguments)) == ("function_call", "read", "fs", {"path": "/etc/hosts"})
    assert ns.output[-2].phase == "commentary"
    ap = client.responses.create(**_request("apply_patch"), extra_headers={"x-scenario": "apply_patch"})
    assert (ap.output[0].type, ap.output[0].input) == ("custom_tool_call", "*** Begin Patch\n*** End Patch\n")


def test_scenarios_cover_the_brief():
    kinds = set()
    for s in SCENARIOS:
        ids, fin = _output(s)
        r = response(prepare(_request(s)), ids, finish=fin, **KW)
        kinds |= {o["type"] for o in r["output"]} | {r["status"], (r["incomplete_details"] or {}).get("reason")}
        if sum(o["type"] == "function_call" for o in r["output"]) > 1:
            kinds.add("parallel")
        if any(o.get("namespace") for o in r["output"]):
            kinds.add("namespace")
    assert {"reasoning", "message", "function_call", "custom_tool_call", "parallel", "namespace", "completed", "incomplete",
            "max_output_tokens", "content_filter"} <= kinds


def test_every_payload_passes_the_sdks_strict_models():
    """tests/sdk_strict.py (a session fixture) validates every event and response the Responses encoder
    returns in any test with the SDK's own models (``model_validate``, not the lenient ``construct``
    the SDK uses when parsing): a missing required field fails the test that produced it."""
    import pydantic
    from sdk_strict import validate_events, validate_response

    from recipe.api.responses_output import ResponsesEncoder

    assert ResponsesEncoder.close.__name__ == "checked" and ResponsesEncoder.response.__name__ == "checked"
    prep = prepare({"model": "deepseek-v4-pro", "input": "hi", "reasoning": {"effort": "none"}}, "responses")
    resp = response(prep, load_tokenizer().encode_ordinary("Hello"), created=1)
    assert resp["usage"]["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}
    assert validate_response(resp) is resp
    old = json.loads(json.dumps(resp))
    del old["usage"]["input_tokens_details"]["cache_write_tokens"]  # what recipe sent before issue 12
    with pytest.raises(pydantic.ValidationError, match="cache_write_tokens"):
        validate_response(old)
    with pytest.raises(pydantic.ValidationError, match="cache_write_tokens"):
        validate_events([{"type": "response.completed", "response": old, "sequence_number": 9}])
