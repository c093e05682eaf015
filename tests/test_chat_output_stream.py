"""CompletionStream / ChatEncoder behaviour: chunking invariance, usage-key rules, ids, finish-reason
table, log probabilities, notes, lifecycle. Golden values come from deepseek-recipe (oracle) or the
wire-format reference, never from our own output."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chat_output_support import (
    accumulate_chunks,
    chat_rows,
    oracle_run,
    our_response,
    recording_kwargs,
    stream_payloads,
    structural,
)
from output_parity_support import ids_of, split_at
from recipe.api.chat_output import FINISH_REASONS, chat_finish_reason
from recipe.output.driver import ENCODERS, CompletionStream, StreamEncoder, response
from recipe.pipeline import prepare
from recipe.output.events import Finish

ROWS = chat_rows()
TOOLS = ROWS[2]["request"]["tools"]
USER = [{"role": "user", "content": "Weather in Paris?"}]


def body(**kw) -> dict:
    """A Chat request; thinking off unless ``reasoning_effort`` says otherwise."""
    return {"model": "deepseek-v4-pro", "messages": USER, "reasoning_effort": "none", **kw}


EXTRA = [
    (body(reasoning_effort="low", tools=TOOLS), "Hmm.</think>Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_w\">\n"
     "<｜DSML｜parameter name=\"city\" string=\"true\">Par", "length"),
    (body(reasoning_effort="none", tools=TOOLS), "A <｜DSML｜ inline mention, then 🤖 done.", "stop"),
    (body(reasoning_effort="none", stop=["END"]), "caf\u00e9 ENEND tail", "stop"),
    (body(reasoning_effort="low"), "think</think>ok<｜end▁of▁sentence｜>ignored", "stop"),
]
CASES = [(r["request"], r["completion_token_ids"], r["backend_finish"]) for r in ROWS] + [
    (b, ids_of(t), f) for b, t, f in EXTRA
]


# ---------------------------------------------------------------- chunking invariance


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(range(len(CASES))), cuts=st.lists(st.integers(0, 200), max_size=12))
def test_any_chunking_accumulates_to_the_response(case, cuts):
    req, ids, fin = CASES[case]
    kw = dict(seed=5, created=1, response_id="chatcmpl-x")
    want = our_response(req, ids, fin, **kw)
    chunks = split_at(ids, cuts)
    got = accumulate_chunks(stream_payloads(req, chunks, fin, **kw))
    if req.get("stop") and got["usage"] != want["usage"]:
        # a push containing the stop match counts all its ids (parity); response() stops at the match
        assert got["usage"]["completion_tokens"] > want["usage"]["completion_tokens"]
        got = dict(got, usage=want["usage"])
    assert got == want


def test_protocol_and_table():
    assert ENCODERS["chat"].id_prefix == "chatcmpl-"
    cs = CompletionStream(prepare(body()), created=1)
    assert isinstance(cs.encoder, StreamEncoder)


# ---------------------------------------------------------------- usage key rules (oracle)


@pytest.mark.parametrize(
    "extra",
    [{}, {"stream": False}, {"stream": True}, {"stream": True, "stream_options": {"include_usage": True}},
     {"stream": True, "stream_options": {"include_usage": False}}],
)
@pytest.mark.parametrize("effort", ["none", "low"])
def test_usage_key_rules_match_oracle(extra, effort):
    pytest.importorskip("deepseek_recipe")
    b = body(reasoning_effort=effort, **extra)
    ids = ids_of("R.</think>Hi there" if effort == "low" else "Hi there")
    o_chunks, _ = oracle_run(b, [[i] for i in ids])
    ours = stream_payloads(b, [[i] for i in ids], "stop", response_id="chatcmpl-test", model="m",
                           system_fingerprint="fp_test", prompt_tokens=20, cached_tokens=5)
    assert structural(ours) == structural(o_chunks)
    absent = extra.get("stream") and not extra.get("stream_options", {}).get("include_usage")
    assert all(("usage" in p) != bool(absent) for p in ours[:-1])
    assert ours[-1]["usage"]["total_tokens"] == 20 + len(ids)


def test_content_continuation_shape_matches_oracle():
    pytest.importorskip("deepseek_recipe")
    b = {"model": "deepseek-v4-pro", "reasoning_effort": "low",
         "messages": [*USER, {"role": "assistant", "content": "Hi", "prefix": True}]}
    ids = ids_of(" there, friend")
    o_chunks, o_acc = oracle_run(b, [ids])
    kw = dict(response_id="chatcmpl-test", model="m", system_fingerprint="fp_test", prompt_tokens=20, cached_tokens=5)
    assert structural(stream_payloads(b, [ids], "stop", **kw)) == structural(o_chunks)
    assert structural(our_response(b, ids, "stop", **kw)) == structural(o_acc)


# ---------------------------------------------------------------- ids, created, fingerprint


def test_ids_created_fingerprint():
    prep = prepare(body(reasoning_effort="low", tools=TOOLS))
    ids = ROWS[3]["completion_token_ids"]  # two_tools
    a = response(prep, ids, seed=42)
    b = response(prep, ids, seed=42)
    c = response(prep, ids, seed=43)
    assert re.fullmatch(r"chatcmpl-[A-Za-z0-9]{29}", a["id"])
    assert a["id"] == b["id"] != c["id"]
    calls = [t["id"] for t in a["choices"][0]["message"]["tool_calls"]]
    assert calls == [t["id"] for t in b["choices"][0]["message"]["tool_calls"]]
    assert [x[:8] for x in calls] == ["call_00_", "call_01_"]
    assert calls != [t["id"] for t in c["choices"][0]["message"]["tool_calls"]]
    assert a["system_fingerprint"] is None and a["model"] == "deepseek-v4-pro"
    assert abs(a["created"] - __import__("time").time()) < 60
    d = response(prep, ids, response_id="chatcmpl-mine", created=7, system_fingerprint="fp_1", model="served")
    assert (d["id"], d["created"], d["system_fingerprint"], d["model"]) == ("chatcmpl-mine", 7, "fp_1", "served")
    # unseeded: fresh ids every time
    assert response(prep, ids)["id"] != response(prep, ids)["id"]
    # every chunk of a stream carries the same id / created / model / fingerprint
    chunks = stream_payloads(body(reasoning_effort="low", tools=TOOLS), [[i] for i in ids], "stop", seed=1,
                             system_fingerprint="fp_2")
    assert len({(p["id"], p["created"], p["model"], p["system_fingerprint"]) for p in chunks}) == 1


def test_prompt_token_defaults_and_checks():
    prep = prepare(body())
    r = response(prep, ids_of("Hi"), cached_tokens=3)
    u = r["usage"]
    assert u["prompt_tokens"] == len(prep.token_ids)
    assert (u["prompt_cache_hit_tokens"], u["prompt_cache_miss_tokens"]) == (3, len(prep.token_ids) - 3)
    assert u["prompt_tokens_details"] == {"cached_tokens": 3}
    assert "completion_tokens_details" in response(prepare(body(reasoning_effort="low")), ids_of("Hi"))["usage"]
    with pytest.raises(ValueError):
        CompletionStream(prep, prompt_tokens=2, cached_tokens=3)
    with pytest.raises(ValueError):
        CompletionStream(prep, cached_tokens=-1)
    # response() takes the stream's options with their checks, and refuses a name the stream lacks
    with pytest.raises(ValueError):
        response(prep, ids_of("Hi"), prompt_tokens=2, cached_tokens=3)
    with pytest.raises(TypeError):
        response(prep, ids_of("Hi"), cached=3)


# ---------------------------------------------------------------- finish reasons


def test_finish_reason_table():
    # wire formats §2.2 / behaviour map §3.3
    assert chat_finish_reason("stop", 0, None) == "stop"
    assert chat_finish_reason("stop", 2, None) == "tool_calls"
    assert chat_finish_reason("stop", 1, "END") == "stop"
    assert chat_finish_reason("length", 1, None) == "length"
    assert chat_finish_reason("content_filter", 1, None) == "content_filter"
    assert chat_finish_reason("insufficient_system_resource", 0, None) == "insufficient_system_resource"
    assert set(FINISH_REASONS.values()) == {"stop", "tool_calls", "length", "content_filter"}


@pytest.mark.parametrize("fin", ["length", "content_filter"])
def test_length_and_filter_win_over_tool_calls_like_oracle(fin):
    pytest.importorskip("deepseek_recipe")
    row = ROWS[3]  # two_tools
    _, o_acc = oracle_run(row["request"], [row["completion_token_ids"]], fin)
    ours = our_response(row["request"], row["completion_token_ids"], fin, **recording_kwargs(row))
    assert ours["choices"][0]["finish_reason"] == o_acc["choices"][0]["finish_reason"] == fin
    assert structural(ours) == structural(o_acc)


# ---------------------------------------------------------------- lifecycle


def test_lifecycle_finish_idempotent_and_done_once():
    cs = CompletionStream(prepare(body()), created=1, seed=1)
    first = cs.start()
    assert first[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert cs.start() == []
    data = cs.sse(first + cs.push(ids_of("Hi")))
    assert data.count(b"data: ") == 2 and b"[DONE]" not in data
    last = cs.finish("stop")
    assert cs.finished and last[-1]["choices"][0]["finish_reason"] == "stop"
    framed = cs.sse(last)
    assert framed.endswith(b"data: [DONE]\n\n") and framed.count(b"[DONE]") == 1
    assert cs.finish("length") == [] and cs.push(ids_of("more")) == [] and cs.push_text("x", 1) == []
    assert cs.sse([]) == b""


def test_eos_and_stop_sequence_end_the_stream():
    cs = CompletionStream(prepare(body()), created=1)
    out = cs.push(ids_of("Hi<｜end▁of▁sentence｜>tail"))
    assert cs.finished and out[-1]["choices"][0]["finish_reason"] == "stop"
    assert accumulate_chunks(out)["choices"][0]["message"]["content"] == "Hi"
    cs = CompletionStream(prepare(body(stop=["END"])), created=1)
    out = []
    for i in ids_of("Hello END world"):
        out += cs.push([i])
        if cs.finished:
            break
    assert accumulate_chunks(out)["choices"][0]["message"]["content"] == "Hello "
    assert cs.finish() == []


def test_empty_output():
    r = response(prepare(body(reasoning_effort="low")), [], finish="length", created=1)
    msg = r["choices"][0]["message"]
    assert (msg["content"], msg["reasoning_content"], r["choices"][0]["finish_reason"]) == ("", "", "length")
    assert r["usage"]["completion_tokens"] == 0


def test_notes_on_final_chunk_and_response():
    b = body(reasoning_effort="low", tools=TOOLS)
    text = 'R</think><｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">Pa'
    chunks = stream_payloads(b, [ids_of(text)], "length", created=1)
    notes = chunks[-1]["recipe"]["notes"]
    assert "truncated_tool_call" in notes
    assert all("recipe" not in p for p in chunks[:-1])
    r = our_response(b, ids_of(text), "length", created=1)
    assert r["recipe"]["notes"] == notes
    assert r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"city": "Pa"}'
    assert "recipe" not in our_response(b, ids_of("R</think>fine"), "stop", created=1)


# ---------------------------------------------------------------- log probabilities


def _lps(ids: list[int], rng: random.Random | None = None) -> list[tuple[float, list[tuple[int, float]]]]:
    return [(-0.01 * (k + 1), [(i, -0.01 * (k + 1)), (100, -3.0)]) for k, i in enumerate(ids)]


def _flat(payloads: list[dict]) -> list[tuple[str, int]]:
    """(channel, entry position by logprob) of every log-probability entry in stream order."""
    out = []
    for p in payloads:
        lp = p["choices"][0]["logprobs"]
        for ch, entries in (lp or {}).items():
            out += [(ch, round(-e["logprob"] * 100) - 1) for e in entries]
    return out


LP_TEXT = "Hi \U0001F916 there.</think>\n\nAns \u00e9 wer"


def test_logprobs_stream_vs_oracle():
    """Entries, token spellings (``\\xNN`` for partial UTF-8) and bytes as the oracle; the one deviation:
    the entry of a token whose text was trimmed (the ``\\n\\n`` after ``</think>``) is carried to the next
    delta of its channel instead of being lost (the oracle keeps it only when pushed all at once)."""
    pytest.importorskip("deepseek_recipe")
    b = body(reasoning_effort="low", logprobs=True, top_logprobs=2)
    ids = ids_of(LP_TEXT)
    lps = _lps(ids)
    o_one, _ = oracle_run(b, [[i] for i in ids], logprobs=[[x] for x in lps])
    _, o_all_acc = oracle_run(b, [ids], logprobs=[lps])
    kw = dict(response_id="chatcmpl-test", model="m", system_fingerprint="fp_test", prompt_tokens=20, cached_tokens=5)
    cs = CompletionStream(prepare(b), **kw)
    ours = []
    for i, lp in zip(ids, lps):
        ours += cs.push([i], [lp])
    ours += cs.finish()
    flat_o, flat_s = _flat(o_one), _flat(ours)
    nl = ids.index(271)  # "\n\n" after </think>: trimmed text, its entry carried to "Ans"
    k = next(j for j, (ch, _) in enumerate(flat_o) if ch == "content")
    assert flat_s[k] == ("content", nl)
    assert flat_s[:k] + flat_s[k + 1:] == flat_o
    assert ours[-1]["choices"][0]["logprobs"] is None
    # an entry rides on the first delta its push produced: with the split 🤖 (utf8 deviation) the
    # " " chunk carries the first half's entry and the 🤖 chunk the second's (the oracle: both on " 🤖")
    lp_of = {p["choices"][0]["delta"].get("reasoning_content"): p["choices"][0]["logprobs"] for p in ours}
    assert [e["bytes"] for e in lp_of[" "]["reasoning_content"]] == [[32, 240, 159, 164]]
    assert [e["bytes"] for e in lp_of["\U0001F916"]["reasoning_content"]] == [[150]]
    # the whole response: equal to the oracle's all-at-once accumulation, in any chunking
    for chunks in ([ids], [[i] for i in ids], [ids[:3], ids[3:8], ids[8:]]):
        cs = CompletionStream(prepare(b), **kw)
        k, out = 0, []
        for c in chunks:
            out += cs.push(c, lps[k:k + len(c)])
            k += len(c)
        out += cs.finish()
        acc = accumulate_chunks(out)
        assert acc["choices"][0]["logprobs"] == o_all_acc["choices"][0]["logprobs"]
    assert response(prepare(b), ids, logprobs=lps, **kw)["choices"][0]["logprobs"] == o_all_acc["choices"][0]["logprobs"]


def test_logprobs_tool_markup_has_none_and_count_checked():
    b = body(reasoning_effort="none", tools=TOOLS, logprobs=True)
    text = 'Go.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_w">\n<｜DSML｜parameter name="city" string="true">v</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    ids = ids_of(text)
    r = response(prepare(b), ids, logprobs=_lps(ids), created=1)
    assert [e["token"] for e in r["choices"][0]["logprobs"]["content"]] == ["Go", ".\n\n"]
    with pytest.raises(ValueError):
        CompletionStream(prepare(b)).push(ids[:2], _lps(ids[:1]))


def test_logprobs_only_when_requested():
    """Deviation: deepseek-recipe attaches supplied log probabilities even when the request did not
    ask (``logprobs`` false/absent); we follow the request."""
    pytest.importorskip("deepseek_recipe")
    b = body(reasoning_effort="none")
    ids = ids_of("Hi there")
    _, o_acc = oracle_run(b, [ids], logprobs=[_lps(ids)])
    assert o_acc["choices"][0]["logprobs"] is not None
    r = response(prepare(b), ids, logprobs=_lps(ids), created=1)
    assert r["choices"][0]["logprobs"] is None
    r = response(prepare(body(reasoning_effort="none", logprobs=True)), ids, created=1)
    assert r["choices"][0]["logprobs"] is None  # requested, but the engine supplied none


def test_finish_event_shape_is_what_close_reads():
    enc = CompletionStream(prepare(body()), created=1).encoder
    out = enc.close(Finish("stop", 3, 0, None, 0, ("stray_dsml",)))
    assert out[0]["recipe"] == {"notes": ["stray_dsml"]} and out[0]["usage"]["completion_tokens"] == 3
