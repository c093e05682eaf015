"""Exact tool-call markup held back until it is known to be a valid call (the ``HOLD`` state).

The exact format streams a call from its invoke tag on. Three openings are held instead, because
only what follows decides whether the model made a call at all:

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

On go the block starts and the block state reads the held text again after the opener, with the
held invoke tag approved so it is not held twice: the events are exactly those of the exact
format. On no-go the held text up to the point of decision is content, verbatim
(``_emit_literal``: only ``</think>``, role tokens and EOS are read in it), with the notes
``stray_dsml`` and, for an invoke, ``rejected_tool_call`` (+ ``missing_required_parameter``);
reading continues after it. Nothing is bounded by length here: a held invoke is decided by its
structure, and a held opener by the first non-blank character after it.
"""

from __future__ import annotations

from recipe.encodings.deepseek_v4.output_dsml import (
    CLOSE,
    OPEN,
    TAG_MAX,
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
from recipe.encodings.deepseek_v4.output_state import BLOCK, CONTENT, HOLD, SWITCH
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

    The held text starts at a block opener or an invoke tag. While it lies in the text being read
    (``_hsrc``, from ``_h0``) it is scanned in place, so a decision costs no copy of the rest of a
    large push. Text left undecided at the end of a push is kept as pieces (``_hparts``, joined
    only at the decision) and the scan goes on over ``_htail``, the held text from ``_hpos`` on
    (short: at most an unfinished tag), so a long held value costs linear time. Positions
    ``_hpos`` (scan) and ``_hinv`` (the held invoke tag, -1 while only an opener is held) are
    relative to the held text's start; ``_hopen`` is the held opener's length (0 when the hold
    began at an invoke). ``_hneed``: required parameters not seen yet (None for an undeclared
    tool); ``_hin_value`` / ``_hnames``: the well-formedness scan; ``_hfrom``: the state the hold
    began in; ``_approved``: the held invoke tag, not to be held again when read after go. Reads
    ``_declared``, ``_strict_req``, ``_eos_text``, ``_rec``.
    """

    def _init_hold(self, matcher: MarkerMatcher) -> None:
        """No hold; ``matcher`` finds DSML openers, closers and EOS spellings (shared, immutable)."""
        self._hparts: list[str] = []
        self._htail = ""
        self._hsrc: str | None = None
        self._h0 = 0
        self._hfrom = CONTENT
        self._hopen = 0
        self._hinv = -1
        self._hpos = 0
        self._hneed: set[str] | None = None
        self._hin_value = False
        self._hnames: set[str] = set()
        #: (text, tag indexes): tags of a text read again after go that must not be held again
        self._approved: tuple[str, list[int]] | None = None
        self._m_hold = matcher

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

    def _hold_start(self, s: str, j: int, k: int, from_state: int, name: str | None) -> int:
        """Hold from the block opener (``name`` None) or invoke tag ``s[j:k]``; returns ``k``."""
        self._state = HOLD
        self._hparts = []
        self._hsrc = s
        self._h0 = j
        self._hfrom = from_state
        self._hpos = k - j
        self._hopen = 0 if name is not None else k - j
        self._hinv = -1
        if name is not None:
            self._hold_invoke(0, name)
        return k

    def _hold_invoke(self, at: int, name: str) -> None:
        self._hinv = at
        need = self._strict_req.get(name)  # (None: an undeclared tool, checked for well-formedness)
        self._hneed = None if need is None else set(need)
        self._hin_value = False
        self._hnames = set()

    def _do_hold(self, s: str, i: int, base: int) -> int | None:
        if self._hsrc is s:  # the held text is s[h0:i] and the scan goes on in s
            h0 = self._h0
            r = self._hold_scan(s, h0)
            if r is None and self._state == HOLD:  # undecided: keep the held text for the next push
                self._hparts = [s[h0:]]
                self._htail = s[h0 + self._hpos:]
                self._hsrc = None
            return r
        new = s[i:] if i else s  # text held from earlier pushes, then this one: scan the tail only
        self._hparts.append(new)
        buf = self._htail + new
        h0 = -self._hpos  # (buf[0] is the held text's position _hpos; see _whole)
        r = self._hold_scan(buf, h0)
        if r is None and self._state == HOLD:
            self._htail = buf[h0 + self._hpos:]
        return r

    def _whole(self, buf: str, h0: int) -> tuple[str, int, int]:
        """(text, start of the held text in it, shift of positions in ``buf``): ``buf`` itself when
        it holds the whole held text, else the joined pieces (``h0`` < 0: ``buf`` is a tail)."""
        if h0 >= 0:
            return buf, h0, 0
        return "".join(self._hparts), 0, -h0

    # ------------------------------------------------------------------ decisions

    def _continue(self, buf: str, at: int) -> int:
        """Go on reading ``buf`` from ``at`` (in place when ``buf`` is the text being read)."""
        self._resume, self._resume_at = buf, at
        return SWITCH

    def _hold_scan(self, buf: str, h0: int) -> int | None:
        """Decide as far as the held text ``buf[h0:]`` allows; None: still undecided."""
        if self._hinv < 0:  # only the block opener so far: what follows it?
            p = _skip_blanks(buf, h0 + self._hpos)
            self._hpos = p - h0
            if p == len(buf):
                return None
            exact = False  # an exact structural tag follows (not a recovery candidate)
            if buf.startswith(OPEN, p):
                k = read_tag(buf, p, len(OPEN))
                if k == -1:
                    return None
                if k >= 0:
                    kind, name, _ = classify(buf[p:k], self._dsml)
                    if kind == T_INVOKE:
                        if not self._needs_hold(name):
                            return self._hold_go(buf, h0)
                        self._hold_invoke(p - h0, name)
                        self._hpos = k - h0
                        return self._hold_scan(buf, h0)
                    exact = kind != T_OTHER
            elif len(buf) - p < len(OPEN) and OPEN.startswith(buf[p:]):
                return None
            if self._rec is not None and buf[p] == "<" and not exact:
                # a corrupted spelling after an exact opener: recovery judges the block as a whole
                hs = head_state(buf[p:p + 2 * TAG_MAX])
                if hs == 0:
                    return None
                if hs > 0:
                    self._rec_start(0)
                    buf, h0, _ = self._whole(buf, h0)
                    return self._continue(buf, h0)
            return self._hold_nogo(buf, h0, p, False)
        if self._hneed is not None:
            return self._scan_strict(buf, h0)
        return self._scan_wellformed(buf, h0)

    def _scan_strict(self, buf: str, h0: int) -> int | None:
        """Strict tool: go once every required parameter was opened; no-go when the invoke ends first."""
        need = self._hneed
        find = self._m_hold.find
        p = h0 + self._hpos
        while True:
            j, m = find(buf, p)
            if m is None:
                self._hpos = j - h0
                return None
            if m in self._eos_text:
                return self._hold_nogo(buf, h0, j, True)
            k = read_tag(buf, j, len(m))
            if k == -1:
                self._hpos = j - h0
                return None
            if k == -2:
                p = j + len(m)
                continue
            kind, name, _ = classify(buf[j:k], self._dsml)
            if kind == T_PARAM:
                need.discard(name)
                if not need:
                    return self._hold_go(buf, h0)
            elif kind == T_CLOSE_INVOKE:
                return self._hold_nogo(buf, h0, k, True)
            elif kind in (T_INVOKE, T_OPEN_BLOCK, T_CLOSE_BLOCK):
                return self._hold_nogo(buf, h0, j, True)
            p = k

    def _scan_wellformed(self, buf: str, h0: int) -> int | None:
        """Undeclared tool: go at the invoke closer if everything up to it was well-formed."""
        p = h0 + self._hpos
        n = len(buf)
        while True:
            if self._hin_value:  # a parameter value: anything up to its closer, no other DSML tag
                j, m = self._m_hold.find(buf, p)
                if m is None:
                    self._hpos = j - h0
                    return None
                if m == CLOSE:
                    k = read_tag(buf, j, len(CLOSE))
                    if k == -1:
                        self._hpos = j - h0
                        return None
                    if k >= 0 and classify(buf[j:k], self._dsml)[0] == T_CLOSE_PARAM:
                        self._hin_value = False
                        p = k
                        continue
                return self._hold_nogo(buf, h0, j, True)
            p = _skip_blanks(buf, p)  # between tags: blanks, then a parameter opener or the closer
            if p == n:
                self._hpos = p - h0
                return None
            m = OPEN if buf.startswith(OPEN, p) else CLOSE if buf.startswith(CLOSE, p) else None
            if m is None:
                if n - p < len(CLOSE) and (OPEN.startswith(buf[p:]) or CLOSE.startswith(buf[p:])):
                    self._hpos = p - h0
                    return None
                return self._hold_nogo(buf, h0, p, True)
            k = read_tag(buf, p, len(m))
            if k == -1:
                self._hpos = p - h0
                return None
            kind, name, _ = classify(buf[p:k], self._dsml) if k >= 0 else (-1, "", None)
            if kind == T_PARAM and name not in self._hnames:
                self._hnames.add(name)
                self._hin_value = True
                p = k
                continue
            if kind == T_CLOSE_INVOKE:
                return self._hold_go(buf, h0)
            return self._hold_nogo(buf, h0, p, True)

    def _hold_go(self, buf: str, h0: int) -> int:
        """A valid call (or a block that holds one): the block starts (or goes on) and the block
        state reads the held text again after the opener, the held invoke tag approved."""
        buf, h0, _ = self._whole(buf, h0)
        self._hparts = []
        if self._hfrom == CONTENT:
            self._enter_block()  # (the content before it ends as before any block)
        self._state = BLOCK
        if self._hinv >= 0:
            self._approved = (buf, [h0 + self._hinv])
        return self._continue(buf, h0 + self._hopen)

    def _hold_nogo(self, buf: str, h0: int, end: int, invoke: bool) -> int | None:
        """Not a call: ``buf[h0:end]`` is content, verbatim; what follows is read again as content."""
        buf, h0, shift = self._whole(buf, h0)
        end += shift
        self._hparts = []
        self._state = CONTENT
        self._note("stray_dsml")
        if invoke:
            self._note("rejected_tool_call")
            if self._hneed:
                self._note("missing_required_parameter")
        self._emit_literal(buf[h0:end])
        if end >= len(buf) or self._end is not None:
            return None
        return self._continue(buf, end)

    def _hold_finish(self) -> None:
        """End of output while holding: nothing was decided, so all of it is content."""
        buf = "".join(self._hparts)
        if buf:
            r = self._hold_nogo(buf, 0, len(buf), self._hinv >= 0)
            assert r is None
        self._state = CONTENT
