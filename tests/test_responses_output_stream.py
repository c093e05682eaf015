"""CompletionStream / ResponsesEncoder behaviour: chunking invariance, event invariants, framing,
ids, usage, finish → status table, log probabilities, notes, deviations, peer failures 7 and 8.
Golden values come from deepseek-recipe (recorded rows), the wire-format reference or the request,
never from our own output."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from output_parity_support import ids_of, split_at
from responses_output_support import (
    check_invariants,
    our_response,
    parse_sse,
    responses_rows,
    stream_payloads,
    structural,
)

from recipe.api.responses_output import (
    FINISH_STATUS,
    ResponsesEncoder,
    custom_tool_input,
    response_status,
)
from recipe.output.driver import (
    ENCODERS,
    ChannelLogprobs,
    CompletionStream,
    StreamEncoder,
    TokenLogprob,
    response,
)
from recipe.pipeline import prepare
from recipe.output.events import (
    Finish,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    accumulate,
)

ROWS = responses_rows()
TOOLS = ROWS[2]["request"]["tools"]  # think_tool: get_w, get_time
NS_TOOLS = [{"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read"}]}, *TOOLS]
CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">Paris'
        '</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


def body(effort: str = "none", **kw) -> dict:
    return {"model": "deepseek-v4-pro", "input": "Weather in Paris?", "reasoning": {"effort": effort}, **kw}


EXTRA = [
    # peer failure 8: text → tool switch inside one push; text after the block (deviation 3)
    (body("low", tools=TOOLS), "Hmm.</think>Let me check." + CALL + "\nAfter the call.", "stop"),
    (body("low", tools=TOOLS), "Hmm.</think>Let me check.\n\n" + CALL[:150], "length"),
    (body("none", tools=NS_TOOLS), "Reading." + CALL.replace("get_w", "fs__read"), "stop"),
    (body("none", tools=[{"type": "custom", "name": "apply_patch"}]),
     CALL.replace("get_w", "apply_patch").replace('"city"', '"input"'), "content_filter"),
    (body("none", tools=TOOLS), "A <｜DSML｜ inline mention, then 🤖 done.", "stop"),
    (body("low"), "think</think>ok<｜end▁of▁sentence｜>ignored", "stop"),
    (body("low", tools=TOOLS), "</think>Hi <｜DSML｜invoke name=\"get_w\">\n</think> more", "length"),
]
CASES = [(r["request"], r["completion_token_ids"], r["backend_finish"]) for r in ROWS] + [
    (b, ids_of(t), f) for b, t, f in EXTRA
]
KW = dict(seed=5, created=1700000000, response_id="resp_x")


# ---------------------------------------------------------------- chunking invariance


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(range(len(CASES))), cuts=st.lists(st.integers(0, 200), max_size=12))
def test_any_chunking_folds_to_the_response(case, cuts):
    """Any split of the same ids: valid event stream whose items (rebuilt from the events alone)
    and final response equal the non-streamed response."""
    req, ids, fin = CASES[case]
    want = our_response(req, ids, fin, **KW)
    payloads = stream_payloads(req, split_at(ids, cuts), fin, **KW)
    check_invariants(payloads)
    assert payloads[-1]["response"] == want


def test_protocol_and_table():
    assert ENCODERS["responses"] is ResponsesEncoder and ResponsesEncoder.id_prefix == "resp_"
    cs = CompletionStream(prepare(body()), created=1)
    assert isinstance(cs.encoder, StreamEncoder)


# ---------------------------------------------------------------- peer failures 7 and 8


def test_peer7_call_ids_survive_both_ways():
    """Every call id survives: parser id → item ``call_id`` in added / done / completed and the
    non-streamed response; replayed as input (function_call + function_call_output) the request
    side keeps it and pairs the output with its call."""
    req = body("none", tools=TOOLS)
    text = CALL.replace("\n</｜DSML｜tool_calls>", '\n<｜DSML｜invoke name="get_time">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    ids = ids_of(text)
    cs = CompletionStream(prepare(req), **KW)
    payloads = cs.start() + cs.push(ids) + cs.finish()
    starts = [p["item"]["call_id"] for p in payloads if p["type"] == "response.output_item.added"]
    dones = [p["item"]["call_id"] for p in payloads if p["type"] == "response.output_item.done"]
    final = [o["call_id"] for o in payloads[-1]["response"]["output"]]
    assert starts == dones == final and len(set(final)) == 2 and all(re.match(r"call_0\d_", c) for c in final)
    resp = our_response(req, ids, "stop", **KW)
    assert [o["call_id"] for o in resp["output"]] == final
    follow = dict(req, input=[{"role": "user", "content": "Weather?"}, *resp["output"],
                              *({"type": "function_call_output", "call_id": c, "output": f"r{k}"} for k, c in enumerate(final))])
    conv = prepare(follow).conversation
    calls = [c for m in conv.messages for c in (getattr(m, "tool_calls", None) or ())]
    assert [c.id for c in calls] == final
    tool_msgs = [m for m in conv.messages if type(m).__name__ == "ToolMessage"]
    assert [m.tool_call_id for m in tool_msgs] == final


@pytest.mark.parametrize("chunking", ["one_push", "per_token", "at_marker"])
def test_peer8_text_to_tool_switch_loses_nothing(chunking):
    """A push that holds the end of the text and the start of the call (or both whole) loses no
    byte: text, item order and arguments equal the non-streamed response."""
    req = body("none", tools=TOOLS)
    ids = ids_of("Let me check." + CALL)
    k = ids_of("Let me check.").__len__()
    chunks = {"one_push": [ids], "per_token": [[i] for i in ids], "at_marker": [ids[: k - 1], ids[k - 1: k + 6], ids[k + 6:]]}[chunking]
    payloads = stream_payloads(req, chunks, "stop", **KW)
    check_invariants(payloads)
    out = payloads[-1]["response"]["output"]
    assert [o["type"] for o in out] == ["message", "function_call"]
    assert out[0]["content"][0]["text"] == "Let me check." and out[0]["phase"] == "commentary"
    assert json.loads(out[1]["arguments"]) == {"city": "Paris"} and out[1]["name"] == "get_w"
    assert "".join(p["delta"] for p in payloads if p["type"] == "response.function_call_arguments.delta") == out[1]["arguments"]


# ---------------------------------------------------------------- framing, lifecycle


def test_framing_event_lines_and_no_done():
    cs = CompletionStream(prepare(body("low")), **KW)
    data = cs.sse(cs.start()) + cs.sse(cs.push(ids_of("R.</think>Hi"))) + cs.sse(cs.finish())
    frames = parse_sse(data)
    assert all(name == d["type"] for name, d in frames)
    assert frames[-1][1]["type"] == "response.completed" and b"[DONE]" not in data
    assert [d["sequence_number"] for _, d in frames] == list(range(len(frames)))
    assert cs.encoder.done() is None
    assert cs.finish() == [] and cs.push(ids_of("x")) == [] and cs.sse([]) == b""
    assert data.startswith(b"event: response.created\ndata: {")


def test_lifecycle_objects():
    """created / in_progress: status in_progress, empty output, null usage and completed_at;
    completed: full output, usage, completed_at ≥ created_at (wire formats §3.3, §7)."""
    payloads = stream_payloads(body("low"), [ids_of("R.</think>Hi")], "stop", **KW)
    for p in payloads[:2]:
        r = p["response"]
        assert (r["status"], r["output"], r["usage"], r["completed_at"]) == ("in_progress", [], None, None)
    fin = payloads[-1]["response"]
    assert fin["status"] == "completed" and fin["completed_at"] >= fin["created_at"] == 1700000000
    assert {k: v for k, v in payloads[0]["response"].items() if k not in ("status", "output", "usage", "completed_at")} == {
        k: v for k, v in fin.items() if k not in ("status", "output", "usage", "completed_at")}


def test_ids():
    prep = prepare(body("low", tools=TOOLS))
    ids = ROWS[2]["completion_token_ids"]  # think_tool: reasoning, message, call
    a = response(prep, ids, seed=42)
    assert re.fullmatch(r"resp_[A-Za-z0-9]{29}", a["id"])
    rid = a["id"]
    assert [o["id"] for o in a["output"]] == [f"rs_{rid}_0", f"msg_{rid}_1", f"fc_{rid}_2"]
    assert a["output"][0]["encrypted_content"] == f"{rid}-0"
    assert a["output"][0]["summary"] == []
    b = response(prep, ids, seed=42)
    assert b["id"] == rid and b["output"][2]["call_id"] == a["output"][2]["call_id"]
    assert response(prep, ids)["id"] != response(prep, ids)["id"]
    c = response(prep, ids, response_id="resp_mine", created=7, model="served")
    assert (c["id"], c["created_at"], c["model"], c["output"][1]["id"]) == ("resp_mine", 7, "served", "msg_resp_mine_1")


def test_usage_cached_and_reasoning_tokens():
    prep = prepare(body("low"))
    ids = ids_of("a b c</think>x")
    r = response(prep, ids, cached_tokens=3, created=1)
    n = len(prep.token_ids)
    # cache_write_tokens: the openai SDK's strict ResponseUsage requires it (deviation R9)
    assert r["usage"] == {"input_tokens": n, "input_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 0},
                          "output_tokens": len(ids),
                          "output_tokens_details": {"reasoning_tokens": ids.index(ids_of("</think>")[0])},
                          "total_tokens": n + len(ids)}
    r = response(prepare(body("none")), ids_of("Hi"), prompt_tokens=20, cached_tokens=5, created=1)
    assert r["usage"]["output_tokens_details"] == {"reasoning_tokens": 0} and r["usage"]["total_tokens"] == 20 + 1


# ---------------------------------------------------------------- finish → status


def test_finish_status_table():
    # behaviour map §3.4 "Status"; wire formats §3.2 incomplete_details
    assert response_status("stop") == ("completed", None)
    assert response_status("length") == ("incomplete", "max_output_tokens")
    assert response_status("content_filter") == ("incomplete", "content_filter")
    assert response_status("insufficient_system_resource") == ("incomplete", None)  # R6: reason in a note
    assert set(FINISH_STATUS) == {"stop", "length", "content_filter"}


def test_unknown_backend_reason_is_incomplete_with_that_reason():
    """Deviation R6: another backend reason gives ``incomplete``; the SDK's model allows only its own
    ``incomplete_details.reason`` values, so the reason is null and the backend's string is a note."""
    payloads = stream_payloads(body(), [ids_of("Hi")], "insufficient_system_resource", **KW)
    check_invariants(payloads)
    last = payloads[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": None}
    assert last["response"]["recipe"] == {"notes": ["incomplete_reason: insufficient_system_resource"]}
    assert last["response"]["output"][0]["status"] == "incomplete"
    assert our_response(body(), ids_of("Hi"), "insufficient_system_resource", **KW) == last["response"]


def test_eos_ends_stream_and_text_after_tool_block_is_a_new_message():
    cs = CompletionStream(prepare(body("none", tools=TOOLS)), **KW)
    out = cs.start() + cs.push(ids_of("Go." + CALL + "\nDone.<｜end▁of▁sentence｜>tail"))
    assert cs.finished and out[-1]["type"] == "response.completed"
    check_invariants(out)
    o = out[-1]["response"]["output"]
    # deviation 3: text after the block is kept (deepseek-recipe drops it), as a second message
    assert [(x["type"], x.get("phase")) for x in o] == [("message", "commentary"), ("function_call", None), ("message", "final_answer")]
    assert o[2]["content"][0]["text"] == "\nDone."
    assert "recipe" not in out[-1]["response"]  # clean output: kept text is not a repair


def test_notes_on_final_response_only():
    b = body("low", tools=TOOLS)
    text = 'R</think><｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">Pa'
    payloads = stream_payloads(b, [ids_of(text)], "length", **KW)
    assert "truncated_tool_call" in payloads[-1]["response"]["recipe"]["notes"]
    assert all("recipe" not in p.get("response", {}) for p in payloads[:-1])
    r = our_response(b, ids_of(text), "length", **KW)
    assert r["recipe"] == payloads[-1]["response"]["recipe"]
    assert r["output"][-1]["arguments"] == '{"city": "Pa"}' and r["output"][-1]["status"] == "incomplete"
    assert "recipe" not in our_response(b, ids_of("R</think>fine"), "stop", **KW)


def test_custom_tool_input_rule():
    assert custom_tool_input('{"input": "*** Begin\\n"}') == "*** Begin\n"
    assert custom_tool_input('{"input": 5}') == '{"input": 5}'
    assert custom_tool_input('{"x": "a", "input": "b"}') == '{"x": "a", "input": "b"}'
    assert custom_tool_input("{}") == "{}"
    assert custom_tool_input("not json") == "not json"


# ---------------------------------------------------------------- response() without a driven encoder


def test_response_replays_parsed_output_when_not_driven():
    """``encoder.response(parsed)`` on a fresh encoder equals the stream's final response for the
    canonical layout (reasoning, message, calls)."""
    row = ROWS[2]  # think_tool
    req, ids = row["request"], row["completion_token_ids"]
    kw = dict(KW, prompt_tokens=20, cached_tokens=5, response_id="resp_test", model="m")
    cs = CompletionStream(prepare(req), **kw)
    cs._events = []
    payloads = cs.start() + cs.push(ids) + cs.finish()
    parsed = accumulate(cs._events)
    fresh = CompletionStream(prepare(req), **kw).encoder
    got = fresh.response(parsed)
    assert got == payloads[-1]["response"]
    assert structural(got) == structural(row["accumulated"])


# ---------------------------------------------------------------- log probabilities (encoder level)


def _entry(tok: str, lp: float) -> TokenLogprob:
    return TokenLogprob(0, tok, tok.encode(), lp, (TokenLogprob(0, tok, tok.encode(), lp),))


def test_logprobs_on_output_text_only():
    """Entries ride on ``output_text.delta`` and are repeated on its done / part / item (behaviour
    map §3.4, same entry shape as Chat); reasoning deltas carry none. CompletionStream does not yet
    pass them for Responses requests (see docs/streaming.md)."""
    enc = CompletionStream(prepare(body("none")), **KW).encoder
    out = enc.open()
    out += enc.on_events([TextDelta("Hi")], [_entry("Hi", -0.5)])
    out += enc.on_events([TextDelta(" there")], [_entry(" there", -0.25)])
    out += enc.close(Finish("stop", 2, 0))
    want = [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}]},
            {"token": " there", "logprob": -0.25, "bytes": list(b" there"),
             "top_logprobs": [{"token": " there", "logprob": -0.25, "bytes": list(b" there")}]}]
    deltas = [p for p in out if p["type"] == "response.output_text.delta"]
    assert [d["logprobs"] for d in deltas] == [want[:1], want[1:]]
    done = next(p for p in out if p["type"] == "response.output_text.done")
    assert done["logprobs"] == want
    assert out[-1]["response"]["output"][0]["content"][0]["logprobs"] == want
    check_invariants(out)
    # the replay path attaches ChannelLogprobs.content to the message
    parsed = accumulate([TextDelta("Hi there"), Finish("stop", 2, 0)])
    fresh = CompletionStream(prepare(body("none")), **KW).encoder
    r = fresh.response(parsed, ChannelLogprobs((_entry("Hi", -0.5), _entry(" there", -0.25)), (_entry("R", -1.0),)))
    assert r["output"][0]["content"][0]["logprobs"] == want


def test_encoder_ignores_out_of_order_call_events():
    """Call events for a call that is not open (impossible from the parser) are dropped, not raised."""
    enc = CompletionStream(prepare(body("none", tools=TOOLS)), **KW).encoder
    out = enc.open() + enc.on_events([ToolCallArgumentsDelta(3, "x"), ToolCallEnd(3, "{}"), ToolCallStart(0, "call_00_x", "get_w"),
                                      ToolCallArgumentsDelta(1, "y"), ToolCallArgumentsDelta(0, "{}"), ToolCallEnd(0, "{}")])
    out += enc.close(Finish("stop", 1, 0, None, 1))
    assert out[-1]["response"]["output"][0]["arguments"] == "{}"


def test_text_inside_an_unfinished_call_follows_the_call():
    """Found by fuzzing: the parser can emit text while a call is open (note ``text_in_tool_block``,
    deviation 3). A Responses item cannot be reopened, so the text is held until the call is
    complete and sent as the next message: no byte lost, the call's arguments whole, in any chunking."""
    req = body("low", tools=TOOLS)
    ids = ids_of('</think><｜DSML｜invoke name="get_w">\n</think>')
    for chunks in ([ids], [[i] for i in ids]):
        payloads = stream_payloads(req, chunks, "stop", **KW)
        check_invariants(payloads)
        r = payloads[-1]["response"]
        assert [(o["type"], o.get("arguments")) for o in r["output"]] == [("function_call", "{}"), ("message", None)]
        assert r["output"][1]["content"][0]["text"] == "</think>"
        assert r["recipe"] == {"notes": ["text_in_tool_block", "think_end_in_content", "truncated_tool_call"]}
        assert r == our_response(req, ids, "stop", **KW)
