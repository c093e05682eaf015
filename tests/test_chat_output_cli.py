"""``recipe complete``: exit statuses, response JSON, SSE stream (through recipe.cli.main, with the
``complete`` command registered the way recipe/cli/main.py registers it)."""

from __future__ import annotations

import argparse
import json

import pytest

from chat_output_support import accumulate_chunks, chat_rows, structural
from recipe.cli import complete as cli_complete
from recipe.cli import main as cli

ROW = {r["scenario"]: r for r in chat_rows()}["think_tool"]


@pytest.fixture
def run(monkeypatch, capsysbinary):
    orig = cli.build_parser

    def build(argv=None):
        p = orig(argv)
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        if "complete" not in sub.choices:
            cli_complete.register(sub)
        return p

    monkeypatch.setattr(cli, "build_parser", build)

    def _run(*argv: str) -> tuple[int, bytes, str]:
        code = cli.main(list(argv))
        cap = capsysbinary.readouterr()
        return code, cap.out, cap.err.decode()

    return _run


@pytest.fixture
def files(tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(ROW["request"]))
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps(ROW["completion_token_ids"]))
    text = tmp_path / "out.txt"
    text.write_text(ROW["completion_text"], encoding="utf-8")
    return tmp_path, str(req), str(ids), str(text)


def _want(**usage):
    want = structural(ROW["accumulated"])
    want["usage"] = dict(want["usage"], **usage)
    return want


def test_response_from_ids_and_text_equal_recording(run, files):
    _, req, ids, text = files
    common = ["--prompt-tokens", "20", "--cached-tokens", "5", "--seed", "1", "--created", "9", "--id", "chatcmpl-test",
              "--fingerprint", "fp_test"]
    code, out, err = run("complete", "--request", req, "--ids", ids, *common)
    assert code == 0, err
    got = json.loads(out)
    assert got["created"] == 9
    got["model"] = "m"
    assert structural(got) == _want()
    code, out2, _ = run("complete", "--request", req, "--text", text, *common)
    assert code == 0 and out2 == out  # same ids, same seed: byte-identical


def test_stream_is_sse_and_accumulates_to_the_response(run, files):
    _, req, ids, _ = files
    code, resp, _ = run("complete", "--request", req, "--ids", ids, "--seed", "4", "--created", "1")
    code2, sse, _ = run("complete", "--request", req, "--ids", ids, "--seed", "4", "--created", "1", "--stream")
    assert code == code2 == 0
    frames = sse.split(b"\n\n")
    assert frames[-1] == b"" and frames[-2] == b"data: [DONE]"
    payloads = [json.loads(f[len(b"data: "):]) for f in frames[:-2]]
    assert all(f.startswith(b"data: {") for f in frames[:-2])
    assert accumulate_chunks(payloads) == json.loads(resp)
    assert payloads[0]["usage"] is None and payloads[-1]["usage"]["prompt_tokens"] > 20  # default: prompt length


def test_finish_option(run, files):
    _, req, ids, _ = files
    code, out, _ = run("complete", "--request", req, "--ids", ids, "--finish", "length")
    assert code == 0 and json.loads(out)["choices"][0]["finish_reason"] == "length"


def test_rejected_request_prints_api_error(run, files):
    tmp, _, ids, _ = files
    bad = tmp / "bad.json"
    bad.write_text(json.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]}))
    code, out, err = run("complete", "--request", str(bad), "--ids", ids)
    assert code == 1
    body = json.loads(out)
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["param"] == "model"
    assert "rejected" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, code",
    [
        (["--ids", "IDS"], 2),  # --request missing
        (["--request", "REQ"], 2),  # neither --text nor --ids
        (["--request", "REQ", "--ids", "IDS", "--text", "TXT"], 2),
        (["--request", "REQ", "--ids", "IDS", "--finish", "bogus"], 2),
        (["--request", "REQ", "--ids", "IDS", "--cached-tokens", "-1"], 2),
        (["--request", "REQ", "--ids", "IDS", "--prompt-tokens", "3", "--cached-tokens", "4"], 2),
        (["--request", "REQ", "--ids", "TXT"], 1),  # not JSON
        (["--request", "REQ", "--ids", "BADIDS"], 1),  # ids out of vocabulary
        (["--request", "MISSING", "--ids", "IDS"], 1),
        (["--request", "REQ", "--text", "BIN"], 1),  # not UTF-8
    ],
)
def test_exit_statuses(run, files, argv, code):
    tmp, req, ids, text = files
    (tmp / "badids.json").write_text("[1, -2, 99999999]")
    (tmp / "bin.txt").write_bytes(b"\xff\xfe")
    subst = {"REQ": req, "IDS": ids, "TXT": text, "BADIDS": str(tmp / "badids.json"), "MISSING": str(tmp / "nope.json"),
             "BIN": str(tmp / "bin.txt")}
    got, out, err = run("complete", *[subst.get(a, a) for a in argv])
    assert got == code, err
    assert "Traceback" not in err and err.startswith("recipe: ")
