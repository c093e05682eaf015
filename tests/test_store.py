"""Conversations held by the server: previous_response_id expansion, memory and SQLite stores."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recipe.errors import RequestError
from recipe.pipeline import prepare
from recipe.store.conversations import MemoryStore, SQLiteStore, StoredResponse, expand_request, history, remember

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


def _turn(n: int) -> tuple[list, list]:
    """Turn n's own input items and the output items a response would carry."""
    inputs = [{"role": "user", "content": f"question {n}"}] if n == 0 else [
        {"type": "function_call_output", "call_id": f"call_{n - 1}", "output": f"result {n - 1}"}
    ]
    outputs = [
        {"type": "reasoning", "id": f"rs_{n}", "status": "completed", "summary": [],
         "content": [{"type": "reasoning_text", "text": f"thinking {n}"}], "encrypted_content": None},
        {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed", "phase": "commentary",
         "content": [{"type": "output_text", "text": f"checking {n}", "annotations": [], "logprobs": []}]},
        {"type": "function_call", "id": f"fc_{n}", "status": "completed", "call_id": f"call_{n}",
         "name": "get_weather", "arguments": json.dumps({"city": f"c{n}"})},
    ]
    return inputs, outputs


@pytest.mark.parametrize("make_store", [MemoryStore, lambda: SQLiteStore(":memory:")])
def test_loop_with_previous_response_id_equals_full_history(make_store):
    store = make_store()
    full: list = []
    prev = None
    for n in range(4):
        inputs, outputs = _turn(n)
        full += inputs
        chained = {"model": "deepseek-v4-pro", "input": inputs, "tools": TOOLS, "instructions": "Be brief."}
        if prev:
            chained["previous_response_id"] = prev
        explicit = {"model": "deepseek-v4-pro", "input": list(full), "tools": TOOLS, "instructions": "Be brief."}
        a = prepare(chained, "responses", store=store)
        b = prepare(explicit, "responses")
        assert a.prompt.text == b.prompt.text and a.token_ids == b.token_ids
        rid = f"resp_{n}"
        assert remember(store, chained, {"id": rid, "output": outputs, "model": "m", "created_at": 1})
        full += outputs
        prev = rid


def test_unknown_previous_response_is_openai_400():
    with pytest.raises(RequestError) as info:
        prepare({"model": "deepseek-v4-pro", "input": "hi", "previous_response_id": "resp_nope"}, "responses", store=MemoryStore())
    err = info.value
    assert (err.status, err.param, err.code) == (400, "previous_response_id", "previous_response_not_found")
    assert "resp_nope" in err.message


def _stored(store, rid: str, inputs: list, outputs: list) -> None:
    remember(store, {"model": "deepseek-v4-pro", "input": inputs}, {"id": rid, "output": outputs, "model": "m", "created_at": 1})


@pytest.mark.parametrize(
    "own_input, param, in_message",
    [
        ([{"role": "user", "content": 5}], "input[0].content", None),
        ([{"role": "user", "content": "ok"}, {"type": "function_call_output", "call_id": "nope", "output": "x"}],
         "input[1].call_id", "nope"),
        ([{"role": "user", "content": "a"},
          {"role": "assistant", "content": [{"type": "output_text", "text": "x"}, {"type": "input_image", "image_url": "https://x/a.png"}]}],
         "input[1].content", "input[1]:"),  # DeepSeek-V4.1 refuses it, with the path in the message
    ],
)
def test_errors_in_the_new_input_name_the_request_s_own_index(own_input, param, in_message):
    """The stored history (3 items) goes in front of the request's input; an error in the request's
    own items names the index the client sent, exactly as the same items without history would."""
    store = MemoryStore()
    _stored(store, "resp_1", [{"role": "user", "content": "hi"}, {"role": "user", "content": "again"}],
            [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}])
    with pytest.raises(RequestError) as chained:
        prepare({"model": "DeepSeek-V4.1-Flash", "previous_response_id": "resp_1", "input": own_input}, "responses", store=store)
    with pytest.raises(RequestError) as alone:
        prepare({"model": "DeepSeek-V4.1-Flash", "input": own_input}, "responses")
    assert chained.value.param == alone.value.param
    assert chained.value.param.startswith(param)
    assert chained.value.message == alone.value.message
    if in_message:
        assert in_message in chained.value.message


def test_an_error_inside_the_stored_history_is_reported_on_previous_response_id():
    store = MemoryStore()
    _stored(store, "resp_1", [{"type": "function_call_output", "call_id": "zz", "output": "x"}], [])
    with pytest.raises(RequestError) as info:
        prepare({"model": "deepseek-v4-pro", "previous_response_id": "resp_1", "input": "hi"}, "responses", store=store)
    err = info.value
    assert err.param == "previous_response_id"
    assert "zz" in err.message and "stored conversation" in err.message


def test_store_false_is_not_saved_and_input_string_is_a_user_item():
    store = MemoryStore()
    assert not remember(store, {"input": "x", "store": False}, {"id": "r1", "output": []})
    assert store.load("r1") is None
    assert remember(store, {"input": "x"}, {"id": "r2", "output": []})
    assert history(store, "r2") == [{"type": "message", "role": "user", "content": "x"}]


def test_cycles_are_refused_not_followed_forever():
    store = MemoryStore()
    store.save(StoredResponse("a", "b", (), ()))
    store.save(StoredResponse("b", "a", (), ()))
    with pytest.raises(RequestError):
        history(store, "a")


def test_expand_does_not_mutate_the_body():
    store = MemoryStore()
    store.save(StoredResponse("r", None, ({"role": "user", "content": "q"},), ()))
    body = {"input": [{"role": "user", "content": "next"}], "previous_response_id": "r"}
    snapshot = json.dumps(body)
    out = expand_request(body, store)
    assert json.dumps(body) == snapshot
    assert [i["content"] for i in out["input"]] == ["q", "next"]


def test_memory_store_is_lru_bounded():
    store = MemoryStore(max_entries=2)
    for k in range(3):
        store.save(StoredResponse(f"r{k}", None, (), ()))
    assert store.load("r0") is None and store.load("r2") is not None


def test_sqlite_store_survives_a_process_restart(tmp_path):
    db = tmp_path / "responses.sqlite"
    write = (
        "import sys; from recipe.store.conversations import SQLiteStore, remember;"
        "s = SQLiteStore(sys.argv[1]);"
        "remember(s, {'input': 'hello'}, {'id': 'resp_1', 'output': [{'type': 'message', 'role': 'assistant', "
        "'content': [{'type': 'output_text', 'text': 'hi'}]}], 'model': 'm', 'created_at': 5})"
    )
    subprocess.run([sys.executable, "-c", write, str(db)], check=True, timeout=60)
    read = (
        "import sys, json; from recipe.store.conversations import SQLiteStore, history;"
        "print(json.dumps(history(SQLiteStore(sys.argv[1]), 'resp_1')))"
    )
    out = subprocess.run([sys.executable, "-c", read, str(db)], check=True, capture_output=True, text=True, timeout=60)
    items = json.loads(out.stdout)
    assert items[0] == {"type": "message", "role": "user", "content": "hello"}
    assert items[1]["content"][0]["text"] == "hi"
