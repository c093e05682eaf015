"""The conversation store behind ``previous_response_id``: the Redis backend (a real redis-server),
a fleet of two servers sharing it, Redis down (a clear 503, never a wrong hit), tenant scopes, and
the SQLite file (the CLI's default) including files written before the ``response`` column."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pytest
from serve_support import EOS, MODEL, free_port, redis_server, running

import recipe.serve
from recipe.serve.engines.replay import ReplayEngine, load_turns
from recipe.store.conversations import MemoryStore, ScopedStore, SQLiteStore, StoredResponse, StoreUnavailable, history
from recipe.store.redis_store import RedisStore

openai = pytest.importorskip("openai")

ITEMS = ({"type": "message", "role": "user", "content": "héllo \ud83d"},)  # a lone surrogate survives the JSON
OUT = ({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": []}]},)


def _record(rid: str, prev: str | None = None) -> StoredResponse:
    return StoredResponse(rid, prev, ITEMS, OUT, MODEL, 1700000000, {"id": rid, "object": "response", "output": list(OUT)})


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


def test_redis_store_round_trip_expiry_and_scopes(redis_url):
    store = RedisStore.from_url(redis_url, prefix="t1", ttl=60)
    store.save(_record("resp_a"))
    store.save(_record("resp_b", "resp_a"))
    got = store.load("resp_b")
    assert got == _record("resp_b", "resp_a")
    assert store.load("resp_nope") is None
    assert 0 < store.client.pttl(b"t1:resp_a") <= 60_000
    assert history(store, "resp_b") == [*ITEMS, *OUT, *ITEMS, *OUT]
    alice, bob = ScopedStore(store, "alice"), ScopedStore(store, "bob")
    alice.save(_record("resp_c", "resp_x"))
    assert alice.load("resp_c") == _record("resp_c", "resp_x") and bob.load("resp_c") is None
    assert store.load("5:alice/resp_c").previous_response_id == "5:alice/resp_x"


def test_redis_down_is_a_clear_error_not_a_miss():
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", retry=Retry(NoBackoff(), 0))
    with pytest.raises(StoreUnavailable, match="conversation store unavailable"):
        store.load("resp_a")
    with pytest.raises(StoreUnavailable):
        store.save(_record("resp_a"))


def _app(store: Any, turns: int = 4) -> Any:
    return recipe.serve.app(ReplayEngine(load_turns([{"text": f"Answer {i}." + EOS} for i in range(turns)])), store=store)


def test_a_fleet_shares_turns_through_redis(redis_url):
    with running(_app(RedisStore.from_url(redis_url, prefix="fleet"))) as a, running(_app(RedisStore.from_url(redis_url, prefix="fleet"))) as b:
        ca = openai.OpenAI(base_url=f"{a.url}/v1", api_key="x", max_retries=0)
        cb = openai.OpenAI(base_url=f"{b.url}/v1", api_key="x", max_retries=0)
        first = ca.responses.create(model=MODEL, input="Question one?", reasoning={"effort": "none"})
        second = cb.responses.create(model=MODEL, input="And two?", previous_response_id=first.id, reasoning={"effort": "none"})
        assert second.previous_response_id == first.id
        assert cb.responses.retrieve(first.id).output_text == "Answer 0."
        assert ca.responses.retrieve(second.id).output_text == "Answer 0."  # b's own replay starts at turn 0


def test_redis_down_answers_503_and_never_a_wrong_hit():
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0", retry=Retry(NoBackoff(), 0))
    with running(_app(store)) as s:
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            client.responses.create(model=MODEL, input="More?", previous_response_id="resp_abc")
        assert info.value.status_code == 503 and info.value.body["code"] == "store_unavailable"
        assert "conversation store unavailable" in info.value.message
        with pytest.raises(openai.APIStatusError) as got:
            client.responses.retrieve("resp_abc")
        assert got.value.status_code == 503
        # a turn that needs no history is still answered; the failed save is counted
        r = client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "none"})
        assert r.output_text == "Answer 0."
        metrics = httpx.get(f"{s.url}/metrics").text
        assert "recipe_store_errors_total 3.0" in metrics
        # chat never touches the store
        assert client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}]).choices


def test_sqlite_store_keeps_responses_and_reads_older_files(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE responses (id TEXT PRIMARY KEY, previous_id TEXT, model TEXT, created_at INTEGER,"
                 " input BLOB NOT NULL, output BLOB NOT NULL)")
    conn.execute("INSERT INTO responses VALUES ('resp_old', NULL, 'm', 1, '[]', '[]')")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    assert store.load("resp_old") == StoredResponse("resp_old", None, (), (), "m", 1, None)
    store.save(_record("resp_new"))
    store.close()
    assert SQLiteStore(path).load("resp_new") == _record("resp_new")


def test_responses_are_stored_unless_store_false(tmp_path):
    store = SQLiteStore(tmp_path / "r.sqlite3")
    with running(_app(store)) as s:
        client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
        kept = client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "none"})
        gone = client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "none"}, store=False)
        assert kept.store is True and gone.store is False
        assert store.load(kept.id).response["id"] == kept.id and store.load(gone.id) is None
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(gone.id)


def test_memory_store_scopes():
    inner = MemoryStore()
    ScopedStore(inner, "t").save(_record("resp_1"))
    assert inner.load("1:t/resp_1").id == "1:t/resp_1" and ScopedStore(inner, "u").load("resp_1") is None
    assert ScopedStore(inner, "t").load("resp_1").id == "resp_1" and ScopedStore(inner, "").load("1:t/resp_1") is None
