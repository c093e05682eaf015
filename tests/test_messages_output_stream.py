"""MessagesEncoder behaviour: chunking invariance (incl. peer failures 7 and 8), event order, SSE
framing, stop reasons, usage, signature and thinking-token options, lifecycle, and the deliberate
request-side choices documented in docs/streaming.md. Golden values come from deepseek-recipe
(recorded rows / live oracle) or the wire-format reference, never from our own output."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages_output_support import (
    TOOLS,
    body,
    fold,
    messages_rows,
    our_response,
    parse_sse,
    recording_kwargs,
    stream_payloads,
)
from output_parity_support import ids_of, split_at
from recipe.api.messages_output import STOP_REASONS, MessagesEncoder, messages_stop_reason, tool_input
from recipe.output.driver import ENCODERS, CompletionStream, StreamEncoder, response
from recipe.conversation import AssistantMessage, ToolChoice, ToolMessage
from recipe.options import PARITY_OPTIONS
from recipe.encodings.deepseek_v4.constants import ASSISTANT, EOS
from recipe.pipeline import prepare

ROWS = {r["scenario"]: r for r in messages_rows()}
CALL = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">Paris'
        '</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
        '<｜DSML｜invoke name="get_time">\n<｜DSML｜parameter name="tz" string="true">Europe/Paris</｜DSML｜parameter>\n'
        '</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


EXTRA = [
    # peer failure 8: text -> tool switch, any chunk may hold both
    (body(tools=TOOLS), "Checking.\n\n" + CALL, "stop"),
    (body(thinking=True, tools=TOOLS), "Hmm.</think>Let me check.\n\n" + CALL[:150], "length"),
    (body(thinking=True, tools=TOOLS), "</think>\n\n" + CALL + "\nAfter the calls.", "stop"),
    (body(tools=TOOLS), "A <｜DSML｜ inline mention, then 🤖 done.", "stop"),
    (body(stop_sequences=["END"]), "caf\u00e9 ENEND tail", "stop"),
    (body(thinking=True), "think</think>ok<｜end▁of▁sentence｜>ignored", "stop"),
    (body(thinking=True), "", "content_filter"),
]
CASES = [(r["request"], r["completion_token_ids"], r["backend_finish"]) for r in ROWS.values()] + [
    (b, ids_of(t), f) for b, t, f in EXTRA
]


# ---------------------------------------------------------------- chunking invariance


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(range(len(CASES))), cuts=st.lists(st.integers(0, 200), max_size=12))
def test_any_chunking_folds_to_the_response(case, cuts):
    req, ids, fin = CASES[case]
    kw = dict(seed=5, response_id="msg_x")
    want = our_response(req, ids, fin, **kw)
    got = fold(stream_payloads(req, split_at(ids, cuts), fin, **kw))
    if req.get("stop_sequences") and got["usage"] != want["usage"]:
        # a push containing the stop match counts all its ids (parity); response() stops at the match
        assert got["usage"]["output_tokens"] > want["usage"]["output_tokens"]
        got["usage"] = want["usage"]
    assert got == want


def test_peer8_text_to_tool_switch_at_every_cut():
    """Peer failure 8: whichever two pushes the ids are split into, the tool_use keeps its name and
    full input and the text keeps every byte."""
    req, text, _ = EXTRA[0]
    ids = ids_of(text)
    for cut in range(len(ids) + 1):
        msg = fold(stream_payloads(req, [ids[:cut], ids[cut:]], "stop", seed=1))
        assert [b["type"] for b in msg["content"]] == ["text", "tool_use", "tool_use"], cut
        assert msg["content"][0]["text"] == "Checking."
        assert [(b["name"], b["input"]) for b in msg["content"][1:]] == [
            ("get_w", {"city": "Paris", "days": 3}), ("get_time", {"tz": "Europe/Paris"})]
        assert msg["stop_reason"] == "tool_use"


def test_input_json_fragments_are_the_argument_deltas():
    """``input_json_delta`` carries exactly the Chat argument fragments (same parser events)."""
    req, text, _ = EXTRA[0]
    ids = ids_of(text)
    chat_body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "none",
                 "tools": [{"type": "function", "function": {"name": t["name"], "parameters": t["input_schema"]}} for t in TOOLS]}
    chat = CompletionStream(prepare(chat_body, "chat"), seed=1)
    frags: dict[int, list[str]] = {}
    for i in ids:
        for p in chat.push([i]):
            for tc in p["choices"][0]["delta"].get("tool_calls") or ():
                if "id" not in tc:
                    frags.setdefault(tc["index"], []).append(tc["function"]["arguments"])
    events = stream_payloads(req, [[i] for i in ids], "stop", seed=1)
    ours: dict[int, list[str]] = {}
    for p in events:
        if p["type"] == "content_block_delta" and p["delta"]["type"] == "input_json_delta":
            ours.setdefault(p["index"] - 1, []).append(p["delta"]["partial_json"])
    assert ours == frags and len(ours) == 2


def test_peer7_tool_use_ids_survive_the_round_trip():
    """Peer failure 7: the ids we emit come back as the assistant's tool_use ids and the results'
    tool_use_id, and the conversion keeps both (and the prompt equals deepseek-recipe's)."""
    row = ROWS["two_tools"]
    resp = our_response(row["request"], row["completion_token_ids"], "stop", seed=9)
    uses = [b for b in resp["content"] if b["type"] == "tool_use"]
    assert len(uses) == 2
    follow = dict(row["request"], messages=[
        *row["request"]["messages"],
        {"role": "assistant", "content": resp["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u["id"], "content": f"result {k}"}
                                     for k, u in enumerate(uses)]},
    ])
    prep = prepare(follow, "messages")
    msgs = prep.conversation.messages
    assistant = next(m for m in msgs if isinstance(m, AssistantMessage))
    assert [c.id for c in assistant.tool_calls] == [u["id"] for u in uses]
    assert [m.tool_call_id for m in msgs if isinstance(m, ToolMessage)] == [u["id"] for u in uses]
    assert assistant.reasoning_content == "Two calls."
    oracle = pytest.importorskip("oracle")
    o = oracle.convert("messages", follow)
    assert o["ok"] and o["token_ids"] == prep.token_ids


# ---------------------------------------------------------------- event order, framing


@pytest.mark.parametrize("scenario", list(ROWS))
def test_sse_frames_name_every_event_and_have_no_terminator(scenario):
    row = ROWS[scenario]
    cs = CompletionStream(prepare(row["request"], "messages"), **recording_kwargs(row))
    data = cs.sse(cs.start())
    for i in row["completion_token_ids"]:
        data += cs.sse(cs.push([i]))
    data += cs.sse(cs.finish(row["backend_finish"]))
    frames = parse_sse(data)
    assert all(name == p["type"] for name, p in frames)
    assert frames[-1][0] == "message_stop" and b"[DONE]" not in data
    assert cs.encoder.done() is None
    assert fold([p for _, p in frames])["stop_reason"] == row["accumulated"]["stop_reason"]
    # wire formats §4.3 frame shape, byte for byte
    assert data.startswith(b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_test",')
    assert data.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


def test_thinking_mode_opens_the_thinking_block_with_the_stream():
    cs = CompletionStream(prepare(body(thinking=True), "messages"), response_id="msg_a")
    first = cs.start()
    assert [p["type"] for p in first] == ["message_start", "content_block_start", "ping"]
    assert first[1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    cs2 = CompletionStream(prepare(body(), "messages"), response_id="msg_b")
    assert [p["type"] for p in cs2.start()] == ["message_start"]
    later = cs2.push(ids_of("Hi"))
    assert [p["type"] for p in later] == ["content_block_start", "ping", "content_block_delta"]


def test_reasoning_after_text_opens_a_new_signed_thinking_block():
    """Defensive path (the parser never emits it today): each run of a kind is its own block."""
    from recipe.output.driver import ResponseMeta
    from recipe.output.events import Finish, ParsedOutput, ReasoningDelta, TextDelta

    enc = MessagesEncoder(prepare(body(), "messages"), ResponseMeta("msg_z", "m", 0, None, 10, 0))
    ev = enc.open() + enc.on_events([TextDelta("a"), ReasoningDelta("r"), TextDelta("b")])
    ev += enc.close(Finish("stop", 3, 1))
    msg = fold(ev)
    assert msg["content"] == [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "r", "signature": "msg_z"},
                              {"type": "text", "text": "b"}]
    assert enc.response(ParsedOutput("ab", "r", (), "stop", "stop", 3, 1))["content"] == msg["content"]
    # a fresh encoder has no streamed layout: canonical order
    fresh = MessagesEncoder(prepare(body(), "messages"), ResponseMeta("msg_z", "m", 0, None, 10, 0))
    assert [b["type"] for b in fresh.response(ParsedOutput("ab", "r", (), "stop", "stop", 3, 1))["content"]] == ["thinking", "text"]


# ---------------------------------------------------------------- stop reasons, usage


def test_stop_reason_table():
    # behaviour map §3.5 / wire formats §4.2
    assert messages_stop_reason("stop", 0, None) == "end_turn"
    assert messages_stop_reason("stop", 2, None) == "tool_use"
    assert messages_stop_reason("stop", 1, "END") == "stop_sequence"
    assert messages_stop_reason("stop", 0, "END") == "stop_sequence"
    assert messages_stop_reason("length", 1, None) == "max_tokens"
    assert messages_stop_reason("content_filter", 1, None) == "refusal"
    assert messages_stop_reason("pause_turn", 0, None) == "pause_turn"
    assert STOP_REASONS == {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def test_stop_sequence_carries_the_matched_string():
    req = body(stop_sequences=["NOPE", "END"])
    ids = ids_of("Hello END world")
    events = stream_payloads(req, [[i] for i in ids], "stop", seed=1)
    delta = next(p for p in events if p["type"] == "message_delta")
    assert delta["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    r = our_response(req, ids, "stop")
    assert (r["stop_reason"], r["stop_sequence"], r["content"]) == ("stop_sequence", "END", [{"type": "text", "text": "Hello "}])


def test_usage_excludes_cache_reads_from_input_tokens():
    prep = prepare(body(), "messages")
    r = response(prep, ids_of("Hi"), cached_tokens=3)
    assert r["usage"] == {"input_tokens": len(prep.token_ids) - 3, "cache_creation_input_tokens": 0,
                          "cache_read_input_tokens": 3, "output_tokens": 1, "service_tier": "standard"}
    ev = stream_payloads(body(), [ids_of("Hi")], "stop", prompt_tokens=100, cached_tokens=64)
    assert ev[0]["message"]["usage"] == {"input_tokens": 36, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 64, "output_tokens": 0, "service_tier": "standard"}
    delta = next(p for p in ev if p["type"] == "message_delta")
    assert delta["usage"] == dict(ev[0]["message"]["usage"], output_tokens=1)
    with pytest.raises(ValueError):
        CompletionStream(prep, prompt_tokens=2, cached_tokens=3)


@pytest.mark.parametrize("scenario", ["think_answer", "think_tool", "no_think_end", "length_in_answer", "plain"])
def test_thinking_tokens_option(scenario):
    """Off by default (parity: no reasoning-token count); with ``thinking_tokens`` the count equals
    deepseek-recipe's Chat ``reasoning_tokens`` for the same ids (recorded Chat rows)."""
    from chat_output_support import chat_rows

    row = ROWS[scenario]
    chat = next(r for r in chat_rows() if r["scenario"] == scenario)
    assert chat["completion_token_ids"] == row["completion_token_ids"]
    want = (chat["accumulated"]["usage"].get("completion_tokens_details") or {"reasoning_tokens": 0})["reasoning_tokens"]
    ids = row["completion_token_ids"]
    plain = our_response(row["request"], ids, row["backend_finish"])
    assert "output_tokens_details" not in plain["usage"]
    opt = {"thinking_tokens": True}
    r = our_response(row["request"], ids, row["backend_finish"], encoder_options=opt)
    assert r["usage"]["output_tokens_details"] == {"thinking_tokens": want}
    msg = fold(stream_payloads(row["request"], [[i] for i in ids], row["backend_finish"], encoder_options=opt))
    assert msg["usage"]["output_tokens_details"] == {"thinking_tokens": want}


# ---------------------------------------------------------------- signature, ids, options


def test_signature_defaults_to_the_response_id_and_is_configurable():
    row = ROWS["think_tool"]
    ids = row["completion_token_ids"]
    r = our_response(row["request"], ids, "stop", seed=4)
    assert re.fullmatch(r"msg_[A-Za-z0-9]{29}", r["id"])
    assert r["content"][0]["signature"] == r["id"]
    r2 = our_response(row["request"], ids, "stop", seed=4, encoder_options={"signature": "c2ln"})
    assert r2["content"][0]["signature"] == "c2ln" and r2["id"] == r["id"]
    cs = CompletionStream(prepare(row["request"], "messages"), seed=4)
    cs.encoder.signature = "set-later"
    ev = cs.start() + cs.push(ids) + cs.finish("stop")
    sigs = [p["delta"]["signature"] for p in ev if p["type"] == "content_block_delta" and p["delta"]["type"] == "signature_delta"]
    assert sigs == ["set-later"]
    with pytest.raises(TypeError):
        CompletionStream(prepare(row["request"], "messages"), encoder_options={"nope": 1})


def test_protocol_and_table():
    assert ENCODERS["messages"] is MessagesEncoder and MessagesEncoder.id_prefix == "msg_"
    cs = CompletionStream(prepare(body(), "messages"))
    assert isinstance(cs.encoder, StreamEncoder)


def test_tool_input_parses_objects_only():
    assert tool_input('{"x": [1, 2.50], "y": {"z": null}}') == {"x": [1, 2.5], "y": {"z": None}}
    assert tool_input("[1]") == {} and tool_input("{") == {} and tool_input("") == {}


def test_logprobs_are_ignored():
    cs = CompletionStream(prepare(body(), "messages"), seed=1)
    ids = ids_of("Hi there")
    ev = cs.start() + cs.push(ids, [(-0.1, [(i, -0.1)]) for i in ids]) + cs.finish()
    assert "logprobs" not in repr(ev)
    assert fold(ev)["content"] == [{"type": "text", "text": "Hi there"}]


# ---------------------------------------------------------------- lifecycle


def test_lifecycle_start_finish_idempotent():
    cs = CompletionStream(prepare(body(), "messages"), seed=1)
    first = cs.start()
    assert [p["type"] for p in first] == ["message_start"] and cs.start() == []
    mid = cs.push(ids_of("Hi"))
    last = cs.finish("length")
    assert cs.finished and [p["type"] for p in last] == ["content_block_stop", "message_delta", "message_stop"]
    assert last[1]["delta"]["stop_reason"] == "max_tokens"
    assert cs.finish("stop") == [] and cs.push(ids_of("more")) == [] and cs.push_text("x", 1) == []
    assert cs.sse([]) == b""
    assert fold(first + mid + last)["content"] == [{"type": "text", "text": "Hi"}]


def test_eos_ends_the_message():
    req = body(thinking=True)
    ids = ids_of("R.</think>Done.<｜end▁of▁sentence｜>junk after")
    cs = CompletionStream(prepare(req, "messages"), seed=1)
    ev = cs.start()
    for i in ids:
        ev += cs.push([i])
        if cs.finished:
            break
    assert cs.finished
    msg = fold(ev)
    assert msg["content"][1] == {"type": "text", "text": "Done."} and msg["stop_reason"] == "end_turn"
    assert "end" not in msg["content"][1]["text"]


# ---------------------------------------------------------------- deliberate request-side choices


def test_tool_choice_any_forces_a_call_and_parity_reads_it_as_auto():
    """Messages documents ``any`` as "must call a tool": by default it is Chat's ``required`` (the
    prompt opens the call block, as a named choice's does, and the constraint requires a call); with
    ``anthropic_tool_choice_any="auto"`` (the parity options) it is read as auto, as deepseek-recipe does."""
    auto = prepare(body(tools=TOOLS, tool_choice={"type": "auto"}), "messages")
    any_ = prepare(body(tools=TOOLS, tool_choice={"type": "any"}), "messages")
    forced = prepare(body(tools=TOOLS, tool_choice={"type": "tool", "name": "get_w"}), "messages")
    assert any_.conversation.tool_choice == ToolChoice("required", None) and any_.parsing.starts_in_tool_calls
    assert any_.output_constraint.kind == forced.output_constraint.kind == "tool_call_required"
    assert any_.token_ids != auto.token_ids
    parity = prepare(body(tools=TOOLS, tool_choice={"type": "any"}), "messages", options=PARITY_OPTIONS)
    assert parity.token_ids == auto.token_ids != forced.token_ids
    assert parity.conversation.tool_choice.mode == "auto" and not parity.parsing.starts_in_tool_calls
    oracle = pytest.importorskip("oracle")
    assert oracle.convert("messages", body(tools=TOOLS, tool_choice={"type": "any"}))["token_ids"] == parity.token_ids


def test_trailing_assistant_prefill_is_closed_not_continued():
    """Messages documents a trailing assistant turn as a prefill to continue; the parity target
    closes it with EOS and starts a fresh assistant turn (kept for prompt parity)."""
    req = body(messages=[*body()["messages"], {"role": "assistant", "content": "The answer is"}])
    prep = prepare(req, "messages")
    assert prep.prompt.text.endswith(f"The answer is{EOS}{ASSISTANT}</think>")
    assert prep.parsing.thinking_stage is None
    # the output is a new message: it does not repeat or extend the prefill
    r = response(prep, ids_of(" 42."))
    assert r["content"] == [{"type": "text", "text": " 42."}]
    oracle = pytest.importorskip("oracle")
    assert oracle.convert("messages", req)["token_ids"] == prep.token_ids


def test_text_inside_an_open_tool_call_follows_the_tool_block():
    """Degraded output (note ``text_in_tool_block``): the parser reports text while a call is open;
    Messages blocks cannot interleave, so the text is sent as the next block, byte for byte."""
    req = body(tools=TOOLS)
    text = ('Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜begin▁of▁sentence｜>'
            '<｜DSML｜parameter name="')
    ids = ids_of(text)
    for chunks in ([[i] for i in ids], [ids]):
        ev = stream_payloads(req, chunks, "stop", seed=1)
        msg = fold(ev)
        assert [b["type"] for b in msg["content"]] == ["text", "tool_use", "text"]
        assert msg["content"][1]["input"] == {}
        # the unfinished parameter tag at the end is the cut call's markup (issue 12, shape 5)
        assert msg["content"][2]["text"] == "<｜begin▁of▁sentence｜>"
        assert msg["recipe"] == {"notes": ["text_in_tool_block", "role_token", "partial_markup", "truncated_tool_call"]}
        assert our_response(req, ids, "stop", seed=1) == msg
