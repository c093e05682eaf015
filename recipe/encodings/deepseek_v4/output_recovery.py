"""Tool calls written in a corrupted DSML spelling: recognise, validate, convert (peer failures, item 9).

Real DeepSeek V4 / V4.1 / V3.2 generations sometimes spell the tool-call markup wrongly:
doubled bars ``<｜｜DSML｜｜ invoke …>``, spaced ASCII bars ``< | DSML | invoke …>``, the V3.2
block name ``function_calls``, or a block opener missing its ``>`` (V4.1's leading-space tag names
with single bars are exact markup, :mod:`.output_dsml`). The output parser (which parses the
exact spelling itself) hands text that starts like such a tag to these helpers, which decide:

* :func:`head_state` — can this held text still be the start of a corrupted opener?
* :class:`RecoveryGrammar` ``.first`` / ``.next`` — a *structurally complete* invoke (opener,
  parameters with explicit closers, invoke closer; only whitespace between tags), optionally
  after a block opener; the caller accepts it only when the tool name is declared;
* :func:`block_closer` — a (tolerant) block closer after recovered invokes.

Accepted invokes become ordinary tool calls; anything else is left to the caller, which keeps
it as content byte for byte. The grammar accepts the exact spelling too (a corrupted block may
hold exact-format invokes), one bar or two, ``｜`` or ``|``, and one optional space at each
seam; the ``string`` attribute of a parameter is optional (its kind is then inferred as on the
exact path). A complete invoke that is still refused (undeclared tool, a parameter named twice,
a strict tool's required parameter missing) is content up to its closer, verbatim, exact-format
invokes inside it included (notes ``stray_dsml``, ``rejected_tool_call``); so is a candidate whose
structure breaks, up to the first closer tag that shows it.

:class:`Recovery` is the parser's side: the ``RECOVER`` state holds the text from a candidate
opener (one of :data:`SOFT_OPENERS`, or an exact-looking opener that is no well-formed tag) and
decides with the helpers above.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple
from json.encoder import encode_basestring  # type: ignore[attr-defined]

from recipe.encodings.deepseek_v4.output_dsml import value_json
from recipe.encodings.deepseek_v4.output_state import CONTENT, RECOVER, SWITCH
from recipe.output.events import ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart

__all__ = [
    "MAX_HOLD",
    "Params",
    "SOFT_OPENERS",
    "TRIGGER_SPAN",
    "Recovery",
    "RecoveryGrammar",
    "block_closer",
    "has_trigger",
    "head_state",
    "params_json",
    "trigger_end",
]

#: longest corrupted-call text held back before it is released as plain text (characters).
MAX_HOLD = 32_768
#: content markers that may start a corrupted DSML tag (recovery on): doubled / spaced / ASCII bars.
SOFT_OPENERS = ("<｜｜", "<｜ ", "<|", "< |", "< ｜")
#: a held block-closer head that fails the tolerant grammar is given up once it shows a ``>``
#: within this many characters, or grows longer.
_HEAD_PEEK = 64
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
#: what can complete an invoke or end a block: an invoke or block closer tag in any spelling (a
#: value cannot contain one, so the first one found decides, whatever the chunking).
_TRIGGER = re.compile(f"< ?/ ?{_BARS}DSML ?{_BARS}(?:invoke|{'|'.join(_BLOCK_NAMES)}) ?>")
#: how many trailing characters to keep to find a trigger split across pushes.
TRIGGER_SPAN = 40


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
    """True when ``text`` holds an invoke or block closer tag: time to decide."""
    return _TRIGGER.search(text) is not None


def trigger_end(text: str) -> int:
    """End index of the first invoke or block closer tag in ``text``, -1 when there is none."""
    m = _TRIGGER.search(text)
    return m.end() if m else -1


class RecoveryGrammar:
    """Compiled tolerant DSML regexes for one set of EOS spellings (values may not contain them).

    Args:
        eos_texts: EOS spellings that end the output (a value containing one is not complete).
    """

    __slots__ = ("block_close", "first", "next", "param")

    def __init__(self, eos_texts: Iterable[str]) -> None:
        bad = "|".join([f" ?/? ?{_BARS}DSML", *(re.escape(e[1:]) for e in eos_texts if e.startswith("<"))])
        value = f"[^<]*(?:<(?!{bad})[^<]*)*"
        p_open = _head("parameter") + f' name="{_NAME}"(?: string="[^"<>\\n]*")? ?>'
        p_close = _head("parameter", True) + " ?>"
        invoke = (_head("invoke") + f' name="({_NAME})"(?: [A-Za-z_]+="[^"<>\\n]*")* ?>'
                  + f"((?:\\s*{p_open}{value}{p_close})*)\\s*" + _head("invoke", True) + " ?>")
        block_open = _head("|".join(_BLOCK_NAMES)) + "(?: ?>|(?=\\s))"
        self.first = re.compile(f"(?:{block_open}\\s*)?{invoke}")
        self.next = re.compile(f"\\s*{invoke}")
        self.param = re.compile(
            f'\\s*{_head("parameter")} name="({_NAME})"(?: string="([^"<>\\n]*)")? ?>({value}){p_close}')
        self.block_close = re.compile("\\s*" + _head("|".join(_BLOCK_NAMES), True) + " ?>")


def block_closer(grammar: RecoveryGrammar, text: str) -> int:
    """End index of a tolerant block closer at the start of ``text`` (blanks first), else -1."""
    m = grammar.block_close.match(text)
    return m.end() if m else -1


class Params(NamedTuple):
    """The parameters of one recognised invoke: ``arguments`` (JSON object text), ``names`` (None
    when a name repeats), ``invalid`` (a non-string value was not JSON), ``inferred`` (a parameter
    had no usable ``string`` attribute)."""

    arguments: str
    names: frozenset[str] | None
    invalid: bool
    inferred: bool


def params_json(grammar: RecoveryGrammar, text: str, start: int, end: int,
                json_params: frozenset[str] = frozenset()) -> Params:
    """The parameters in ``text[start:end]`` as :class:`Params`.

    Same rules as the exact path: ``string="true"`` values become JSON strings, ``string="false"``
    values are kept raw when they are valid JSON, else quoted; without a ``true``/``false`` value the
    parameter is JSON when its name is in ``json_params``, else a string.
    """
    parts = []
    names: set[str] = set()
    dup = invalid = inferred = False
    for m in grammar.param.finditer(text, start, end):
        key, kind, val = m.groups()
        if key in names:
            dup = True
        names.add(key)
        if kind != "true" and kind != "false":
            inferred = True
            kind = "false" if key in json_params else "true"
        value, bad = value_json(val, kind == "true")
        parts.append(encode_basestring(key) + ": " + value)
        invalid = invalid or bad
    return Params("{" + ", ".join(parts) + "}", None if dup else frozenset(names), invalid, inferred)


class Recovery:
    """The :class:`~.output.OutputParser` methods of the ``RECOVER`` state (corrupted DSML calls).

    Owns the held text (``_rbuf``, ``_rws``, ``_rlen``, ``_rtail``), the phase (``_rmore``,
    ``_rhead``) and ``_rec_skip``; reads ``_rec`` (the grammar, None when recovery is off) and
    ``_declared`` and switches the parser's state.
    """

    def _init_recovery(self) -> None:
        self._rbuf: list[str] = []  # held text from the candidate on (joined lazily)
        self._rws = ""  # blanks after a recovered call, before anything else
        self._rlen = 0
        self._rtail = ""  # last characters seen, to find an "invoke>" split across pushes
        self._rmore = False  # recovery phase: False = first invoke, True = after a recovered invoke
        self._rhead = False  # the held text's head was recognised (only the trigger is awaited)
        # (text, index) of a candidate just rejected: read as plain text there
        self._rec_skip: tuple[str, int] | None = None

    def _rec_skipped(self, s: str, j: int) -> bool:
        """True (once) for the candidate at ``s[j]`` that recovery has just given up on."""
        skip = self._rec_skip
        if skip is not None and skip[0] is s and skip[1] == j:
            self._rec_skip = None
            return True
        return False

    def _rec_start(self, j: int, more: bool = False) -> int:
        """Enter recovery at a candidate (index ``j`` of the current text): hold it from there
        (``more``: phase "more", after a recovered call)."""
        self._state = RECOVER
        self._rbuf = []
        self._rws = ""
        self._rlen = 0
        self._rtail = ""
        self._rmore = more
        self._rhead = False
        return j

    def _do_recover(self, s: str, i: int, base: int) -> int | None:
        """Hold text while a corrupted call may be forming; decide as soon as it is certain.

        Decisions happen when the held head stops looking like a DSML tag, when the end of an
        invoke or block closer arrives (an invoke may be complete, or can no longer be), or at
        :data:`MAX_HOLD` characters.
        """
        new = s[i:] if i else s
        if not new:
            return None
        self._rlen += len(new)
        if self._rmore and not self._rbuf and new.isspace():
            self._rws += new  # only blanks since the last call (kept apart: no re-joining)
            return None
        self._rbuf.append(new)
        if not self._rhead:
            held = "".join(self._rbuf)
            if self._rws:
                held = self._rws + held
                self._rws = ""
            self._rbuf = [held]
            if self._rmore:
                return self._rec_more(held, final=False)
            hs = head_state(held)
            if hs < 0:
                return self._rec_reject(held)
            if hs == 0:
                return None
            self._rhead = True
        window = self._rtail + new
        self._rtail = window[-TRIGGER_SPAN:]
        if self._rlen > MAX_HOLD:
            held = "".join(self._rbuf)
            return self._rec_exit(held, skip=True) if self._rmore else self._rec_reject(held)
        if not has_trigger(window):
            return None
        held = "".join(self._rbuf)
        self._rbuf = [held]
        return self._rec_more(held, final=False) if self._rmore else self._rec_first(held)

    def _rec_first(self, held: str) -> int | None:
        m = self._rec.first.match(held)
        if m is None:
            return self._rec_reject(held, trigger_end(held))
        params = self._rec_params(held, m)
        if not isinstance(params, Params):  # refused: the invoke (and a block opener before it) is content
            return self._rec_reject(held, m.end(), params)
        # the text before the call ends like content before a tool block
        self._c_nl = ""
        self._c_q.clear()
        self._after_block = False
        if self._stops is not None:
            tail = self._stops.flush()
            if tail:
                self._text_out(tail)
                self._c_lead = False
        self._rec_call(m.group(1), params)
        return self._rec_continue(held[m.end():])

    def _rec_params(self, held: str, m: re.Match[str]) -> Params | tuple[str, ...]:
        """The parameters of the complete invoke ``m`` when it may be a call, else the notes saying
        why not (undeclared tool, a parameter named twice, a strict tool's required parameter missing)."""
        name = m.group(1)
        if name not in self._declared:
            return ("rejected_tool_call",)
        ta = self._tool_args.get(name)
        p = params_json(self._rec, held, m.start(2), m.end(2), ta.json_params if ta is not None else frozenset())
        if p.names is None:
            return ("rejected_tool_call", "duplicate_parameter")
        req = self._strict_req.get(name)
        if req is not None and not req <= p.names:
            return ("rejected_tool_call", "missing_required_parameter")
        return p

    def _rec_more(self, held: str, final: bool) -> int | None:
        """After a recovered invoke: another invoke, the block closer, or the end of the block."""
        body = held.lstrip()
        if not body:
            if final:
                return None  # blanks after the last call are dropped, as after a block
            self._rhead = False
            self._rws = held
            self._rbuf = []
            return None
        closing = head_state(body, "close")
        opening = head_state(body, "invoke")
        if closing == 1:
            k = block_closer(self._rec, held)
            if k >= 0:
                self._state = CONTENT
                self._rbuf = []
                self._after_block = True
                self._resume = held[k:]
                return SWITCH
            if final or ">" in body[:_HEAD_PEEK] or len(body) > _HEAD_PEEK:
                self._note("stray_dsml")  # a broken closer: text (a closer is never a candidate)
                return self._rec_exit(held, skip=False)
            return None
        if opening == 1:
            self._rhead = True
            m = self._rec.next.match(held)
            if m is not None:
                params = self._rec_params(held, m)
                if isinstance(params, Params):
                    self._rec_call(m.group(1), params)
                    return self._rec_continue(held[m.end():])
                return self._rec_exit_literal(held, m.end(), params)
            end = trigger_end(held)
            if end >= 0:
                return self._rec_exit_literal(held, end, ())
            if final:
                return self._rec_exit(held, skip=True)
            return None
        if not final and (closing == 0 or opening == 0):
            return None
        return self._rec_exit(held, skip=False)

    def _rec_continue(self, rest: str) -> int:
        """A call was recovered: keep watching the text after it (phase "more")."""
        self._rec_start(0, more=True)
        self._resume = rest
        return SWITCH

    def _rec_call(self, name: str, params: Params) -> None:
        if params.invalid:
            self._note("invalid_json_argument")
        if params.inferred:
            self._note("inferred_parameter_type")
        self._note("recovered_dsml")
        idx = self._ncalls
        self._ncalls = idx + 1
        out = self._out
        args = params.arguments
        out.append(ToolCallStart(idx, self._new_id(idx), name))
        out.append(ToolCallArgumentsDelta(idx, args))
        out.append(ToolCallEnd(idx, args))

    def _rec_reject(self, held: str, end: int = -1, why: tuple[str, ...] = ()) -> int | None:
        """Not a recoverable call. With ``end`` (the first closer tag, or the end of a refused
        invoke): ``held[:end]`` is content verbatim and the rest is read again; without: the held
        text is read again as content, with this candidate's opener as text."""
        self._state = CONTENT
        self._rbuf = []
        if end < 0:
            if self._rhead:  # it looked like a DSML tag: markup kept as text
                self._note("stray_dsml")
            self._rec_skip = (held, 0)
            self._resume = held
            return SWITCH
        return self._rec_literal(held, end, why)

    def _rec_literal(self, held: str, end: int, why: tuple[str, ...]) -> int | None:
        self._note("stray_dsml")
        for note in why:
            self._note(note)
        self._emit_literal(held[:end])
        self._resume = rest = held[end:] if self._end is None else ""
        return SWITCH if rest else None

    def _rec_exit_literal(self, held: str, end: int, why: tuple[str, ...]) -> int | None:
        """The recovered block is over at a refused or broken invoke: it is content up to ``end``."""
        self._state = CONTENT
        self._rbuf = []
        self._after_block = True
        return self._rec_literal(held, end, why)

    def _rec_exit(self, held: str, skip: bool) -> int:
        """The recovered block is over: the rest is content (blanks kept only before text)."""
        self._state = CONTENT
        self._rbuf = []
        self._after_block = True
        if skip:
            self._note("stray_dsml")
        self._rec_skip = (held, len(held) - len(held.lstrip())) if skip else None
        self._resume = held
        return SWITCH

    def _rec_finish(self) -> None:
        """End of output while recovering: decide with what is held, then read the rest."""
        while self._state == RECOVER and self._end is None:
            held = self._rws + "".join(self._rbuf)
            self._rws = ""
            if self._rmore:
                r = self._rec_more(held, final=True)
                if r is None:
                    self._state = CONTENT
                    self._rbuf = []
                    return
            elif self._rhead:
                self._rec_first(held)
            else:
                self._rec_reject(held)
            text, self._resume = self._resume, ""
            self._drive(text)
        if self._state == RECOVER:
            self._state = CONTENT
