"""Malformed model output (issue 12): a generator of hostile outputs with known structure, the
three APIs' requests declaring the same tools, each API's result reduced to one shape, and the
checks of the acceptance property:

(a) every call names a declared tool (or is a well-formed undeclared call flagged
    ``undeclared_tool``), carries every parameter its invoke wrote and every required parameter of a
    strict tool, and has arguments that are one JSON object with unique keys;
(b) reasoning + content + the markup of recovered calls give back the output, whitespace aside
    (checked as: the output without blanks is the text pieces in event order with, between two
    pieces, a gap exactly where calls were made; each gap holds only its calls' markup and values);
(c) every dropped or reinterpreted marker has a note;
(d) streamed = non-streamed (every chunking gives the same result).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from recipe.conversation import ParsingOptions, ToolArguments

#: declared tools: ``f`` (city: string, n: integer), ``g`` (no schema), ``s`` (strict: a, b required);
#: ``x`` is never declared.
DECLARED = ("f", "g", "s")
NAMES = ("f", "g", "s", "x")
PARAMS = {"f": ("city", "n"), "g": ("q",), "s": ("a", "b"), "x": ("k",)}
JSON_PARAMS = {"f": frozenset({"n"}), "s": frozenset({"b"})}
STRICT_REQUIRED = frozenset({"a", "b"})
ROLES = ("<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>", "<｜latest_reminder｜>")
EOS = "<｜end▁of▁sentence｜>"

#: (opener prefix, closer prefix, space before tag names, block name)
SPELLINGS = {
    "exact": ("<｜DSML｜", "</｜DSML｜", "", "tool_calls"),
    "doubled": ("<｜｜DSML｜｜", "</｜｜DSML｜｜", " ", "calls"),
    "v41": ("<｜DSML｜", "</｜DSML｜", " ", "calls"),  # DeepSeek-V4.1's: exact markup too, for every model
    "v32": ("<｜DSML｜", "</｜DSML｜", "", "function_calls"),
    "ascii": ("< | DSML | ", "</ | DSML | ", "", "calls"),
}

#: loose pieces dropped anywhere between segments
FRAGMENTS = (
    "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "<｜DSML｜function_calls>", "</｜DSML｜function_calls>",
    "</｜DSML｜invoke>", "</｜DSML｜parameter>", '<｜DSML｜invoke name="f">', '<｜DSML｜invoke name="x">',
    '<｜DSML｜parameter name="city" string="true">', '<｜DSML｜parameter name="city">', "<｜DSML｜", "</｜DSML｜",
    "<｜DSML｜tool_calls", "<｜｜DSML｜｜ calls>", '<｜｜DSML｜｜ invoke name="g">', "</｜｜DSML｜｜ invoke>",
    "</think>", "<think>", "</think>", *ROLES, "<", "< |", "<|", "\n", "\n\n", " ", '"', "{", "é", "🤖",
)

_WS = re.compile(r"\s+")
#: a DSML tag or tag start in any spelling (for the gap checks)
_ANY_TAG = re.compile(r"< ?/? ?(?:[｜|] ?){1,2}DSML ?(?:[｜|] ?){1,2}[^<>]*>?")
#: (gaps are compared without whitespace, so V4.1's exact `<｜DSML｜ invoke` reads as V4's there)
_CORRUPTED_TAG = re.compile(r"< ?/? ?(?:(?:[｜|] ?){2}|\| ?|｜ )DSML|DSML｜function_calls")
_SENTINEL = re.compile(r"[WV]\d{3}[a-z]")


def strip_ws(text: str) -> str:
    return _WS.sub("", text)


@dataclass
class Output:
    """A generated output: its text, the sentinels it holds, and for each structured invoke the
    sentinels of its values with the parameter names it writes (``writes``: sentinel -> invoke no.)."""

    text: str = ""
    sentinels: list[str] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)  # value sentinel -> invoke number
    params: dict[int, list[tuple[str, int]]] = field(default_factory=dict)  # invoke -> [(name, opener end)]
    thinking: bool = False

    def add(self, piece: str) -> None:
        self.text += piece

    def sentinel(self, kind: str = "W") -> str:
        w = f"{kind}{len(self.sentinels):03d}{'abcdefghij'[len(self.sentinels) % 10]}"
        self.sentinels.append(w)
        return w


@st.composite
def outputs(draw: Any, thinking: bool | None = None) -> tuple[Output, str]:
    """(output, finish): prose, loose DSML fragments, structured tool blocks in random spellings with
    missing / repeated / attribute-less parameters and breakages, optionally cut short (``length``)."""
    o = Output(thinking=draw(st.booleans()) if thinking is None else thinking)

    def prose() -> None:
        for _ in range(draw(st.integers(1, 3))):
            o.add(o.sentinel() + draw(st.sampled_from([" ", "\n", "\n\n", ". "])))

    def tag(sp: tuple[str, str, str, str], kind: str, closing: bool = False, attrs: str = "") -> str:
        return f"{sp[1] if closing else sp[0]}{sp[2]}{kind}{attrs}>"

    def invoke(sp: tuple[str, str, str, str], no: int) -> None:
        name = draw(st.sampled_from(NAMES))
        o.add(tag(sp, "invoke", attrs=f' name="{name}"') + draw(st.sampled_from(["\n", "", " "])))
        o.params[no] = []
        pnames = list(PARAMS[name])
        for _ in range(draw(st.integers(0, 3))):
            pname = draw(st.sampled_from(pnames + ["extra"]))
            kind = draw(st.sampled_from(["true", "false", None]))
            attrs = f' name="{pname}"' + ("" if kind is None else f' string="{kind}"')
            v = o.sentinel("V")
            o.writes[v] = no
            value = v if kind != "false" else draw(st.sampled_from([f'"{v}"', f'["{v}", 2]', f'{{"k": "{v}"}}', v]))
            o.add(tag(sp, "parameter", attrs=attrs))
            o.params[no].append((pname, len(o.text)))
            o.add(value)
            if draw(st.integers(0, 9)) > 0:  # sometimes the closer is missing
                o.add(tag(sp, "parameter", closing=True))
            o.add(draw(st.sampled_from(["\n", "", "\n"])))
            if draw(st.integers(0, 14)) == 0:
                o.add(o.sentinel() + "\n")  # text between tags
        if draw(st.integers(0, 9)) > 0:
            o.add(tag(sp, "invoke", closing=True) + "\n")

    if o.thinking:
        prose()
        if draw(st.integers(0, 4)) > 0:
            o.add("</think>")
    invokes = 0
    for _ in range(draw(st.integers(1, 5))):
        what = draw(st.sampled_from(["prose", "prose", "fragment", "block", "block"]))
        if what == "prose":
            prose()
        elif what == "fragment":
            o.add(draw(st.sampled_from(FRAGMENTS)))
        else:
            sp = SPELLINGS[draw(st.sampled_from(["exact", "exact", "exact", "doubled", "v41", "v32", "ascii"]))]
            if draw(st.integers(0, 4)) > 0:
                o.add(tag(sp, sp[3]) + "\n")
            for _ in range(draw(st.integers(0, 3))):
                invoke(sp, invokes)
                invokes += 1
            if draw(st.integers(0, 4)) > 0:
                o.add(tag(sp, sp[3], closing=True))
            o.add(draw(st.sampled_from(["", "\n", "\n\n"])))
    finish = "stop"
    if draw(st.integers(0, 3)) == 0:
        o.text = o.text[: draw(st.integers(0, len(o.text)))]
        finish = "length"
    return o, finish


# ---------------------------------------------------------------- requests and options

_F_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}}
_S_SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
             "required": ["a", "b"], "additionalProperties": False}


def parsing_options(thinking: bool, strict: bool = True) -> ParsingOptions:
    """What the three APIs derive for the tools below (Messages has no strict tools: ``strict`` False)."""
    args = {"f": ToolArguments(json_params=frozenset({"n"})),
            "s": ToolArguments(required=STRICT_REQUIRED if strict else frozenset(), json_params=frozenset({"b"}))}
    return ParsingOptions(parse_tool_calls=True, thinking_stage="reasoning" if thinking else None,
                          tool_names=DECLARED, tool_arguments=args)


def request(api: str, thinking: bool) -> dict[str, Any]:
    """A request of ``api`` declaring ``f``, ``g`` and ``s`` (strict where the API has strict tools)."""
    if api == "chat":
        tools = [{"type": "function", "function": {"name": "f", "parameters": _F_SCHEMA}},
                 {"type": "function", "function": {"name": "g"}},
                 {"type": "function", "function": {"name": "s", "strict": True, "parameters": _S_SCHEMA}}]
        return {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "go"}], "tools": tools,
                "reasoning_effort": "high" if thinking else "none"}
    if api == "responses":
        tools = [{"type": "function", "name": "f", "parameters": _F_SCHEMA},
                 {"type": "function", "name": "g", "parameters": None},
                 {"type": "function", "name": "s", "strict": True, "parameters": _S_SCHEMA}]
        return {"model": "deepseek-v4-pro", "input": "go", "tools": tools,
                "reasoning": {"effort": "high" if thinking else "none"}}
    tools = [{"name": "f", "input_schema": _F_SCHEMA}, {"name": "g", "input_schema": {"type": "object"}},
             {"name": "s", "input_schema": _S_SCHEMA}]
    return {"model": "deepseek-v4-pro", "max_tokens": 1000, "messages": [{"role": "user", "content": "go"}],
            "tools": tools, "thinking": {"type": "enabled" if thinking else "disabled"}}


# ---------------------------------------------------------------- one shape for every API


@dataclass(frozen=True)
class Result:
    """What a client reads: reasoning, answer text, calls (name, arguments text), notes, and the
    order of text and calls (``pieces``: text pieces, and between them the set of call indexes
    whose events came there: a call's markup may be split by text written inside it)."""

    reasoning: str
    content: str
    calls: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]
    pieces: tuple[str | frozenset[int], ...] = ()


def from_events(events: list[Any]) -> Result:
    """The parser's events as a :class:`Result` (``pieces`` from the event order)."""
    from recipe.output.events import (
        ReasoningDelta,
        TextDelta,
        ToolCallArgumentsDelta,
        ToolCallEnd,
        ToolCallStart,
        accumulate,
    )

    pieces: list[Any] = []
    open_calls: set[int] = set()  # text written inside an open call has that call's markup on both sides
    for ev in events:
        if isinstance(ev, (TextDelta, ReasoningDelta)):
            if pieces and isinstance(pieces[-1], str):
                pieces[-1] += ev.text
            else:
                pieces.append(ev.text)
            if open_calls:
                pieces.append(set(open_calls))
        elif isinstance(ev, (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd)):
            if isinstance(ev, ToolCallStart):
                open_calls.add(ev.index)
            elif isinstance(ev, ToolCallEnd):
                open_calls.discard(ev.index)
            if pieces and isinstance(pieces[-1], set):
                pieces[-1].add(ev.index)
            else:
                pieces.append({ev.index})
    r = accumulate(events)
    return Result(r.reasoning_content, r.content, tuple((c.name, c.arguments) for c in r.tool_calls), r.notes,
                  tuple(p if isinstance(p, str) else frozenset(p) for p in pieces))


def from_api(api: str, resp: dict[str, Any]) -> Result:
    """An API's non-streamed response as a :class:`Result` (no ``pieces``)."""
    notes = tuple(resp.get("recipe", {}).get("notes", ()))
    if api == "chat":
        m = resp["choices"][0]["message"]
        calls = tuple((c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or ())
        return Result(m.get("reasoning_content") or "", m["content"] or "", calls, notes)
    if api == "responses":
        out = resp["output"]
        reasoning = "".join(p["text"] for it in out if it["type"] == "reasoning" for p in it["content"])
        content = "".join(p["text"] for it in out if it["type"] == "message" for p in it["content"])
        calls = tuple((it["name"], it["arguments"]) for it in out if it["type"] == "function_call")
        return Result(reasoning, content, calls, notes)
    blocks = resp["content"]
    reasoning = "".join(b["thinking"] for b in blocks if b["type"] == "thinking")
    content = "".join(b["text"] for b in blocks if b["type"] == "text")
    calls = tuple((b["name"], json.dumps(b["input"], ensure_ascii=False)) for b in blocks if b["type"] == "tool_use")
    return Result(reasoning, content, calls, notes)


def same_calls(a: Result, b: Result) -> bool:
    """The same calls (arguments compared as JSON values: Messages re-serialises them)."""
    return [(n, json.loads(x)) for n, x in a.calls] == [(n, json.loads(x)) for n, x in b.calls]


# ---------------------------------------------------------------- the property


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"repeated key in {keys}"
    return dict(pairs)


def _values(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


_PARTIAL_OK = ("<｜DSML｜", "</｜DSML｜", "<｜｜DSML｜｜", "</｜｜DSML｜｜", "<|DSML|", "</|DSML|", EOS)


def _gap_rest(calls: frozenset[int], gap: str, args_of: list[dict[str, Any]]) -> str:
    values = [v for ci in sorted(calls) for v in args_of[ci].values()]
    return min(_without_markup(gap, values, tags_first) for tags_first in (True, False))


def _gap_ok(calls: frozenset[int], gap: str, at_end: bool, args_of: list[dict[str, Any]]) -> bool:
    """A gap holds only its calls' markup and values (and, at the very end, an unfinished tag)."""
    rest = _gap_rest(calls, gap, args_of)
    return rest == "" or (at_end and any(x.startswith(rest) for x in _PARTIAL_OK))


def _assign(flat: str, pieces: list[Any], ok: Any) -> list[tuple[frozenset[int], str, int]] | None:
    """Place the text pieces in ``flat`` in order, every gap between them accepted by ``ok``: the
    (calls, gap text, gap end) list of the first placement found, None when there is none."""
    def place(pos: int, k: int, acc: list[Any]) -> list[Any] | None:
        if k == len(pieces):
            return acc if pos == len(flat) else None
        p = pieces[k]
        if isinstance(p, str):
            return place(pos + len(p), k + 1, acc) if flat.startswith(p, pos) else None
        if k + 1 == len(pieces):
            ends = [len(flat)]
        else:
            nxt, ends, e = pieces[k + 1], [], flat.find(pieces[k + 1], pos)
            while e >= 0:
                ends.append(e)
                e = flat.find(nxt, e + 1)
        for e in ends:
            if ok(p, flat[pos:e], e):
                got = place(e, k + 1, [*acc, (p, flat[pos:e], e)])
                if got is not None:
                    return got
        return None

    return place(0, 0, [])


def _without_markup(gap: str, values: list[Any], tags_first: bool) -> str:
    """``gap`` without DSML tags and without the calls' values (a value may hold tag-like text, or
    text that also occurs in a tag: both orders are tried)."""
    rest = _ANY_TAG.sub("", gap) if tags_first else gap
    for v in sorted(values, key=lambda v: -len(_values(v))):
        for w in (strip_ws(json.dumps(v, ensure_ascii=False)), strip_ws(_values(v))):
            if w and w in rest:
                rest = rest.replace(w, "", 1)
                break
    return rest if tags_first else _ANY_TAG.sub("", rest)


def check(o: Output, r: Result, *, strict: bool) -> None:
    """Properties (a), (b), (c) of one result for the generated output ``o``."""
    text = o.text.split(EOS, 1)[0]
    notes = set(r.notes)
    # (a) calls: declared or flagged, unique keys, strict required, every parameter its invoke wrote
    args_of = []
    for name, arguments in r.calls:
        assert name in DECLARED or "undeclared_tool" in notes, name
        args = json.loads(arguments, object_pairs_hook=_unique_keys)
        assert isinstance(args, dict)
        args_of.append(args)
        if name == "s" and strict:
            assert STRICT_REQUIRED <= set(args), (name, args)
        sources = {o.writes[w] for v in args.values() for w in _SENTINEL.findall(_values(v)) if w in o.writes}
        assert len(sources) <= 1, sources
        for src in sources:
            written = {p for p, end in o.params[src] if end <= len(text)}
            assert written <= set(args), (written, args)
    # every sentinel the output holds lands once, in one field (no character lost or doubled)
    hay = r.reasoning + r.content + "".join(_values(v) for a in args_of for v in a.values())
    for w in o.sentinels:
        if w in text:
            assert hay.count(w) == 1, (w, r)
    # (b) text pieces in order; gaps exactly where calls were made, holding only their markup and values
    out = text
    if o.thinking:
        t = out.find("</think>")
        roles = [out.find(x) for x in ROLES if x in out]
        if t >= 0 and not (roles and min(roles) < t):
            out = out[:t] + out[t + len("</think>"):]
    flat = strip_ws(out)
    pieces: list[Any] = []  # blank text pieces dropped, the call sets around them merged
    for p in r.pieces:
        if isinstance(p, str):
            if strip_ws(p):
                pieces.append(strip_ws(p))
        elif pieces and not isinstance(pieces[-1], str):
            pieces[-1] = pieces[-1] | p
        else:
            pieces.append(p)
    gaps = _assign(flat, pieces, lambda calls, gap, end: _gap_ok(calls, gap, end == len(flat), args_of))
    assert gaps is not None, (r.pieces, out)
    for calls, gap, end in gaps:
        if end == len(flat) and _gap_rest(calls, gap, args_of):
            assert notes & {"partial_markup", "truncated_tool_call"}, (gap, r.notes)
    # (c) a note for every marker dropped, reinterpreted, or kept as text where it means something
    if "</think>" in r.content:  # (after a role token nothing is structure: that note covers it)
        assert notes & {"think_end_in_content", "role_token"}, r
    if any(x in r.content or x in r.reasoning for x in ROLES):
        assert "role_token" in notes, r
    if "<｜DSML｜" in r.content or "</｜DSML｜" in r.content:  # the format's own markup kept as text
        assert notes & {"stray_dsml", "duplicate_parameter", "text_in_tool_block", "role_token"}, r
    for calls, gap, end in gaps:
        for v in sorted((v for ci in calls for v in args_of[ci].values()), key=lambda v: -len(_values(v))):
            gap = gap.replace(strip_ws(_values(v)), "", 1)  # markup only: a value may hold tag-like text
        if _CORRUPTED_TAG.search(gap):
            assert notes & {"recovered_dsml", "stray_dsml"}, (gap, r.notes)
        if re.search(r'parameter name="[^"]*" ?>', gap):
            assert "inferred_parameter_type" in notes, (gap, r.notes)
        if end == len(flat):  # the output ends in call markup: cut short unless the last invoke closed
            opened = gap.rfind("invokename=")
            if not gap.endswith(">") or (opened >= 0 and not re.search(r"/[｜|]{1,2}DSML[｜|]{1,2}invoke>", gap[opened:])):
                assert notes & {"truncated_tool_call", "partial_markup", "unclosed_invoke"}, (gap, r.notes)
    for name, _ in r.calls:
        if name not in DECLARED:
            assert "undeclared_tool" in notes
