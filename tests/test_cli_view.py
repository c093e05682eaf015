"""The CLI's terminal views (recipe/cli/view.py) print through rich: styled on a terminal, the bare
text to a pipe or a file, nothing the prompt holds lost on the way."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest

from recipe.cli import view
from recipe.prompt import Prompt, Special, Text


def _prep(segments, ids=(1, 2, 3), note="the vocabulary lacks <｜System｜>"):
    prompt = Prompt(segments=tuple(Special(t) if special else Text(t) for special, t in segments))
    return SimpleNamespace(prompt=prompt, api="chat", model="deepseek-v4-flash", encoding="deepseek_v4",
                           conversation=SimpleNamespace(thinking=False), ids=None if ids is None else list(ids),
                           token_ids_note=note)


@pytest.fixture(autouse=True)
def _no_colour_switches(monkeypatch):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


def _piped(monkeypatch, call) -> str:
    buf = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stdout", buf)
    call()
    return buf.getvalue()


def test_a_piped_prompt_is_its_bare_text_and_the_summary(monkeypatch):
    prep = _prep([(True, "<｜begin▁of▁sentence｜>"), (True, "<｜User｜>"), (False, "Hi\n[bold]x[/] 中"),
                  (True, "<｜Assistant｜>")], ids=range(6))
    assert _piped(monkeypatch, lambda: view.print_prompt(prep)) == (
        "<｜begin▁of▁sentence｜><｜User｜>Hi\n[bold]x[/] 中<｜Assistant｜>\n\n"
        "api chat  model deepseek-v4-flash  encoding deepseek_v4  thinking False  special tokens 3  tokens 6\n")


def test_a_prompt_without_ids_says_why(monkeypatch):
    out = _piped(monkeypatch, lambda: view.print_prompt(_prep([(False, "Hi")], ids=None)))
    assert out == ("Hi\n\napi chat  model deepseek-v4-flash  encoding deepseek_v4  thinking False  "
                   "special tokens 0  no token ids\nno token ids: the vocabulary lacks <｜System｜>\n")


def test_piped_tokens_are_piece_and_id_then_the_count(monkeypatch):
    out = _piped(monkeypatch, lambda: view.print_tokens([7, 8, 9], ["Hel", "lo", "[x]"]))
    assert out == "Hel[7] lo[8] [x][9] \ntokens 3\n"


def test_a_terminal_gets_rich_styles(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    out = _piped(monkeypatch, lambda: view.print_prompt(_prep([(True, "<｜User｜>"), (False, "Hi")])))
    assert "\x1b[1;35m<｜User｜>\x1b[0m" in out and "\x1b[2mapi\x1b[0m chat" in out
    out = _piped(monkeypatch, lambda: view.print_tokens([7, 8], ["a", "b"]))
    assert "\x1b[32ma\x1b[0m" in out and "\x1b[36mb\x1b[0m" in out
