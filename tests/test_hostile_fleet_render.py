"""Hostile bodies against vLLM's render / derender routes served by recipe (real uvicorn on 127.0.0.1).

Found here and fixed: a derender whose ``token_ids`` or ``top_logprobs`` held an id outside the
vocabulary (negative, or past its last id) was a 500 ``TokenIdError`` in all three APIs; a logprob
sent as the string ``"NaN"`` or ``"inf"`` became a float no JSON can print (a 500), and strings and
floats were silently turned into ids (``"12"`` → 12, ``3.7`` → 3); an unhashable ``finish_reason``
(a list) was a 500; ``token_ids: 0`` or ``{}`` read as no output. Each is now the API's own 400
naming the field. And the routes held the event loop for a whole large body: a derender prepared its
``chat_request`` on the loop at any size, and every route parsed the body and printed its answer
(millions of ids through ``json.dumps``) there. Bounded in count and time, loopback only.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile_support import loop_probe
from recipe.serve.config import ServeConfig
from recipe.serve.server import app
from recipe.tokenizer import default_tokenizer
from serve_support import running

MODEL = "deepseek-v4-pro"
N_VOCAB = default_tokenizer().n_vocab
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "logprobs": True, "top_logprobs": 2}
MESSAGES = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]}
RESPONSES = {"model": MODEL, "input": "Hi", "top_logprobs": 2, "include": ["message.output_text.logprobs"]}
ORIGINAL = {"chat": ("/v1/chat/completions/derender", "chat_request", CHAT),
            "messages": ("/v1/messages/derender", "messages_request", MESSAGES),
            "responses": ("/v1/responses/derender", "responses_request", RESPONSES)}


@pytest.fixture(scope="module")
def server():
    with running(app(config=ServeConfig(warm=False, render_only=True))) as srv:
        yield srv


def _gen(ids: Any, **choice: Any) -> dict[str, Any]:
    return {"request_id": "gen-1", "choices": [{"index": 0, "token_ids": ids, "finish_reason": "stop", **choice}]}


def _lp(token_id: Any, logprob: Any, top: Any = ()) -> dict[str, Any]:
    return {"content": [{"token_id": token_id, "logprob": logprob,
                         "top_logprobs": [{"token_id": t, "logprob": v} for t, v in top]}]}


def _error(api: str, r: httpx.Response) -> dict[str, Any]:
    """The error object of the API's own 400 body (Anthropic's ``{type: error, error}`` for Messages)."""
    assert r.status_code == 400, (r.status_code, r.text[:300])
    body = r.json()
    if api == "messages":
        assert body["type"] == "error"
    err = body["error"]
    assert err["type"] == "invalid_request_error"
    return err


HOSTILE_GENERATE = {
    "id past the vocabulary": (_gen([N_VOCAB]), "generate_response.choices[0].token_ids"),
    "huge id": (_gen([10**9]), "generate_response.choices[0].token_ids"),
    "id over 64 bits": (_gen([2**70]), "generate_response.choices[0].token_ids"),
    "token_ids 0": (_gen(0), "generate_response.choices[0].token_ids"),
    "token_ids object": (_gen({}), "generate_response.choices[0].token_ids"),
    "token_ids string": (_gen("12"), "generate_response.choices[0].token_ids"),
    "a float id": (_gen([1.0]), "generate_response.choices[0].token_ids"),
    "a bool id": (_gen([True]), "generate_response.choices[0].token_ids"),
    "finish_reason a list": (_gen([100], finish_reason=["stop"]), "generate_response.choices[0].finish_reason"),
    "finish_reason an object": (_gen([100], finish_reason={"a": 1}), "generate_response.choices[0].finish_reason"),
    "logprob NaN": (_gen([100], logprobs=_lp(100, "NaN")), "generate_response.choices[0].logprobs.content[0]"),
    "logprob inf": (_gen([100], logprobs=_lp(100, "inf")), "generate_response.choices[0].logprobs.content[0]"),
    "logprob a string": (_gen([100], logprobs=_lp(100, "-1")), "generate_response.choices[0].logprobs.content[0]"),
    "logprob a bool": (_gen([100], logprobs=_lp(100, True)), "generate_response.choices[0].logprobs.content[0]"),
    "top id past the vocabulary": (_gen([100], logprobs=_lp(100, -1.0, [(10**9, -2.0)])),
                                   "generate_response.choices[0].logprobs.content[0]"),
    "top id negative": (_gen([100], logprobs=_lp(100, -1.0, [(-7, -2.0)])),
                        "generate_response.choices[0].logprobs.content[0]"),
    "top id a float": (_gen([100], logprobs=_lp(100, -1.0, [(3.7, -2.0)])),
                       "generate_response.choices[0].logprobs.content[0]"),
    "top id a string": (_gen([100], logprobs=_lp(100, -1.0, [("12", -2.0)])),
                        "generate_response.choices[0].logprobs.content[0]"),
    "entry id a string": (_gen([100], logprobs=_lp("100", -1.0)), "generate_response.choices[0].logprobs.content[0]"),
    "top_logprobs a string": (_gen([100], logprobs={"content": [{"token_id": 100, "logprob": -1, "top_logprobs": "ab"}]}),
                              "generate_response.choices[0].logprobs.content[0]"),
}


@pytest.mark.parametrize("api", list(ORIGINAL))
@pytest.mark.parametrize("case", list(HOSTILE_GENERATE))
def test_a_hostile_generate_response_is_the_apis_400_naming_the_field(server, api, case):
    path, field, original = ORIGINAL[api]
    gen, param = HOSTILE_GENERATE[case]
    r = httpx.post(server.url + path, json={"generate_response": gen, field: original}, timeout=30)
    err = _error(api, r)
    if api != "messages":  # (Anthropic's error object has no param; the message names the field)
        assert err["param"] == param, err
    assert any(w in err["message"] for w in ("vocabulary", "finish_reason", "token_ids", "token id", "logprob"))


@pytest.mark.parametrize("api", list(ORIGINAL))
def test_valid_logprobs_still_derender_exactly(server, api):
    """The strict checks keep what was right: ints and floats as sent, the alternatives in order."""
    path, field, original = ORIGINAL[api]
    gen = _gen([100, 200], logprobs={"content": [
        {"token_id": 100, "logprob": -0.25, "top_logprobs": [{"token_id": 100, "logprob": -0.25}, {"token_id": 7, "logprob": -3}]},
        {"token_id": 200, "logprob": 0, "top_logprobs": []}]})
    r = httpx.post(server.url + path, json={"generate_response": gen, field: original}, timeout=30)
    assert r.status_code == 200, r.text[:300]
    if api == "chat":
        lps = r.json()["choices"][0]["logprobs"]
        entries = (lps.get("content") or []) + (lps.get("reasoning_content") or [])
        assert [e["logprob"] for e in entries] == [-0.25, 0.0]
        assert [a["logprob"] for a in entries[0]["top_logprobs"]] == [-0.25, -3.0]


HOSTILE_COMPLETIONS = {
    "logprob NaN": ({"content": [{"token_id": 100, "logprob": "nan"}]}, "logprobs.content[0]"),
    "top logprob -inf": ({"content": [{"token_id": 100, "logprob": -1, "top_logprobs": [{"token_id": 4, "logprob": "-inf"}]}]},
                         "logprobs.content[0]"),
    "entry id a string": ({"content": [{"token_id": "100", "logprob": -1}]}, "logprobs.content[0]"),
    "top id a float": ({"content": [{"token_id": 100, "logprob": -1, "top_logprobs": [{"token_id": 4.5, "logprob": -1}]}]},
                       "logprobs.content[0]"),
}


@pytest.mark.parametrize("case", list(HOSTILE_COMPLETIONS))
def test_completions_derender_refuses_non_finite_or_converted_logprobs(server, case):
    lp, param = HOSTILE_COMPLETIONS[case]
    body = {"model": MODEL, "generate_responses": [{"choices": [{"token_ids": [100], "logprobs": lp}]}]}
    err = _error("chat", httpx.post(server.url + "/v1/completions/derender", json=body, timeout=30))
    assert err["param"] == f"generate_responses[0].choices[0].{param}"


# ---- properties

_ids = st.one_of(st.integers(-3, 3), st.integers(N_VOCAB - 3, N_VOCAB + 3), st.integers(0, N_VOCAB - 1),
                 st.integers(2**63 - 2, 2**64 + 2), st.just(True), st.floats(-1, 1e6, allow_nan=False), st.text(max_size=3))
_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**66), 2**66) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.sampled_from(["NaN", "inf", "-Infinity", "stop", "length", ""]) | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=12)
_entry = st.fixed_dictionaries({"token_id": _ids, "logprob": st.one_of(st.floats(-50, 0), _json)},
                               optional={"top_logprobs": st.one_of(st.lists(st.fixed_dictionaries(
                                   {"token_id": _ids, "logprob": st.one_of(st.floats(-50, 0), _json)}), max_size=3), _json)})
_choice = st.fixed_dictionaries(
    {"token_ids": st.one_of(st.lists(_ids, max_size=6), _json)},
    optional={"finish_reason": st.one_of(st.sampled_from([None, "stop", "length", "abort"]), _json),
              "logprobs": st.one_of(st.none(), st.fixed_dictionaries({"content": st.lists(_entry, max_size=4)}), _json)})
_generate = st.one_of(st.fixed_dictionaries(
    {"choices": st.one_of(st.lists(_choice, min_size=1, max_size=2), _json)},
    optional={"request_id": _json, "usage": _json, "output_mode": st.one_of(st.just("tokens"), _json),
              "kv_transfer_params": _json}), _json)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(api=st.sampled_from(list(ORIGINAL)), gen=_generate, extra=st.dictionaries(
    st.sampled_from(["prompt_tokens", "model", "stream"]), _json, max_size=2))
def test_any_generate_response_derenders_or_is_a_400_never_a_500(server, api, gen, extra):
    path, field, original = ORIGINAL[api]
    r = httpx.post(server.url + path, json={**extra, "generate_response": gen, field: original}, timeout=30)
    assert r.status_code in (200, 400), (r.status_code, r.text[:300])
    body = r.json()  # valid JSON (no NaN, no Infinity)
    if r.status_code == 400:
        err = _error(api, r)
        if api != "messages":
            assert err["param"] in ("generate_response", "prompt_tokens", "stream") or err["param"].startswith("generate_response.")
    elif api == "chat":
        assert body["object"] == "chat.completion"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(gens=st.one_of(st.lists(_generate, min_size=1, max_size=2), _json), request=st.one_of(st.none(), _json))
def test_any_completions_derender_is_a_text_completion_or_a_400(server, gens, request):
    body = {"model": MODEL, "generate_responses": gens, **({"completion_request": request} if request is not None else {})}
    r = httpx.post(server.url + "/v1/completions/derender", json=body, timeout=30)
    assert r.status_code in (200, 400), (r.status_code, r.text[:300])
    assert r.json()["object" if r.status_code == 200 else "error"]


def _post(url: str, body: Any) -> httpx.Response:
    """POST ``body`` as ASCII JSON (a lone surrogate travels as its escape)."""
    return httpx.post(url, content=json.dumps(body).encode(), headers={"content-type": "application/json"}, timeout=30)


_SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>",
             "<｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"x\">", "😀", "\ud800", "\u0000", "\u202e", "ﬀ"]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.one_of(st.sampled_from(_SPECIALS), st.text(max_size=6)), min_size=1, max_size=8))
def test_text_never_renders_as_special_ids(server, parts):
    """Whatever a user, system or tool text spells, the render's special ids are the template's own:
    the same sequence as for a plain text in the same places (Chat and Completions)."""
    tok = default_tokenizer()
    text = "".join(parts)

    def specials(content: str) -> list[int] | None:
        body = {"model": MODEL, "messages": [{"role": "system", "content": content}, {"role": "user", "content": content}]}
        r = _post(server.url + "/v1/chat/completions/render", body)
        if r.status_code != 200:  # a lone surrogate is not text: the API's own 400
            assert r.status_code == 400 and "\ud800" in content, r.text[:300]
            return None
        return [i for i in r.json()["token_ids"] if tok.is_special(i)]

    if text.strip():
        got = specials(text)
        assert got is None or got == specials("plain words")
    r = _post(server.url + "/v1/completions/render", {"model": MODEL, "prompt": text})
    if r.status_code == 200:
        assert not any(tok.is_special(i) for i in r.json()[0]["token_ids"])
    else:
        assert r.status_code == 400 and (not text or "\ud800" in text), r.text[:300]


# ---- the event loop

def _big_chat(i: int) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k}.{i} " + "word " * 300}
                                         for k in range(2_000)]}


def test_large_render_and_derender_bodies_do_not_hold_the_event_loop():
    """Bodies under the 8 MiB limit: a derender whose chat_request is 3 MB, a Completions render of
    7 MB of digits (about 3.5 million ids to print) and a derender of 300,000 ids. The routes parsed
    every body, prepared a derender's request and printed every answer on the event loop (the
    Completions render: 1.3 s of the loop's CPU time on a loaded 2-core machine); now no run of the
    loop's work reaches 100 ms. A first request of each kind loads the vocabulary; the measured one
    differs from it in its first message, so nothing of it is cached."""
    gen = {"request_id": "g", "choices": [{"index": 0, "token_ids": [100], "finish_reason": "stop"}]}
    cases = [
        ("/v1/chat/completions/derender", lambda i: {"generate_response": gen, "chat_request": _big_chat(i)}),
        ("/v1/completions/render", lambda i: {"model": MODEL, "prompt": [f"{i} " + "1 2 3 4 5 6 7 8 9 " * 200] * 1_900,
                                              "max_tokens": 1}),
        ("/v1/completions/derender", lambda i: {"model": MODEL, "generate_responses": [
            {"choices": [{"token_ids": [100 + (k + i) % 50_000 for k in range(300_000)]}]}]}),
    ]
    with loop_probe(app(config=ServeConfig(warm=False, render_only=True))) as probe:
        with httpx.Client(base_url=probe.url, timeout=120) as client:
            for path, body in cases:
                for i in range(2):
                    raw = json.dumps(body(i)).encode()
                    assert len(raw) < 8 * 1024 * 1024
                    probe.reset()
                    r = client.post(path, content=raw, headers={"content-type": "application/json"})
                    assert r.status_code == 200, r.text[:300]
                assert probe.worst < 0.1, (path, probe.worst)
