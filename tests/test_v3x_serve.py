"""``recipe serve`` with an earlier DeepSeek generation: the engine receives the family's prompt ids
(V3 vocabulary) and the family's output format comes back as each API's tool call."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from fake_engines import APPS, Script, Seen
from serve_support import running

import recipe
import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.tokenizer import load_v3_tokenizer

openai = pytest.importorskip("openai")

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
OUTPUT = ("Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
          "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>")


@contextmanager
def served(script: Script):
    seen = Seen()
    with running(APPS["vllm"](script, seen)) as fake:
        app = recipe.serve.app(f"vllm+{fake.url}", config=ServeConfig())
        with running(app) as s:
            yield s, seen


def test_a_v31_request_through_recipe_serve():
    ids = load_v3_tokenizer().encode_with_special_tokens(OUTPUT)
    with served(Script(ids, chunk=3, vocabulary="v3")) as (s, seen):
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0, timeout=20)
        with client.chat.completions.stream(model="deepseek-v3.1", messages=QUESTION, tools=[WEATHER],
                                            extra_body={"thinking": {"type": "disabled"}}) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == "Checking." and final.choices[0].finish_reason == "tool_calls"
    assert json.loads(msg.tool_calls[0].function.arguments) == {"city": "Paris"}
    prep = recipe.prepare({"model": "deepseek-v3.1", "messages": QUESTION, "tools": [WEATHER], "thinking": {"type": "disabled"}})
    assert seen.bodies[0]["prompt"] == prep.token_ids
    assert prep.token_ids[-2:] == [128804, 128799]  # <｜Assistant｜></think> in the V3 vocabulary
