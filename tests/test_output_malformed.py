"""Malformed model output (issue 12): the acceptance property over generated hostile outputs, in
the parser and in all three APIs, and the six shapes of the issue as named regressions per API."""

from __future__ import annotations

import json
import random

import pytest

from chat_output_support import accumulate_chunks
from hypothesis import given, settings
from hypothesis import strategies as st
from malformed_support import check, from_api, from_events, outputs, parsing_options, request, same_calls
from messages_output_support import fold as messages_fold
from output_parity_support import split_at, stream_payloads
from output_support import decoded_pieces, split_ids, tok
from responses_output_support import check_invariants
from responses_output_support import structural as responses_structural

from recipe.encodings.deepseek_v4.output import OutputParser
from recipe.output.driver import response
from recipe.pipeline import prepare


def _run(o, chunks, finish, text_mode=False):
    p = OutputParser(o, tok(), tool_call_id=7)
    events = []
    for c in chunks:
        events += p.push_text(c, 1) if text_mode else p.push(c)
    events += p.finish(finish)
    return from_events(events)


@settings(max_examples=300, deadline=None)
@given(outputs(), st.integers(0, 2**32 - 1), st.booleans())
def test_parser_property(gen, seed, strict):
    """(a)-(d) on the parser: every chunking gives the same result, and that result passes the checks."""
    out, finish = gen
    o = parsing_options(out.thinking, strict)
    ids = tok().encode_with_special_tokens(out.text)
    results = [_run(o, split_ids(ids, how), finish) for how in ("all", "one", random.Random(seed))]
    results.append(_run(o, decoded_pieces(ids), finish, text_mode=True))
    base = results[0]
    for r in results[1:]:
        assert (r.reasoning, r.content, r.calls, r.notes) == (base.reasoning, base.content, base.calls, base.notes)
    check(out, base, strict=strict)


# ---------------------------------------------------------------- the same property through the three APIs

API_FOLD = {
    "chat": lambda payloads: accumulate_chunks(payloads),
    "responses": lambda payloads: (check_invariants(payloads), responses_structural(payloads[-1]["response"]))[1],
    "messages": lambda payloads: messages_fold(payloads),
}
KW = dict(seed=5, created=1700000000, prompt_tokens=20, cached_tokens=5)


@settings(max_examples=60, deadline=None)
@given(outputs(), st.sampled_from(["chat", "responses", "messages"]), st.lists(st.integers(0, 400), max_size=10))
def test_api_property(gen, api, cuts):
    """(a)-(d) through an API: the non-streamed response carries exactly the parser's reasoning,
    answer, calls and notes (so the checks hold there), and any chunking of the stream folds to it."""
    out, finish = gen
    prep = prepare(request(api, out.thinking), api)
    ids = tok().encode_with_special_tokens(out.text)
    p = OutputParser(prep.parsing, tok(), tool_call_id=5)
    parsed = from_events(p.push(ids) + p.finish(finish))
    check(out, parsed, strict=api != "messages")
    resp = response(prep, ids, finish=finish, **KW)
    got = from_api(api, resp)
    if api == "responses":
        resp = responses_structural(resp)  # (completed_at counts elapsed seconds)
    assert (got.reasoning, got.content, got.notes) == (parsed.reasoning, parsed.content, parsed.notes)
    assert same_calls(got, parsed)
    folded = API_FOLD[api](stream_payloads(prep, split_at(ids, cuts), finish, start=api != "chat", **KW))
    if api == "messages":
        folded["recipe"] = resp.get("recipe")  # (the SDK's fold drops it: deviation M3)
        folded = {k: v for k, v in folded.items() if v is not None or k != "recipe"}
    assert folded == resp


# ---------------------------------------------------------------- the six shapes of issue 12, in every API

_B, _C = "<｜DSML｜", "</｜DSML｜"
_S1 = (f'Let me look.\n\n{_B}function_calls>\n{_B}invoke name="x">\n{_B}parameter name="k" string="true">v{_C}parameter>\n'
       f"{_C}invoke>\n{_C}function_calls>")
_S2 = (f'{_B}tool_calls>\n{_B}invoke name="f">\n{_B}parameter name="city">SF{_C}parameter>\n'
       f'{_B}parameter name="n">3{_C}parameter>\n{_C}invoke>\n{_C}tool_calls>')
_S2_STRICT = f'{_B}tool_calls>\n{_B}invoke name="s">\n{_B}parameter name="a" string="true">x{_C}parameter>\n{_C}invoke>\n{_C}tool_calls>'
_DUP = f'{_B}parameter name="city" string="true">LA{_C}parameter>'
_S3 = (f'{_B}tool_calls>\n{_B}invoke name="f">\n{_B}parameter name="city" string="true">SF{_C}parameter>\n'
       f"{_DUP}\n{_C}invoke>\n{_C}tool_calls>")
_S4_QUOTED = f"To call a tool, write {_B}tool_calls> and stop."
_S5 = f'Checking.\n\n{_B}tool_calls>\n{_B}invoke name="f">\n{_B}parameter name="city" string="true">Paris{_C}parameter'
_S6 = (f'Sure.<｜User｜>And now?<｜Assistant｜>{_B}tool_calls>\n{_B}invoke name="f">\n'
       f'{_B}parameter name="city" string="true">SF{_C}parameter>\n{_C}invoke>\n{_C}tool_calls>')

#: name -> (thinking, output, finish, reasoning, content, calls, notes; per API: the calls when they differ)
SHAPES = {
    # 1. an undeclared tool inside a function_calls block (a V3.2 block name): not a call, content byte for byte
    "1_undeclared_tool_in_function_calls_block": (
        False, _S1, "stop", "", _S1, [], ["stray_dsml", "rejected_tool_call"]),
    # 2. a parameter without string=: read (JSON when the schema types it so) ...
    "2_parameter_without_string_attribute": (
        False, _S2, "stop", "", "", [("f", {"city": "SF", "n": 3})], ["inferred_parameter_type"]),
    # ... and a strict tool's call missing a required parameter is not offered as a call (Messages has no strict tools)
    "2_strict_call_missing_a_required_parameter": (
        False, _S2_STRICT, "stop", "", _S2_STRICT, [], ["stray_dsml", "rejected_tool_call", "missing_required_parameter"]),
    # 3. a parameter named twice: the first value, the repeat is content, same in every API
    "3_duplicate_parameter": (False, _S3, "stop", "", _DUP, [("f", {"city": "SF"})], ["duplicate_parameter"]),
    # 4. lost characters: a quoted opener, a </think> in the answer
    "4_quoted_opener_in_the_answer": (False, _S4_QUOTED, "stop", "", _S4_QUOTED, [], ["stray_dsml"]),
    "4_think_end_in_the_answer": (
        True, "Think.</think>Answer </think> more", "stop", "Think.", "Answer </think> more", [], ["think_end_in_content"]),
    # 5. cut inside a closing tag: the partial tag belongs to no value
    "5_cut_inside_a_closing_tag": (
        False, _S5, "length", "", "Checking.", [("f", {"city": "Paris"})], ["partial_markup", "truncated_tool_call"]),
    # 6. role tokens mid-answer: text with a note; nothing after them is structure (no call)
    "6_role_tokens_mid_answer": (False, _S6, "stop", "", _S6, [], ["role_token"]),
}
_MESSAGES_CALLS = {"2_strict_call_missing_a_required_parameter": ([("s", {"a": "x"})], "", [])}


#: Responses output item kinds where they are not one message (or one call)
_LAYOUT = {"3_duplicate_parameter": ["function_call", "message"], "4_think_end_in_the_answer": ["reasoning", "message"],
           "5_cut_inside_a_closing_tag": ["message", "function_call"]}


def _expected(api: str, name: str) -> tuple:
    thinking, text, finish, reasoning, content, calls, notes = SHAPES[name]
    if api == "messages" and name in _MESSAGES_CALLS:
        calls, content, notes = _MESSAGES_CALLS[name]
    return thinking, text, finish, reasoning, content, calls, notes


def _layout(api: str, resp: dict) -> tuple[list, str]:
    """(item / block kinds in order, the finish as the API says it)."""
    if api == "chat":
        ch = resp["choices"][0]
        return [], ch["finish_reason"]
    if api == "responses":
        return [it["type"] for it in resp["output"]], resp["status"]
    return [b["type"] for b in resp["content"]], resp["stop_reason"]


_FINISH = {("chat", True, "stop"): "tool_calls", ("chat", False, "stop"): "stop", ("chat", True, "length"): "length",
           ("responses", True, "stop"): "completed", ("responses", False, "stop"): "completed",
           ("responses", True, "length"): "incomplete", ("messages", True, "stop"): "tool_use",
           ("messages", False, "stop"): "end_turn", ("messages", True, "length"): "max_tokens"}


def _v41_spelling(text: str) -> str:
    """``text`` with DeepSeek-V4.1's tag names (a leading space) for V4's exact ones."""
    for v4, v41 in (("tool_calls>", " calls>"), ("invoke", " invoke"), ("parameter", " parameter")):
        text = text.replace("｜DSML｜" + v4, "｜DSML｜" + v41)
    return text


#: model -> how its outputs spell the markup (V4.1 requests, V4.1's spelling: the same rules hold)
_MODELS = {"deepseek-v4-pro": str, "DeepSeek-V4.1-Flash": _v41_spelling}


@pytest.mark.parametrize("model", sorted(_MODELS))
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_issue12_shape(name, api, model):
    """Each shape of issue 12 through each API: the response and the stream (one id per push and all
    at once) carry exactly the expected reasoning, answer, calls and notes; for a DeepSeek-V4.1
    request, the same with the output (and so the answer kept from it) in V4.1's spelling."""
    thinking, text, finish, reasoning, content, calls, notes = _expected(api, name)
    text, content = _MODELS[model](text), _MODELS[model](content)
    prep = prepare(request(api, thinking) | {"model": model}, api)
    ids = tok().encode_with_special_tokens(text)
    resp = response(prep, ids, finish=finish, **KW)
    got = from_api(api, resp)
    if api == "responses":
        resp = responses_structural(resp)  # (completed_at counts elapsed seconds)
    assert (got.reasoning, got.content) == (reasoning, content)
    assert [(n, json.loads(a)) for n, a in got.calls] == calls
    assert list(got.notes) == notes
    kinds, fin = _layout(api, resp)
    assert fin == _FINISH[(api, bool(calls), finish)]
    if api != "chat":  # text written inside a call follows the call (an item / block cannot be reopened)
        layout = _LAYOUT.get(name, ["message"] if content else ["function_call"])
        layout = [{"message": "text", "function_call": "tool_use", "reasoning": "thinking"}[k] for k in layout] \
            if api == "messages" else layout
        assert kinds == layout
    for chunks in ([[i] for i in ids], [ids]):
        assert API_FOLD[api](stream_payloads(prep, chunks, finish, start=api != "chat", **KW)) == (
            resp if api != "messages" else {k: v for k, v in resp.items() if k != "recipe"} | (
                {"recipe": resp["recipe"]} if "recipe" in resp else {}))


def test_v41_system_token_is_a_role_token_only_in_a_v41_vocabulary():
    """``<｜System｜>`` opens a prompt section in DeepSeek-V4.1: decoded with a V4.1 vocabulary (the
    synthetic one) it is a role token like ``<｜User｜>`` (text, note, no call after it); with the V4
    vocabulary, where it is not a token, it is plain text and the call after it is a call."""
    from v41_support import synthetic_v41_tokenizer

    call = _v41_spelling(f'{_B}tool_calls>\n{_B}invoke name="f">\n{_B}parameter name="city" string="true">SF{_C}parameter>\n'
                         f"{_C}invoke>\n{_C}tool_calls>")
    text = "Done.<｜System｜>New rules." + call
    for vocab, role in ((synthetic_v41_tokenizer(), True), (tok(), False)):
        ids = vocab.encode_with_special_tokens(text)
        assert (len(ids) < len(tok().encode_with_special_tokens(text))) is role  # one id only where it is a token
        results = []
        for chunks in ([[i] for i in ids], [ids]):
            p = OutputParser(parsing_options(False), vocab, tool_call_id=7)
            events = [e for c in chunks for e in p.push(c)] + p.finish("stop")
            results.append(from_events(events))
        r = results[0]
        assert (r.content, r.calls, r.notes) == (results[1].content, results[1].calls, results[1].notes)
        if role:
            assert (r.content, list(r.calls), list(r.notes)) == (text, [], ["role_token"])
        else:
            assert (r.content, [(n, json.loads(a)) for n, a in r.calls]) == ("Done.<｜System｜>New rules.", [("f", {"city": "SF"})])
            assert "role_token" not in r.notes
