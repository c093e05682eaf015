"""``recipe render`` / ``recipe complete`` with DeepSeek-V4.1: the prompt without ids (and why) on
the embedded vocabulary, exact ids with a V4.1 vocabulary (``--tokenizer``), V4.1 output."""

from __future__ import annotations

import json

from fixtures import jsonl
from recipe.cli.main import main
from v41_support import synthetic_v41_path

ROW = next(r for r in jsonl("deepseek_v41/chat_v41.jsonl") if r["id"] == "v41-image_data_url")


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _request(tmp_path):
    f = tmp_path / "req.json"
    f.write_text(json.dumps(ROW["request"]), encoding="utf-8")
    return f


def test_render_json_without_a_v41_vocabulary_has_the_prompt_and_a_note(tmp_path, capsys):
    code, out, err = run(["render", str(_request(tmp_path)), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["encoding"] == "deepseek_v41" and doc["prompt"] == ROW["prompt"]
    assert doc["special_ranges"] == ROW["special_ranges"]
    assert doc["token_ids"] is None and doc["num_tokens"] is None
    assert "'<｜System｜>'" in doc["note"] and "--tokenizer" in doc["note"]
    assert [{k: s[k] for k in ("kind", "detail", "path")} for s in doc["image_sources"]] == [
        {k: s[k] for k in ("kind", "detail", "path")} for s in ROW["image_sources"]]
    assert doc["image_sources"][0]["url"] == ROW["image_sources"][0]["data_url"]


def test_render_json_with_a_v41_vocabulary_has_exact_ids(tmp_path, capsys):
    code, out, err = run(["render", str(_request(tmp_path)), "--json", "--tokenizer", str(synthetic_v41_path())], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["token_ids"] == ROW["token_ids_synth_v41"] and doc["num_tokens"] == len(ROW["token_ids_synth_v41"])
    assert "note" not in doc


def test_render_view_says_why_there_are_no_ids(tmp_path, capsys):
    code, out, _ = run(["render", str(_request(tmp_path))], capsys)
    assert code == 0
    assert "<｜System｜>" in out and "no token ids" in out and "tokenizer.json" in out


def test_complete_needs_the_prompt_length(tmp_path, capsys):
    text = tmp_path / "out.txt"
    text.write_text("Hello<｜end▁of▁sentence｜>", encoding="utf-8")  # the request has thinking off
    req = _request(tmp_path)
    code, out, err = run(["complete", "--request", str(req), "--text", str(text)], capsys)
    assert code == 1 and "--prompt-tokens" in err and "<｜System｜>" in err
    code, out, err = run(["complete", "--request", str(req), "--text", str(text), "--prompt-tokens", "30"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["choices"][0]["message"]["content"] == "Hello" and doc["usage"]["prompt_tokens"] == 30
    code, out, err = run(["complete", "--request", str(req), "--text", str(text), "--tokenizer", str(synthetic_v41_path())], capsys)
    assert code == 0, err
    assert json.loads(out)["usage"]["prompt_tokens"] == len(ROW["token_ids_synth_v41"])


def test_complete_reads_the_spaced_dsml_of_v41(tmp_path, capsys):
    body = {"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"type": "function", "function": {"name": "get_w", "parameters": {"type": "object"}}}], "reasoning_effort": "none"}
    req = tmp_path / "req.json"
    req.write_text(json.dumps(body), encoding="utf-8")
    text = tmp_path / "out.txt"
    d = "｜DSML｜"
    text.write_text(f'\n\n<{d} calls>\n<{d} invoke name="get_w">\n<{d} parameter name="city" string="true">Paris</{d} parameter>\n'
                    f'</{d} invoke>\n</{d} calls><｜end▁of▁sentence｜>', encoding="utf-8")
    code, out, err = run(["complete", "--request", str(req), "--text", str(text), "--prompt-tokens", "9"], capsys)
    assert code == 0, err
    msg = json.loads(out)["choices"][0]
    assert msg["finish_reason"] == "tool_calls"
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["message"]["tool_calls"]] == [("get_w", {"city": "Paris"})]
