"""The ``recipe`` command with the earlier DeepSeek generations: each family's vocabulary, prompt,
output and cache keys (the tokenizer fingerprint keeps V3-vocabulary keys apart from V4's)."""

from __future__ import annotations

import json

from v3x_support import hf_v3

from recipe.cli.main import main
from recipe.tokenizer import load_tokenizer, load_v3_tokenizer

REQ = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Weather in Paris?"}],
       "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _file(tmp_path, model: str) -> str:
    f = tmp_path / f"{model}.json"
    f.write_text(json.dumps({"model": model, **REQ}))
    return str(f)


def test_render_uses_the_family_vocabulary(tmp_path, capsys):
    for model, encoding in [("deepseek-v3", "deepseek_v3"), ("deepseek-r1", "deepseek_r1"),
                            ("deepseek-v3.1", "deepseek_v3_1"), ("DeepSeek-V3.2", "deepseek_v3_2")]:
        code, out, err = run(["render", _file(tmp_path, model), "--json"], capsys)
        assert code == 0, err
        doc = json.loads(out)
        assert doc["encoding"] == encoding
        assert doc["token_ids"] == hf_v3().encode(doc["prompt"], add_special_tokens=False).ids
    code, out, _ = run(["render", _file(tmp_path, "deepseek-v3.1"), "--json"], capsys)
    assert json.loads(out)["conversion"]["thinking_stage"] == "reasoning"


def test_tokenize_with_a_model_s_vocabulary(capsys):
    code, out, _ = run(["tokenize", "｜DSML｜ 中文", "--json", "--model", "deepseek-v3.2"], capsys)
    assert code == 0 and json.loads(out)["token_ids"] == load_v3_tokenizer().encode_ordinary("｜DSML｜ 中文")


def test_complete_reads_the_family_output(tmp_path, capsys):
    req = _file(tmp_path, "deepseek-v3.1")
    text = tmp_path / "out.txt"
    text.write_text("Hmm</think>Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
                    "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>")
    code, out, err = run(["complete", "--request", req, "--text", str(text)], capsys)
    assert code == 0, err
    msg = json.loads(out)["choices"][0]["message"]
    assert msg["reasoning_content"] == "Hmm" and msg["content"] == "Sure."
    assert msg["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_cache_keys_bind_the_family_vocabulary(tmp_path, capsys):
    import recipe
    from recipe.cache.keys import KeySpec, block_keys

    f = _file(tmp_path, "deepseek-r1")
    code, out, err = run(["cache", "keys", f, "--json", "--block-size", "4"], capsys)
    assert code == 0, err
    ids = recipe.prepare({"model": "deepseek-r1", **REQ}).token_ids
    v3 = block_keys(ids, KeySpec("native", 4, "deepseek-r1", load_v3_tokenizer().fingerprint)).hex()
    v4 = block_keys(ids, KeySpec("native", 4, "deepseek-r1", load_tokenizer().fingerprint)).hex()
    assert json.loads(out)["keys"] == v3 and not set(v3) & set(v4)
