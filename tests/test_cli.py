"""The ``recipe`` command: exit statuses, JSON contract, and no tracebacks."""

from __future__ import annotations

import argparse

import json
import os
import subprocess
import sys

import pytest

from fixtures import api_requests
from recipe.cli.main import main
from recipe.errors import RequestError

ROW = next(r for r in api_requests("chat") if "error" not in r and r["id"] == "C12")
BAD = next(r for r in api_requests("chat") if r["id"] == "C11")  # named tool choice naming no declared tool


def run(argv, capsys, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        import io

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_render_json_matches_conformance(tmp_path, capsys):
    f = tmp_path / "req.json"
    f.write_text(json.dumps(ROW["request"]))
    code, out, err = run(["render", str(f), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["api"] == "chat" and doc["model"] == "deepseek-v4-pro" and doc["encoding"] == "deepseek_v4"
    assert doc["prompt"] == ROW["prompt"] and doc["token_ids"] == ROW["token_ids"]
    assert doc["num_tokens"] == len(ROW["token_ids"])


def test_render_stdin_and_model_override(capsys, monkeypatch):
    body = json.dumps({"model": "nope", "messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "disabled"}})
    code, out, _ = run(["render", "-", "--json", "--model", "deepseek-v4-flash"], capsys, body, monkeypatch)
    from recipe.tokenizer import load_tokenizer

    hi = load_tokenizer().encode_ordinary("hi")
    assert code == 0 and json.loads(out)["token_ids"] == [0, 128803, *hi, 128804, 128822]


def test_rejected_request_exit_1_with_api_error(tmp_path, capsys):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(BAD["request"]))
    code, out, err = run(["render", str(f), "--json"], capsys)
    assert code == 1
    assert json.loads(out)["error"]["message"] == BAD["error"]["body"]["error"]["message"]
    assert "rejected" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [["render", "{f}", "--json"], ["grammar", "{f}"], ["complete", "--request", "{f}", "--text", "{t}"],
     ["cache", "keys", "{f}"], ["cache", "diff", "{f}", "{f}"]],
)
def test_every_command_reports_a_rejected_request_the_same_way(argv, tmp_path, capsys):
    """README's CLI rule: exit 1, the API's error JSON (indented) on stdout, one line on stderr."""
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(BAD["request"]))
    t = tmp_path / "answer.txt"
    t.write_text("hi")
    code, out, err = run([a.replace("{f}", str(f)).replace("{t}", str(t)) for a in argv], capsys)
    assert code == 1
    error = json.loads(out)["error"]
    assert error["message"] == BAD["error"]["body"]["error"]["message"] and error["param"] == "tool_choice"
    assert out.startswith('{\n  "error": {')
    assert "rejected" in err and err.count("\n") == 1 and "Traceback" not in err


def test_unknown_model_names_supported_ones(tmp_path, capsys):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}))
    code, out, _ = run(["render", str(f), "--json"], capsys)
    assert code == 1
    error = json.loads(out)["error"]
    assert error["param"] == "model"
    assert error["message"] == ("The model 'gpt-4o' is not supported. 23 model names are supported: "
                                "GET /v1/models (recipe serve) or `recipe models` lists them.")
    f.write_text(json.dumps({"model": "deepseek-v4", "messages": [{"role": "user", "content": "x"}]}))
    code, out, _ = run(["render", str(f), "--json"], capsys)
    message = json.loads(out)["error"]["message"]
    assert message.startswith("The model 'deepseek-v4' is not supported; closest: ") and "DeepSeek-V4-Pro" in message
    assert len(message) < 200  # one short line (deepseek-recipe's lists every name: Options.unknown_model="list")


def test_unknown_model_message_in_parity_lists_every_name():
    from recipe.options import PARITY_OPTIONS
    from recipe.pipeline import prepare

    with pytest.raises(RequestError) as info:
        prepare({"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]}, "chat", options=PARITY_OPTIONS)
    assert info.value.message == ("The supported API model names are DeepSeek-V4-Flash, DeepSeek-V4-Pro, DeepSeek-V4.1-Flash, "
                                  "deepseek-v4-flash, deepseek-v4-pro, deepseek-v4.1-flash, but you passed gpt-4o.")


def test_models_command_lists_what_requests_may_name(capsys):
    from recipe.options import DEFAULT_OPTIONS

    code, out, _ = run(["models", "--json"], capsys)
    rows = json.loads(out)["models"]
    assert code == 0 and [r["name"] for r in rows] == sorted({*DEFAULT_OPTIONS.models, *DEFAULT_OPTIONS.aliases})
    assert {"name": "deepseek-r1", "family": "deepseek_r1", "alias_of": None, "thinking": None} in rows
    assert {"name": "deepseek-chat", "family": "deepseek_v4", "alias_of": "deepseek-v4-flash", "thinking": False} in rows
    code, out, _ = run(["models"], capsys)
    assert code == 0 and "deepseek-reasoner" in out and "(alias of deepseek-v4-flash, thinking)" in out


def test_options_repr_is_short():
    """help(recipe.prepare) shows its default options as ``Options()``, not the whole model table."""
    import pydoc

    import recipe
    from recipe.options import PARITY_OPTIONS, Options

    assert repr(Options()) == "Options()"
    assert repr(Options(developer_role="reject")) == "Options(developer_role='reject')"
    assert repr(PARITY_OPTIONS).startswith("Options(models=<6 names>, developer_role='reject'")
    sig = pydoc.render_doc(recipe.prepare, renderer=pydoc.plaintext).split("\n")[2]
    assert "options: 'Options' = Options()," in sig and len(sig) < 400


@pytest.mark.parametrize("argv", [["render"], ["complete"], ["grammar"], ["cache", "keys"], ["cache", "diff"],
                                  ["cache", "simulate"], ["models"], ["tokenize"]])
def test_every_option_has_help(argv, capsys):
    """In ``--help``, every argument line (two-space indent) has a description: on its line after a gap,
    or on the next, deeper-indented line."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("arguments:") or line == "options:")
    missing = []
    for k, line in enumerate(lines[start:], start):
        if not line.startswith("  ") or line.startswith("   ") or line.strip().startswith("-h, --help"):
            continue
        described = "  " in line.strip() or (k + 1 < len(lines) and lines[k + 1].startswith("    "))
        if not described:
            missing.append(line.strip())
    assert missing == [], (argv, missing)


def test_api_auto_reads_a_vllm_style_chat_body_with_top_k_as_chat():
    from recipe.pipeline import detect_api

    chat = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "x"}], "top_k": 20}
    assert detect_api(chat) == "chat"
    assert detect_api({**chat, "max_tokens": 9, "min_p": 0.05}) == "chat"
    assert detect_api({**chat, "max_tokens": 9, "messages": [{"role": "system", "content": "s"}, *chat["messages"]]}) == "chat"
    assert detect_api({**chat, "max_tokens": 9}) == "messages"  # valid in both: Anthropic's own field decides


@pytest.mark.parametrize(
    "argv",
    [["render"], ["render", "--api", "xml", "f"], ["bogus"], ["render", "--example", "nope"], [], ["tokenize"]],
)
def test_usage_errors_exit_2(argv, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2 and "Traceback" not in err


def test_unreadable_and_invalid_inputs_exit_1(tmp_path, capsys):
    code, _, err = run(["render", str(tmp_path / "missing.json")], capsys)
    assert code == 1 and "cannot read" in err
    f = tmp_path / "junk.json"
    f.write_bytes(b"\xff{not json")
    code, out, err = run(["render", str(f), "--json"], capsys)
    assert code == 1 and "error" in json.loads(out)


def test_human_view_shows_count(capsys):
    code, out, _ = run(["render", "--example", "weather"], capsys)
    assert code == 0 and "<｜Assistant｜>" in out and "tokens " in out


def test_tokenize_json_keeps_special_spellings_as_text(capsys):
    code, out, _ = run(["tokenize", "a<｜User｜>b", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["token_ids"] == [67, 30, 28217, 6756, 28217, 32, 68]
    assert "".join(doc["pieces"]) == "a<｜User｜>b"


def test_console_script_runs_in_a_subprocess():
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run([sys.executable, "-m", "recipe.cli.main", "render", "--example", "hello", "--json"], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["token_ids"][0] == 0
