"""Tool-call blocks written inside the reasoning, for the ``<｜tool▁calls▁begin｜>`` parser (:mod:`.output`).

The rule of the DeepSeek-V4 parser (``recipe/encodings/deepseek_v4/output_reasoning.py``) in this
syntax: a ``<｜tool▁calls▁begin｜>`` met in the reasoning (tools declared) is held with what follows
it up to ``<｜tool▁calls▁end｜>``. When the block is complete and well formed — only blanks between
calls, every call ``<｜tool▁call▁begin｜>`` + a head :meth:`CallStates._parse_head` accepts + one JSON
object + blanks (and, fenced, the closing fence) + ``<｜tool▁call▁end｜>``, each naming a declared
tool, at least one call — it is a call (note ``tool_call_in_reasoning``): the newlines right before
it are dropped, the call states read it (the events of the same block in the answer) and the
reasoning goes on after it. Anything else (another block or call marker inside, ``</think>``, an
EOS spelling, the end of the output, a block that does not validate) keeps the held text as
reasoning, verbatim, with the note ``dsml_in_reasoning``. Held text is scanned once (kept as
pieces), so holding is linear.
"""

from __future__ import annotations

import json

from recipe.encodings.v3_shared.constants import (
    TOOL_CALL_BEGIN,
    TOOL_CALL_END,
    TOOL_CALLS_BEGIN,
    TOOL_CALLS_END,
)
from recipe.encodings.v3_shared.output_calls import BLOCK
from recipe.output.parsing import MarkerMatcher

__all__ = ["ReasoningCalls"]

_BLANKS = " \t\r\n"
_REASONING = 0
_DECODE = json.JSONDecoder(parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))


class ReasoningCalls:
    """The :class:`~.output.OutputParser` methods that hold and decide a block in the reasoning.

    Fields: ``_rc_hold`` (a block is held), ``_rc_parts`` (the held text scanned so far; the
    parser's ``_buf`` holds only what is not scanned yet), ``_m_rhold`` (what decides: the block
    closer, ``</think>``, EOS spellings, another block or call opener).
    """

    def _init_rcalls(self, eos_text: frozenset[str]) -> None:
        self._rc_hold = False
        self._rc_parts: list[str] = []
        self._m_rhold = MarkerMatcher([TOOL_CALLS_END, "</think>", *sorted(eos_text), TOOL_CALLS_BEGIN])

    def _rc_start(self) -> None:
        """``_buf`` starts with a block opener in the reasoning: hold it."""
        self._rc_hold = True
        self._rc_parts = [self._take(len(TOOL_CALLS_BEGIN))]

    def _rc_step(self) -> bool:
        """Scan the held block's next text; True when decided (reading goes on), False: wait."""
        j, m = self._m_rhold.find(self._buf)
        if m is None:
            if j:
                self._rc_parts.append(self._take(j))
            return False
        self._rc_hold = False
        if m == TOOL_CALLS_END:
            self._rc_parts.append(self._take(j + len(m)))
            block = "".join(self._rc_parts)
            self._rc_parts = []
            if self._rc_valid(block):
                self._rc_replay(block)
                return True
            self._rc_nogo(block)
            return True
        self._rc_parts.append(self._take(j))  # the marker itself is read again as reasoning
        block = "".join(self._rc_parts)
        self._rc_parts = []
        self._rc_nogo(block)
        return True

    def _rc_nogo(self, text: str) -> None:
        self._note("dsml_in_reasoning")
        self._emit_reasoning(text)

    def _rc_flush(self) -> None:
        """End of output while holding: the held text goes back before the unscanned rest."""
        if self._rc_hold:
            self._rc_hold = False
            self._note("dsml_in_reasoning")
            self._buf = "".join(self._rc_parts) + self._buf
            self._rc_parts = []

    def _rc_valid(self, block: str) -> bool:
        """Whether ``block`` (opener to closer) is complete, well formed and calls declared tools."""
        body = block[len(TOOL_CALLS_BEGIN):len(block) - len(TOOL_CALLS_END)]
        p, n, calls = 0, len(body), 0
        while True:
            while p < n and body[p] in _BLANKS:
                p += 1
            if p == n:
                return calls > 0
            if not body.startswith(TOOL_CALL_BEGIN, p):
                return False
            end = body.find(TOOL_CALL_END, p)
            if end < 0:
                return False
            head = body[p + len(TOOL_CALL_BEGIN):end]
            parsed = self._parse_head(head)
            if parsed is None or parsed[1] < 0 or parsed[0] not in self._declared:
                return False
            try:
                args, k = _DECODE.raw_decode(head, parsed[1])
            except ValueError:
                return False
            tail = head[k:].strip(_BLANKS)
            if not isinstance(args, dict) or tail not in ("```" if self._fenced else "", ""):
                return False
            calls += 1
            p = end + len(TOOL_CALL_END)

    def _rc_replay(self, block: str) -> None:
        """The call states read a decided block; the reasoning goes on after it."""
        self._note("tool_call_in_reasoning")
        self._r_nl = ""  # the newlines before the block go with it, as in the answer
        rest = self._buf
        self._buf = block[len(TOOL_CALLS_BEGIN):]
        self._in_block = True
        self._block_markup = ""
        self._block_ws = ""
        self._block_calls = 0
        self._state = BLOCK
        handlers = self._handlers
        while self._buf and self._state != _REASONING:
            if not handlers[self._state]():
                break
        self._after_block = False
        self._state = _REASONING
        self._buf = rest
