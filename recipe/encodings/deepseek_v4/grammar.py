"""The grammar of a DeepSeek-V4 assistant turn (DSML tool calls), for constrained decoding.

Builds a :class:`~recipe.schema.grammar_ir.Grammar` from a family-neutral
:class:`~recipe.schema.turn.TurnSpec`; :mod:`recipe.schema.constrain` prints and caches it. The shape
(the format the output parser reads, :mod:`.output`)::

    [reasoning </think>]                        when the prompt ends inside <think>
    content EOS                                 no tools / tool_choice none / auto without a call
    json EOS                                    response_format json_object / json_schema
    [content] <DSML tool_calls>\\n INVOKE+ </DSML tool_calls> EOS     calls (auto: content first)
    INVOKE = <DSML invoke name="NAME">\\n PARAM* [\\n] </DSML invoke>\\n   (the reference encoder
             writes a blank line in a call without parameters; deepseek-recipe does not)
    PARAM  = <DSML parameter name="KEY" string="true">RAW</DSML parameter>\\n
           | <DSML parameter name="KEY" string="false">JSON</DSML parameter>\\n

Every marker is its special-token id (``｜DSML｜``, ``</think>``, EOS; the ``<`` / ``</`` before
``｜DSML｜`` is text, as the template renders it). Free text (reasoning, content, raw values, JSON
strings) never holds a special token nor the text spelling of one; content also never holds
``DSML`` (the corrupted spellings the parser's recovery reads as calls). Design facts (measured):
a greedy text lexeme stops where a special token follows, so content before a block is one lexeme
ending in ``<`` followed by the ``｜DSML｜`` id; where a JSON answer and a call block are both
possible (tools + response_format) the two alternatives start differently (``{`` vs blanks then
``<``), and only blanks may precede the block there.

The spelling of the markup is a parameter (:class:`DsmlSpelling`), so the V4.1 family (spaced tag
names) and the V3.2 family (``function_calls``) can reuse this builder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from recipe.encodings.deepseek_v4.constants import DSML, TEMPLATE_SPECIALS, THINK_END
from recipe.schema.grammar_ir import EMPTY, Grammar, Lex, Lit, Node, Opt, Plus, Ref, Star, Text, Tok, alt, seq
from recipe.schema.json_grammar import MAX_WS, JsonRules
from recipe.schema.turn import GrammarParts, ToolSpec, TurnSpec

if TYPE_CHECKING:
    from recipe.tokenizer import Tokenizer

__all__ = ["DsmlSpelling", "V4_SPELLING", "build_grammar", "text_excludes"]

_NAME_OK = re.compile(r'[^"<>\n]+')


@dataclass(frozen=True, slots=True)
class DsmlSpelling:
    """How a DSML family spells its markup (the text after ``<`` / ``</`` + the marker token).

    Attributes:
        marker: the marker token's spelling (``｜DSML｜``).
        block: block tag name (V4 ``tool_calls``; V4.1 `` calls``).
        invoke: invoke tag name (V4 ``invoke``; V4.1 `` invoke``).
        parameter: parameter tag name (V4 ``parameter``; V4.1 `` parameter``).
        think_end: the token that ends reasoning (the turn itself ends with the encoding's stop
            tokens, where the grammar accepts).
        template_specials: spellings the template emits as special tokens (excluded from free text).
        content_excludes: words content may not contain (the parser's recovery would read them as markup).
    """

    marker: str = DSML
    block: str = "tool_calls"
    invoke: str = "invoke"
    parameter: str = "parameter"
    think_end: str = THINK_END
    template_specials: frozenset[str] = TEMPLATE_SPECIALS
    content_excludes: tuple[str, ...] = ("DSML",)


#: DeepSeek-V4 (Pro / Flash).
V4_SPELLING = DsmlSpelling()


def text_excludes(template_specials: Iterable[str]) -> tuple[str, ...]:
    """Words free text may not contain: the template specials' spellings, a leading ``<`` dropped
    before ``｜`` (``｜User｜>``: the same tokens excluded, and far cheaper for xgrammar, whose masks
    slow down about tenfold for every excluded word that starts with ``<``).

    Special tokens themselves never match free text in the Lark (llguidance matches them by id only);
    in the structural tag these words also keep the template's special tokens out, for an engine that
    reads them as text. The vocabulary's other added tokens (placeholders) are excluded by the Lark
    only (docs/constrained-decoding.md, known differences)."""
    words = {s[1:] if s.startswith("<｜") else s for s in template_specials}
    return tuple(sorted(words))


_WS_LT = Lex(f"/[ \\t\\n\\r]{{0,{MAX_WS}}}</", f'[ \\t\\n\\r]{{0,{MAX_WS}}} "<"')


class _Builder:
    def __init__(self, spec: TurnSpec, tokenizer: Tokenizer, sp: DsmlSpelling) -> None:
        self.spec, self.sp = spec, sp
        specials: Mapping[str, int] = tokenizer.special_tokens
        self.mark = lambda s: Tok(specials[s], s) if s in specials else Lit(s)
        self.D = self.mark(sp.marker)
        self.text_ex = text_excludes(sp.template_specials)
        self.content_ex = tuple(sorted({*self.text_ex, *sp.content_excludes} - {sp.marker}))  # DSML covers ｜DSML｜
        self.rules: dict[str, Node] = {}
        self.json = JsonRules(self.rules, self.text_ex, ebnf_exclude="｜")
        self.unenforced: list[str] = []
        #: parameter signature -> (rule, first path, its unenforced notes) once built
        self.shared: dict[bytes, tuple[Node | None, str, tuple[str, ...]] | None] = {}
        self.sigs: dict[tuple[int, str], bytes | None] = {}  # (tool index, parameter) -> signature
        self.n_shared = 0

    # -- tool calls --------------------------------------------------------------------------

    def count_shared(self) -> None:
        """Which (name, schema) parameters occur in more than one schema-mode tool: each becomes one
        named rule that every such tool refers to (a smaller grammar compiles faster)."""
        seen: dict[bytes, int] = {}
        if len(self.spec.tools) < 2:
            return
        for i, t in enumerate(self.spec.tools):
            for key, sub in _schema_props(t):
                sig = self.sigs[(i, key)] = _param_signature(key, sub)
                if sig is not None:
                    seen[sig] = seen.get(sig, 0) + 1
        self.shared = {sig: None for sig, n in seen.items() if n > 1}

    def shared_param(self, idx: int, key: str, schema: Any, path: str) -> Node | None:
        """:meth:`param` of tool ``idx``, built once per (name, schema) occurring in several tools;
        the unenforced notes are repeated under each tool's path."""
        sig = self.sigs.get((idx, key))
        if sig is None or sig not in self.shared:
            return self.param(key, schema, path)
        hit = self.shared[sig]
        if hit is None:
            n0 = len(self.json.unenforced)
            node = self.param(key, schema, path)
            if node is not None:
                name = f"param{self.n_shared}"
                self.n_shared += 1
                self.rules[name] = node
                node = Ref(name)
            hit = self.shared[sig] = (node, path, tuple(self.json.unenforced[n0:]))
        else:
            first = hit[1]
            self.json.unenforced.extend(path + note[len(first):] for note in hit[2] if note.startswith(first))
        return hit[0]

    def param(self, key: str, schema: Any, path: str) -> Node | None:
        sp = self.sp
        raw, js = self.json.param_value(schema, path, "</", self.text_ex)
        head = f'{sp.parameter} name="{key}" string='
        ways = []
        if raw is not None:
            ways.append(seq(Lit(head + '"true">'), raw))
        if js is not None:
            ways.append(seq(Lit(head + '"false">'), js, Lit("</")))
        if not ways:
            return None
        return seq(Lit("<"), self.D, alt(*ways), self.D, Lit(f"{sp.parameter}>\n"))

    def any_param(self) -> Node:
        """Any well-formed parameter (syntax mode): a name, then a raw or a JSON value."""
        if "p_any" not in self.rules:
            sp = self.sp
            name = Lex('/[^"<>\\n｜]+/', '[^"<>\\n｜]+')
            value = alt(
                seq(Lit('" string="true">'), Text(self.text_ex, "</")),
                seq(Lit('" string="false">'), self.json.any_value(1), Lit("</")),
            )
            self.rules["p_any"] = seq(
                Lit("<"), self.D, Lit(f'{sp.parameter} name="'), name, value, self.D, Lit(f"{sp.parameter}>\n"))
        return Ref("p_any")

    def params(self, tool: ToolSpec, idx: int) -> Node:
        """The parameters of one invoke: in schema order, required ones present (schema mode), or any
        well-formed ones (syntax mode; a schema-mode tool that declares no properties and is open)."""
        schema = tool.parameters if isinstance(tool.parameters, Mapping) else {}
        props = schema.get("properties")
        closed = schema.get("additionalProperties") is False
        if not tool.schema_args or not isinstance(props, Mapping) or not props:
            return EMPTY if tool.schema_args and closed else Star(self.any_param())
        required = schema.get("required")
        required = set(required) if isinstance(required, list) else set()
        self.json.root = schema  # for $ref resolution
        items: list[Node] = []
        for key, sub in props.items():
            path = f"{tool.name}/{key}"
            node = self.shared_param(idx, key, sub, path) if _NAME_OK.fullmatch(key) else None
            if node is None:
                self.unenforced.append(f"{path}: parameter cannot be written in DSML")
                continue
            items.append(node if key in required else Opt(node))
        extra = schema.get("additionalProperties")
        if extra is True or isinstance(extra, Mapping):
            items.append(Star(self.any_param()))
            self.unenforced.append(f"{tool.name}: additionalProperties (extra parameters not checked)")
        return seq(*items)

    def invoke(self, tool: ToolSpec, idx: int) -> Node:
        sp = self.sp
        name = f"invoke{idx}"
        self.rules[name] = seq(
            Lit("<"), self.D, Lit(f'{sp.invoke} name="{tool.name}">\n'), self.params(tool, idx),
            Opt(Lit("\n")), Lit("</"), self.D, Lit(f"{sp.invoke}>\n"),
        )
        return Ref(name)

    def calls(self) -> Node:
        """INVOKE+ (or exactly one) then the block closer."""
        one = alt(*(self.invoke(t, i) for i, t in enumerate(self.spec.tools)))
        return seq(Plus(one) if self.spec.parallel else one, Lit("</"), self.D, Lit(f"{self.sp.block}>"))

    def block_after(self, lead: Node) -> Node:
        """``lead`` (text ending in ``<``) + marker + the block."""
        return seq(lead, self.D, Lit(f"{self.sp.block}>\n"), self.calls())

    # -- the turn ------------------------------------------------------------------------------

    def answer(self) -> Node:
        """What follows the reasoning. The turn ends where the grammar accepts (EOS is the engine's
        stop token), so no rule spells EOS."""
        spec = self.spec
        content = Opt(Text(self.content_ex, nonempty=True))
        if spec.answer == "json":
            fmt: Node = self.json.value(spec.answer_schema, "response_format")
        elif spec.answer == "regex":
            pattern = spec.answer_regex or ""
            fmt = Lex("/" + pattern.replace("/", "\\/") + "/", "", tag_regex=pattern)
        else:
            fmt = content
        mode = spec.mode
        if mode in ("content", "json", "regex"):
            return fmt
        if spec.starts_in == "tool_block":  # the prompt opened the block (required / named)
            return self.calls()
        if mode == "tools_auto":
            if spec.answer == "regex":
                self.unenforced.append("response_format: regex beside tools")
            return alt(content, self.block_after(Text(self.content_ex, "<")))
        if mode == "tools_or_json":  # start-disjoint: "{" vs blanks then "<"
            return alt(fmt, self.block_after(_WS_LT))
        return self.block_after(_WS_LT)  # required / named after reasoning

    def build(self) -> GrammarParts:
        self.count_shared()
        start = self.answer()
        if self.spec.starts_in == "reasoning":
            start = seq(Text(self.text_ex), self.mark(self.sp.think_end), start)
        unenforced = [*self.unenforced, *self.json.unenforced]
        return GrammarParts(Grammar(start, self.rules), tuple(dict.fromkeys(unenforced)))


def _schema_props(tool: ToolSpec) -> Iterable[tuple[str, Any]]:
    """The (name, schema) parameters of a schema-mode tool (none for a syntax-mode tool)."""
    schema = tool.parameters if isinstance(tool.parameters, Mapping) else {}
    props = schema.get("properties")
    if not tool.schema_args or not isinstance(props, Mapping):
        return ()
    return props.items()


def _param_signature(key: str, schema: Any) -> bytes | None:
    """The name and schema as compact JSON, or None where the parameter cannot be shared: a schema
    with a ``$ref`` (it resolves against its own tool's schema) or one orjson cannot print."""
    try:
        sig = orjson.dumps([key, schema])
    except TypeError:
        return None
    return None if b'"$ref"' in sig else sig


def build_grammar(spec: TurnSpec, tokenizer: Tokenizer, spelling: DsmlSpelling = V4_SPELLING) -> GrammarParts:
    """The grammar of the turn ``spec`` describes, in the DSML ``spelling`` (default: V4).

    Markers are the vocabulary's special-token ids (a spelling the vocabulary lacks stays text).
    Never raises for a spec built by :func:`recipe.schema.turn.turn_spec`.
    """
    return _Builder(spec, tokenizer, spelling).build()
