"""The CLI's terminal views: rich styles a terminal's output; to a pipe or a file the views write
the same text without importing rich (recipe/cli/view.py). Checked against rich itself: for any
prompt, the plain path's bytes equal what rich prints to a non-terminal."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from recipe.cli import view
from recipe.prompt import Prompt, Special, Text

# text with what rich treats specially: control codes it strips (BEL, BS, VT, FF, CR), escape
# sequences, wide and combining characters, markup-like brackets, emoji codes, tabs, blank lines
_ALPHABET = st.sampled_from(list("ab \n\r\t\x07\x08\x0b\x0c\x1b[]/:\\é中😀\u0301\u200b\x00\x7f"))
_TEXT = st.lists(_ALPHABET, max_size=30).map("".join) | st.text(max_size=20)
_SEGMENTS = st.lists(st.tuples(st.booleans(), _TEXT), max_size=8)


def _prep(segments, ids=(1, 2, 3), note="the vocabulary lacks <｜System｜>"):
    prompt = Prompt(segments=tuple(Special(t) if special else Text(t) for special, t in segments))
    return SimpleNamespace(prompt=prompt, api="chat", model="deepseek-v4-flash", encoding="deepseek_v4",
                           conversation=SimpleNamespace(thinking=False), ids=None if ids is None else list(ids),
                           token_ids_note=note)


def _rich(call) -> str:
    buf = io.StringIO()
    call(Console(file=buf, highlight=False, soft_wrap=True))
    return buf.getvalue()


def _plain(call, monkeypatch) -> str:
    buf = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stdout", buf)
    call(None)
    return buf.getvalue()


@pytest.fixture(autouse=True)
def _no_colour_switches(monkeypatch):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


@given(segments=_SEGMENTS, with_ids=st.booleans())
def test_plain_prompt_view_is_what_rich_prints_to_a_pipe(segments, with_ids):
    prep = _prep(segments, ids=(1, 2, 3) if with_ids else None)
    with pytest.MonkeyPatch.context() as mp:
        plain = _plain(lambda c: view.print_prompt(prep, c), mp)
    assert plain == _rich(lambda c: view.print_prompt(prep, c))


@given(pieces=st.lists(_TEXT, max_size=8))
def test_plain_token_view_is_what_rich_prints_to_a_pipe(pieces):
    ids = list(range(7, 7 + len(pieces)))
    with pytest.MonkeyPatch.context() as mp:
        plain = _plain(lambda c: view.print_tokens(ids, pieces, c), mp)
    assert plain == _rich(lambda c: view.print_tokens(ids, pieces, c))


def test_the_plain_view_of_a_real_prompt():
    prep = _prep([(True, "<｜begin▁of▁sentence｜>"), (True, "<｜User｜>"), (False, "Hi\r\n[bold]x[/]"),
                  (True, "<｜Assistant｜>")], ids=range(6))
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", buf)
        view.print_prompt(prep)
    assert buf.getvalue() == ("<｜begin▁of▁sentence｜><｜User｜>Hi\n[bold]x[/]<｜Assistant｜>\n\n"
                              "api chat  model deepseek-v4-flash  encoding deepseek_v4  thinking False  "
                              "special tokens 3  tokens 6\n")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stdout, env, plain", [
    (io.StringIO(), {}, True),
    (_Tty(), {}, False),
    (io.StringIO(), {"FORCE_COLOR": "1"}, False),
    (io.StringIO(), {"FORCE_COLOR": ""}, False),  # any value: rich decides
    (io.StringIO(), {"TTY_COMPATIBLE": "1"}, False),
])
def test_rich_is_used_for_a_terminal_or_when_colour_is_asked_for(monkeypatch, stdout, env, plain):
    monkeypatch.setattr(sys, "stdout", stdout)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert view.plain_output() is plain


def test_a_terminal_gets_rich_styles(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buf)
    view.print_prompt(_prep([(True, "<｜User｜>"), (False, "Hi")]))
    out = buf.getvalue()
    assert "\x1b[1;35m<｜User｜>\x1b[0m" in out and "\x1b[2mapi\x1b[0m chat" in out
