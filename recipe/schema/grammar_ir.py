"""A small grammar representation for output grammars, printed as llguidance Lark and as an
xgrammar structural tag (the JSON vLLM's ``structured_outputs.structural_tag`` and SGLang accept).

A model family's grammar builder (e.g. :mod:`recipe.encodings.deepseek_v4.grammar`) and the JSON
Schema converter (:mod:`recipe.schema.json_grammar`) build :class:`Grammar` values out of the
nodes below; :func:`to_lark` and :func:`to_structural_tag` print them. The two printers agree by
construction on the structure; where a format cannot say the same thing the difference is listed
in docs/constrained-decoding.md.

Nodes:

* :class:`Lit` — literal text; :class:`Tok` — one special token, by id (never spelled in text);
* :class:`Text` — free text that contains none of the excluded words (and, by the nature of both
  matchers, no special token), optionally ending with a literal ``suffix`` (``"</"`` before a
  marker token). In Lark one greedy lexeme, in the structural tag ``any_text`` + ``const_string``;
* :class:`Lex` — a lexeme given in both syntaxes (a Lark terminal body and an xgrammar EBNF
  expression): JSON strings, bounded numbers, punctuation with bounded whitespace;
* :class:`Ref` — a named rule; :class:`Seq`, :class:`Alt`, :class:`Opt`, :class:`Star`,
  :class:`Plus` — composition.

Rules whose closure is text-only (no :class:`Tok`, no :class:`Text`) may be recursive (JSON
values); they become one ``grammar`` (EBNF) format in the structural tag. Other rules are inlined
there and must not be recursive.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

__all__ = [
    "Alt",
    "Grammar",
    "Lex",
    "Lit",
    "Node",
    "Opt",
    "Plus",
    "Ref",
    "Seq",
    "Star",
    "Text",
    "Tok",
    "lark_literal",
    "regex_escape",
    "to_lark",
    "to_structural_tag",
]


@dataclass(frozen=True, slots=True)
class Lit:
    """Literal text (``""`` matches nothing; prefer :data:`EMPTY`)."""

    text: str


@dataclass(frozen=True, slots=True)
class Tok:
    """One special token by id; ``spelling`` is for reading only."""

    id: int
    spelling: str = ""


@dataclass(frozen=True, slots=True)
class Text:
    """Free text without any of ``excludes`` as a substring, then the literal ``suffix``.

    ``nonempty``: at least one character before the suffix.
    """

    excludes: tuple[str, ...]
    suffix: str = ""
    nonempty: bool = False


@dataclass(frozen=True, slots=True)
class Lex:
    """A lexeme: ``lark`` is a Lark terminal body (``/regex/``, may use ``&``/``~``), ``ebnf`` the same
    language (or the stated approximation) as an xgrammar EBNF expression; ``tag_regex``, when set,
    is used instead of ``ebnf`` in the structural tag (a ``regex`` format)."""

    lark: str
    ebnf: str
    tag_regex: str | None = None


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to rule ``name`` of the grammar."""

    name: str


@dataclass(frozen=True, slots=True)
class Seq:
    """Items in order (no items: the empty string)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    """One of the items."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Opt:
    """The item or nothing."""

    item: Node


@dataclass(frozen=True, slots=True)
class Star:
    """The item zero or more times."""

    item: Node


@dataclass(frozen=True, slots=True)
class Plus:
    """The item one or more times."""

    item: Node


Node = Union[Lit, Tok, Text, Lex, Ref, Seq, Alt, Opt, Star, Plus]
EMPTY = Seq(())


@dataclass(frozen=True, slots=True)
class Grammar:
    """``start`` plus named rules (rule names: ``[a-z][a-z0-9_]*``)."""

    start: Node
    rules: Mapping[str, Node] = field(default_factory=dict)


def seq(*items: Node) -> Node:
    """A :class:`Seq`, flattened (nested sequences spliced, a single item returned as is)."""
    out: list[Node] = []
    for it in items:
        if type(it) is Seq:
            out.extend(it.items)
        else:
            out.append(it)
    merged: list[Node] = []
    for it in out:  # adjacent literals become one literal
        if type(it) is Lit and merged and type(merged[-1]) is Lit:
            merged[-1] = Lit(merged[-1].text + it.text)  # type: ignore[union-attr]
        else:
            merged.append(it)
    return merged[0] if len(merged) == 1 else Seq(tuple(merged))


def alt(*items: Node) -> Node:
    """An :class:`Alt` (a single item returned as is)."""
    return items[0] if len(items) == 1 else Alt(tuple(items))


# ---------------------------------------------------------------------------------------------
# Lark (llguidance)
# ---------------------------------------------------------------------------------------------

_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~/")


def regex_escape(text: str) -> str:
    """``text`` as a literal inside a Lark ``/…/`` regex (Rust regex syntax; ``/`` escaped)."""
    out = []
    for ch in text:
        if ch in _REGEX_META:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def lark_literal(text: str) -> str:
    """``text`` as a Lark string literal (JSON escapes, non-ASCII raw)."""
    return json.dumps(text, ensure_ascii=False)


def exclusion(excludes: tuple[str, ...]) -> str:
    """The Lark terminal ``~/(?s:.*)(?:w1|w2…)(?s:.*)/``: every string that contains none of
    ``excludes`` (intersect a terminal with it: ``/…/ & ~/…/``)."""
    words = "|".join(regex_escape(w) for w in sorted(set(excludes)))
    return f"~/(?s:.*)(?:{words})(?s:.*)/"


@functools.lru_cache(maxsize=1024)
def text_terminal(node: Text) -> str:
    """The Lark terminal body of a :class:`Text` node.

    Where the suffix cannot be part of an excluded word (:func:`suffix_outside`) it follows the
    intersection (``(/(?s:.*)/ & ~/…/) "</"``): llguidance checks every terminal for emptiness when
    it compiles a grammar, which is immediate for an intersection that matches the empty string and a
    search (about 1 ms a terminal on this machine) for ``/(?s:.*)<\\// & ~/…/``."""
    many = "+" if node.nonempty else "*"
    if suffix_outside(node):
        return f"(/(?s:.{many})/ & {exclusion(node.excludes)}) {lark_literal(node.suffix)}"
    body = f"/(?s:.{many}){regex_escape(node.suffix)}/"
    return f"{body} & {exclusion(node.excludes)}" if node.excludes else body


@functools.lru_cache(maxsize=1024)
def suffix_outside(node: Text) -> bool:
    """True when ``(text without the words) + suffix`` is the same language as ``(text + suffix)
    without the words``: no excluded word lies inside the suffix or ends inside it (no word ends
    with a non-empty prefix of the suffix)."""
    if not node.suffix or not node.excludes:
        return False
    sfx = node.suffix
    return not any(w in sfx or any(w.endswith(sfx[:k]) for k in range(1, len(sfx) + 1)) for w in node.excludes)


class _LarkPrinter:
    def __init__(self) -> None:
        self.terminals: dict[str, str] = {}  # body -> name

    def terminal(self, body: str) -> str:
        name = self.terminals.get(body)
        if name is None:
            name = self.terminals[body] = f"T{len(self.terminals)}"
        return name

    def expr(self, node: Node, top: bool = False) -> str:
        t = type(node)
        if t is Lit:
            return lark_literal(node.text)  # type: ignore[union-attr]
        if t is Tok:
            return f"<[{node.id}]>"  # type: ignore[union-attr]
        if t is Text:
            return self.terminal(text_terminal(node))  # type: ignore[arg-type]
        if t is Lex:
            return self.terminal(node.lark)  # type: ignore[union-attr]
        if t is Ref:
            return node.name  # type: ignore[union-attr]
        if t is Seq:
            items = node.items  # type: ignore[union-attr]
            if not items:
                return "_empty"
            body = " ".join(self.expr(i) for i in items)
            return body if top or len(items) == 1 else f"({body})"
        if t is Alt:
            body = " | ".join(self.expr(i, top=True) for i in node.items)  # type: ignore[union-attr]
            return body if top else f"({body})"
        suffix = {Opt: "?", Star: "*", Plus: "+"}[t]  # type: ignore[index]
        inner = node.item  # type: ignore[union-attr]
        return f"({self.expr(inner, top=True)}){suffix}"


def to_lark(grammar: Grammar) -> str:
    """The grammar as llguidance Lark text: rules in order, then the terminals (``T0``, ``T1``, …)."""
    p = _LarkPrinter()
    lines = [f"start: {p.expr(grammar.start, top=True)}"]
    for name, node in grammar.rules.items():
        lines.append(f"{name}: {p.expr(node, top=True)}")
    lines.append("_empty: ")
    for body, name in p.terminals.items():
        lines.append(f"{name}: {body}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# xgrammar structural tag
# ---------------------------------------------------------------------------------------------


def ebnf_literal(text: str) -> str:
    """``text`` as an xgrammar EBNF string literal."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _closure(rules: Mapping[str, Node], node: Node, acc: dict[str, None]) -> bool:
    """Collect rule names reachable from ``node`` into ``acc``; False if a Tok/Text is reachable."""
    t = type(node)
    if t is Tok or t is Text:
        return False
    if t is Ref:
        name = node.name  # type: ignore[union-attr]
        if name in acc:
            return True
        acc[name] = None
        return _closure(rules, rules[name], acc)
    if t is Seq or t is Alt:
        return all(_closure(rules, i, acc) for i in node.items)  # type: ignore[union-attr]
    if t in (Opt, Star, Plus):
        return _closure(rules, node.item, acc)  # type: ignore[union-attr]
    return True


def _ebnf(node: Node) -> str:
    t = type(node)
    if t is Lit:
        return ebnf_literal(node.text)  # type: ignore[union-attr]
    if t is Lex:
        return f"({node.ebnf})"  # type: ignore[union-attr]
    if t is Ref:
        return f"r_{node.name}"  # type: ignore[union-attr]
    if t is Seq:
        items = node.items  # type: ignore[union-attr]
        return "(" + " ".join(_ebnf(i) for i in items) + ")" if items else '""'
    if t is Alt:
        return "(" + " | ".join(_ebnf(i) for i in node.items) + ")"  # type: ignore[union-attr]
    suffix = {Opt: "?", Star: "*", Plus: "+"}[t]  # type: ignore[index]
    return f"({_ebnf(node.item)}){suffix}"  # type: ignore[union-attr]


class _TagPrinter:
    def __init__(self, grammar: Grammar) -> None:
        self.rules = grammar.rules
        self.ebnf_cache: dict[Node, dict[str, Any]] = {}
        self.ref_cache: dict[str, dict[str, Any]] = {}  # rule name -> its format (built once)

    def fmt(self, node: Node) -> dict[str, Any]:
        t = type(node)
        if t is Lit:
            return {"type": "const_string", "value": node.text}  # type: ignore[union-attr]
        if t is Tok:
            return {"type": "token", "token": node.id}  # type: ignore[union-attr]
        if t is Text:
            body = {"type": "any_text", "excludes": sorted(set(node.excludes))}  # type: ignore[union-attr]
            if node.suffix:  # type: ignore[union-attr]
                return {"type": "sequence", "elements": [body, {"type": "const_string", "value": node.suffix}]}  # type: ignore[union-attr]
            return body
        if t is Lex:
            if node.tag_regex is not None:  # type: ignore[union-attr]
                return {"type": "regex", "pattern": node.tag_regex}  # type: ignore[union-attr]
            return {"type": "grammar", "grammar": f"root ::= {node.ebnf}"}  # type: ignore[union-attr]
        if t is Ref:
            name = node.name  # type: ignore[union-attr]
            hit = self.ref_cache.get(name)
            if hit is None:
                acc: dict[str, None] = {}
                if _closure(self.rules, node, acc):
                    hit = self.grammar_format(node, acc)
                else:
                    hit = self.fmt(self.rules[name])
                self.ref_cache[name] = hit
            return hit
        if t is Seq:
            items = node.items  # type: ignore[union-attr]
            if not items:
                return {"type": "const_string", "value": ""}
            return {"type": "sequence", "elements": [self.fmt(i) for i in items]}
        if t is Alt:
            return {"type": "or", "elements": [self.fmt(i) for i in node.items]}  # type: ignore[union-attr]
        kind = {Opt: "optional", Star: "star", Plus: "plus"}[t]  # type: ignore[index]
        return {"type": kind, "content": self.fmt(node.item)}  # type: ignore[union-attr]

    def grammar_format(self, node: Node, names: dict[str, None]) -> dict[str, Any]:
        hit = self.ebnf_cache.get(node)
        if hit is None:
            lines = [f"root ::= {_ebnf(node)}"]
            lines += [f"r_{n} ::= {_ebnf(self.rules[n])}" for n in names]
            hit = self.ebnf_cache[node] = {"type": "grammar", "grammar": "\n".join(lines)}
        return hit


def to_structural_tag(grammar: Grammar) -> dict[str, Any]:
    """The grammar as an xgrammar structural tag: ``{"type": "structural_tag", "format": …}``.

    Tokens are ``token`` formats (by id), free text is ``any_text`` with ``excludes``, text-only rules
    are EBNF ``grammar`` formats. Tested against xgrammar 0.2.9 (``compile_structural_tag``). A rule
    referred to more than once is printed once: its places hold the same dict (serialise, don't mutate).
    """
    return {"type": "structural_tag", "format": _TagPrinter(grammar).fmt(grammar.start)}
