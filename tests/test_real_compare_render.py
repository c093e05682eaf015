"""vLLM's render protocol from recipe against real vLLM 0.32 (tests/real_engine.py: vLLM on the CPU with
``--enable-scale-out --tokenizer-mode deepseek_v4``, a tiny random-weight model with DeepSeek-V4's
vocabulary): the same request posted to vLLM's render route and to recipe's gets bodies of the same
shape, field for field (same keys in the same order, same JSON types, recursively), for Chat,
Messages, Responses and Completions.

The ids are not compared with vLLM's: vLLM's DeepSeek-V4 encoder differs from DeepSeek's own library
in places (docs/fleet.md). recipe's ids are compared with independent oracles instead: DeepSeek's
``deepseek-recipe`` for the three chat APIs (tests/oracle.py) and HF ``tokenizers`` on the vocabulary
file for a Completions text. The round trip: recipe's rendered ``GenerateRequest`` goes to vLLM's own
``/inference/v1/generate`` (vLLM takes recipe's body as is), and the generate response is derendered
by both vLLM and recipe — the same fields, and for Completions the same text.

The module's name sorts before tests/test_real_engine.py, so it runs first, on the default engine
(``vllm_running``) that module then reuses; after it, the last engine there has been killed and a
second start would cost a minute.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from real_engine import SERVED, VLLMServer, require_vllm
from render_support import render_only

pytestmark = pytest.mark.real_engine
require_vllm(module=True)

MODEL = "deepseek-v4-flash"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
#: name -> (route, body): requests whose sampling fields vLLM and recipe write alike (their values
#: differ where DeepSeek's thinking rules set them; the shape may not).
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions/render", {"messages": [{"role": "system", "content": "Be brief."},
                                                           {"role": "user", "content": "Weather in Paris?"}],
                                              "max_tokens": 64, "seed": 3}),
    "chat_stream": ("/v1/chat/completions/render", {"messages": [{"role": "user", "content": "Hi"}], "stream": True,
                                                     "stream_options": {"include_usage": True}}),
    "messages": ("/v1/messages/render", {"max_tokens": 64, "system": "Be brief.",
                                         "messages": [{"role": "user", "content": "Weather in Paris?"}]}),
    "responses": ("/v1/responses/render", {"input": "Weather in Paris?", "instructions": "Be brief.",
                                           "max_output_tokens": 64}),
    "completions_text": ("/v1/completions/render", {"prompt": "The weather in Paris is", "max_tokens": 8}),
    "completions_ids": ("/v1/completions/render", {"prompt": [[0, 19923, 2058], [23166]], "temperature": 0,
                                                   "stop": ["."], "logprobs": 1}),
}
API = {"/v1/chat/completions/render": "chat", "/v1/messages/render": "messages", "/v1/responses/render": "responses"}


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):  # an integer-valued float is still a number, not an integer
        return "number"
    return {dict: "object", list: "array", str: "string"}[type(value)]


def shape_diff(ours: Any, theirs: Any, path: str = "$") -> str | None:
    """Where ``ours`` and ``theirs`` differ in shape (None: nowhere): the same JSON type at every
    path, objects with the same keys in the same order, and arrays whose items have the same shapes
    (an empty array matches any array: ``stop_token_ids`` is ``[]`` or ``[1]`` by value)."""
    if _type(ours) != _type(theirs):
        return f"{path}: {_type(ours)} != {_type(theirs)}"
    if isinstance(ours, dict):
        if list(ours) != list(theirs):
            return f"{path}: keys {list(ours)} != {list(theirs)}"
        return next((d for k in ours if (d := shape_diff(ours[k], theirs[k], f"{path}.{k}"))), None)
    if isinstance(ours, list) and ours and theirs:
        return next((d for i, a in enumerate(ours) for b in theirs[:1] if (d := shape_diff(a, b, f"{path}[{i}]"))), None)
    return None


@pytest.fixture(scope="module")
def pair(vllm_running: VLLMServer):
    """(vLLM's URL, recipe serve --render-only's URL, the window both use)."""
    with render_only(max_model_len=4096) as srv:
        yield vllm_running.url, srv.url


def both(pair: tuple[str, str], route: str, body: dict[str, Any]) -> tuple[Any, Any]:
    theirs = httpx.post(pair[0] + route, json={**body, "model": SERVED}, timeout=120)
    ours = httpx.post(pair[1] + route, json={**body, "model": MODEL}, timeout=120)
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    return theirs.json(), ours.json()


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_bodies_have_vllms_shape_and_recipes_ids_are_exact(pair, case):
    route, body = CASES[case]
    theirs, ours = both(pair, route, body)
    assert shape_diff(ours, theirs) is None, shape_diff(ours, theirs)
    if route in API:
        from oracle import convert

        want = convert(API[route], {**body, "model": MODEL})
        assert want["ok"], want
        assert ours["token_ids"] == want["token_ids"]
    else:
        from tokenizers import Tokenizer

        from recipe.tokenizer import default_tokenizer_path

        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        hf = Tokenizer.from_file(str(default_tokenizer_path()))
        want = [p if isinstance(p, list) else hf.encode(p, add_special_tokens=True).ids for p in prompts]
        assert [g["token_ids"] for g in ours] == want
        assert [g["sampling_params"] for g in ours] == [g["sampling_params"] for g in theirs]


def _generate(url: str, gen: dict[str, Any]) -> dict[str, Any]:
    """vLLM's own ``/inference/v1/generate`` on a rendered body (whole, greedy, 6 tokens)."""
    body = {**gen, "model": SERVED, "stream": False, "stream_options": None,
            "sampling_params": {**gen["sampling_params"], "max_tokens": 6, "temperature": 0.0, "output_kind": 2}}
    r = httpx.post(url + "/inference/v1/generate", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_chat_round_trip_through_vllms_generate_and_both_derenders(pair):
    request = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 64}
    gen = httpx.post(pair[1] + "/v1/chat/completions/render", json=request, timeout=60).json()
    out = _generate(pair[0], gen)
    ids = out["choices"][0]["token_ids"]
    assert 1 <= len(ids) <= 6
    body = {"generate_response": out, "prompt_tokens": len(gen["token_ids"])}
    theirs = httpx.post(pair[0] + "/v1/chat/completions/derender",
                        json={**body, "model": SERVED, "chat_request": {**request, "model": SERVED}}, timeout=60)
    ours = httpx.post(pair[1] + "/v1/chat/completions/derender", json={**body, "chat_request": request}, timeout=60)
    assert theirs.status_code == 200 and ours.status_code == 200, (theirs.text, ours.text)
    t, o = theirs.json(), ours.json()
    assert set(t) <= set(o)
    assert set(t["choices"][0]) <= set(o["choices"][0])
    assert o["usage"]["completion_tokens"] == t["usage"]["completion_tokens"] == len(ids)
    assert o["usage"]["prompt_tokens"] == t["usage"]["prompt_tokens"] == len(gen["token_ids"])
    assert o["id"] == t["id"] == out["request_id"]


def test_completions_round_trip_gives_vllms_text(pair):
    request = {"model": MODEL, "prompt": "The weather in Paris is", "max_tokens": 6}
    gens = httpx.post(pair[1] + "/v1/completions/render", json=request, timeout=60).json()
    out = _generate(pair[0], gens[0])
    body = {"generate_responses": [out], "prompt_tokens": [len(gens[0]["token_ids"])]}
    theirs = httpx.post(pair[0] + "/v1/completions/derender", json={**body, "model": SERVED}, timeout=60)
    ours = httpx.post(pair[1] + "/v1/completions/derender", json={**body, "model": MODEL}, timeout=60)
    assert theirs.status_code == 200 and ours.status_code == 200, (theirs.text, ours.text)
    t, o = theirs.json(), ours.json()
    assert shape_diff(o, t) is None, shape_diff(o, t)
    assert o["choices"][0]["text"] == t["choices"][0]["text"]
    assert o["usage"] == t["usage"]
