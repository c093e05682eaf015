"""Hostile tenants: no tenant reads, continues or cache-hits another's turns, whatever the tenants'
names and the ids hold (``/``, ``:``, NUL, unicode). Real uvicorn on 127.0.0.1, a real redis-server,
the SQLite file and the in-memory store; hypothesis properties over the key functions themselves."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_support import EOS, MODEL, redis_server, running

import recipe.serve
from recipe.cache.index import namespace
from recipe.cache.keys import KeySpec
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.serve.tenants import Tenant, Tenants, derive_salt, salt_problem
from recipe.store.conversations import (MemoryStore, ScopedStore, SQLiteStore, StoredResponse, scope_key,
                                        split_scope_key)
from recipe.store.redis_store import RedisStore

#: names and ids built from the characters that could split a key: separators, NUL, unicode
_TEXT = st.text(alphabet=st.sampled_from(["a", "x", "/", ":", "\x00", "0", "1", "é", "\U0001f600", "%", " "]), max_size=8)
_PAIRS = st.tuples(_TEXT, _TEXT)


def _record(rid: str, prev: str | None = None, text: str = "hi") -> StoredResponse:
    return StoredResponse(rid, prev, ({"type": "message", "role": "user", "content": text},), (), MODEL, 1, None)


@settings(max_examples=400, deadline=None)
@given(_PAIRS, _PAIRS)
def test_distinct_tenant_id_pairs_never_share_a_store_key(a, b):
    assert (scope_key(*a) == scope_key(*b)) == (a == b)
    assert split_scope_key(scope_key(*a)) == a


@settings(max_examples=150, deadline=None)
@given(_PAIRS, _PAIRS)
def test_a_scoped_store_never_answers_another_pairs_id(a, b):
    store = MemoryStore()
    ScopedStore(store, a[0]).save(_record(a[1], text="secret"))
    got = ScopedStore(store, b[0]).load(b[1])
    assert (got is not None) == (a == b)
    if got is not None:
        assert got.id == a[1]


@settings(max_examples=200, deadline=None)
@given(_TEXT, _TEXT)
def test_distinct_tenants_never_share_a_prefix_index_namespace(a, b):
    spaces = [namespace(KeySpec(model=MODEL, salt=derive_salt(t))) for t in (a, b)]
    assert (spaces[0] == spaces[1]) == (a == b)


def test_keys_written_before_the_length_prefix_are_read_only_where_unambiguous():
    store = MemoryStore()
    store.save(_record("alice/resp_1", "alice/resp_0"))
    store.save(_record("resp_open"))
    store.save(_record("alice/x/resp_2"))  # SCOPE/ID with a '/' in one part: whose it was is unknowable
    got = ScopedStore(store, "alice").load("resp_1")
    assert got is not None and got.id == "resp_1" and got.previous_response_id == "resp_0"
    assert ScopedStore(store, "").load("resp_open").id == "resp_open"
    assert scope_key("", "resp_open") == "resp_open" and scope_key("", "5:alice/resp_1") == "0:/5:alice/resp_1"
    assert ScopedStore(store, "alice").load("x/resp_2") is None
    assert ScopedStore(store, "alice/x").load("resp_2") is None
    assert not ScopedStore(store, "alice").delete("x/resp_2") and store.load("alice/x/resp_2") is not None
    assert ScopedStore(store, "alice").delete("resp_1") and store.load("alice/resp_1") is None
    ScopedStore(store, "alice").save(_record("resp_3", text="secret"))
    assert ScopedStore(store, "").load("5:alice/resp_3") is None  # the open scope never reads a tenant's key


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "r.sqlite3")
        yield s
        s.close()
    else:
        with redis_server() as url:
            s = RedisStore.from_url(url)
            yield s
            s.close()


def _post(url: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}, timeout=20)


def test_a_tenant_named_like_another_tenants_scope_cannot_read_or_continue_it(store):
    """Tenants ``alice`` and ``alice/x``: ``alice`` naming ``x/<id>`` once reached ``alice/x``'s
    turn (``alice/`` + ``x/<id>`` was the same key), and the engine got its text in her prompt."""
    tenants = Tenants({"sk-a": Tenant("alice", derive_salt("alice")), "sk-ax": Tenant("alice/x", derive_salt("alice/x"))})
    engine = ReplayEngine(load_turns([{"text": "Noted." + EOS}]))
    with running(recipe.serve.app(engine, store=store, tenants=tenants)) as s:
        r = _post(s.url, "sk-ax", {"model": MODEL, "input": "the secret is 42", "reasoning": {"effort": "none"}})
        assert r.status_code == 200 and r.json()["store"] is True
        rid = r.json()["id"]
        assert httpx.get(f"{s.url}/v1/responses/{rid}", headers={"authorization": "Bearer sk-ax"}).status_code == 200
        stolen = _post(s.url, "sk-a", {"model": MODEL, "input": "what was it?", "previous_response_id": f"x/{rid}"})
        assert stolen.status_code == 400, stolen.text
        assert stolen.json()["error"]["code"] == "previous_response_not_found"
        got = httpx.get(f"{s.url}/v1/responses/x/{rid}", headers={"authorization": "Bearer sk-a"})
        assert got.status_code == 404
        got = httpx.get(f"{s.url}/v1/responses/x%2F{rid}", headers={"authorization": "Bearer sk-a"})
        assert got.status_code == 404
        got = httpx.delete(f"{s.url}/v1/responses/x%2F{rid}", headers={"authorization": "Bearer sk-a"})
        assert got.status_code == 404
        # the owner still continues its own turn
        ok = _post(s.url, "sk-ax", {"model": MODEL, "input": "and?", "previous_response_id": rid,
                                    "reasoning": {"effort": "none"}})
        assert ok.status_code == 200 and ok.json()["previous_response_id"] == rid


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=300))
def test_a_derived_salt_is_always_one_the_engines_take(name):
    assert salt_problem(derive_salt(name)) is None


@pytest.mark.parametrize("salt, why", [
    ("x" * 129, "129 characters long; engines take at most 128"),
    ("team@corp", "holds '@'"),
    ("a/b", "holds '/'"),
    ("a\\\\b", "holds '\\\\'"),
])
def test_a_salt_the_engine_would_refuse_stops_the_server_at_startup(tmp_path, salt, why):
    """vLLM refuses a ``cache_salt`` over 128 characters or holding ``@``, ``/``, ``\\`` or NUL, so
    such a tenant got a 400 on every request; the key file is now refused (exit 1, one line, the
    salt not printed)."""
    keys = tmp_path / "keys.txt"
    keys.write_text(f"sk-ok ok\nsk-bad bad {salt}\n")
    r = subprocess.run([sys.executable, "-m", "recipe", "serve", "--port", "0", "--store", "memory", "--api-keys",
                        str(keys)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"recipe serve: api keys file {keys}:2: the salt of tenant 'bad' ") and why in r.stderr
    assert r.stderr.count("\n") == 1 and salt not in r.stderr


def test_a_nul_in_a_json_salt_is_refused_and_a_constructed_tenant_too(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text('{"sk-a": {"tenant": "a", "salt": "ab\\u0000c"}}')
    with pytest.raises(ValueError, match="holds NUL"):
        Tenants.from_file(keys)
    with pytest.raises(ValueError, match="holds '/'"):
        Tenants({"sk": Tenant("t", "a/b")})
