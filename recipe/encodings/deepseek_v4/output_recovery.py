"""Tool calls written in a corrupted DSML spelling: recognise, validate, convert (peer failures, item 9).

Real DeepSeek V4 / V4.1 / V3.2 generations sometimes spell the tool-call markup wrongly:
doubled bars ``<｜｜DSML｜｜ invoke …>``, spaced ASCII bars ``< | DSML | invoke …>``, the V4.1
names with a leading space (``<｜DSML｜ calls>``, `` invoke``, `` parameter``), the V3.2 block
name ``function_calls``, or a block opener missing its ``>``. The output parser (which parses the
exact spelling itself) hands text that starts like such a tag to these helpers, which decide:

* :func:`head_state` — can this held text still be the start of a corrupted opener?
* :func:`match_first` / :func:`match_next` — a *structurally complete* invoke (opener, parameters
  with explicit closers, invoke closer; only whitespace between tags), optionally after a block
  opener; the caller accepts it only when the tool name is declared;
* :func:`block_closer` — a (tolerant) block closer after recovered invokes.

Accepted invokes become ordinary tool calls; anything else is left to the caller, which keeps
it as content byte for byte. The grammar accepts the exact spelling too (a corrupted block may
hold exact-format invokes), one bar or two, ``｜`` or ``|``, and one optional space at each
seam.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from json.encoder import encode_basestring  # type: ignore[attr-defined]

__all__ = ["MAX_HOLD", "TRIGGER_SPAN", "RecoveryGrammar", "block_closer", "has_trigger", "head_state", "params_json"]

#: longest corrupted-call text held back before it is released as plain text (characters).
MAX_HOLD = 32_768
_BLOCK_NAMES = ("tool_calls", "function_calls", "calls")
_HEADS = {
    "open": tuple(f"<{b1}DSML{b2}{n}" for b1 in ("｜", "｜｜") for b2 in ("｜", "｜｜") for n in (*_BLOCK_NAMES, "invoke")),
    "invoke": tuple(f"<{b1}DSML{b2}invoke" for b1 in ("｜", "｜｜") for b2 in ("｜", "｜｜")),
    "close": tuple(f"</{b1}DSML{b2}{n}" for b1 in ("｜", "｜｜") for b2 in ("｜", "｜｜") for n in _BLOCK_NAMES),
}
#: a held head longer than this (normalised) without completing is not a DSML tag.
_HEAD_MAX = 40

_BARS = "(?:[｜|] ?){1,2}"
_NAME = '[^"<>\\n]{1,256}'
#: what can complete an invoke or end a block: an invoke closer's end, a block closer's end.
_TRIGGER = re.compile(r"invoke ?>|/[^<>/]{0,24}calls ?>")
#: how many trailing characters to keep to find a trigger split across pushes.
TRIGGER_SPAN = 40
_SIMPLE_JSON = re.compile(r"[ \t\r\n]*(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)[ \t\r\n]*")


def _head(names: str, closing: bool = False) -> str:
    return f"< ?{'/ ?' if closing else ''}{_BARS}DSML ?{_BARS}(?:{names})"


def head_state(text: str, kind: str = "open") -> int:
    """Whether ``text`` starts a (possibly corrupted) DSML tag: 1 yes, 0 undecided, -1 no.

    ``kind``: ``"open"`` (block or invoke opener), ``"invoke"`` (invoke opener) or ``"close"``
    (block closer). Blanks are ignored and ASCII ``|`` counts as ``｜`` for this quick test; the
    precise grammar is applied later by the regexes of :class:`RecoveryGrammar`.
    """
    norm = text[:_HEAD_MAX].replace(" ", "").replace("|", "｜")
    heads = _HEADS[kind]
    for h in heads:
        if norm.startswith(h):
            return 1
    if len(norm) < _HEAD_MAX and len(text) < 2 * _HEAD_MAX and any(h.startswith(norm) for h in heads):
        return 0
    return -1


def has_trigger(text: str) -> bool:
    """True when ``text`` holds the end of an invoke or block closer: time to decide."""
    return _TRIGGER.search(text) is not None


class RecoveryGrammar:
    """Compiled tolerant DSML regexes for one set of EOS spellings (values may not contain them).

    Args:
        eos_texts: EOS spellings that end the output (a value containing one is not complete).
    """

    __slots__ = ("block_close", "first", "next", "param")

    def __init__(self, eos_texts: Iterable[str]) -> None:
        bad = "|".join([f" ?/? ?{_BARS}DSML", *(re.escape(e[1:]) for e in eos_texts if e.startswith("<"))])
        value = f"[^<]*(?:<(?!{bad})[^<]*)*"
        p_open = _head("parameter") + f' name="{_NAME}" string="(?:true|false)" ?>'
        p_close = _head("parameter", True) + " ?>"
        invoke = (_head("invoke") + f' name="({_NAME})"(?: [A-Za-z_]+="[^"<>\\n]*")* ?>'
                  + f"((?:\\s*{p_open}{value}{p_close})*)\\s*" + _head("invoke", True) + " ?>")
        block_open = _head("|".join(_BLOCK_NAMES)) + "(?: ?>|(?=\\s))"
        self.first = re.compile(f"(?:{block_open}\\s*)?{invoke}")
        self.next = re.compile(f"\\s*{invoke}")
        self.param = re.compile(
            f'\\s*{_head("parameter")} name="({_NAME})" string="(true|false)" ?>({value}){p_close}')
        self.block_close = re.compile("\\s*" + _head("|".join(_BLOCK_NAMES), True) + " ?>")


def block_closer(grammar: RecoveryGrammar, text: str) -> int:
    """End index of a tolerant block closer at the start of ``text`` (blanks first), else -1."""
    m = grammar.block_close.match(text)
    return m.end() if m else -1


def params_json(grammar: RecoveryGrammar, text: str, start: int, end: int, is_json) -> tuple[str, bool]:
    """Arguments JSON of the parameters in ``text[start:end]`` and whether a value was invalid JSON.

    Same rules as the exact path: ``string="true"`` values become JSON strings, ``string="false"``
    values are kept raw when they are valid JSON, else quoted.
    """
    parts = []
    invalid = False
    for m in grammar.param.finditer(text, start, end):
        key, kind, val = m.groups()
        k = encode_basestring(key) + ": "
        if kind == "true":
            parts.append(k + encode_basestring(val))
        elif _SIMPLE_JSON.fullmatch(val) or is_json(val):
            parts.append(k + val)
        else:
            invalid = True
            parts.append(k + encode_basestring(val))
    return "{" + ", ".join(parts) + "}", invalid
