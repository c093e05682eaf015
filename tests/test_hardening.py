"""Inputs a fresh tester used to break things: each now gives a clean error or a correct answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recipe.cli.main import main
from recipe.output.driver import CompletionStream, response
from recipe.errors import RequestError
from recipe.pipeline import prepare
from recipe.store.conversations import MemoryStore, SQLiteStore, remember, history
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
CHAT = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"}}


def _deep(levels: int) -> dict:
    d: dict = {}
    for _ in range(levels):
        d = {"a": d}
    return d


@pytest.mark.parametrize("api, body", [
    ("chat", {**CHAT, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": _deep(1000)}}}}]}),
    ("responses", {"model": "deepseek-v4-pro", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {"a": _deep(1000)}}}]}),
    ("messages", {"model": "deepseek-v4-pro", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"a": _deep(1000)}}}]}),
])
def test_deep_dict_bodies_get_the_json_nesting_limit(api, body):
    with pytest.raises(RequestError) as info:
        prepare(body, api)
    assert info.value.stage == "parse" and "recursion limit" in info.value.message


def test_push_accepts_arrays_and_rejects_bad_ids_with_keyerror():
    prep = prepare(CHAT, "chat")
    ids = TOK.encode_ordinary("Hello there")
    assert response(prep, np.array(ids), seed=1) == response(prep, ids, seed=1)
    with pytest.raises(KeyError):
        response(prep, [ids[0], -5], seed=1)


def test_lone_surrogates_stream_as_json_escapes():
    cs = CompletionStream(prepare(CHAT, "chat"), seed=1)
    data = cs.sse(cs.push_text("a\ud800", 1) + cs.finish("stop"))
    chunk = json.loads(data.split(b"\n\n")[1].removeprefix(b"data: "))
    assert chunk["choices"][0]["delta"]["content"] == "a\ud800"
    store = SQLiteStore(":memory:")
    remember(store, {"input": "q\udfff"}, {"id": "r1", "output": []})
    assert history(store, "r1")[0]["content"] == "q\udfff"


def test_remember_refuses_what_is_not_a_response():
    with pytest.raises(ValueError):
        remember(MemoryStore(), {"input": "x"}, {"id": 5, "output": "zz"})


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_overflowing_number_argument_is_a_string_in_stream_and_response(api):
    tools = {"chat": {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
             "messages": {"tools": [{"name": "f", "input_schema": {"type": "object"}}]}}[api]
    body = {**CHAT, **tools} if api == "chat" else {"model": "deepseek-v4-pro", "max_tokens": 50, "thinking": {"type": "disabled"},
                                                      "messages": [{"role": "user", "content": "x"}], **tools}
    prep = prepare(body, api)
    out = TOK.encode_with_special_tokens('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="n" '
                                         'string="false">1e999</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    final = response(prep, out, seed=1)
    if api == "chat":
        assert json.loads(final["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"n": "1e999"}
    else:
        assert final["content"][-1]["input"] == {"n": "1e999"}


@pytest.mark.parametrize("argv, code, needle", [
    (["--version"], 0, ""),
    (["render", "recipe/examples/hello.json", "--example", "hello"], 2, "not both"),
    (["cache", "simulate", "/dev/null", "--hit-price", "nan"], 2, "finite"),
    (["render", "--example", "hello", "--model", "\udcff"], 2, "not valid UTF-8"),
    (["render", "--example", "hello", "--tokenizer", "/"], 1, "cannot read tokenizer"),
])
def test_cli_errors_are_one_line(argv, code, needle, capsys):
    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's --version exits 0 itself
        got = exc.code
    err = capsys.readouterr().err
    assert got == code and needle in err and "Traceback" not in err


def test_cli_bad_vocabularies_and_ids(tmp_path, capsys):
    empty = tmp_path / "t.json"
    empty.write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}}))
    assert main(["tokenize", "hi", "--tokenizer", str(empty)]) == 1
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"token_ids": [1, 2, 3, 99999999999]}))
    assert main(["cache", "keys", str(ids)]) == 1
    assert main(["cache", "keys", str(ids), "--block-size", "2147483648"]) == 1
    assert "Traceback" not in capsys.readouterr().err
