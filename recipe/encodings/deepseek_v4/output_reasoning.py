"""Tool-call blocks written inside the reasoning (the ``RBLOCK`` state of :mod:`.output`).

A thinking model sometimes writes a whole, well-formed DSML block before its ``</think>``. As
deepseek-recipe does, such a block is a call; unlike deepseek-recipe, only when it is valid and
nothing around it is lost:

* an exact block opener (``<｜DSML｜tool_calls>``, V4.1's ``<｜DSML｜ calls>``, V3.2's
  ``function_calls``) met in the reasoning is held, with everything after it, until it is decided;
* **go** at the block closer, when everything from the opener on was: blanks, invokes of declared
  tools (exact tags), each holding parameters with ``string="true|false"`` and an explicit closer,
  no name twice, a strict tool's required parameters present, and at least one invoke. The
  reasoning's newlines right before the opener are dropped (as before a block in the answer), the
  block is read again by the block states (exactly the events of the same block in the answer),
  the reasoning goes on after the closer, and the Finish notes say ``tool_call_in_reasoning``;
* **no-go** at the first place where the block stops being one (any other text or tag, an
  undeclared tool, ``</think>``, a role token, an EOS spelling, the end of the output): the held
  text up to there is reasoning, verbatim, with the note ``dsml_in_reasoning``, and reading goes
  on from there as reasoning.

Any other DSML tag in the reasoning (a bare invoke, a closer) is reasoning text with the same note.
The ids of the block count as reasoning tokens (they come before ``</think>``). Holding is linear:
the text is scanned once, kept as pieces while undecided.
"""

from __future__ import annotations

from recipe.encodings.deepseek_v4 import output_dsml as dsml
from recipe.encodings.deepseek_v4.output_state import BLOCK, REASONING, RBLOCK, SWITCH
from recipe.output.parsing import MarkerMatcher

__all__ = ["ReasoningCalls"]

_BLANKS = " \t\r\n"
_MORE, _GO, _NOGO = range(3)
#: scan phases: between invokes, inside an invoke (between parameters), inside a parameter value
_BETWEEN, _INVOKE, _VALUE = range(3)


class ReasoningCalls:
    """The :class:`~.output.OutputParser` methods of the ``RBLOCK`` state (module docstring).

    Fields: ``_rb_parts`` the held text (pieces, joined only at the decision) once it spans pushes;
    ``_rb_h0`` the opener's index in the text being read when the hold starts; ``_rb_abs`` the opener's position in the decoded output; ``_rb_tail`` the held text
    from ``_rb_at`` (offset in the held text) on, where the scan resumes; ``_rb_phase``,
    ``_rb_calls``, ``_rb_names``, ``_rb_need`` the well-formedness scan. Reads ``_declared``,
    ``_strict_req``, ``_dsml``.
    """

    def _init_rblock(self, m_rvalue: MarkerMatcher) -> None:
        """The fields' start values; ``m_rvalue``: the markers a value scan stops at (the parser setup's)."""
        self._rb_parts: list[str] = []
        self._rb_h0 = 0
        self._rb_abs = 0
        self._rb_tail = ""
        self._rb_at = 0
        self._rb_phase = _BETWEEN
        self._rb_calls = 0
        self._rb_names: set[str] = set()
        self._rb_need: set[str] = set()
        self._resume_base: int | None = None
        self._m_rvalue = m_rvalue

    def _rblock_start(self, s: str, j: int, k: int, base: int) -> int | None:
        """The block opener ``s[j:k]`` in the reasoning: hold it and decide what follows."""
        self._state = RBLOCK
        self._rb_parts = []
        self._rb_h0 = j
        self._rb_abs = base + j
        self._rb_phase = _BETWEEN
        self._rb_calls = 0
        return self._rb_decide(s, k, base)

    def _do_rblock(self, s: str, i: int, base: int) -> int | None:
        new = s[i:] if i else s
        self._rb_parts.append(new)
        buf = self._rb_tail + new
        r, q = self._rb_scan(buf, 0)
        at = self._rb_at
        if r == _MORE:
            self._rb_tail = buf[q:]
            self._rb_at = at + q
            return None
        whole = "".join(self._rb_parts)
        self._rb_parts = []
        return self._rb_end(r, whole, 0, at + q, self._rb_abs)

    def _rb_decide(self, s: str, p: int, base: int) -> int | None:
        """Scan ``s`` (holding the opener at ``_rb_h0``) from ``p``; decide or keep the held text."""
        h0 = self._rb_h0
        r, q = self._rb_scan(s, p)
        if r == _MORE:
            self._rb_parts = [s[h0:]]
            self._rb_tail = s[q:]
            self._rb_at = q - h0
            return None
        return self._rb_end(r, s, h0, q - h0, base)

    def _rb_end(self, r: int, text: str, h0: int, x: int, base: int) -> int | None:
        """Decided at offset ``x`` of the held text ``text[h0:]`` (``base``: the position of
        ``text[0]`` in the output): go (``x`` ends the block closer) or no-go (``x``: where it broke)."""
        end = h0 + x
        self._state = REASONING
        if r == _GO:
            self._note("tool_call_in_reasoning")
            self._r_nl = ""  # the newlines before the opener go with the block, as in the answer
            self._r_q.clear()
            self._rb_replay(text[h0:end])
        else:
            self._note("dsml_in_reasoning")
            self._emit_reasoning(text[h0:end])
        if end >= len(text):
            return None
        self._resume, self._resume_at, self._resume_base = text, end, base
        return SWITCH

    def _rb_replay(self, block: str) -> None:
        """The block states read a decided block (opener to closer) and emit its calls."""
        self._blk_calls = 0
        self._ws = ""
        self._state = BLOCK
        saved = self._resume, self._resume_at, self._resume_base
        k = dsml.read_tag(block, 0, len(dsml.OPEN))
        self._drive(block[k:], 0)
        self._resume, self._resume_at, self._resume_base = saved
        self._after_block = False
        self._state = REASONING

    def _rb_tag(self, buf: str, p: int) -> tuple[int, int, str, bool | None]:
        """(end, kind, name, is_string) of the exact tag at ``buf[p]``: end -1 when it needs more
        text, kind -1 when it is no exact tag."""
        m = dsml.OPEN if buf.startswith(dsml.OPEN, p) else dsml.CLOSE if buf.startswith(dsml.CLOSE, p) else None
        if m is None:
            n = len(buf) - p
            if n < len(dsml.CLOSE) and (dsml.OPEN.startswith(buf[p:]) or dsml.CLOSE.startswith(buf[p:])):
                return -1, -1, "", None
            return p, -1, "", None
        k = dsml.read_tag(buf, p, len(m))
        if k == -1:
            return -1, -1, "", None
        if k == -2:
            return p, -1, "", None
        kind, name, is_str = dsml.classify(buf[p:k], self._dsml)
        return k, kind, name, is_str

    def _rb_scan(self, buf: str, p: int) -> tuple[int, int]:
        """Scan the held block in ``buf`` from ``p``: ``(_MORE, where to resume)``, ``(_GO, end of
        the block closer)`` or ``(_NOGO, where the text stops being a valid block)``."""
        n = len(buf)
        while True:
            if self._rb_phase == _VALUE:
                j, m = self._m_rvalue.find(buf, p)
                if m is None:
                    return _MORE, j
                if m != dsml.CLOSE:
                    return _NOGO, j
                k, kind, _, _ = self._rb_tag(buf, j)
                if k == -1:
                    return _MORE, j
                if kind != dsml.T_CLOSE_PARAM:
                    return _NOGO, j
                self._rb_phase = _INVOKE
                p = k
                continue
            while p < n and buf[p] in _BLANKS:
                p += 1
            if p == n:
                return _MORE, p
            k, kind, name, is_str = self._rb_tag(buf, p)
            if k == -1:
                return _MORE, p
            if self._rb_phase == _BETWEEN:
                if kind == dsml.T_INVOKE and name in self._declared:
                    self._rb_phase = _INVOKE
                    self._rb_names = set()
                    self._rb_need = set(self._strict_req.get(name, ()))
                elif kind == dsml.T_CLOSE_BLOCK and self._rb_calls:
                    return _GO, k
                else:
                    return _NOGO, p
            elif kind == dsml.T_PARAM and is_str is not None and name not in self._rb_names:
                self._rb_names.add(name)
                self._rb_need.discard(name)
                self._rb_phase = _VALUE
            elif kind == dsml.T_CLOSE_INVOKE and not self._rb_need:
                self._rb_calls += 1
                self._rb_phase = _BETWEEN
            else:
                return _NOGO, p
            p = k

    def _rblock_finish(self) -> None:
        """End of output while holding: the held text is reasoning."""
        text = "".join(self._rb_parts)
        self._rb_parts = []
        self._state = REASONING
        self._note("dsml_in_reasoning")
        if text:
            self._emit_reasoning(text)
