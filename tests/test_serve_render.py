"""vLLM's render / derender protocol served by recipe (recipe/serve/render.py), through real uvicorn.

The oracle is vLLM 0.32 itself: fixtures/vllm_render/fields.json holds the field sets read from its
wire models and bodies.json what a running vLLM 0.32 (``--enable-scale-out --tokenizer-mode
deepseek_v4``) answered for the same requests (tests/render_make_vectors.py wrote both). recipe's
bodies must have the same fields in the same order, and ids equal to ``recipe.prepare``'s, which
for the plain requests are also vLLM's own.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from render_support import FIELDS, answered, fixture_cases, post, refused_param, render_only

import recipe
from recipe.serve.config import ServeConfig
from recipe.serve.server import app
from recipe.serve.tenants import Tenant, Tenants
from serve_support import dsml_call, running

BODIES = fixture_cases("bodies")
API = {"/v1/chat/completions/render": "chat", "/v1/messages/render": "messages", "/v1/responses/render": "responses"}
RENDERED = sorted(k for k, v in BODIES.items() if v["route"] in API)
#: Requests where vLLM's DeepSeek-V4 encoder and deepseek-recipe render differently, so recipe's ids
#: (deepseek-recipe's) are not vLLM's: a response_format schema (deepseek-recipe writes it into the
#: system prompt) and tool_choice "none" (deepseek-recipe leaves the tools out of the prompt).
NOT_VLLM_IDS = {"chat_json_schema", "chat_system_tools"}
QUIET = ServeConfig(warm=False, gc_freeze=False)


@pytest.fixture(scope="module")
def renderer():
    with render_only() as srv:
        yield srv


def test_the_fixture_names_its_source_and_the_cases_ran():
    assert FIELDS["vllm_version"].startswith("0.32")
    assert "GenerateRequest" in FIELDS["source"]
    assert all(BODIES[k]["status"] == 200 for k in BODIES), {k: BODIES[k]["status"] for k in BODIES}
    assert set(API.values()) == {API[BODIES[k]["route"]] for k in RENDERED}


@pytest.mark.parametrize("case", RENDERED)
def test_render_answers_vllm_fields_in_vllm_order_with_recipe_ids(renderer, case):
    want = BODIES[case]
    got, theirs = answered(renderer.url, want)
    assert list(got) == FIELDS["generate_request"] == list(theirs)
    sp, vsp = got["sampling_params"], theirs["sampling_params"]
    assert list(sp) == list(vsp)
    assert set(sp) <= set(FIELDS["sampling_params_defaults"])
    order = list(FIELDS["sampling_params_defaults"])
    assert [order.index(k) for k in sp] == sorted(order.index(k) for k in sp)
    if "structured_outputs" in vsp:
        assert list(sp["structured_outputs"]) == list(vsp["structured_outputs"])
    for field in ("model", "stream", "stream_options", "output_mode", "cache_salt", "priority", "features",
                  "content_parts", "token_offsets", "kv_transfer_params", "ec_transfer_params"):
        assert got[field] == theirs[field], field
    for field in ("output_kind", "skip_clone", "stop", "bad_words", "skip_reading_prefix_cache", "seed", "logprobs"):
        assert sp.get(field) == vsp.get(field), field
    api = API[want["route"]]
    prep = recipe.prepare(want["request"], api)
    # sampling after recipe's thinking rules (thinking forces temperature 1.0 and DeepSeek's top_p)
    assert (sp["temperature"], sp["top_p"]) == (prep.engine.temperature, prep.engine.top_p)
    assert got["token_ids"] == prep.token_ids
    if case not in NOT_VLLM_IDS:
        assert got["token_ids"] == theirs["token_ids"]
    assert sp["max_tokens"] == prep.engine.max_tokens
    assert sp["stop_token_ids"] == list(dict.fromkeys(prep.engine.stop_token_ids))[:len(sp["stop_token_ids"])]
    prefix = "resp_" if api == "responses" else "chatcmpl-"
    assert got["request_id"].startswith(prefix) and theirs["request_id"].startswith(prefix)


def test_request_ids_follow_vllm(renderer):
    chat = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]}
    assert post(renderer.url, "/v1/chat/completions/render", chat, **{"X-Request-Id": "abc"}).json()["request_id"] \
        == "chatcmpl-abc"
    assert post(renderer.url, "/v1/chat/completions/render", {**chat, "request_id": "r1"}).json()["request_id"] \
        == "chatcmpl-r1"
    resp = {"model": "deepseek-v4-flash", "input": "Hi", "request_id": "resp_mine"}
    assert post(renderer.url, "/v1/responses/render", resp).json()["request_id"] == "resp_mine"


@pytest.mark.parametrize("value", [42, 1.5, True, ["r1"], {"id": "r1"}])
@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions/render", {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]}),
    ("/v1/responses/render", {"model": "deepseek-v4-flash", "input": "Hi"}),
])
def test_a_request_id_that_is_not_a_string_is_refused_not_replaced(renderer, path, body, value):
    assert refused_param(renderer.url, path, body, lambda b: b.update(request_id=value)) == "request_id"


def test_a_tool_request_carries_the_turn_grammar_from_the_first_token(renderer):
    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
            "tool_choice": "required"}
    got = post(renderer.url, "/v1/chat/completions/render", body).json()
    so = got["sampling_params"]["structured_outputs"]
    assert list(so) == list(BODIES["chat_json_schema"]["response"]["sampling_params"]["structured_outputs"])
    assert json.loads(so["structural_tag"])  # the structural tag recipe's vLLM connector sends
    assert got["reasoning_ended"] is True
    assert got["token_ids"] == recipe.prepare(body, "chat").token_ids


def test_render_errors_are_each_apis_own_shape_and_name_the_field(renderer):
    r = post(renderer.url, "/v1/chat/completions/render", {"model": "deepseek-v4-flash", "messages": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"].startswith("messages")
    r = post(renderer.url, "/v1/messages/render", {"model": "deepseek-v4-flash", "messages": []})
    assert r.status_code == 400 and r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(renderer.url + "/v1/responses/render", content=b"{not json", timeout=10)
    assert r.status_code == 400 and "invalid JSON" in r.json()["error"]["message"]
    r = post(renderer.url, "/v1/chat/completions/render", {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code in (400, 404) and r.json()["error"]["param"] == "model"
    r = post(renderer.url, "/v1/chat/completions/render",
             {"model": "deepseek-v4-flash", "priority": "high", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "priority"


def test_render_only_serves_no_generation(renderer):
    r = post(renderer.url, "/v1/chat/completions", {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    health = httpx.get(renderer.url + "/health", timeout=10)
    assert health.status_code == 200 and health.json()["replicas"] == []
    count = post(renderer.url, "/v1/messages/count_tokens",
                 {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]})
    assert count.status_code == 200


def _output(prep: Any, text: str) -> list[int]:
    """The ids a model would write for ``text`` as its answer (closing the reasoning first when the
    request thinks), ending with EOS."""
    from recipe.tokenizer import default_tokenizer

    text = ("</think>" if prep.conversation.thinking else "") + text
    return [*default_tokenizer().encode_with_special_tokens(text), *prep.engine.stop_token_ids[:1]]


def test_chat_derender_is_recipes_answer_with_vllms_fields(renderer):
    case = BODIES["chat_derender"]
    chat = case["request"]["chat_request"]
    prep = recipe.prepare(chat, "chat")
    ids = _output(prep, "Hello")
    body = {**case["request"], "generate_response": {"request_id": "chatcmpl-42", "choices": [
        {"index": 0, "finish_reason": "stop", "token_ids": ids}], "kv_transfer_params": {"k": 1}}}
    r = post(renderer.url, "/v1/chat/completions/derender", body)
    assert r.status_code == 200, r.text
    got = r.json()
    assert set(FIELDS["chat_completion_response"]) <= set(got)
    assert set(case["response"]["choices"][0]) <= set(got["choices"][0])
    want = recipe.response(prep, ids, response_id="chatcmpl-42", prompt_tokens=body["prompt_tokens"],
                           model="deepseek-v4-flash", created=got["created"])
    assert got["choices"][0]["message"] == want["choices"][0]["message"]
    assert got["choices"][0]["message"]["content"] == "Hello"
    assert got["id"] == "chatcmpl-42" and got["usage"] == want["usage"]
    assert got["kv_transfer_params"] == {"k": 1}


def test_messages_and_responses_derender_parse_tool_calls(renderer):
    tool = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    msgs = {"model": "deepseek-v4-flash", "max_tokens": 100, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [tool]}
    prep = recipe.prepare(msgs, "messages")
    ids = _output(prep, dsml_call("get_weather", city="Paris"))
    gen = {"request_id": "msg_1", "choices": [{"index": 0, "finish_reason": "stop", "token_ids": ids}],
           "usage": {"prompt_tokens": len(prep.token_ids), "completion_tokens": len(ids), "total_tokens": 0,
                     "prompt_tokens_details": {"cached_tokens": 64}}}
    r = post(renderer.url, "/v1/messages/derender", {"generate_response": gen, "messages_request": msgs})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["id"] == "msg_1" and got["stop_reason"] == "tool_use"
    assert [b for b in got["content"] if b["type"] == "tool_use"][0]["input"] == {"city": "Paris"}
    assert got["usage"]["cache_read_input_tokens"] == 64
    resp = {"model": "deepseek-v4-flash", "input": "Weather?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": tool["input_schema"]}]}
    prep = recipe.prepare(resp, "responses")
    ids = _output(prep, dsml_call("get_weather", city="Paris"))
    r = post(renderer.url, "/v1/responses/derender", {"responses_request": resp, "generate_response": {
        "request_id": "resp_1", "choices": [{"index": 0, "finish_reason": "stop", "token_ids": ids}]}})
    assert r.status_code == 200, r.text
    calls = [o for o in r.json()["output"] if o["type"] == "function_call"]
    assert r.json()["id"] == "resp_1" and json.loads(calls[0]["arguments"]) == {"city": "Paris"}


@pytest.mark.parametrize("mutate, param", [
    (lambda b: b.pop("chat_request"), "chat_request"),
    (lambda b: b.update(stream=True), "stream"),
    (lambda b: b.update(generate_response={"choices": []}), "generate_response.choices"),
    (lambda b: b["generate_response"]["choices"][0].update(token_ids=[-1]), "generate_response.choices[0].token_ids"),
    (lambda b: b["generate_response"]["choices"][0].update(finish_reason="abort"),
     "generate_response.choices[0].finish_reason"),
    (lambda b: b["generate_response"].update(output_mode="text"), "generate_response.output_mode"),
    (lambda b: b.update(prompt_tokens=-3), "prompt_tokens"),
    (lambda b: b["chat_request"].update(messages=7), "chat_request.messages"),
    (lambda b: b["generate_response"]["choices"][0].update(logprobs={"content": []}),
     "generate_response.choices[0].logprobs"),
    # more cached tokens than the prompt has: the caller's numbers disagree (was a 500)
    (lambda b: b.update(prompt_tokens=3, generate_response={**b["generate_response"], "usage": {
        "prompt_tokens_details": {"cached_tokens": 64}}}), "generate_response.usage.prompt_tokens_details.cached_tokens"),
])
def test_derender_refuses_what_it_cannot_derender_naming_the_field(renderer, mutate, param):
    body = BODIES["chat_derender"]["request"]
    assert refused_param(renderer.url, "/v1/chat/completions/derender", body, mutate) == param


@pytest.mark.parametrize("path, field", [("/v1/chat/completions/derender", "chat_request"),
                                         ("/v1/messages/derender", "messages_request"),
                                         ("/v1/responses/derender", "responses_request")])
def test_derender_names_ids_outside_the_vocabulary(renderer, path, field):
    """Ids from another model's vocabulary (a larger one's) are the caller's error: a 400 in the API's
    own shape naming the field and the vocabulary's size, never a 500."""
    original = {"chat_request": {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]},
                "messages_request": {"model": "deepseek-v4-flash", "max_tokens": 10,
                                     "messages": [{"role": "user", "content": "Hi"}]},
                "responses_request": {"model": "deepseek-v4-flash", "input": "Hi"}}[field]
    gen = {"request_id": "x-1", "choices": [{"index": 0, "finish_reason": "stop", "token_ids": [19923, 129280]}]}
    r = post(renderer.url, path, {"generate_response": gen, field: original})
    assert r.status_code == 400, r.text
    body = r.json()
    if field == "messages_request":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert "generate_response.choices[0].token_ids" in body["error"]["message"]
        assert "outside the vocabulary (129280 ids" in body["error"]["message"]
    else:
        assert body["error"]["param"] == "generate_response.choices[0].token_ids"
        assert "outside the vocabulary (129280 ids" in body["error"]["message"]


def test_derender_names_a_top_logprob_id_outside_the_vocabulary(renderer):
    chat = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}], "logprobs": True,
            "top_logprobs": 1, "thinking": {"type": "disabled"}}
    choice = {"index": 0, "finish_reason": "stop", "token_ids": [19923], "logprobs": {"content": [
        {"token_id": 19923, "logprob": -0.1, "top_logprobs": [{"token_id": 10**8, "logprob": -2.0}]}]}}
    r = post(renderer.url, "/v1/chat/completions/derender",
             {"generate_response": {"request_id": "x-2", "choices": [choice]}, "chat_request": chat})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "generate_response.choices[0].logprobs.content[0]"
    assert "token id 100000000 is outside the vocabulary" in r.json()["error"]["message"]
    choice["logprobs"]["content"][0]["top_logprobs"][0]["token_id"] = 19923   # the same body, in the vocabulary
    r = post(renderer.url, "/v1/chat/completions/derender",
             {"generate_response": {"request_id": "x-2", "choices": [choice]}, "chat_request": chat})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] == -2.0


def test_tenants_authenticate_and_their_salt_is_the_cache_salt():
    tenants = Tenants({"key-a": Tenant("a", "salt-a")})
    with render_only(tenants) as srv:
        body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]}
        assert post(srv.url, "/v1/chat/completions/render", body).status_code == 401
        r = post(srv.url, "/v1/chat/completions/render", body, authorization="Bearer key-a")
        assert r.status_code == 200 and r.json()["cache_salt"] == "salt-a"
        r = post(srv.url, "/v1/messages/render", {**body, "max_tokens": 5}, **{"x-api-key": "wrong"})
        assert r.status_code == 401 and r.json()["type"] == "error"


def test_responses_render_expands_previous_response_id_from_the_store():
    # vLLM's stateless render refuses previous_response_id; recipe reads the conversation store
    with running(app(config=QUIET)) as srv:
        first = {"model": "deepseek-v4-flash", "input": "Hi", "store": True}
        r = post(srv.url, "/v1/responses", first)
        assert r.status_code == 200, r.text
        rid, output = r.json()["id"], r.json()["output"]
        follow = {"model": "deepseek-v4-flash", "input": "And then?", "previous_response_id": rid}
        got = post(srv.url, "/v1/responses/render", follow).json()
        expanded = {"model": "deepseek-v4-flash", "input": [
            {"role": "user", "content": "Hi"}, *output, {"role": "user", "content": "And then?"}]}
        assert got["token_ids"] == recipe.prepare(expanded, "responses").token_ids
        missing = post(srv.url, "/v1/responses/render", {**follow, "previous_response_id": "resp_nope"})
        assert missing.status_code in (400, 404) and missing.json()["error"]["param"] == "previous_response_id"


def test_recipe_serve_render_only_takes_no_engine():
    from recipe.cli.main import build_parser
    from recipe.cli.serve import _Bad, build

    ns = build_parser().parse_args(["serve", "--render-only", "--engine", "demo", "--store", "memory"])
    with pytest.raises(_Bad) as err:
        build(ns)
    assert err.value.status == 2 and "--render-only" in str(err.value)


def test_recipe_serve_render_only_from_the_command_line():
    from serve_support import cli_server

    with cli_server("--render-only", "--store", "memory") as (url, _proc):
        body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Hi"}]}
        got = post(url, "/v1/chat/completions/render", body).json()
        assert got["token_ids"] == recipe.prepare(body, "chat").token_ids
        assert post(url, "/v1/chat/completions", body).status_code == 404
