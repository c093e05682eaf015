"""Exact tool-call markup held back until it is known to be a valid call (the ``HOLD`` state).

The exact format streams a call from its invoke tag on. Three openings are held instead, because
only what follows decides whether the model made a call at all (issue 12):

* a block opener ``<｜DSML｜tool_calls>``: its text is markup only if the block holds a call, so it
  is held until the first invoke tag (**go**) or anything else (**no-go**: the opener is content;
  when a corrupted-spelling tag follows, recovery judges the block from the opener on);
* an invoke of an **undeclared** tool: a call (flagged ``undeclared_tool``, as deepseek-recipe
  returns it) only when the invoke is well-formed — exact tags, every parameter closed, only
  whitespace between tags, no parameter named twice; decided at the first place it is not, or at
  its closer;
* an invoke of a **strict** tool with required parameters: a call once every required parameter
  has been opened; no-go when the invoke ends (closer, next invoke, block closer, EOS, end of
  output) before that.

On go the held text is read again by the ordinary states, with the held opener / invoke approved so
they are not held twice: the events are exactly those of the exact format. On no-go the held text
up to the point of decision is content, verbatim (``_emit_literal``: only ``</think>``, role
tokens and EOS are read in it), with the notes ``stray_dsml`` and, for an invoke,
``rejected_tool_call`` (+ ``missing_required_parameter``); reading continues after it. Nothing is
bounded by length here: a held invoke is decided by its structure, and a held opener by the first
non-blank character after it.
"""

from __future__ import annotations

from recipe.encodings.deepseek_v4.output_dsml import (
    CLOSE,
    OPEN,
    T_CLOSE_BLOCK,
    T_CLOSE_INVOKE,
    T_CLOSE_PARAM,
    T_INVOKE,
    T_OPEN_BLOCK,
    T_OTHER,
    T_PARAM,
    classify,
    read_tag,
)
from recipe.encodings.deepseek_v4.output_recovery import head_state
from recipe.encodings.deepseek_v4.output_state import CONTENT, HOLD, SWITCH
from recipe.output.parsing import MarkerMatcher

__all__ = ["Hold"]

_BLANKS = " \t\r\n"


def _skip_blanks(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _BLANKS:
        i += 1
    return i


class Hold:
    """The :class:`~.output.OutputParser` methods of the ``HOLD`` state.

    Owns the held text (``_hbuf``), the state to read it again in (``_hfrom``), where the held
    invoke starts (``_hinv``, -1 while only an opener is held), the scan position (``_hpos``) and
    the checks in progress (``_hneed``: required parameters not seen yet, None for an undeclared
    tool; ``_hin_value`` / ``_hnames`` for the well-formedness scan); ``_approved`` marks the tags
    of a text read again after go. Reads ``_declared``, ``_strict_req`` and ``_eos_text``.
    """

    def _init_hold(self) -> None:
        self._hbuf = ""
        self._hfrom = CONTENT
        self._hinv = -1
        self._hpos = 0
        self._hneed: set[str] | None = None
        self._hin_value = False
        self._hnames: set[str] = set()
        #: (text, tag indexes): tags of a text read again after go that must not be held again
        self._approved: tuple[str, list[int]] | None = None
        self._m_hold = MarkerMatcher([OPEN, CLOSE, *self._eos_text])

    def _needs_hold(self, name: str) -> bool:
        """An invoke of ``name`` is held: the tool is undeclared, or strict with required parameters."""
        d = self._declared
        return (bool(d) and name not in d) or name in self._strict_req

    def _take_approval(self, s: str, j: int) -> bool:
        """True (once) when the tag at ``s[j]`` was approved by a go decision."""
        ap = self._approved
        if ap is None or ap[0] is not s or j not in ap[1]:
            return False
        ap[1].remove(j)
        if not ap[1]:
            self._approved = None
        return True

    def _hold_start(self, tag: str, from_state: int, name: str | None) -> None:
        """Hold from a block opener (``name`` None) or an invoke tag of ``name`` (already complete)."""
        self._state = HOLD
        self._hbuf = tag
        self._hfrom = from_state
        self._hpos = len(tag)
        self._hinv = -1
        if name is not None:
            self._hold_invoke(0, name)

    def _hold_invoke(self, at: int, name: str) -> None:
        self._hinv = at
        need = self._strict_req.get(name)
        self._hneed = None if need is None or (self._declared and name not in self._declared) else set(need)
        self._hin_value = False
        self._hnames = set()

    def _do_hold(self, s: str, i: int, base: int) -> int | None:
        new = s[i:] if i else s
        if new:
            self._hbuf += new
        return self._hold_scan()

    # ------------------------------------------------------------------ decisions

    def _hold_scan(self) -> int | None:
        """Decide as far as the held text allows; None: still undecided (everything is held)."""
        buf = self._hbuf
        if self._hinv < 0:  # only the block opener so far: what follows it?
            p = _skip_blanks(buf, self._hpos)
            self._hpos = p
            if p == len(buf):
                return None
            exact = False  # an exact structural tag follows (not a recovery candidate)
            if buf.startswith(OPEN, p):
                k = read_tag(buf, p, len(OPEN))
                if k == -1:
                    return None
                if k >= 0:
                    kind, name, _ = classify(buf[p:k])
                    if kind == T_INVOKE:
                        if not self._needs_hold(name):
                            return self._hold_go()
                        self._hold_invoke(p, name)
                        self._hpos = k
                        return self._hold_scan()
                    exact = kind != T_OTHER
            elif len(buf) - p < len(OPEN) and OPEN.startswith(buf[p:]):
                return None
            if self._rec is not None and buf[p] == "<" and not exact:
                # a corrupted spelling after an exact opener: recovery judges the block as a whole
                hs = head_state(buf[p:])
                if hs == 0:
                    return None
                if hs > 0:
                    self._hbuf = ""
                    self._rec_start(0)
                    self._resume = buf
                    return SWITCH
            return self._hold_nogo(p, False)
        if self._hneed is not None:
            return self._scan_strict(buf)
        return self._scan_wellformed(buf)

    def _scan_strict(self, buf: str) -> int | None:
        """Strict tool: go once every required parameter was opened; no-go when the invoke ends first."""
        need = self._hneed
        find = self._m_hold.find
        p = self._hpos
        while True:
            j, m = find(buf, p)
            if m is None:
                self._hpos = j
                return None
            if m in self._eos_text:
                return self._hold_nogo(j, True)
            k = read_tag(buf, j, len(m))
            if k == -1:
                self._hpos = j
                return None
            if k == -2:
                p = j + len(m)
                continue
            kind, name, _ = classify(buf[j:k])
            if kind == T_PARAM:
                need.discard(name)
                if not need:
                    return self._hold_go()
            elif kind == T_CLOSE_INVOKE:
                return self._hold_nogo(k, True)
            elif kind in (T_INVOKE, T_OPEN_BLOCK, T_CLOSE_BLOCK):
                return self._hold_nogo(j, True)
            p = k

    def _scan_wellformed(self, buf: str) -> int | None:
        """Undeclared tool: go at the invoke closer if everything up to it was well-formed."""
        p = self._hpos
        n = len(buf)
        while True:
            if self._hin_value:  # a parameter value: anything up to its closer, no other DSML tag
                j, m = self._m_hold.find(buf, p)
                if m is None:
                    self._hpos = j
                    return None
                if m == CLOSE:
                    k = read_tag(buf, j, len(CLOSE))
                    if k == -1:
                        self._hpos = j
                        return None
                    if k >= 0 and classify(buf[j:k])[0] == T_CLOSE_PARAM:
                        self._hin_value = False
                        p = k
                        continue
                return self._hold_nogo(j, True)
            p = _skip_blanks(buf, p)  # between tags: blanks, then a parameter opener or the closer
            if p == n:
                self._hpos = p
                return None
            m = OPEN if buf.startswith(OPEN, p) else CLOSE if buf.startswith(CLOSE, p) else None
            if m is None:
                if n - p < len(CLOSE) and (OPEN.startswith(buf[p:]) or CLOSE.startswith(buf[p:])):
                    self._hpos = p
                    return None
                return self._hold_nogo(p, True)
            k = read_tag(buf, p, len(m))
            if k == -1:
                self._hpos = p
                return None
            kind, name, _ = classify(buf[p:k]) if k >= 0 else (-1, "", None)
            if kind == T_PARAM and name not in self._hnames:
                self._hnames.add(name)
                self._hin_value = True
                p = k
                continue
            if kind == T_CLOSE_INVOKE:
                return self._hold_go()
            return self._hold_nogo(p, True)

    def _hold_go(self) -> int:
        """A valid call (or a block that holds one): read the held text again in the ordinary states."""
        buf = self._hbuf
        self._hbuf = ""
        self._approved = (buf, [0] if self._hinv <= 0 else [0, self._hinv])
        self._state = self._hfrom
        self._resume = buf
        return SWITCH

    def _hold_nogo(self, end: int, invoke: bool) -> int | None:
        """Not a call: ``held[:end]`` is content, verbatim; the rest is read again as content."""
        buf = self._hbuf
        self._hbuf = ""
        self._state = CONTENT
        self._note("stray_dsml")
        if invoke:
            self._note("rejected_tool_call")
            if self._hneed:
                self._note("missing_required_parameter")
        self._emit_literal(buf[:end])
        rest = buf[end:]
        if not rest or self._end is not None:
            return None
        self._resume = rest
        return SWITCH

    def _hold_finish(self) -> None:
        """End of output while holding: nothing was decided, so all of it is content."""
        if self._hbuf:
            r = self._hold_nogo(len(self._hbuf), self._hinv >= 0)
            assert r is None
        self._state = CONTENT
