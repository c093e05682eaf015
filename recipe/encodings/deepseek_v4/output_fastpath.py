"""Speed paths of the DeepSeek-V4 output parser (:mod:`.output`): same events, less work.

The general path is the tag-by-tag state machine. The shortcuts here sit on top and give exactly
its events (``tests/test_output_fastpath.py`` compares them push by push, with the shortcuts
switched off by clearing ``_fast_ok`` / ``_fast_texts`` / ``_fast_plain`` / ``_re_run``):

* **plain tokens** (the first test of :meth:`FastPaths.push`): an id whose text holds no ``<``,
  ``>`` or newline (:func:`plain_cache`, per vocabulary: its text, its JSON-escaped form and shared
  reasoning / content events) in mid-reasoning, mid-content, a string or non-string value, or the
  name and attributes of a held DSML tag: one dict lookup and the state's few flags; in the same
  first test, the pieces of a DSML tag inside a block: ``<`` / ``</`` starting one, ``｜DSML｜`` after
  them, and a token with ``>`` completing the held tag (:meth:`FastPaths._tag_token`, the general
  ``_push_ids`` directly when it declines);
* **one-token pushes** (:meth:`FastPaths.push`): plain text in reasoning, content or a string
  value, whitespace between tags, a token completing a held DSML tag (:meth:`FastPaths._tag_token`),
  the ``<`` / ``｜DSML｜`` pieces of a tag, the tokens after a held block opener that cannot decide
  anything (:meth:`FastPaths._hold_phase0_token`) skip the scanner; anything else goes to the general
  ``_push_ids``. They read the per-vocabulary id -> text table of :func:`text_cache`, and are off
  (empty table) while the UTF-8 decoder holds part of a character or when a marker spelling
  does not start with ``<``;
* **bulk invokes** (:meth:`FastPaths._bulk_invokes`): a push whose text holds complete
  well-formed invokes (exact spelling, explicit closers, only ASCII whitespace between tags,
  values free of DSML openers/closers and EOS spellings) matches them with one regex run
  (:func:`bulk_patterns`) and emits each call's start / arguments / end at once;
* **argument fragments** (:attr:`FastPaths.push_fragments`, for ``CompletionStream.push_sse``): the
  one-token pushes whose only event is an arguments delta of the open call (a string value's
  token, a token completing a parameter's opener or closer) return the delta's text and its
  compact JSON instead of an event (from the plain entry, or memoised per text), for the API
  encoder's ``fragment_sse`` to frame. A held tag's completion (:meth:`FastPaths._tag_token`) is
  memoised per (held text, token text).

``bench/bench_stream.py`` measures them against deepseek-recipe (the stream benches: the fragments).
"""

from __future__ import annotations

import re
import types
from collections.abc import Sequence
from json.encoder import encode_basestring  # type: ignore[attr-defined]

from orjson import dumps as _orjson_dumps

from recipe.encodings.deepseek_v4.output_dsml import (
    KEY_JSON,
    OPEN,
    V4_DIALECT,
    Dialect,
    Spelling,
    T_CLOSE_BLOCK,
    T_CLOSE_INVOKE,
    T_CLOSE_PARAM,
    T_INVOKE,
    T_PARAM,
    TAG_MAX,
    classify,
    key_json,
    value_json,
)
from recipe.encodings.deepseek_v4.output_state import (
    BLOCK,
    CONTENT,
    HOLD,
    INVOKE,
    REASONING,
    RECOVER,
    VALUE,
)
from recipe.output.events import (
    OutputEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from recipe.tokenizer import Tokenizer

__all__ = ["BULK_MIN", "FastPaths", "Plain", "bulk_patterns", "is_plain", "plain_cache", "text_cache"]

_TEXT_CACHES: dict[int, tuple[object, dict[int, str]]] = {}
_PLAIN_CACHES: dict[int, tuple[object, dict[int, Plain | None]]] = {}
_NO_TEXTS: dict = {}  # never written: the one-token shortcuts are off

#: A plain token (:func:`plain_cache`): its text, the text as JSON string content (escaped, no quotes),
#: a shared reasoning and content event carrying it (events are immutable), and the compact JSON
#: (a quoted string literal, UTF-8) of that escaped content: what an API's SSE frame of a tool-call
#: arguments delta carrying it holds (:meth:`FastPaths.push` with ``fragments``).
Plain = tuple[str, str, ReasoningDelta, TextDelta, bytes]


def text_cache(tokenizer: Tokenizer) -> dict[int, str]:
    """Per-vocabulary cache: token id -> its text, for ids whose bytes are whole UTF-8 (filled lazily)."""
    key = id(tokenizer.encoding)
    hit = _TEXT_CACHES.get(key)
    if hit is None or hit[0] is not tokenizer.encoding:
        hit = _TEXT_CACHES[key] = (tokenizer.encoding, {})
    return hit[1]


def plain_cache(tokenizer: Tokenizer) -> dict[int, Plain | None]:
    """Per-vocabulary cache: token id -> :data:`Plain`, for ids whose text is whole UTF-8 and holds no
    ``<``, ``>`` or newline — text that can neither start, end nor break a tag, a marker or a run of
    newlines — and None for the other ids seen (filled lazily, from :func:`text_cache`'s texts)."""
    key = id(tokenizer.encoding)
    hit = _PLAIN_CACHES.get(key)
    if hit is None or hit[0] is not tokenizer.encoding:
        hit = _PLAIN_CACHES[key] = (tokenizer.encoding, {})
    return hit[1]


def is_plain(text: str) -> bool:
    """Whether ``text`` may be a :func:`plain_cache` entry."""
    return bool(text) and "<" not in text and ">" not in text and "\n" not in text


_WS = "[ \t\r\n]*"
_NAME = '[^"<>\n]{1,256}'
_BULK: dict[tuple[tuple[str, ...], tuple[Spelling, ...]], tuple[re.Pattern[str], re.Pattern[str]]] = {}
#: shortest remaining text worth a bulk match attempt (a minimal invoke is longer).
BULK_MIN = 40


def bulk_patterns(eos_texts: tuple[str, ...], d: Dialect = V4_DIALECT) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(run regex, lexer regex) for values that cannot contain these EOS spellings, with the
    invoke / parameter tag names of the dialect ``d`` (default V4's spellings).

    The run regex matches one or more consecutive complete invokes; the lexer's ``findall`` over
    such a run yields ``(invoke_name, key, "t" if string, value, "</" at invoke close)`` tuples.
    """
    key = (eos_texts, d.spellings)
    hit = _BULK.get(key)
    if hit is None:
        bad = "|".join(["/?｜DSML｜", *(re.escape(e[1:]) for e in eos_texts)])
        value = f"[^<]*(?:<(?!{bad})[^<]*)*"  # unrolled loop: linear, no nested ambiguity
        # either spelling of the dialect (V4, V4.1), mixed too
        inv = "(?:" + "|".join(dict.fromkeys(re.escape(sp.invoke) for sp in d.spellings)) + ")"
        par = "(?:" + "|".join(dict.fromkeys(re.escape(sp.parameter) for sp in d.spellings)) + ")"
        invoke = (f'{_WS}<｜DSML｜{inv} name="{_NAME}">(?:{_WS}<｜DSML｜{par} name="{_NAME}" '
                  f'string="(?:true|false)">{value}</｜DSML｜{par}>)*{_WS}</｜DSML｜{inv}>')
        lexer = (f'{_WS}<｜DSML｜{inv} name="({_NAME})">'
                 f'|{_WS}<｜DSML｜{par} name="({_NAME})" string="(?:(t)rue|false)">({value})</｜DSML｜{par}>'
                 f'|{_WS}(</)｜DSML｜{inv}>')
        hit = _BULK[key] = (re.compile(f"(?:{invoke})+"), re.compile(lexer))
    return hit


#: string-value text -> (text, its JSON string content, None, None, that content's JSON literal): the
#: argument fragment of a token that is not plain (it holds a newline), memoised (bounded)
_PIECES: dict[str, tuple[str, str, None, None, bytes]] = {}


def _value_piece(text: str) -> tuple[str, str, None, None, bytes]:
    """The :data:`_PIECES` entry of ``text`` (a string value's text, shaped like a :data:`Plain`
    entry: ``[1]`` the argument fragment, ``[4]`` its compact JSON), memoised."""
    piece = encode_basestring(text)[1:-1]
    frag = (text, piece, None, None, _orjson_dumps(piece))
    if len(_PIECES) < 4096:
        _PIECES[text] = frag
    return frag


#: dialect spellings -> (held tag text, completing token's text) -> :func:`_tag_completion`'s answer
_TAG_MEMOS: dict[tuple[Spelling, ...], dict[tuple[str, str], tuple[str, int, str, bool | None, str] | tuple[()]]] = {}


def _tag_completion(key: tuple[str, str], d: Dialect,
                    memo: dict[tuple[str, str], tuple[str, int, str, bool | None, str] | tuple[()]]
                    ) -> tuple[str, int, str, bool | None, str] | tuple[()]:
    """For a held tag text and the text of a token holding its ``>`` (``key``): (the tag, its kind,
    name and string attribute as :func:`.output_dsml.classify` gives them, the text after the
    ``>``), or ``()`` when the token cannot simply complete it (a ``<`` in the token, a newline
    before its ``>``, the tag too long). Memoised in ``memo`` (bounded): tags and their closing
    tokens repeat."""
    hold, text = key
    g = text.find(">")
    if "<" in text or "\n" in text[:g] or len(hold) + g >= TAG_MAX:
        hit: tuple[str, int, str, bool | None, str] | tuple[()] = ()
    else:
        tag = hold + text[: g + 1]
        hit = (tag, *classify(tag, d), text[g + 1:])
    if len(memo) < 4096:
        memo[key] = hit
    return hit


class FastPaths:
    """The :class:`~.output.OutputParser` methods that shortcut its general path.

    Owns ``_fast_ok`` (shortcuts possible for these markers), ``_fast_texts`` / ``_fast_plain``
    (the id -> text and id -> plain-token tables the one-token shortcuts read, or empty ones while
    they are off) and ``_re_run`` /
    ``_re_lex`` (the bulk regexes, None when off); reads and writes the parser's state.
    """

    def _init_fast(self, setup: object) -> None:
        """Switch the shortcuts on when every marker spelling starts with ``<`` (decided once per
        vocabulary and end ids: :func:`.output_setup.parser_setup`)."""
        self._tag_memo = _TAG_MEMOS.setdefault(self._dsml.spellings, {})
        self._fast_ok = setup.fast_ok  # type: ignore[attr-defined]
        self._fast_texts = self._texts if self._fast_ok else _NO_TEXTS
        self._plains = setup.plains  # type: ignore[attr-defined]
        self._fast_plain = self._plains if self._fast_ok else _NO_TEXTS
        if self._dsml is V4_DIALECT:
            self._re_run, self._re_lex = setup.re_run, setup.re_lex  # type: ignore[attr-defined]
        else:  # another dialect (V3.2's function_calls block): bulk regexes with its tag names
            self._re_run, self._re_lex = (bulk_patterns(tuple(sorted(self._eos_text)), self._dsml) if self._fast_ok
                                          else (None, None))

    def push(self, token_ids: Sequence[int], fragments: bool = False) -> list[OutputEvent] | Plain:
        """Feed completion token ids (any number). Returns the events they complete.

        An id in ``eos_token_ids`` ends the output (Finish ``stop``); ids after it are ignored.
        Any sequence of integers is accepted (lists, tuples, arrays such as numpy's). Raises
        ``KeyError`` only for an id outside the vocabulary. A one-token push is served here when a
        shortcut applies, everything else by the general ``_push_ids``.

        ``fragments`` (:attr:`push_fragments`; for ``CompletionStream.push_sse``): a one-token push
        whose only event would be an arguments delta of the open call, when a shortcut serves it (a
        token of a string value, a token completing a parameter's opener or closer),
        returns a tuple ``f`` instead: ``f[1]`` the delta's text, ``f[4]`` its compact JSON string
        literal (for a plain token, its :data:`Plain` entry), so the caller can frame the delta
        without an event; the parser's state is the same either way.
        """
        if len(token_ids) == 1:
            # The plainest token (no "<", ">" or newline): the cases of the paths below that
            # it can take, with fewer checks (same actions, same events).
            tid = token_ids[0]
            hit = self._fast_plain.get(tid)
            if hit is not None:
                hold = self._hold
                if not hold:
                    st = self._state
                    if st == VALUE:
                        if self._vstring:
                            if not self._vnl:
                                self._completion += 1
                                piece = hit[1]
                                args = self._args
                                args.append(piece)
                                self._args_sent = len(args)
                                if fragments:
                                    return hit
                                return [ToolCallArgumentsDelta(self._call, piece)]
                        elif not self._vdup:  # a non-string value: buffered until its closer
                            self._completion += 1
                            self._vbuf.append(hit[0])
                            return []
                    elif st == REASONING:
                        if not self._r_nl and not self._r_q and not self._r_lead and not self._rpend:
                            self._completion += 1
                            self._pos += len(hit[0])
                            self._rcount += 1
                            return [hit[2]]
                    elif st == CONTENT:
                        if self._plain and not self._c_nl and not self._c_q and not self._c_lead and not self._after_block:
                            self._completion += 1
                            return [hit[3]]
                elif self._hold_tag:
                    if self._state != HOLD and len(hold) + len(hit[0]) < TAG_MAX:
                        self._hold = hold + hit[0]  # the name or attributes of a DSML tag waiting for its ">"
                        self._completion += 1
                        return []
                elif hit[0] == "｜DSML｜" and BLOCK <= self._state <= VALUE and (hold == "<" or hold == "</"):
                    self._hold = hold + "｜DSML｜"  # now exactly an opener / closer prefix waiting for its ">"
                    self._hold_tag = True
                    self._completion += 1
                    return []
            elif not self._hold:
                # the start of a DSML tag (or of an EOS spelling) in a block: held, as the scan would
                text = self._fast_texts.get(tid)
                if (text == "<" or text == "</") and BLOCK <= self._state <= VALUE:
                    self._hold = text
                    self._hold_tag = False
                    self._completion += 1
                    return []
            elif self._hold_tag and BLOCK <= self._state <= VALUE:
                # a token completing a held DSML tag (the general path when it is anything else)
                text = self._fast_texts.get(tid)
                if text is not None and ">" in text:
                    out = self._tag_token(text, fragments)
                    if out is not None:
                        return out
                    if type(token_ids) is not tuple and type(token_ids) is not list:
                        token_ids = [int(t) for t in token_ids]
                    return self._push_ids(token_ids)
        kind = type(token_ids)
        if kind is not tuple and kind is not list:
            token_ids = [int(t) for t in token_ids]
        if len(token_ids) == 1:
            # Fast paths for one whole-text token (``_pos`` is only read while reasoning, so
            # the non-reasoning paths below do not maintain it).
            text = self._fast_texts.get(token_ids[0])
            if text is not None and token_ids[0] not in self._plains:  # first sight: is it plain?
                if is_plain(text):
                    esc = encode_basestring(text)[1:-1]
                    esc = text if esc == text else esc
                    self._plains[token_ids[0]] = (text, esc, ReasoningDelta(text), TextDelta(text), _orjson_dumps(esc))
                else:
                    self._plains[token_ids[0]] = None

            if text is not None:  # (empty table while the decoder holds part of a character)
                st = self._state
                if st == HOLD:
                    if self._hinv < 0 and self._hsrc is None and self._hold_phase0_token(text):
                        self._completion += 1
                        return []
                elif not self._hold:
                    if "<" not in text:
                        if st == VALUE:
                            self._completion += 1
                            if self._vstring:
                                # a string value piece: one escaped arguments delta (nothing was pending);
                                # a trailing "\n" is held until the next piece or the closer (_value_text)
                                if self._vnl:
                                    text = "\n" + text
                                    self._vnl = False
                                if text[-1] == "\n":
                                    self._vnl = True
                                    text = text[:-1]
                                    if not text:
                                        return []
                                frag = _PIECES.get(text)
                                if frag is None:
                                    frag = _value_piece(text)
                                args = self._args
                                args.append(frag[1])
                                self._args_sent = len(args)
                                if fragments:
                                    return frag
                                return [ToolCallArgumentsDelta(self._call, frag[1])]
                            out = self._out = []
                            self._value_text(text)
                            if self._args_sent < len(self._args):
                                self._flush_args()
                            return out
                        if st == REASONING:
                            self._completion += 1
                            pos0 = self._pos
                            self._pos = pos0 + len(text)
                            if (text[-1] != "\n" and not self._r_nl and not self._r_q and not self._r_lead
                                    and not self._rpend):
                                self._rcount += 1  # mid-reasoning text: delivered as is
                                return [ReasoningDelta(text)]
                            out = self._out = []
                            self._emit_reasoning(text)
                            if self._rpend:
                                self._count_one(pos0)
                            else:
                                self._rcount += 1
                            return out
                        if st == CONTENT:
                            self._completion += 1
                            if (text[-1] != "\n" and self._plain and not self._c_nl and not self._c_q
                                    and not self._c_lead and not self._after_block):
                                return [TextDelta(text)]  # mid-content text: delivered as is
                            out = self._out = []
                            self._emit_content(text)
                            if self._end is not None:
                                self._close(self._end[0])
                            return out
                        if st < RECOVER and text.isspace():  # between tags in a block / an invoke: held, dropped at the next tag
                            self._completion += 1
                            self._ws += text
                            return []
                    elif (text == "<" or text == "</") and BLOCK <= st <= VALUE:
                        # the start of a DSML tag (or of an EOS spelling): held, as the scan would
                        self._hold = text
                        self._hold_tag = False
                        self._completion += 1
                        return []
                elif self._hold_tag:
                    if ">" not in text:
                        if "<" not in text and "\n" not in text and len(self._hold) + len(text) < TAG_MAX:
                            self._hold += text
                            self._completion += 1
                            return []
                    elif BLOCK <= st <= VALUE:
                        out = self._tag_token(text, fragments)
                        if out is not None:
                            return out
                elif text == "｜DSML｜" and BLOCK <= st <= VALUE and (self._hold == "<" or self._hold == "</"):
                    self._hold += text  # now exactly an opener / closer prefix waiting for its ">"
                    self._hold_tag = True
                    self._completion += 1
                    return []
        return self._push_ids(token_ids)

    #: :meth:`push` with ``fragments=True``: the same code object with the other default, so the
    #: driver's per-token call costs no extra argument or wrapper.
    push_fragments = types.FunctionType(push.__code__, push.__globals__, "push_fragments", (True,), push.__closure__)

    @property
    def open_call(self) -> int:
        """Index of the tool call being built (its ``ToolCallStart`` was emitted), -1 when none."""
        return self._call

    def _hold_phase0_token(self, text: str) -> bool:
        """A held block opener (:mod:`.output_hold`) waiting for its first tag: take a token that
        cannot decide anything (a blank after the opener, a piece of an exact tag without ``>``);
        False: the general path must look."""
        tail = self._htail  # the held text from its first non-blank on ("" while only blanks)
        if not tail and not text.strip(" \t\r\n"):  # the hold's blanks: ASCII only (\u3000 is text)
            self._hparts.append(text)
            self._hpos += len(text)
            return True
        new = tail + text
        if ">" in text or "\n" in text or len(new) >= TAG_MAX or not (
                OPEN.startswith(new) or (new.startswith(OPEN) and "<" not in text)):
            return False
        self._hparts.append(text)
        self._htail = new
        return True

    def _tag_token(self, text: str, fragments: bool = False) -> list[OutputEvent] | Plain | None:
        """One token completing a held DSML tag inside a block; None when the general scan must decide.

        Handles the structural tags valid in the current state (invoke or block closer in a
        block, parameter or invoke closer in an invoke, parameter closer in a value) and the
        text after the ``>``, with the same events as :meth:`_dsml_step` and the state
        handlers (inlined: this runs for about one token in ten of a tool-call-heavy output).
        """
        key = (self._hold, text)
        hit = self._tag_memo.get(key)
        if hit is None:
            hit = _tag_completion(key, self._dsml, self._tag_memo)
        if not hit:
            return None
        tag, kind, name, is_str, rest = hit
        st = self._state
        if st == VALUE:
            if kind != T_CLOSE_PARAM:
                return None
            out = self._out = []
            if self._vstring and not self._vdup:  # a string value: its closing quote (and held "\n")
                self._args.append('\\n"' if self._vnl else '"')
                self._vnl = False
            else:
                self._end_value(False, tag)
            st = self._state = INVOKE
        elif st == INVOKE:
            if kind == T_PARAM:
                pnames = self._pnames
                if is_str is None or name in pnames:
                    return None  # inferred kind or a repeated name: the general path
                pnames.add(name)
                out = self._out = []
                k = KEY_JSON.get(name) or key_json(name)
                piece = (", " + k if self._nparams else k) + ('"' if is_str else "")
                self._args.append(piece)
                self._nparams += 1
                self._vstring = is_str
                self._vnl = False
                self._vbuf = []
                st = self._state = VALUE
            elif kind == T_CLOSE_INVOKE:
                out = self._out = []
                self._end_call()
                st = self._state = BLOCK
            else:
                return None
        elif st == BLOCK:
            if kind == T_INVOKE:
                if self._needs_hold(name):
                    return None
                out = self._out = []
                self._start_call(name)
                st = INVOKE
            elif kind == T_CLOSE_BLOCK:
                out = self._out = []
                self._leave_block()
                st = CONTENT
            else:
                return None
        else:
            return None
        self._completion += 1
        self._hold = ""
        self._ws = ""
        self._ws_text = False
        if rest:
            if st == VALUE:
                self._value_text(rest)
            elif st == CONTENT:  # no "<" in rest: no marker, plain content after the block
                self._emit_content(rest)
                if self._end is not None:
                    self._close(self._end[0])
            elif rest.isspace():
                self._ws = rest
            else:
                self._feed(rest)
                return self._end_push(out)
        call = self._call
        if call >= 0:  # the argument text appended since the last flush: one delta (_flush_args)
            args = self._args
            k = self._args_sent
            n = len(args)
            if k < n:
                piece = args[k] if k + 1 == n else "".join(args[k:])
                self._args_sent = n
                if fragments and not out:  # the push's only event: as a fragment (see push)
                    return (piece, piece, None, None, _orjson_dumps(piece))
                out.append(ToolCallArgumentsDelta(call, piece))
        return out  # start + "{" / args / args + end / content: never two mergeable deltas in a row

    def _bulk_invokes(self, s: str, i: int) -> int:
        """Emit every complete well-formed invoke starting at ``i`` (after whitespace) at once.

        Returns the index after the last one emitted (``i`` when none). The events are those the
        tag-by-tag path gives for the same text inside one push: start, one arguments delta, end.
        An invoke the general path must judge (a parameter named twice, a strict tool's required
        parameter missing) ends the run: the index returned is its start.
        """
        m = self._re_run.match(s, i)
        if m is None:
            return i
        append = self._out.append
        declared = self._declared
        strict = self._strict_req
        new_id = self._new_id
        stream = getattr(new_id, "stream", None)
        if stream is not None:  # (LazyIds: call its id stream directly)
            new_id = stream()
        keys = KEY_JSON
        idx = self._ncalls
        parts: list[str] = []
        seen: set[str] = set()
        call = ""
        invalid = False
        stop = -1  # ordinal of the invoke that ends the run, when one does
        ordinal = -1
        for name, key, is_str, val, close in self._re_lex.findall(s, i, m.end()):
            if key:
                if key in seen:
                    stop = ordinal
                    break
                seen.add(key)
                k = keys.get(key)
                if k is None:
                    k = key_json(key)
                value, bad = value_json(val, is_str == "t")
                parts.append(k + value)
                invalid = invalid or bad
            elif name:
                call = name
                parts = []
                seen = set()
                invalid = False
                ordinal += 1
            else:
                req = strict.get(call)
                if req is not None and not req <= seen:
                    stop = ordinal
                    break
                if declared and call not in declared:
                    self._note("undeclared_tool")
                if invalid:
                    self._note("invalid_json_argument")
                args = "{" + ", ".join(parts) + "}" if parts else "{}"
                append(ToolCallStart(idx, new_id(idx), call))
                append(ToolCallArgumentsDelta(idx, args))
                append(ToolCallEnd(idx, args))
                idx += 1
        self._blk_calls += idx - self._ncalls
        self._ncalls = idx
        self._ws = ""
        self._ws_text = False
        if stop >= 0:  # the general path reads that invoke (its leading whitespace included)
            for tok in self._re_lex.finditer(s, i, m.end()):
                if tok.group(1) is not None:
                    if stop == 0:
                        return tok.start()
                    stop -= 1
        i = m.end()
        m = self._dsml.block_end.match(s, i)
        if m is not None:  # the block closer right after: leave the block here too
            self._leave_block()
            return m.end()
        return i

    def _sync_fast(self) -> None:
        """One-token shortcuts read ``_fast_texts``: the id -> text table, or an empty one while
        they are off (a marker spelling not starting with ``<``) or the decoder holds a partial
        UTF-8 sequence (a token's text then depends on the bytes before it)."""
        on = self._fast_ok and not self._dec.buffer
        self._fast_texts = self._texts if on else _NO_TEXTS
        self._fast_plain = self._plains if on else _NO_TEXTS
