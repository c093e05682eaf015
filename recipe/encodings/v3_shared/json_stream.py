"""An incremental validator for one JSON object text, for streaming tool-call arguments.

The pre-V4 formats write a call's arguments as raw JSON text (``<｜tool▁sep｜>{"city": "Paris"}``).
:class:`JsonStream` takes that text in pieces and releases the longest prefix that can still be
completed into valid JSON **by appending only**, so argument deltas can be streamed and the whole
is always valid JSON: a key is held until its ``:``, a comma until the next element starts, an
escape sequence until it is complete; strings, numbers and literals stream as they arrive.
:meth:`JsonStream.close` returns the suffix that completes what was released (a cut string is
closed, a cut number or literal finished — ``-`` → ``-0``, ``tr`` → ``true`` —, a value missing
after ``:`` becomes ``null``, open containers are closed). The grammar is RFC 8259's (no NaN,
no comments, no trailing commas); blanks are the JSON blanks.
"""

from __future__ import annotations

import re

__all__ = ["JsonStream"]

_WS = " \t\r\n"
_DIGITS = "0123456789"
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_ESCAPES = '"\\/bfnrt'
_HEX = "0123456789abcdefABCDEF"
#: a run of plain string characters (no quote, backslash or control character)
_PLAIN = re.compile(r'[^"\\\x00-\x1f]+')

# number phases: phase -> {character class -> next phase} (absent: the number ends before it)
_NUM_CLASS = {**{d: "d" for d in "123456789"}, "0": "0", ".": ".", "e": "e", "E": "e", "+": "s", "-": "s"}
_NUM_NEXT: dict[str, dict[str, str]] = {
    "sign": {"0": "zero", "d": "int"},
    "zero": {".": "frac0", "e": "exp0"},
    "int": {"0": "int", "d": "int", ".": "frac0", "e": "exp0"},
    "frac0": {"0": "frac", "d": "frac"},
    "frac": {"0": "frac", "d": "frac", "e": "exp0"},
    "exp0": {"0": "exp", "d": "exp", "s": "expsign"},
    "expsign": {"0": "exp", "d": "exp"},
    "exp": {"0": "exp", "d": "exp"},
}
_NUM_FINAL = frozenset({"zero", "int", "frac", "exp"})

# what the scanner expects next
_VALUE, _FIRST_KEY, _KEY, _COLON, _AFTER_VALUE, _FIRST_ITEM = range(6)
# token being read
_NONE, _STR, _KEY_STR, _NUM, _LIT = range(5)


class JsonStream:
    """Validates one JSON object text piece by piece (see the module docstring).

    Attributes:
        done: the top-level object is closed (later text is trailing text).
        error: index into the text of the :meth:`feed` call where the text stopped being JSON, or -1.
    """

    __slots__ = ("_stack", "_expect", "_tok", "_num", "_lit", "_esc", "_held", "done", "error", "_started")

    def __init__(self) -> None:
        self._stack: list[str] = []
        self._expect = _VALUE
        self._tok = _NONE
        self._num = ""  # number state: the chars of the number read so far (last few matter)
        self._lit = ""  # literal still to read
        self._esc = ""  # escape sequence being read ("\\", "\\u12", …)
        self._held = ""  # released later: a key (until ':'), a comma (until the next element)
        self.done = False
        self.error = -1
        self._started = False

    def feed(self, text: str) -> tuple[str, int]:
        """Read ``text``. Returns ``(released, consumed)``: the text now safe to stream, and how many
        characters of ``text`` belong to the JSON (fewer when it ended or broke: see ``done`` /
        ``error``)."""
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            if self.done or self.error >= 0:
                break
            c = text[i]
            tok = self._tok
            if tok == _STR or tok == _KEY_STR:
                target = out if tok == _STR and not self._esc else None
                if self._esc:
                    j = self._escape(text, i)
                    if j < 0:
                        self.error = i
                        break
                    if not self._esc and tok == _STR:
                        out.append(self._held)
                        self._held = ""
                    i = j
                    continue
                m = _PLAIN.match(text, i)
                if m is not None:
                    piece = m.group()
                    if target is not None:
                        out.append(piece)
                    else:
                        self._held += piece
                    i = m.end()
                    continue
                if c == '"':
                    if tok == _STR:
                        out.append(c)
                        self._end_value()
                    else:
                        self._held += c
                        self._tok = _NONE
                        self._expect = _COLON
                    i += 1
                    continue
                if c == "\\":
                    self._esc = c
                    self._held += c
                    i += 1
                    continue
                self.error = i  # a raw control character
                break
            if tok == _NUM:
                if self._number(c):
                    out.append(c)
                    i += 1
                    continue
                if not self._num_complete():
                    self.error = i
                    break
                self._tok = _NONE
                self._end_value()
                continue  # the delimiter is read in the container state
            if tok == _LIT:
                if c != self._lit[0]:
                    self.error = i
                    break
                self._lit = self._lit[1:]
                out.append(c)
                i += 1
                if not self._lit:
                    self._tok = _NONE
                    self._end_value()
                continue
            # between tokens
            if c in _WS:
                if self._started:
                    if self._held:
                        self._held += c
                    else:
                        out.append(c)
                i += 1
                continue
            if not self._step(c, out):
                self.error = i
                break
            i += 1
        return "".join(out), i

    # ------------------------------------------------------------------ grammar

    def _release(self, out: list[str], c: str) -> None:
        if self._held:
            out.append(self._held)
            self._held = ""
        out.append(c)

    def _step(self, c: str, out: list[str]) -> bool:
        exp = self._expect
        if not self._started:
            if c != "{":
                return False
            self._started = True
            self._stack.append("}")
            self._expect = _FIRST_KEY
            out.append(c)
            return True
        if exp == _FIRST_KEY or exp == _KEY:
            if c == '"':
                self._held += c
                self._tok = _KEY_STR
                return True
            if c == "}" and exp == _FIRST_KEY:
                self._close(out, c)
                return True
            return False
        if exp == _COLON:
            if c != ":":
                return False
            self._release(out, c)
            self._expect = _VALUE
            return True
        if exp == _AFTER_VALUE:
            top = self._stack[-1]
            if c == ",":
                self._held += c
                self._expect = _KEY if top == "}" else _VALUE
                return True
            if c == top:
                self._held = ""
                self._close(out, c)
                return True
            return False
        if exp == _FIRST_ITEM and c == "]":
            self._close(out, c)
            return True
        # a value
        if c == '"':
            self._release(out, c)
            self._tok = _STR
            return True
        if c == "{":
            self._release(out, c)
            self._stack.append("}")
            self._expect = _FIRST_KEY
            return True
        if c == "[":
            self._release(out, c)
            self._stack.append("]")
            self._expect = _FIRST_ITEM
            return True
        if c == "-" or c in _DIGITS:
            self._release(out, c)
            self._tok = _NUM
            self._num = "sign" if c == "-" else "zero" if c == "0" else "int"
            return True
        lit = _LITERALS.get(c)
        if lit is not None:
            self._release(out, c)
            self._tok = _LIT
            self._lit = lit[1:]
            return True
        return False

    def _close(self, out: list[str], c: str) -> None:
        out.append(c)
        self._stack.pop()
        self._end_value()

    def _end_value(self) -> None:
        self._tok = _NONE
        if not self._stack:
            self.done = True
        else:
            self._expect = _AFTER_VALUE

    def _escape(self, text: str, i: int) -> int:
        """Read escape characters from ``text[i]``; returns the next index, or -1 for a bad escape."""
        n = len(text)
        while i < n and self._esc:
            c = text[i]
            esc = self._esc
            if len(esc) == 1:
                if c not in _ESCAPES and c != "u":
                    return -1
            elif c not in _HEX:
                return -1
            esc += c
            self._held += c
            i += 1
            self._esc = "" if (len(esc) == 2 and esc[1] != "u") or len(esc) == 6 else esc
        return i

    def _number(self, c: str) -> bool:
        """Whether ``c`` continues the number (RFC 8259 grammar); advances its phase."""
        nxt = _NUM_NEXT[self._num].get(_NUM_CLASS.get(c, ""))
        if nxt is None:
            return False
        self._num = nxt
        return True

    def _num_complete(self) -> bool:
        return self._num in _NUM_FINAL

    # ------------------------------------------------------------------ completion

    @property
    def pending(self) -> str:
        """Text read but not released (a key awaiting its ``:``, a comma, an unfinished escape): what
        :meth:`close` leaves out, so a caller that stops here can keep it elsewhere."""
        return self._held

    def close(self) -> str:
        """The text that completes what :meth:`feed` released into one valid JSON object (``""``
        when it is complete; ``"{}"`` when nothing was released); :attr:`pending` is left out."""
        if not self._started:
            return "{}"
        if self.done:
            return ""
        tail = ""
        if self._tok == _STR:
            tail += '"'
        elif self._tok == _NUM and not self._num_complete():
            tail += "0"  # "-" / "1." / "1e" / "1e+" + "0"
        elif self._tok == _LIT:
            tail += self._lit
        elif self._tok == _NONE and self._expect == _VALUE and not self._held:
            tail += "null"  # after a released ':' (a held ',' is simply dropped)
        return tail + "".join(reversed(self._stack))
