"""A stored response's housekeeping routes (delete, input items, cancel) through the official openai
SDK, each tenant in its own scope; the stores' retention (``--store-ttl``); and vLLM's ``/tokenize`` and
``/detokenize``."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from serve_support import MODEL, redis_server, running

import recipe
import recipe.serve
from recipe.serve.tenants import Tenant, Tenants
from recipe.store.conversations import DEFAULT_TTL, MemoryStore, SQLiteStore, StoredResponse
from recipe.tokenizer import load_tokenizer

openai = pytest.importorskip("openai")

TOK = load_tokenizer()


def _client(url: str, key: str = "x") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=20)


def test_delete_input_items_and_cancel_through_the_sdk(tmp_path: Path):
    with running(recipe.serve.app(store=SQLiteStore(tmp_path / "r.sqlite3"))) as s:
        c = _client(s.url)
        first = c.responses.create(model=MODEL, input="Hello there", reasoning={"effort": "none"})
        second = c.responses.create(model=MODEL, previous_response_id=first.id, reasoning={"effort": "none"}, input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "And again?"}]}])
        items = list(c.responses.input_items.list(second.id, order="asc"))
        assert [(i.type, i.role, i.content[0].text) for i in items] == [
            ("message", "developer", "Be brief."), ("message", "user", "And again?")]
        assert all(i.id and i.status == "completed" for i in items)
        # the default order is desc, as OpenAI's; pages follow `after`
        page = c.responses.input_items.list(second.id, limit=1)
        assert [i.id for i in page.data] == [items[1].id] and page.has_more
        assert [i.id for i in c.responses.input_items.list(second.id, limit=1)] == [items[1].id, items[0].id]
        with pytest.raises(openai.BadRequestError, match="background"):
            c.responses.cancel(second.id)
        assert c.responses.delete(first.id) is None  # the SDK returns None for OpenAI's 200 {"deleted": true}
        raw = httpx.delete(f"{s.url}/v1/responses/{second.id}")
        assert raw.status_code == 200 and raw.json() == {"id": second.id, "object": "response.deleted", "deleted": True}
        for call in (lambda: c.responses.retrieve(first.id), lambda: c.responses.delete(first.id),
                     lambda: c.responses.input_items.list(first.id), lambda: c.responses.cancel(first.id)):
            with pytest.raises(openai.NotFoundError):
                call()
        with pytest.raises(openai.BadRequestError) as err:  # its continuation lost its history
            c.responses.create(model=MODEL, previous_response_id=first.id, input="more")
        assert err.value.body["code"] == "previous_response_not_found"


def test_a_tenant_reaches_only_its_own_responses():
    with running(recipe.serve.app(tenants=Tenants({"key-a": Tenant("alice", "sa"), "key-b": Tenant("bob", "sb")}))) as s:
        alice, bob = _client(s.url, "key-a"), _client(s.url, "key-b")
        r = alice.responses.create(model=MODEL, input="mine", reasoning={"effort": "none"})
        for call in (lambda: bob.responses.delete(r.id), lambda: bob.responses.input_items.list(r.id),
                     lambda: bob.responses.cancel(r.id)):
            with pytest.raises(openai.NotFoundError):
                call()
        assert [i.content[0].text for i in alice.responses.input_items.list(r.id)] == ["mine"]
        alice.responses.delete(r.id)
        with pytest.raises(openai.NotFoundError):
            alice.responses.retrieve(r.id)


def _record(rid: str, created_at: int) -> StoredResponse:
    return StoredResponse(rid, None, ({"role": "user", "content": "x"},), (), "m", created_at)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
def test_records_expire_ttl_seconds_after_their_creation_and_can_be_deleted(backend, tmp_path: Path):
    now = int(time.time())
    if backend == "redis":
        pytest.importorskip("redis")
        from recipe.store.redis_store import RedisStore

        with redis_server() as url:
            store = RedisStore.from_url(url, ttl=1.0)
            store.save(_record("old", now))
            assert store.load("old") is not None
            time.sleep(1.2)
            assert store.load("old") is None and store.delete("old") is False
            store.save(_record("new", now))
            assert store.delete("new") is True and store.load("new") is None
            store.close()
        return
    store = MemoryStore(ttl=3600) if backend == "memory" else SQLiteStore(tmp_path / "s.sqlite3", ttl=3600)
    store.save(_record("old", now - 3601))
    store.save(_record("new", now - 10))
    assert store.load("old") is None and store.load("new") is not None
    assert store.delete("old") is False and store.delete("new") is True and store.load("new") is None
    if backend == "sqlite":  # expired rows leave the file on a later save
        store.save(_record("older", now - 7200))
        store._purged = 0.0
        store.save(_record("fresh", now))
        rows = store._conn.execute("SELECT id FROM responses ORDER BY id").fetchall()
        assert rows == [("fresh",)]


def test_the_default_retention_is_30_days():
    from recipe.cli.serve import DEFAULT_TTL_TEXT, _ttl

    assert DEFAULT_TTL == 30 * 86400 and _ttl(DEFAULT_TTL_TEXT) == DEFAULT_TTL
    assert _ttl("12h") == 43200 and _ttl("90") == 90 and _ttl("off") is None


def test_tokenize_and_detokenize_in_vllms_shapes():
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
    prep = recipe.prepare(body, "chat")
    with running(recipe.serve.app()) as s:
        chat = httpx.post(f"{s.url}/tokenize", json=body).json()
        assert chat == {"count": len(prep.token_ids), "max_model_len": 1048576, "tokens": prep.token_ids, "token_strs": None}
        text = httpx.post(f"{s.url}/tokenize", json={"prompt": "Hi <｜User｜>", "return_token_strs": True}).json()
        assert text["tokens"] == [0, *TOK.encode_ordinary("Hi <｜User｜>")]  # the spelling stays text
        assert "".join(text["token_strs"][1:]) == "Hi <｜User｜>" and text["count"] == len(text["tokens"])
        bare = httpx.post(f"{s.url}/tokenize", json={"prompt": "Hi", "add_special_tokens": False}).json()
        assert bare["tokens"] == TOK.encode_ordinary("Hi")
        back = httpx.post(f"{s.url}/detokenize", json={"model": MODEL, "tokens": prep.token_ids}).json()
        assert back == {"prompt": prep.prompt.text}
        bad = httpx.post(f"{s.url}/detokenize", json={"tokens": [10**9]})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens"
        bad = httpx.post(f"{s.url}/tokenize", json={"model": "gpt-4o", "prompt": "x"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "model"
        bad = httpx.post(f"{s.url}/tokenize", json={"prompt": 5})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt"
