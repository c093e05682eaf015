"""Tenants from ``--api-keys``: keys authenticate, and two tenants sending the same prompt get
disjoint cache salts (at the engine), disjoint prefix keys (in the routing index) and disjoint stored
responses (one cannot GET or continue the other's response id)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fake_engines import APPS, Script, Seen
from serve_support import EOS, MODEL, running

import recipe
import recipe.serve
from recipe.cache.index import namespace
from recipe.cache.keys import KeySpec, block_keys
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.tenants import OPEN, Tenant, Tenants, derive_salt
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

IDS = load_tokenizer().encode_with_special_tokens("Fine." + EOS)
# a long shared prompt: several full 64-token blocks
PROMPT = [{"role": "system", "content": "You are a careful assistant. " * 40}, {"role": "user", "content": "Status?"}]
CHAT = {"model": MODEL, "messages": PROMPT, "reasoning_effort": "none"}


@pytest.fixture
def keys_file(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("# key tenant [salt]\nsk-alice alice\nsk-alice-2 alice\nsk-bob bob s3cret-salt\n")
    return path


def _oai(url: str, key: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=20)


def test_key_files_text_and_json(tmp_path, keys_file):
    t = Tenants.from_file(keys_file)
    assert t.authenticate("Bearer sk-alice", None) == Tenant("alice", derive_salt("alice")) == t.authenticate(None, "sk-alice-2")
    assert t.authenticate("Bearer sk-bob", None) == Tenant("bob", "s3cret-salt")
    assert t.authenticate("Bearer nope", None) is None and t.authenticate(None, None) is None
    assert len(derive_salt("alice")) == 43 and derive_salt("alice") != derive_salt("bob")
    j = tmp_path / "keys.json"
    j.write_text(json.dumps({"k1": "t1", "k2": {"tenant": "t2", "salt": "x"}}))
    tj = Tenants.from_file(j)
    assert tj.authenticate("Bearer k1", None).name == "t1" and tj.authenticate(None, "k2").salt == "x"
    assert Tenants().authenticate(None, None) is OPEN
    for text in ("", "only-a-key\n", '{"k": 3}', "a b c d\n"):
        bad = tmp_path / "bad"
        bad.write_text(text)
        with pytest.raises(ValueError):
            Tenants.from_file(bad)


@pytest.mark.parametrize("text, where", [
    ("k1 t1\nk1 t2\n", ":2: this key was first listed on line 1"),  # two tenants: which one would it be?
    ("k1 t1\n# again\nk1 t1 salt\n", ":3: this key was first listed on line 1"),  # the same tenant: refused too
    ('{"k1": "t1", "k1": "t2"}', "entries 1 and 2"),
    ('{"k1": {"tenant": "t1", "tenant": "t2"}}', "entries 1 and 2"),
])
def test_a_key_listed_twice_is_an_error_naming_the_lines_not_the_key(tmp_path, text, where):
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        Tenants.from_file(path)
    assert where in str(info.value) and "k1" not in str(info.value)


def test_missing_or_wrong_keys_are_401_in_each_apis_shape(keys_file):
    with running(recipe.serve.app(ReplayEngine(load_turns([{"ids": IDS}])), tenants=Tenants.from_file(keys_file))) as s:
        with pytest.raises(openai.AuthenticationError) as info:
            _oai(s.url, "sk-wrong").chat.completions.create(**CHAT)
        assert info.value.body["code"] == "invalid_api_key"
        with pytest.raises(anthropic.AuthenticationError) as ainfo:
            anthropic.Anthropic(base_url=s.url, api_key="sk-wrong", max_retries=0).messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert ainfo.value.body["error"]["type"] == "authentication_error"
        r = httpx.post(f"{s.url}/v1/chat/completions", json=CHAT)
        assert r.status_code == 401 and r.json()["error"]["message"] == "Missing API key."
        assert httpx.get(f"{s.url}/v1/models").status_code == 401
        # both auth styles of the SDKs
        assert _oai(s.url, "sk-alice").chat.completions.create(**CHAT).choices[0].message.content == "Fine."
        m = anthropic.Anthropic(base_url=s.url, api_key="sk-bob", max_retries=0).messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}], thinking={"type": "disabled"})
        assert m.content[0].text == "Fine."
        assert httpx.get(f"{s.url}/health").status_code == 200  # health and metrics stay open
        assert httpx.get(f"{s.url}/metrics").status_code == 200


def test_two_tenants_same_prompt_disjoint_salts_prefix_keys_and_responses(keys_file):
    seen = Seen()
    with running(APPS["vllm"](Script(IDS), seen)) as fake:
        engines = [f"vllm+{fake.url}?name=r0", f"vllm+{fake.url}?name=r1"]
        with running(recipe.serve.app(engines=engines, tenants=Tenants.from_file(keys_file))) as s:
            alice, bob = _oai(s.url, "sk-alice"), _oai(s.url, "sk-bob")
            a = alice.chat.completions.with_raw_response.create(**CHAT)
            b = bob.chat.completions.with_raw_response.create(**CHAT)
            a2 = _oai(s.url, "sk-alice-2").chat.completions.with_raw_response.create(**CHAT)
            # salts at the engine
            salts = [body["cache_salt"] for body in seen.bodies]
            assert salts == [derive_salt("alice"), "s3cret-salt", derive_salt("alice")]
            # prefix keys in the routing index: each tenant's own namespace and keys, none shared
            ids = recipe.prepare(CHAT).token_ids
            spec_a, spec_b = (KeySpec(model=MODEL, salt=salt) for salt in (derive_salt("alice"), "s3cret-salt"))
            ka, kb = block_keys(ids, spec_a).keys, block_keys(ids, spec_b).keys
            assert len(ka) >= 3 and not set(ka) & set(kb) and namespace(spec_a) != namespace(spec_b)
            index = s.state.pool.index
            held = {(ns, k) for ns, k in index._entries}
            assert {(namespace(spec_a), k) for k in ka} <= held and {(namespace(spec_b), k) for k in kb} <= held
            # bob's prefix is not alice's (he goes to the other, idle replica); alice's second key is the
            # same tenant, so her prefix sends it where her first request went
            replica = [x.headers["x-recipe-replica"] for x in (a, b, a2)]
            assert replica[0] == replica[2] != replica[1]
            assert [x.parse().usage.prompt_tokens for x in (a, b, a2)] == [len(ids)] * 3

            # stored responses: bob can neither read nor continue alice's
            r = alice.responses.create(model=MODEL, input="Status?", reasoning={"effort": "none"})
            assert alice.responses.retrieve(r.id).id == r.id
            assert _oai(s.url, "sk-alice-2").responses.retrieve(r.id).id == r.id
            with pytest.raises(openai.NotFoundError):
                bob.responses.retrieve(r.id)
            with pytest.raises(openai.BadRequestError) as info:
                bob.responses.create(model=MODEL, input="More?", previous_response_id=r.id)
            assert info.value.code == "previous_response_not_found"
            assert alice.responses.create(model=MODEL, input="More?", previous_response_id=r.id,
                                          reasoning={"effort": "none"}).previous_response_id == r.id
