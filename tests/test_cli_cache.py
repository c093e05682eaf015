"""``cache keys|diff|simulate`` through a small argparse harness (recipe/cli/main.py wires the same register)."""

from __future__ import annotations

import argparse
import hashlib
import json

import cbor2
import pytest

from recipe.cli import cache as cli_cache


def run(argv, capsys, loader=None):
    parser = argparse.ArgumentParser(prog="recipe")
    cli_cache.register(parser.add_subparsers(dest="command"), loader)
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code, "", capsys.readouterr().err
    code = ns.run(ns)
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def vllm_reference(ids, block_size, seed, salt=None, tagged=False):
    """vLLM's block hashes with cbor2 + hashlib; ``tagged``: vLLM 0.32's ``("cache_salt", salt)``."""
    h = hashlib.sha256(cbor2.dumps(seed, canonical=True)).digest()
    out = []
    for i in range(0, len(ids) - block_size + 1, block_size):
        extra = ((("cache_salt", salt) if tagged else salt),) if i == 0 and salt else None
        h = hashlib.sha256(cbor2.dumps((h, tuple(ids[i : i + block_size]), extra), canonical=True)).digest()
        out.append(h.hex())
    return out


IDS = [(i * 7919) % 129_280 for i in range(300)]


def test_keys_json_vllm_matches_cbor2(tmp_path, capsys):
    f = write(tmp_path, "p.json", {"model": "deepseek-v4", "token_ids": IDS})
    code, out, _ = run(["cache", "keys", f, "--scheme", "vllm", "--hash-seed", "42", "--block-size", "16",
                        "--salt", "t1", "--json"], capsys)
    assert code == 0
    obj = json.loads(out)
    assert (obj["scheme"], obj["block_size"], obj["num_tokens"]) == ("vllm-sha256-cbor/1", 16, 300)
    assert obj["keys"] == vllm_reference(IDS, 16, "42", "t1")


def test_keys_vllm_tagged_extras_are_vllm_032s(tmp_path, capsys):
    """``--tagged-extras``: the salt hashed as vLLM 0.32 hashes it, the keys its KV events carry."""
    f = write(tmp_path, "p.json", {"model": "deepseek-v4", "token_ids": IDS})
    argv = ["cache", "keys", f, "--scheme", "vllm", "--hash-seed", "vllm-none-hash", "--block-size", "16", "--json"]
    code, out, err = run([*argv, "--salt", "t1", "--tagged-extras"], capsys)
    assert code == 0, err
    tagged = json.loads(out)["keys"]
    assert tagged == vllm_reference(IDS, 16, "vllm-none-hash", "t1", tagged=True)
    assert tagged[0] != vllm_reference(IDS, 16, "vllm-none-hash", "t1")[0]
    unsalted = [json.loads(run([*argv, *extra], capsys)[1])["keys"] for extra in ([], ["--tagged-extras"])]
    assert unsalted[0] == unsalted[1] == vllm_reference(IDS, 16, "vllm-none-hash")
    trace = write(tmp_path, "t.jsonl", json.dumps({"token_ids": IDS, "salt": "t1"}) + "\n")
    code, _, err = run(["cache", "simulate", trace, "--scheme", "vllm", "--hash-seed", "0", "--tagged-extras"], capsys)
    assert code == 0, err
    code, _, err = run(["cache", "keys", f, "--tagged-extras"], capsys)   # native keys have no extras
    assert code == 2 and "--tagged-extras is for --scheme vllm" in err


def test_keys_native_default_block_size_and_text_view(tmp_path, capsys):
    f = write(tmp_path, "p.json", {"model": "m", "token_ids": IDS, "tokenizer": "fp"})
    code, out, _ = run(["cache", "keys", f, "--json"], capsys)
    obj = json.loads(out)
    assert code == 0 and obj["scheme"] == "native-sha256/1" and obj["block_size"] == 64 and len(obj["keys"]) == 4
    code, salted, _ = run(["cache", "keys", f, "--json", "--salt", "x"], capsys)
    assert not set(json.loads(salted)["keys"]) & set(obj["keys"])
    code, out, _ = run(["cache", "keys", f], capsys)
    assert code == 0 and "full blocks=4" in out and obj["keys"][3] in out


def test_keys_uses_the_callback_for_request_files(tmp_path, capsys):
    f = write(tmp_path, "req.json", {"messages": [{"role": "user", "content": "hi"}]})
    seen = []

    def loader(path):
        seen.append(path)
        return "deepseek-v4", IDS[:40], []

    code, out, _ = run(["cache", "keys", f, "--scheme", "vllm", "--hash-seed", "0", "--block-size", "16", "--json"],
                       capsys, loader)
    assert code == 0 and seen == [f]
    assert json.loads(out)["keys"] == vllm_reference(IDS[:40], 16, "0")


def test_diff_reports_where_the_prefix_breaks(tmp_path, capsys):
    a = write(tmp_path, "a.json", {"token_ids": IDS[:200]})
    b_ids = IDS[:150] + [5] + IDS[151:260]
    b = write(tmp_path, "b.json", {"token_ids": b_ids, "boundaries": [[0, 0, 100], [1, 100, 200], [2, 200, 260]]})
    code, out, _ = run(["cache", "diff", a, b, "--json"], capsys)
    assert code == 0
    from recipe.tokenizer import load_tokenizer

    tok = load_tokenizer()  # (an ids file without a model: the default vocabulary shows the text)
    texts = {"text_before": tok.decode(IDS[138:150]), "text_a": tok.decode(IDS[150:162]), "text_b": tok.decode(b_ids[150:162])}
    assert json.loads(out) == {"shared_tokens": 150, "len_a": 200, "len_b": 260, "extends": False,
                               "shared_blocks": 2, "block_size": 64, "token_a": IDS[150], "token_b": 5,
                               "message_index": 1, **texts}
    code, out, _ = run(["cache", "diff", a, b], capsys)
    assert "breaks at token 150 in message 1" in out
    assert f"  A then: {texts['text_a']!r}…" in out and f"  B then: {texts['text_b']!r}…" in out
    assert f"  before: …{texts['text_before']!r}" in out
    code, out, _ = run(["cache", "diff", a, write(tmp_path, "c.json", {"token_ids": IDS})], capsys)
    assert "B extends A: all 200 tokens shared (3 blocks of 64)" in out


def test_simulate_reports_hit_rate_and_cost(tmp_path, capsys):
    lines = [{"token_ids": IDS[:130], "model": "m"}, {"token_ids": IDS[:300], "model": "m"},
             {"token_ids": IDS[:300], "model": "m", "salt": "other"}]
    trace = write(tmp_path, "t.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    code, out, _ = run(["cache", "simulate", trace, "--json"], capsys)
    assert code == 0
    rep = json.loads(out)
    # request 2 reuses request 1's two full blocks (128 tokens); the other tenant gets nothing.
    assert (rep["requests"], rep["prompt_tokens"], rep["hit_tokens"], rep["miss_tokens"]) == (3, 730, 128, 602)
    assert rep["hit_rate"] == pytest.approx(128 / 730)
    assert rep["cost"] == pytest.approx((128 * 0.14 + 602 * 0.55) / 1e6)
    code, out, _ = run(["cache", "simulate", trace, "--json", "--hit-price", "0", "--miss-price", "1"], capsys)
    assert json.loads(out)["cost"] == pytest.approx(602 / 1e6)
    code, out, _ = run(["cache", "simulate", trace], capsys)
    assert code == 0 and "hit rate 17.5%" in out


@pytest.mark.parametrize(
    "content",
    ["not json", json.dumps({"token_ids": [1, -2]}), json.dumps({"token_ids": "x"}), json.dumps([1, 2])],
)
def test_bad_input_files_exit_1(tmp_path, capsys, content):
    f = write(tmp_path, "bad.json", content)
    code, _, err = run(["cache", "keys", f], capsys)
    assert code == 1 and "bad.json" in err
    code, _, _ = run(["cache", "keys", str(tmp_path / "missing.json")], capsys)
    assert code == 1


def test_bad_trace_lines_and_failing_callback_exit_1(tmp_path, capsys):
    trace = write(tmp_path, "t.jsonl", '{"token_ids": [1, 2]}\n{"nope": 1}\n')
    code, _, err = run(["cache", "simulate", trace], capsys)
    assert code == 1 and "t.jsonl:2" in err

    def loader(path):
        raise ValueError("messages: required")

    f = write(tmp_path, "req.json", {"messages": []})
    code, _, err = run(["cache", "keys", f], capsys, loader)
    assert code == 1 and "messages: required" in err


@pytest.mark.parametrize(
    "argv",
    [["cache", "keys"], ["cache", "keys", "F", "--scheme", "md5"], ["cache", "keys", "F", "--block-size", "x"],
     ["cache", "bogus"]],
)
def test_usage_errors_exit_2(capsys, argv):
    assert run(argv, capsys)[0] == 2


def test_semantic_usage_errors_exit_2(tmp_path, capsys):
    f = write(tmp_path, "p.json", {"token_ids": IDS})
    code, _, err = run(["cache", "keys", f, "--scheme", "vllm"], capsys)  # no --hash-seed
    assert code == 2 and "PYTHONHASHSEED" in err and "vllm-none-hash" in err
    assert run(["cache", "keys", f, "--block-size", "0"], capsys)[0] == 2
    assert run(["cache", "diff", f, f, "--block-size", "0"], capsys)[0] == 2
    assert run(["cache"], capsys)[0] == 2


def test_trace_lines_split_on_newlines_only(tmp_path, capsys):
    """JSONL written with ensure_ascii=False holds U+2028, U+0085 … raw inside its strings; they are
    no line breaks (str.splitlines broke such a trace into invalid halves)."""
    lines = [{"token_ids": IDS[:130], "model": "m\u2028x\x85y\x1c"}, {"token_ids": IDS[:300], "model": "m\u2028x\x85y\x1c"}]
    trace = write(tmp_path, "t.jsonl", "\r\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\r\n")
    code, out, err = run(["cache", "simulate", trace, "--json"], capsys)
    assert code == 0, err
    assert (json.loads(out)["requests"], json.loads(out)["hit_tokens"]) == (2, 128)
