"""``/v1/completions/render`` and ``/v1/completions/derender`` (recipe/serve/render_completions.py)
through real uvicorn, against what vLLM 0.32 answered for the same requests.

The oracle is vLLM itself: fixtures/vllm_render/completions.json holds the bodies a running vLLM 0.32
(``--enable-scale-out --tokenizer-mode deepseek_v4``, DeepSeek-V4's tokenizer.json) answered
(tests/render_make_vectors.py --completions wrote it). recipe's answers must be the same lists with
the same fields in the same order and the same values, except the random request ids; the ids of a
text prompt are also checked against HF ``tokenizers`` on the vocabulary file (an independent
tokenizer), and a special token's spelling in a text stays text.
"""

from __future__ import annotations

import json

import pytest
from render_support import FIELDS, answered, fixture_cases, post, refused_param, render_only

from recipe.serve.tenants import Tenant, Tenants

CASES = fixture_cases("completions")
RENDERED = sorted(k for k, v in CASES.items() if v["route"] == "/v1/completions/render")


@pytest.fixture(scope="module")
def renderer():
    with render_only() as srv:
        yield srv


def test_the_fixture_ran_every_case_on_vllm_0_32():
    assert all(v["status"] == 200 for v in CASES.values()), {k: v["status"] for k, v in CASES.items()}
    assert RENDERED and "derender" in CASES


@pytest.mark.parametrize("case", RENDERED)
def test_render_is_vllms_list_field_for_field(renderer, case):
    want = CASES[case]
    got, theirs = answered(renderer.url, want)
    assert isinstance(got, list) and len(got) == len(theirs)
    for g, t in zip(got, theirs):
        assert list(g) == list(t) == FIELDS["generate_request"]
        assert g["request_id"].startswith("cmpl-")
        if "request_id" in want["request"]:  # else each side's is random
            assert g["request_id"] == t["request_id"]
        for key in g:
            if key != "request_id":
                assert g[key] == t[key], (key, g[key], t[key])
        assert json.dumps(g["sampling_params"]) == json.dumps(t["sampling_params"])  # order and float-ness too


def test_multi_prompt_ids_carry_the_index(renderer):
    r = post(renderer.url, "/v1/completions/render", {"model": "deepseek-v4-flash", "prompt": ["a", "b", "c"]},
             **{"X-Request-Id": "hdr"})
    assert [g["request_id"] for g in r.json()] == ["cmpl-hdr-0", "cmpl-hdr-1", "cmpl-hdr-2"]


def test_text_ids_are_the_vocabularys_and_special_spellings_stay_text(renderer):
    from tokenizers import Tokenizer

    from recipe.tokenizer import default_tokenizer_path

    hf = Tokenizer.from_file(str(default_tokenizer_path()))
    text = "The weather in Paris is 21 °C — 晴れ. <｜User｜> is only text here"
    r = post(renderer.url, "/v1/completions/render", {"model": "deepseek-v4-flash", "prompt": text})
    ids = r.json()[0]["token_ids"]
    assert 128803 not in ids  # <｜User｜>'s id: text never becomes a special token
    plain = text.replace("<｜User｜>", "")
    r2 = post(renderer.url, "/v1/completions/render", {"model": "deepseek-v4-flash", "prompt": plain})
    assert r2.json()[0]["token_ids"] == hf.encode(plain, add_special_tokens=True).ids


@pytest.mark.parametrize(("body", "param", "status"), [
    ({"prompt": "x"}, "model", 400),
    ({"model": "deepseek-v4-flash"}, "prompt", 400),
    ({"model": "nope", "prompt": "x"}, "model", 400),
    ({"model": "deepseek-v4-flash", "prompt": []}, "prompt", 400),
    ({"model": "deepseek-v4-flash", "prompt": [[1], [10**9]]}, "prompt[1]", 400),
    ({"model": "deepseek-v4-flash", "prompt": "x", "suffix": "y"}, "suffix", 400),
    ({"model": "deepseek-v4-flash", "prompt": "x", "echo": True}, "echo", 400),
    ({"model": "deepseek-v4-flash", "prompt": "x", "temperature": 3}, "temperature", 400),
    ({"model": "deepseek-v4-flash", "prompt": "x", "n": 2, "temperature": 0}, "n", 400),
    ({"model": "deepseek-v4-flash", "prompt": "x", "logit_bias": {"a": 1}}, "logit_bias.a", 400),
    ({"model": "deepseek-v4-flash", "prompt": [5] * 5000, "max_tokens": 4}, "prompt", 400),
])
def test_errors_are_openai_errors_naming_the_field(body, param, status):
    with render_only(max_model_len=4096) as srv:
        r = post(srv.url, "/v1/completions/render", body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["message"]


def test_max_tokens_is_lowered_to_the_room_in_the_window():
    with render_only(max_model_len=100) as srv:
        r = post(srv.url, "/v1/completions/render", {"model": "deepseek-v4-flash", "prompt": [5] * 90, "max_tokens": 50})
    assert r.json()[0]["sampling_params"]["max_tokens"] == 10


def test_derender_is_vllms_text_completion_field_for_field(renderer):
    got, theirs = answered(renderer.url, CASES["derender"])
    assert list(got) == list(theirs)
    assert list(got["choices"][0]) == list(theirs["choices"][0])
    for key in ("id", "object", "model", "usage", "kv_transfer_params"):
        assert got[key] == theirs[key], key
    assert got["choices"] == theirs["choices"]


def test_derender_cuts_at_a_stop_string_and_reports_logprobs(renderer):
    from recipe.tokenizer import load_tokenizer

    tok = load_tokenizer()
    ids = tok.encode_ordinary("Hello world. More")
    lp = {"content": [{"token_id": i, "logprob": -0.5, "top_logprobs": [{"token_id": i, "logprob": -0.5}]} for i in ids]}
    body = {"model": "deepseek-v4-flash", "completion_request": {"model": "deepseek-v4-flash", "prompt": "x", "stop": ["."]},
            "generate_responses": [{"request_id": "cmpl-z", "choices": [{"index": 0, "token_ids": ids,
                                                                         "finish_reason": "length", "logprobs": lp}]}]}
    out = post(renderer.url, "/v1/completions/derender", body).json()
    choice = out["choices"][0]
    assert choice["text"] == "Hello world" and choice["finish_reason"] == "stop" and choice["stop_reason"] == "."
    assert choice["logprobs"]["tokens"] == [tok.decode([i]) for i in ids]
    assert choice["logprobs"]["text_offset"][1] == len(tok.decode([ids[0]]))
    assert out["usage"]["completion_tokens"] == len(ids)


@pytest.mark.parametrize(("mutate", "param"), [
    (lambda b: b.update(generate_responses=[]), "generate_responses"),
    (lambda b: b.update(stream=True), "stream"),
    (lambda b: b["generate_responses"][0]["choices"][0].update(token_ids=[]),
     "generate_responses[0].choices[0].token_ids"),
    (lambda b: b.update(prompt_tokens=[1, 2]), "prompt_tokens"),
    (lambda b: b["completion_request"].update(temperature="hot"), "completion_request.temperature"),
])
def test_derender_refusals_name_the_field(renderer, mutate, param):
    assert refused_param(renderer.url, "/v1/completions/derender", CASES["derender"]["request"], mutate) == param


def test_tenants_authenticate_and_the_salt_is_the_cache_salt():
    tenants = Tenants({"key-a": Tenant("a", "salt-a")})
    with render_only(tenants) as srv:
        assert post(srv.url, "/v1/completions/render", {"model": "deepseek-v4-flash", "prompt": "x"}).status_code == 401
        r = post(srv.url, "/v1/completions/render", {"model": "deepseek-v4-flash", "prompt": "x"},
                 Authorization="Bearer key-a")
    assert r.json()[0]["cache_salt"] == "salt-a"
