"""``recipe serve`` serves only the model families whose vocabulary its engines run.

A vLLM replica's vocabulary is learned at start from its ``POST /tokenize`` (the fake engine
tokenizes with recipe's own DeepSeek-V4 or DeepSeek-V3 vocabulary); ``ServeConfig.vocabulary``
(``--vocabulary``) states it; an engine that does not tokenize keeps every family.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, running

import recipe.serve
from recipe.encodings.table import FAMILIES, MODELS
from recipe.serve.config import ServeConfig
from recipe.serve.engines.base import VOCABULARY_PROBE
from recipe.serve.vocabulary import narrow, vocabulary_of
from recipe.options import DEFAULT_OPTIONS
from recipe.tokenizer import load_tokenizer, load_v3_tokenizer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

V4_FAMILIES = {"deepseek_v4", "deepseek_v41"}
V4_NAMES = {m for f in FAMILIES if f.name in V4_FAMILIES for m in f.models}
V3_NAMES = set(MODELS) - V4_NAMES
HELLO = [{"role": "user", "content": "Hello"}]


@contextmanager
def served(script: Script, kind: str = "vllm", **config: Any):
    seen = Seen()
    with running(APPS[kind](script, seen)) as fake:
        app = recipe.serve.app(f"{kind}+{fake.url}", config=ServeConfig(**config))
        with running(app) as s:
            yield s, seen


def _listed(url: str) -> set[str]:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    names = {m.id for m in client.models.list()}
    a = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    assert {m.id for m in a.models.list()} == names
    return names


def _aliases(names: set[str]) -> set[str]:
    return {n for n, a in DEFAULT_OPTIONS.aliases.items() if a.target in names}


def test_the_probe_tells_the_two_vocabularies_apart():
    v4 = load_tokenizer().encode_with_special_tokens(VOCABULARY_PROBE)
    v3 = load_v3_tokenizer().encode_with_special_tokens(VOCABULARY_PROBE)
    assert v4 != v3
    assert vocabulary_of(v4) == "v4" and vocabulary_of(v3) == "v3" and vocabulary_of([1, 2, 3]) is None
    assert set(narrow(DEFAULT_OPTIONS, ["v4"]).models) == V4_NAMES
    assert set(narrow(DEFAULT_OPTIONS, ["v3"]).models) == V3_NAMES
    with pytest.raises(ValueError, match="unknown vocabulary"):
        narrow(DEFAULT_OPTIONS, ["v5"])


def test_a_v4_engine_serves_only_the_v4_families():
    ids = load_tokenizer().encode_with_special_tokens("Hi." + EOS)
    with served(Script(ids)) as (s, seen):
        listed = _listed(s.url)
        assert listed == V4_NAMES | _aliases(V4_NAMES) and "deepseek-v3" not in listed
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
        ok = client.chat.completions.create(model="deepseek-v4-flash", messages=HELLO,
                                            extra_body={"thinking": {"type": "disabled"}})
        assert ok.choices[0].message.content == "Hi."
        sent = len(seen.bodies)
        with pytest.raises(openai.BadRequestError) as exc:
            client.chat.completions.create(model="deepseek-v3", messages=HELLO)
        assert exc.value.body["param"] == "model" and "deepseek-v3" in exc.value.body["message"]
        with pytest.raises(openai.BadRequestError) as exc:
            client.responses.create(model="deepseek-r1", input="Hello")
        assert exc.value.body["param"] == "model"
        a = anthropic.Anthropic(base_url=s.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as aexc:
            a.messages.create(model="deepseek-v3", max_tokens=10, messages=HELLO)
        assert aexc.value.body["type"] == "error" and aexc.value.body["error"]["type"] == "invalid_request_error"
        assert "deepseek-v3" in aexc.value.body["error"]["message"]
        assert len(seen.bodies) == sent  # nothing reached the engine
        health = httpx.get(s.url + "/health").json()
        assert health["vocabulary"] == {"served": ["v4"], "source": "engine"}


def test_a_v3_engine_serves_only_the_v3_families():
    ids = load_v3_tokenizer().encode_with_special_tokens("Hi.<｜end▁of▁sentence｜>")
    with served(Script(ids, vocabulary="v3")) as (s, seen):
        assert _listed(s.url) == V3_NAMES | _aliases(V3_NAMES)
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
        ok = client.chat.completions.create(model="deepseek-v3", messages=HELLO)
        assert ok.choices[0].message.content == "Hi."
        with pytest.raises(openai.BadRequestError) as exc:
            client.chat.completions.create(model="deepseek-v4-flash", messages=HELLO)
        assert exc.value.body["param"] == "model"


def test_the_flag_states_the_families_whatever_the_engine_says():
    ids = load_tokenizer().encode_with_special_tokens("Hi." + EOS)
    with served(Script(ids, vocabulary=None), vocabulary="v4") as (s, _):
        assert _listed(s.url) == V4_NAMES | _aliases(V4_NAMES)
        assert httpx.get(s.url + "/health").json()["vocabulary"] == {"served": ["v4"], "source": "flag"}
    with served(Script(ids), vocabulary="v3") as (s, _):  # the flag wins over the probe
        assert _listed(s.url) == V3_NAMES | _aliases(V3_NAMES)
    with pytest.raises(ValueError, match="vocabulary"):
        ServeConfig(vocabulary="v5")


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_an_engine_that_does_not_tokenize_keeps_every_family(kind):
    ids = load_tokenizer().encode_with_special_tokens("Hi." + EOS)
    with served(Script(ids, vocabulary=None), kind) as (s, _):
        assert _listed(s.url) == set(MODELS) | set(DEFAULT_OPTIONS.aliases)
        assert httpx.get(s.url + "/health").json()["vocabulary"] == {"served": None, "source": "none"}
