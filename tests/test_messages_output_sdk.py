"""The official ``anthropic`` SDK against our Messages output, over real HTTP on 127.0.0.1.

A stdlib HTTP server (one thread, module lifetime, socket timeouts) answers ``POST /v1/messages``
with :class:`CompletionStream` SSE (one token id per push, as an engine would) or :func:`response`
JSON for the scenario named in the ``x-scenario`` header. The SDK must consume both without error,
and the message it accumulates from the stream — ``messages.create(stream=True)`` folded with the
SDK's ``accumulate_event``, and ``messages.stream()``'s ``get_final_message()`` — must equal the
non-streamed message it reads, for every scenario: thinking, text, parallel tool uses, max_tokens,
refusal, stop_sequence, degraded output.
"""

from __future__ import annotations

from typing import Any

import pytest
from sdk_server import by_scenario, serve

from messages_output_support import TOOLS, body, messages_rows
from output_parity_support import ids_of

anthropic = pytest.importorskip("anthropic")
from anthropic.lib.streaming._messages import accumulate_event  # noqa: E402

ROWS = {r["scenario"]: r for r in messages_rows()}
_CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">Pa\\"ris'
         '</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">2.50</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
         '</｜DSML｜tool_calls>')
#: (request, completion text, finish) on top of the recorded rows
EXTRA = {
    "empty_reasoning": (body(thinking=True), "</think>Straight to the answer \U0001F916.", "stop"),
    "text_after_tool": (body(tools=TOOLS), "Checking.\n\n" + _CALL + "\nAnd some text after.", "stop"),
    "text_in_tool_block": (body(tools=TOOLS), ("Hm.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_w\">\n"
                                               "<｜begin▁of▁sentence｜><｜DSML｜parameter name=\""), "stop"),
    "tool_max_tokens": (body(thinking=True, tools=TOOLS), "R.</think>" + _CALL[:120], "length"),
}
KW = dict(seed=3, prompt_tokens=20, cached_tokens=5)


def _output(scenario: str) -> tuple[list[int], str]:
    if scenario in ROWS:
        return ROWS[scenario]["completion_token_ids"], ROWS[scenario]["backend_finish"]
    _, text, fin = EXTRA[scenario]
    return ids_of(text), fin


@pytest.fixture(scope="module")
def client():
    with serve(by_scenario(_output), **KW) as server:
        yield anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=20)


def _view(obj: Any) -> dict:
    """SDK object → comparable dict (None values dropped; the helper's ``parsed_output`` too)."""
    d = obj.model_dump(mode="json", exclude_none=True)
    for block in d.get("content", ()):
        block.pop("parsed_output", None)
    return d


def _request(scenario: str) -> dict:
    return dict(ROWS[scenario]["request"]) if scenario in ROWS else dict(EXTRA[scenario][0])


SCENARIOS = [*ROWS, *EXTRA]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sdk_stream_equals_response(client, scenario):
    req = _request(scenario)
    hdr = {"x-scenario": scenario}
    full = client.messages.create(**req, extra_headers=hdr)
    want = _view(full)
    notes = want.pop("recipe", None)
    if notes is not None:
        assert full.recipe == notes  # unknown keys stay readable as attributes

    # raw events, folded by the SDK's own accumulator
    snap = None
    bufs: dict[int, bytes] = {}
    raw = []
    for ev in client.messages.create(**req, stream=True, extra_headers=hdr):
        raw.append(ev)
        snap = accumulate_event(event=ev, current_snapshot=snap, json_bufs=bufs)
    assert _view(snap) == want
    assert raw[0].type == "message_start" and raw[-1].type == "message_stop"
    assert "ping" not in [e.type for e in raw]  # the SDK skips pings (api-wire-formats §1.2)
    delta = next(e for e in raw if e.type == "message_delta")
    if notes is not None:
        assert delta.recipe == notes  # the notes ride on message_delta (the SDK does not fold them)

    # the accumulating helper
    with client.messages.stream(**req, extra_headers=hdr) as s:
        kinds = [ev.type for ev in s]
        final = s.get_final_message()
    assert _view(final) == want
    blocks = want["content"]
    if any(b["type"] == "text" for b in blocks):
        assert "text" in kinds
    if any(b["type"] == "thinking" for b in blocks):
        assert "signature" in kinds
    if any(b["type"] == "thinking" and b["thinking"] for b in blocks):
        assert "thinking" in kinds
    if any(b["type"] == "tool_use" for b in blocks):
        assert "input_json" in kinds
    assert want["stop_reason"] == _expected_stop(scenario)
    assert want["usage"]["input_tokens"] == 15 and want["usage"]["cache_read_input_tokens"] == 5


def _expected_stop(scenario: str) -> str:
    if scenario in ROWS:
        return ROWS[scenario]["accumulated"]["stop_reason"]
    return {"tool_max_tokens": "max_tokens", "text_after_tool": "tool_use", "text_in_tool_block": "tool_use"}.get(scenario, "end_turn")


def test_scenarios_cover_the_brief():
    stops = {_expected_stop(s) for s in SCENARIOS}
    assert stops == {"end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence"}
    assert {"think_answer", "plain", "two_tools", "length_in_answer", "content_filter", "stop_seq"} <= set(SCENARIOS)


def test_sdk_reads_parallel_tool_inputs_and_stop_sequence(client):
    msg = client.messages.create(**_request("two_tools"), extra_headers={"x-scenario": "two_tools"})
    assert [(b.type, getattr(b, "name", None)) for b in msg.content] == [("thinking", None), ("tool_use", "get_w"), ("tool_use", "get_time")]
    assert msg.content[1].input == {"city": "Paris"} and msg.content[2].input == {"tz": "Europe/Paris", "fmt24": True}
    assert msg.content[0].signature == msg.id
    with client.messages.stream(**_request("text_after_tool"), extra_headers={"x-scenario": "text_after_tool"}) as s:
        final = s.get_final_message()
    assert final.content[1].input == {"city": 'Pa\\"ris', "days": 2.5}  # a backslash and a quote
    assert s.get_final_text() == "Checking.\nAnd some text after."
    stop = client.messages.create(**_request("stop_seq"), extra_headers={"x-scenario": "stop_seq"})
    assert (stop.stop_reason, stop.stop_sequence, stop.content[0].text) == ("stop_sequence", "END", "Hello ")
