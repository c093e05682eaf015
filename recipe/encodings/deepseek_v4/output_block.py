"""Exact-spelling tool-call blocks for the DeepSeek-V4 output parser (:mod:`.output`).

The states ``BLOCK`` (between invokes), ``INVOKE`` (between parameters) and ``VALUE`` (inside
a parameter value) read the text tag by tag (:meth:`ToolCallBlock._dsml_step`) and turn it into
:class:`~recipe.output.events.ToolCallStart` / :class:`~recipe.output.events.ToolCallArgumentsDelta` /
:class:`~recipe.output.events.ToolCallEnd` events. Arguments are always one valid JSON object:
``string="true"`` values stream as JSON-string pieces; ``string="false"`` values are buffered
to their closer and emitted raw when they are valid JSON, else quoted (``invalid_json_argument``);
a call cut short is closed. Whitespace between tags is dropped; text that is not a tag ends the
block (between invokes) or goes to content (inside an invoke, the call continues); a parameter
left open is closed by the next structural tag (an invoke opener or block closer that closes the
call is then read again by the block state). A parameter written without ``string=`` is read as
JSON when the tool's schema types it so, else as a string (``inferred_parameter_type``); a
parameter named twice in one invoke keeps its first value, the repeat (tag, value, closer) is
content (``duplicate_parameter``), so arguments never hold a key twice. An invoke tag that must
be held (undeclared or strict tool, :mod:`.output_hold`) switches to the ``HOLD`` state. See the
deviations in :mod:`.output`.
"""

from __future__ import annotations

from json.encoder import encode_basestring  # type: ignore[attr-defined]

from recipe.encodings.deepseek_v4.constants import THINK_END
from recipe.encodings.deepseek_v4.output_dsml import (
    CLOSE,
    OPEN,
    T_CLOSE_BLOCK,
    T_CLOSE_INVOKE,
    T_CLOSE_PARAM,
    T_INVOKE,
    T_OTHER,
    T_PARAM,
    TAG_MAX,
    classify,
    is_tag_prefix,
    read_tag,
    value_json,
)
from recipe.encodings.deepseek_v4.output_fastpath import BULK_MIN
from recipe.encodings.deepseek_v4.output_recovery import block_closer
from recipe.encodings.deepseek_v4.output_state import BLOCK, CONTENT, INVOKE, VALUE
from recipe.output.events import ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart

__all__ = ["ToolCallBlock"]


class ToolCallBlock:
    """The :class:`~.output.OutputParser` methods for the block, invoke and value states.

    Owns the call being built (``_call``, ``_args``, ``_nparams``, ``_pnames``, the value buffers)
    and the whitespace held between tags (``_ws``); reads and writes the parser's state.
    """

    def _init_calls(self) -> None:
        """No call yet; nothing held between tags."""
        self._ncalls = 0
        self._call = -1  # index of the open call, -1 when none
        self._args: list[str] = []
        self._args_sent = 0  # how many of _args were emitted as deltas
        self._nparams = 0
        self._pnames: set[str] = set()  # parameter names of the open call
        self._json_params: frozenset[str] = frozenset()  # its tool's non-string properties
        self._blk_calls = 0  # calls started in the current block
        self._vdup = False  # the open value repeats a parameter name: it goes to content
        self._vstring = True
        self._vnl = False  # a trailing "\n" of a string value is held
        self._vbuf: list[str] = []
        self._ws = ""  # whitespace held between DSML tags
        self._ws_text = False  # text was emitted from inside the current invoke since the last tag

    def _enter_block(self) -> None:
        """Content -> block: the newlines held before the opener are dropped, a held stop-sequence
        prefix is released."""
        self._c_nl = ""
        self._c_q.clear()
        self._after_block = False
        self._blk_calls = 0
        if self._stops is not None:
            held = self._stops.flush()
            if held:
                self._text_out(held)
                self._c_lead = False
        self._state = BLOCK

    def _leave_block(self) -> None:
        """Block -> content: blanks right after the block are held (dropped unless text follows)."""
        self._state = CONTENT
        self._after_block = True

    def _dsml_step(self, s: str, i: int, base: int) -> tuple[int, int, str, bool, int] | None:
        """Shared scan for block/invoke/value states.

        Returns None when everything up to the end was handed to ``_text_in_state`` (maybe with
        a hold), else ``(tag_start, kind, name, is_string, tag_end)`` of the next complete tag
        (kind ``T_OTHER`` for a non-structural ``<｜DSML｜…>`` tag text).
        """
        find = self._m_dsml.find
        while True:
            j = s.find("<", i)
            if j < 0:
                j, m = len(s), None
            elif s.startswith(OPEN, j):
                m = OPEN
            elif s.startswith(CLOSE, j):
                m = CLOSE
            else:
                j, m = find(s, j)
            if j > i:
                if self._state == BLOCK:
                    seg = s[i:j]
                    body = seg.lstrip()
                    if body:  # text between invokes: the block is over, continue as content
                        p = j - len(body)
                        self._note("text_in_tool_block")
                        self._c_nl = self._ws + s[i:p]
                        self._c_q.clear()
                        self._ws = ""
                        self._leave_block()
                        return (p, -1, "", False, p)
                    self._ws += seg
                else:
                    self._text_in_state(s[i:j])
                    if self._end is not None:
                        return (j, -1, "", False, j)
            if m is None:
                self._held(s, j, base)
                return None
            if m in self._eos_text:
                self._end = ("stop", None)
                return None
            k = read_tag(s, j, len(m))
            if k == -1:
                self._held(s, j, base, True)
                return None
            if k == -2 and (cut := self._cut_by_eos(s, j, len(m))) != -1:
                if cut == -3:  # maybe an EOS spelling cutting the tag: wait for it (no longer
                    self._held(s, j, base)  # a bare tag opening, so the one-token shortcuts stay out)
                    return None
                i = cut  # a tag cut by an EOS spelling: dropped as it is when cut by the EOS id
                continue
            kind, name, is_str = classify(s[j:k], self._dsml) if k >= 0 else (T_OTHER, "", False)
            if kind == T_OTHER and self._state == BLOCK and self._rec is not None:
                if k >= 0 and block_closer(self._rec, s[j:k]) == k - j:
                    # a corrupted spelling of the block closer (e.g. ``calls`` without V4.1's space): it closes the block
                    self._note("recovered_dsml")
                    self._ws = ""
                    self._ws_text = False
                    return j, T_CLOSE_BLOCK, "", False, k
                # not an exact tag between invokes: the block is over; content reads the tag
                # again, where a corrupted spelling may still be recovered
                self._note("stray_dsml")
                self._note("text_in_tool_block")
                self._c_nl = self._ws
                self._c_q.clear()
                self._ws = ""
                self._leave_block()
                return (j, -1, "", False, j)
            if k == -2:
                self._text_in_state(m)
                if self._end is not None or self._state == CONTENT:
                    return (j + len(m), -1, "", False, j + len(m))
                i = j + len(m)
                continue
            if kind == T_OTHER:  # not a structural tag: plain text of the current state
                if self._state != VALUE:
                    self._note("stray_dsml")
                self._text_in_state(s[j:k])
                if self._end is not None or self._state == CONTENT:
                    return (k, -1, "", False, k)
                i = k
                continue
            self._ws = ""
            self._ws_text = False
            return j, kind, name, is_str, k

    def _cut_by_eos(self, s: str, j: int, plen: int) -> int:
        """Where an EOS spelling cuts the unfinished structural tag at ``s[j]`` inside a tool block
        (note ``partial_markup``, the tag dropped: what :meth:`_flush_held` does when the EOS id
        cuts it, so text and id feeding agree); -3 when the text ends inside what may be that EOS
        spelling; -1 when it does not."""
        lt = s.find("<", j + plen, j + TAG_MAX)
        if lt < 0:
            return -1
        st = self._state
        tag = s[j:lt]
        if not ((st == INVOKE or st == VALUE or (st == BLOCK and self._blk_calls)) and "\n" not in tag
                and is_tag_prefix(tag, self._dsml)):
            return -1
        rest = s[lt:]
        if any(rest.startswith(e) for e in self._eos_text):
            self._note("partial_markup")
            return lt
        return -3 if any(e.startswith(rest) for e in self._eos_text) else -1

    def _text_in_state(self, text: str) -> None:
        st = self._state
        if st == VALUE:
            self._value_text(text)
            return
        body = text.rstrip()
        if not body:
            self._ws += text  # whitespace between tags: held, dropped at the next tag
            return
        self._note("text_in_tool_block")
        self._note_markers(body)
        ws = text[len(body):]
        if st == BLOCK:  # text between invokes: the block is over, back to content
            self._c_nl = self._ws
            self._c_q.clear()
            self._ws = ""
            self._leave_block()
            self._emit_content(body)
            if ws:
                self._emit_content(ws)
        else:  # text inside an invoke: content, trimmed as a run, the call continues
            if self._ws_text:
                body = self._ws + body
            else:
                body = body.lstrip()
            self._ws = ws
            self._ws_text = True
            self._flush_args()
            self._emit_content(body)

    def _do_tags(self, s: str, i: int, base: int) -> int | None:
        """The handler of the ``BLOCK``, ``INVOKE`` and ``VALUE`` states: the next tag
        (:meth:`_dsml_step`) goes to the state's tag rule (``_block_tag``, ``_invoke_tag``,
        ``_value_tag``). Returns where to continue, or None when everything was read (or held)."""
        st = self._state
        if st == BLOCK and len(s) - i >= BULK_MIN and self._re_run is not None:
            i = self._bulk_invokes(s, i)
            if self._state != BLOCK:
                return i
        r = self._dsml_step(s, i, base)
        if r is None:
            return None
        j, kind, name, is_str, k = r
        if kind == -1:
            return k
        if st == INVOKE:
            return self._invoke_tag(kind, name, is_str, s, j, k)
        if st == VALUE:
            return self._value_tag(kind, name, is_str, s, j, k)
        return self._block_tag(kind, name, s, j, k)

    def _block_tag(self, kind: int, name: str, s: str, j: int, k: int) -> int:
        """Handle the tag ``s[j:k]`` between invokes; returns where to continue."""
        if kind == T_INVOKE:
            if self._needs_hold(name) and not self._take_approval(s, j):
                self._hold_start(s, j, k, BLOCK, name)
            else:
                self._start_call(name)
        elif kind == T_CLOSE_BLOCK:
            self._leave_block()
        elif kind == T_PARAM:  # a parameter outside any invoke: text, back to content
            self._note("stray_dsml")
            self._text_in_state(s[j:k])
        else:  # stray closer or a repeated block opener: markup, dropped
            self._note("stray_dsml")
        return k

    def _invoke_tag(self, kind: int, name: str, is_str: bool | None, s: str, j: int, k: int) -> int:
        """Handle the tag ``s[j:k]`` inside an invoke; returns where to continue (``j``: the block
        state reads the tag again)."""
        if kind == T_PARAM:
            if name in self._pnames:  # a repeated name: the first value stays, this one is content
                self._note("duplicate_parameter")
                self._to_content(s[j:k])
                self._vdup = True
                self._vstring = False  # (keeps the one-token string shortcut away)
                self._state = VALUE
                return k
            self._pnames.add(name)
            if is_str is None:
                self._note("inferred_parameter_type")
                is_str = name not in self._json_params
            self._arg(f'{", " if self._nparams else ""}{encode_basestring(name)}: {chr(34) if is_str else ""}')
            self._nparams += 1
            self._vstring = is_str
            self._vnl = False
            self._vbuf = []
            self._state = VALUE
        elif kind == T_CLOSE_INVOKE:
            self._end_call()
            self._state = BLOCK
        elif kind == T_INVOKE or kind == T_CLOSE_BLOCK:  # the call ends here; the block reads the tag
            self._note("unclosed_invoke")
            self._end_call()
            self._state = BLOCK
            return j
        else:  # stray </parameter> or nested <tool_calls>: text, the call goes on
            self._note("stray_dsml")
            self._to_content(s[j:k])
        return k

    def _value_tag(self, kind: int, name: str, is_str: bool | None, s: str, j: int, k: int) -> int:
        """Handle the tag ``s[j:k]`` inside a parameter value: its closer ends the value, another
        structural tag ends it implicitly and is read as a tag of the invoke."""
        if kind == T_CLOSE_PARAM:
            self._end_value(False, s[j:k])
            self._state = INVOKE
            return k
        self._note("implicit_parameter_close")
        self._end_value(True)
        self._state = INVOKE
        return self._invoke_tag(kind, name, is_str, s, j, k)

    def _to_content(self, text: str) -> None:
        """Text inside an invoke that is not the call's (a repeated parameter): content, the call goes on."""
        self._note_markers(text)
        self._flush_args()
        self._emit_content(text)

    def _note_markers(self, text: str) -> None:
        """Notes for a ``</think>`` or a role token in text sent to content from inside a block
        (kept as text there; nothing in a block is frozen by a role token)."""
        if "<" in text:
            if THINK_END in text:
                self._note("think_end_in_content")
            if "<｜" in text and any(r in text for r in self._roles):
                self._note("role_token")

    def _value_text(self, text: str) -> None:
        if not self._vstring:
            if self._vdup:
                self._to_content(text)
                return
            self._vbuf.append(text)
            return
        if self._vnl:
            text = "\n" + text
            self._vnl = False
        if text[-1] == "\n":
            self._vnl = True
            text = text[:-1]
            if not text:
                return
        self._arg(encode_basestring(text)[1:-1])

    def _end_value(self, implicit: bool, closer: str = "") -> None:
        """Close the open value (``closer``: its explicit closer tag, "" when implicit or cut)."""
        if self._vdup:
            self._vdup = False
            if closer:
                self._to_content(closer)
            return
        if self._vstring:
            if self._vnl and not implicit:
                self._arg("\\n")
            self._vnl = False
            self._arg('"')
            return
        raw = "".join(self._vbuf)
        self._vbuf = []
        if implicit and raw.endswith("\n"):
            raw = raw[:-1]
        value, bad = value_json(raw, False)
        if bad:
            self._note("invalid_json_argument")
        self._arg(value)

    def _start_call(self, name: str) -> None:
        idx = self._ncalls
        self._ncalls += 1
        self._call = idx
        self._args = []
        self._nparams = 0
        self._pnames = set()
        ta = self._tool_args.get(name)
        self._json_params = ta.json_params if ta is not None else frozenset()
        self._blk_calls += 1
        if self._declared and name not in self._declared:
            self._note("undeclared_tool")
        self._out.append(ToolCallStart(idx, self._new_id(idx), name))
        self._args_sent = 0
        self._arg("{")
        self._state = INVOKE

    def _end_call(self) -> None:
        self._arg("}")
        self._flush_args()
        self._out.append(ToolCallEnd(self._call, "".join(self._args)))
        self._call = -1

    def _arg(self, text: str) -> None:
        self._args.append(text)

    def _flush_args(self) -> None:
        """Emit the argument text appended since the last flush as one delta."""
        args = self._args
        k = self._args_sent
        if k < len(args):
            self._out.append(ToolCallArgumentsDelta(self._call, args[k] if k + 1 == len(args) else "".join(args[k:])))
            self._args_sent = len(args)
