"""The call states of the ``<｜tool▁calls▁begin｜>`` output parser (:mod:`.output`): block, call head,
arguments, the text after them, and a rejected call's text.

A mixin of :class:`~.output.OutputParser` sharing its fields (the buffer, the notes, the events).
States: ``BLOCK`` (between calls: blanks held, a call opener, the block closer, or stray text),
``HEAD`` (``<｜tool▁call▁begin｜>`` up to the first character of the arguments: accepted as a call of a
declared tool, or rejected as content), ``ARGS`` (the arguments through :class:`.json_stream.JsonStream`),
``TAIL`` (after the arguments object: blanks and the closing fence, up to ``<｜tool▁call▁end｜>``) and
``RAW`` (a rejected call's text up to its end, as content).
"""

from __future__ import annotations

import re

from recipe.encodings.v3_shared.constants import TOOL_CALL_BEGIN, TOOL_CALL_END, TOOL_CALLS_END, TOOL_SEP
from recipe.encodings.v3_shared.json_stream import JsonStream
from recipe.output.events import ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart

__all__ = ["CallStates", "BLOCK", "HEAD", "ARGS", "TAIL", "RAW"]

BLOCK, HEAD, ARGS, TAIL, RAW = 2, 3, 4, 5, 6
_CONTENT = 1
_HEAD_MAX = 512  # a call head longer than this (name, fence) is not a call head

#: the end of a call's text that may still become blanks + the closing fence (fenced) / blanks (bare)
_FENCE_SUFFIX = re.compile("[ \t\r\n]*(?:`{1,3}[ \t\r\n]*)?$")
_BLANK_SUFFIX = re.compile("[ \t\r\n]*$")
#: what may come before <｜tool▁sep｜> in a call head: the type word (fenced) or the name (bare)
_FENCED_PRE = re.compile("[ \t\r\n]*[A-Za-z_]{0,32}[ \t]*")
_BARE_PRE = re.compile("[ \t\r\n]*[^\\s<]{0,256}[ \t]*")
_FENCED_NAME = re.compile("[ \t]*([^\\s<]{0,256})[ \t]*")
_FENCE_LINE = re.compile("```([A-Za-z]*)[ \t]*\n")
_FENCE_OPEN = re.compile("`{1,3}[A-Za-z]*[ \t]*")


def _partial(text: str, marker: str) -> int:
    """Length of the longest proper prefix of ``marker`` that ``text`` ends with."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


def _skip_blanks(text: str, k: int) -> int:
    while k < len(text) and text[k] in " \t\r\n":
        k += 1
    return k




class CallStates:
    """The :class:`~.output.OutputParser` methods of the call states (module docstring)."""

    # ------------------------------------------------------------------ block and calls

    def _block(self) -> bool:
        """Between calls: blanks are held (markup before the first call, dropped between calls,
        content when text follows); a call opener, the block closer, EOS, or stray text (content)."""
        lead = len(self._buf) - len(self._buf.lstrip(" \t\r\n"))
        if lead:
            self._block_ws += self._take(lead)
            if not self._buf:
                return False
        j, m = self._find(self._m_block)
        if j:
            stray = self._block_ws + self._take(j)
            body = stray.rstrip(" \t\r\n")
            self._block_ws = stray[len(body):]  # blanks after it are decided by what follows them
            self._stray(body)
            if self._end is not None:
                return False
        if m is None:
            return False
        self._take(len(m))
        if not self._block_calls:
            self._block_markup += self._block_ws
        self._block_ws = ""
        if m == TOOL_CALL_BEGIN:
            self._head = m
            self._state = HEAD
        elif m == TOOL_CALLS_END:
            self._leave_block(m)
        elif m in self._eos_text:
            self._leave_block("")
            self._end = ("stop", None)
            return False
        else:  # a call closer with no call open
            self._stray(m)
        return True

    def _stray(self, text: str) -> None:
        self._note("text_in_tool_block")
        self._release_markup()
        self._as_content(text)

    def _release_markup(self) -> None:
        if self._block_markup:
            markup, self._block_markup = self._block_markup, ""
            self._as_content(markup)

    def _leave_block(self, closer: str) -> None:
        if self._block_calls:
            self._after_block = True
        else:
            self._release_markup()
            self._as_content(closer)
        self._block_markup = ""
        self._in_block = False
        self._state = _CONTENT

    def _head_state(self) -> bool:
        """Read ``<TC>`` + head up to the first character of the arguments, then decide."""
        self._head += self._buf
        self._buf = ""
        head = self._head
        body = head[len(TOOL_CALL_BEGIN):]
        ends = [k for k in (body.find(mk) for mk in self._ends) if k >= 0]
        cut = min(ends) if ends else len(body)
        if not ends:  # a possible marker at the end is not decided on yet
            cut -= max(_partial(body, mk) for mk in (*self._ends, *(() if TOOL_SEP in body else (TOOL_SEP,))))
        parsed = self._parse_head(body[:cut])
        if parsed is None:
            if ends:  # the call's markup ended before its arguments began: not a call
                self._buf = body[cut:]
                self._head = ""
                self._reject(head[: len(TOOL_CALL_BEGIN) + cut], "invalid_json_argument")
                return True
            if cut > _HEAD_MAX:
                self._head = ""
                self._buf = body[cut:]
                self._reject(head[: len(TOOL_CALL_BEGIN) + cut], "invalid_json_argument", raw=True)
                return True
            return False  # undecided: wait for more
        name, start = parsed
        if start < 0 or name not in self._declared:
            self._head = ""
            self._buf = body[cut:]
            self._reject(head[: len(TOOL_CALL_BEGIN) + cut], "invalid_json_argument" if start < 0 else "undeclared_tool",
                         raw=True)
            return True
        # accepted: the block's markup is consumed, the call starts at "{"
        self._block_markup = ""
        self._block_calls += 1
        idx = self._ncalls
        self._ncalls += 1
        self._out.append(ToolCallStart(idx, self._new_id(idx), name))
        self._js = JsonStream()
        self._args = []
        self._tail = ""
        self._tail_junk = False
        self._head = ""
        self._buf = body[start:]
        self._state = ARGS
        return True

    def _parse_head(self, body: str) -> tuple[str, int] | None:
        """``(name, index of the arguments' "{" in body)`` once the head is read; ``(name, -1)`` as soon
        as it cannot be a call head (fenced: ``TYPE<SEP>NAME\n[```json\n]{``; bare: ``NAME<SEP>{``;
        names and the type word without blanks or ``<``); None while it may still become one."""
        sep = body.find(TOOL_SEP)
        pre = body if sep < 0 else body[:sep]
        if not (_FENCED_PRE if self._fenced else _BARE_PRE).fullmatch(pre):
            return "", -1
        if sep < 0:
            return None
        rest = body[sep + len(TOOL_SEP):]
        base = sep + len(TOOL_SEP)
        if not self._fenced:
            name = pre.strip()
            k = len(rest) - len(rest.lstrip(" \t\r\n"))
            if k == len(rest):
                return None
            return (name, base + k) if name and rest[k] == "{" else (name, -1)
        m = _FENCED_NAME.match(rest)
        name, k = m.group(1), m.end()
        if k == len(rest):
            return None if len(name) < 256 else (name, -1)
        if rest[k] != "\n" or not name:
            return name, -1
        k = _skip_blanks(rest, k + 1)
        if k == len(rest):
            return None
        if rest[k] == "`":
            m = _FENCE_LINE.match(rest, k)
            if m is None:
                tail = rest[k:]
                return None if _FENCE_OPEN.fullmatch(tail) else (name, -1)
            if m.group(1).lower() not in ("", "json"):
                return name, -1
            k = _skip_blanks(rest, m.end())
            if k == len(rest):
                return None
        return (name, base + k) if rest[k] == "{" else (name, -1)

    def _reject(self, text: str, note: str, raw: bool = False) -> None:
        """A call that yields nothing: its markup is content; with ``raw`` the rest of it up to its
        ``<｜tool▁call▁end｜>`` is content too."""
        self._note(note)
        self._release_markup()
        self._as_content(text)
        self._state = RAW if raw else (BLOCK if self._in_block else _CONTENT)

    def _raw(self) -> bool:
        """The text of a rejected call up to its end: content; then back to the block."""
        j, m = self._find(self._m_block)
        if j:
            self._as_content(self._take(j))
            if self._end is not None:
                return False
        if m is None:
            return False
        if m == TOOL_CALL_END:
            self._as_content(self._take(len(m)))
            self._state = BLOCK if self._in_block else _CONTENT
            return True
        # a new call, the block end or EOS: handled by the block state
        self._state = BLOCK if self._in_block else _CONTENT
        if not self._in_block and m == TOOL_CALLS_END:
            self._as_content(self._take(len(m)))
        return True

    def _args_state(self) -> bool:
        j, m = self._find(self._m_block)
        piece = self._buf[:j]
        if piece:
            js = self._js
            released, used = js.feed(piece)
            if released:
                self._args.append(released)
                self._out.append(ToolCallArgumentsDelta(self._ncalls - 1, released))
            if js.done or js.error >= 0:
                self._take(used)
                if js.error >= 0:
                    self._note("invalid_json_argument")
                self._buf = self._end_call() + self._buf  # text the arguments left out: after the call
                self._state = TAIL
                return True
            self._take(j)
        if m is None:
            return False
        # the call ends (or another begins) before its object closed
        self._note("invalid_json_argument" if m == TOOL_CALL_END else "truncated_tool_call")
        self._buf = self._end_call() + self._buf
        self._state = TAIL
        return True

    def _end_call(self) -> str:
        """Close the open call's arguments and emit its end; returns the text read into the
        arguments but left out of them (a cut key, comma or escape), which is content."""
        js = self._js
        pending = js.pending if js is not None else ""
        tail = js.close() if js is not None else "{}"
        idx = self._ncalls - 1
        if tail:
            self._args.append(tail)
            self._out.append(ToolCallArgumentsDelta(idx, tail))
        self._out.append(ToolCallEnd(idx, "".join(self._args)))
        self._js = None
        self._args = []
        return pending

    def _tail_state(self) -> bool:
        """After the arguments: blanks and (fenced) the closing fence, then ``<｜tool▁call▁end｜>``;
        anything else there is content (released as soon as it cannot be part of the fence)."""
        j, m = self._find(self._m_block)
        if j:
            self._tail += self._take(j)
            self._flush_tail(self._fence_start(self._tail))
        if m is None:
            return False
        self._take(len(m))
        k = self._fence_start(self._tail)
        if self._tail[k:].strip(" \t\r\n") not in ("", "```" if self._fenced else ""):
            k = len(self._tail)  # an unfinished fence: content too
        self._flush_tail(k)
        self._tail = ""
        self._tail_junk = False
        if m == TOOL_CALL_END:
            self._state = BLOCK if self._in_block else _CONTENT
            if not self._in_block:
                self._after_block = True
        elif m == TOOL_CALL_BEGIN:
            self._head = m
            self._state = HEAD
        elif m == TOOL_CALLS_END:
            self._leave_block(m)
        else:
            self._end = ("stop", None)
            return False
        return True

    def _fence_start(self, tail: str) -> int:
        """Where the suffix of ``tail`` that may still be blanks + closing fence begins."""
        m = (_FENCE_SUFFIX if self._fenced else _BLANK_SUFFIX).search(tail)
        return m.start() if m is not None else len(tail)

    def _flush_tail(self, k: int) -> None:
        """``tail[:k]`` is text after the arguments that is not the fence: content (blanks right
        after the arguments are not)."""
        junk, self._tail = self._tail[:k], self._tail[k:]
        if not self._tail_junk:
            junk = junk.lstrip(" \t\r\n")
        if junk:
            self._note("text_in_tool_block")
            self._tail_junk = True
            self._as_content(junk)

