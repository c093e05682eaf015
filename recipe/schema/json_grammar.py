"""JSON Schema -> grammar rules (:mod:`recipe.schema.grammar_ir`), with recipe's JSON number rules.

Family-neutral: a family's output-grammar builder asks :class:`JsonRules` for the rule of a JSON
value (a ``json_schema`` answer, a ``string="false"`` tool parameter, any JSON object) and, for a
tool parameter, for the raw-string alternative (:meth:`JsonRules.param_value`).

**Numbers agree with the output parser** (:mod:`recipe.jsonfmt`, the DSML argument check): the
grammar allows only numbers whose value fits an f64 and that the parser keeps as written, at every
nesting depth: integers have at most 19 digits (``-?(0|[1-9][0-9]{0,18})``); numbers add at most 32
fraction digits and a one- or two-digit exponent (so ``1e999`` and a 300-digit integer are out).
Strings are JSON strings without lone-surrogate escapes (``\\ud800``, which recipe's JSON reader
refuses) and without the family's excluded words (special-token spellings). Containers nest at most
:data:`MAX_DEPTH` deep where the schema does not bound them; whitespace runs are at most
:data:`MAX_WS` characters.

**Enforced keywords:** ``type`` (one or a list), ``properties`` (in schema order), ``required``,
``additionalProperties`` (``false``, ``true`` or a schema; extra properties are allowed only when the
schema says so explicitly), ``items``, ``minItems`` / ``maxItems`` (up to :data:`MAX_ITEMS`), ``enum``
and ``const`` on every type (the values that satisfy the rest of the schema), ``anyOf``, ``oneOf`` (as
``anyOf``), ``minLength``/``maxLength`` (JSON strings, up to :data:`MAX_LENGTH`), ``minimum`` /
``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum`` (:mod:`recipe.schema.json_numbers`), local
``$ref``. Every other keyword that would restrict values (``pattern``, ``format``, ``multipleOf``…)
is *not* enforced and is listed in :attr:`JsonRules.unenforced` (``path: keyword``); annotation
keywords are ignored. (A strict schema holding one is refused: :mod:`recipe.schema.strict_enforce`.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from recipe.schema.grammar_ir import EMPTY, Lex, Lit, Node, Opt, Ref, Star, Text, alt, exclusion, regex_escape, seq
from recipe.schema.json_numbers import bounds, integer_range, number_range

__all__ = ["MAX_DEPTH", "MAX_WS", "MAX_ITEMS", "MAX_LENGTH", "INT_LEX", "NUM_LEX", "JsonRules"]

#: deepest container nesting of JSON values the schema leaves open.
MAX_DEPTH = 20
#: longest whitespace run around JSON punctuation.
MAX_WS = 32
#: largest ``minItems`` / ``maxItems`` the grammar enforces (each item is written out; larger ones
#: are listed in :attr:`JsonRules.unenforced`)
MAX_ITEMS = 256
#: largest ``minLength`` / ``maxLength`` the grammar enforces (larger ones are listed as unenforced)
MAX_LENGTH = 10_000

_WS_RX = f"[ \\t\\n\\r]{{0,{MAX_WS}}}"
_WS_EBNF = f"[ \\t\\n\\r]{{0,{MAX_WS}}}"
_INT_RX = "-?(?:0|[1-9][0-9]{0,18})"
_INT_EBNF = '"-"? ("0" | [1-9] [0-9]{0,18})'
#: a JSON integer the parser keeps exactly (at most 19 digits).
INT_LEX = Lex(f"/{_INT_RX}/", _INT_EBNF)
#: a JSON number that cannot overflow f64.
NUM_LEX = Lex(
    f"/{_INT_RX}(?:\\.[0-9]{{1,32}})?(?:[eE][+-]?[0-9]{{1,2}})?/",
    f'{_INT_EBNF} ("." [0-9]{{1,32}})? ([eE] [+\\-]? [0-9]{{1,2}})?',
)
_STR_CHAR_RX = '(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\\\/bfnrt]|\\\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))'
_STR_ESC_EBNF = '"\\\\" ["\\\\/bfnrt] | "\\\\u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})'

#: keywords that only annotate (never restrict values).
_ANNOTATIONS = frozenset(
    "$schema $id $comment $defs definitions title description default examples deprecated readOnly "
    "writeOnly strict name $anchor".split()
)
#: keywords this converter enforces (on the schema kind they belong to).
_HANDLED = frozenset(
    "type properties required additionalProperties items minItems maxItems enum const anyOf oneOf $ref "
    "minLength maxLength minimum maximum exclusiveMinimum exclusiveMaximum".split()
)
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _punct(ch: str) -> Lex:
    return Lex(f"/{_WS_RX}{regex_escape(ch)}{_WS_RX}/", f"{_WS_EBNF} \"{ch}\" {_WS_EBNF}")


LBRACE, RBRACE, LBRACK, RBRACK, COMMA, COLON = (_punct(c) for c in "{}[],:")
_LITERALS = {"boolean": alt(Lit("true"), Lit("false")), "null": Lit("null")}


def _json_text(value: Any) -> str:
    """How a model prints a JSON constant (prompt separators, raw non-ASCII)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


class JsonRules:
    """Builds JSON-value rules into ``rules`` (shared with the caller's grammar).

    Args:
        rules: the grammar's rule table; new rules are added with the ``prefix``.
        excludes: words no JSON string may contain (the family's special-token spellings).
        ebnf_exclude: characters the structural tag's JSON strings exclude instead (xgrammar EBNF has
            no word exclusion; for DeepSeek ``"｜"``, which every excluded spelling but ``<think>`` /
            ``</think>`` contains).
        prefix: rule-name prefix (``j``).
    """

    def __init__(self, rules: dict[str, Node], excludes: tuple[str, ...], ebnf_exclude: str = "", prefix: str = "j") -> None:
        self.rules = rules
        self.excludes = tuple(sorted(set(excludes)))
        self.ebnf_exclude = ebnf_exclude
        self.prefix = prefix
        self.unenforced: list[str] = []
        self._n = 0
        self._str_cache: dict[tuple[int, int | None], Lex] = {}
        self._any_ready = False
        self._refs: dict[tuple[int, str], str] = {}  # (id of the root, pointer) -> rule
        #: the schema local ``$ref`` pointers resolve against (set per tool by the caller)
        self.root: Any = None

    # -- lexemes ---------------------------------------------------------------------------

    def string_lex(self, min_len: int = 0, max_len: int | None = None) -> Lex:
        """A JSON string lexeme (length in characters after unescaping is approximated by the count
        of characters or escapes)."""
        key = (min_len, max_len)
        hit = self._str_cache.get(key)
        if hit is not None:
            return hit
        rep = "*" if (min_len, max_len) == (0, None) else f"{{{min_len},{'' if max_len is None else max_len}}}"
        if not self.excludes:
            lark = f'/"{_STR_CHAR_RX}{rep}"/'
        elif any('"' in w for w in self.excludes):
            lark = f'/"{_STR_CHAR_RX}{rep}"/ & {exclusion(self.excludes)}'
        else:  # the quotes outside the intersection: compiles faster (grammar_ir.text_terminal)
            lark = f'"\\"" (/{_STR_CHAR_RX}{rep}/ & {exclusion(self.excludes)}) "\\""'
        bad = "".join(ch for ch in self.ebnf_exclude if ch not in '"\\')
        ebnf = f'"\\"" ([^"\\\\\\x00-\\x1f{bad}] | {_STR_ESC_EBNF}){rep} "\\""'
        lex = self._str_cache[key] = Lex(lark, ebnf)
        return lex

    def _new(self, node: Node, hint: str = "") -> Ref:
        name = f"{self.prefix}{self._n}{hint}"
        self._n += 1
        self.rules[name] = node
        return Ref(name)

    # -- any JSON --------------------------------------------------------------------------

    def any_value(self, depth: int = 0) -> Node:
        """Any JSON value whose containers nest at most ``MAX_DEPTH - depth`` deep."""
        self._ensure_any()
        return Ref(f"{self.prefix}_any{depth}")

    def any_object(self) -> Node:
        """Any JSON object (depth-bounded members)."""
        self._ensure_any()
        return Ref(f"{self.prefix}_obj0")

    def _ensure_any(self) -> None:
        if self._any_ready:
            return
        self._any_ready = True
        p, s = self.prefix, self.string_lex()
        scalars = (s, NUM_LEX, Lit("true"), Lit("false"), Lit("null"))
        for d in range(MAX_DEPTH + 1):
            if d == MAX_DEPTH:
                self.rules[f"{p}_any{d}"] = alt(*scalars)
                continue
            inner = Ref(f"{p}_any{d + 1}")
            member = seq(s, COLON, inner)
            self.rules[f"{p}_obj{d}"] = seq(LBRACE, Opt(seq(member, Star(seq(COMMA, member)))), RBRACE)
            arr = seq(LBRACK, Opt(seq(inner, Star(seq(COMMA, inner)))), RBRACK)
            self.rules[f"{p}_any{d}"] = alt(Ref(f"{p}_obj{d}"), arr, *scalars)

    # -- schemas ---------------------------------------------------------------------------

    def value(self, schema: Any, path: str = "$", root: Any = None) -> Node:
        """The rule for a JSON value valid under ``schema`` (``root``: for local ``$ref``)."""
        if root is not None:
            self.root = root
        elif self.root is None:
            self.root = schema
        return self._value(schema, path, 0)

    def _note(self, path: str, keyword: str) -> None:
        item = f"{path}: {keyword}"
        if item not in self.unenforced:
            self.unenforced.append(item)

    def _value(self, schema: Any, path: str, depth: int) -> Node:
        if schema is True or schema == {} or not isinstance(schema, Mapping):
            if schema is False:
                self._note(path, "false")
            return self.any_value(min(depth, MAX_DEPTH))
        for key in schema:
            if key not in _HANDLED and key not in _ANNOTATIONS and key not in ("additionalItems",):
                self._note(path, key)
        if "$ref" in schema:
            return self._ref(schema["$ref"], path, depth)
        if "const" in schema or ("enum" in schema and isinstance(schema["enum"], list) and schema["enum"]):
            return alt(*(Lit(_json_text(v)) for v in self.allowed_values(schema, path)))
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                if key == "oneOf":
                    self._note(path, "oneOf (enforced as anyOf)")
                base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                return alt(*(self._value({**base, **b} if isinstance(b, Mapping) else b, f"{path}/{key}/{i}", depth)
                             for i, b in enumerate(branches)))
        if "allOf" in schema:
            return self.any_value(min(depth, MAX_DEPTH))
        types = schema.get("type")
        if isinstance(types, list):
            if not types:
                return self.any_value(min(depth, MAX_DEPTH))
            return alt(*(self._typed(schema, t, path, depth) for t in types))
        if isinstance(types, str):
            return self._typed(schema, types, path, depth)
        if "properties" in schema:
            return self._typed(schema, "object", path, depth)
        if "items" in schema:
            return self._typed(schema, "array", path, depth)
        return self.any_value(min(depth, MAX_DEPTH))

    def _ref(self, ref: Any, path: str, depth: int) -> Node:
        if not isinstance(ref, str) or not ref.startswith("#"):
            self._note(path, "$ref (not local)")
            return self.any_value(min(depth, MAX_DEPTH))
        name = self._refs.get((id(self.root), ref))
        if name is not None:
            return Ref(name)
        target: Any = self.root
        for raw in ref[2:].split("/") if ref.startswith("#/") else ([] if ref == "#" else [None]):
            part = None if raw is None else raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            else:
                self._note(path, "$ref (unresolved)")
                return self.any_value(min(depth, MAX_DEPTH))
        name = f"{self.prefix}{self._n}ref"
        self._n += 1
        self._refs[(id(self.root), ref)] = name
        self.rules[name] = EMPTY  # placeholder while the target is built (recursion)
        self.rules[name] = self._value(target, ref, depth)
        return Ref(name)

    def _typed(self, schema: Mapping[str, Any], t: Any, path: str, depth: int) -> Node:
        if not isinstance(t, str):
            self._note(path, "type (not a type name)")
            return self.any_value(min(depth, MAX_DEPTH))
        if t == "string":
            lo = schema.get("minLength", 0)
            hi = schema.get("maxLength")
            lo, hi = self._lengths(schema, path)
            return self.string_lex(lo, hi)
        if t in ("integer", "number"):
            return self._number(schema, t, path)
        if t in _LITERALS:
            return _LITERALS[t]
        if depth >= MAX_DEPTH:
            if t in ("object", "array") and any(k in schema for k in ("properties", "items", "required", "additionalProperties")):
                self._note(path, f"{t} nested deeper than {MAX_DEPTH}")
            return self.any_value(MAX_DEPTH)
        if t == "object":
            return self._object(schema, path, depth)
        if t == "array":
            return self._array(schema, path, depth)
        self._note(path, f"type {t!r}")
        return self.any_value(min(depth, MAX_DEPTH))

    def _object(self, schema: Mapping[str, Any], path: str, depth: int) -> Node:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = schema.get("required")
        required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        extra = schema.get("additionalProperties")
        members: list[tuple[Node, bool]] = []
        for name, sub in props.items():
            node = seq(Lit(_json_text(name)), COLON, self._value(sub, f"{path}/properties/{name}", depth + 1))
            members.append((node, name in required))
        tail: Node | None = None
        if extra is True or isinstance(extra, Mapping):
            self._note(path, "additionalProperties (names not checked against properties)")
            value = self.any_value(min(depth + 1, MAX_DEPTH)) if extra is True else self._value(extra, f"{path}/additionalProperties", depth + 1)
            tail = seq(self.string_lex(), COLON, value)
        elif not props and extra is None:
            return self.any_value(min(depth, MAX_DEPTH)) if depth >= MAX_DEPTH else self._any_members(depth)
        return seq(LBRACE, self._members(members, tail), RBRACE)

    def _any_members(self, depth: int) -> Node:
        self._ensure_any()
        return Ref(f"{self.prefix}_obj{min(depth, MAX_DEPTH - 1)}")

    def _members(self, members: list[tuple[Node, bool]], tail: Node | None) -> Node:
        """Members in order, optional ones optional, commas only between present members."""
        # first_i: members i.. with none before; after_i: members i.. after a present member
        after: Node = Star(seq(COMMA, tail)) if tail is not None else EMPTY
        first: Node = Opt(seq(tail, after)) if tail is not None else EMPTY
        for node, req in reversed(members):
            after_next, first_next = after, first
            if req:
                after = seq(COMMA, node, after_next)
                first = seq(node, after_next)
            else:
                after = seq(Opt(seq(COMMA, node)), after_next)
                first = alt(seq(node, after_next), first_next) if first_next != EMPTY else Opt(seq(node, after_next))
            if len(members) > 4:  # keep printed rules small: name the chains
                after, first = self._new(after, "a") if after != EMPTY else after, self._new(first, "f")
        return first

    def _array(self, schema: Mapping[str, Any], path: str, depth: int) -> Node:
        items = schema.get("items", True)
        if isinstance(items, list):  # draft-04 tuple form
            self._note(path, "items (tuple form)")
            items = True
        item = self._value(items, f"{path}/items", depth + 1)
        lo = self._count(schema, "minItems", path) or 0
        hi = self._count(schema, "maxItems", path)
        if hi is not None and hi < lo:
            self._note(path, "maxItems (below minItems: no array satisfies)")
            hi = None
        more: Node = Star(seq(COMMA, item))
        if hi is not None:  # at most hi - lo more items, each optional after the one before
            more = EMPTY
            for _ in range(hi - max(lo, 1)):
                more = Opt(seq(COMMA, item, more))
        if lo == 0:
            body: Node = Opt(seq(item, more)) if hi != 0 else EMPTY
        else:
            body = seq(item, *([COMMA, item] * (lo - 1)), more)
        return seq(LBRACK, body, RBRACK)

    def _count(self, schema: Mapping[str, Any], key: str, path: str) -> int | None:
        """``minItems`` / ``maxItems`` when given and enforceable (``<= MAX_ITEMS``); else noted, None."""
        if key not in schema:
            return None
        n = schema[key]
        if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_ITEMS:
            return n
        self._note(path, f"{key} (above {MAX_ITEMS})" if isinstance(n, int) and not isinstance(n, bool) and n > 0 else key)
        return None

    def _lengths(self, schema: Mapping[str, Any], path: str) -> tuple[int, int | None]:
        """``(minLength, maxLength)`` of a JSON string where enforceable (``<= MAX_LENGTH``); others noted."""
        lo, hi = schema.get("minLength", 0), schema.get("maxLength")
        if not (isinstance(lo, int) and not isinstance(lo, bool) and 0 <= lo <= MAX_LENGTH):
            self._note(path, f"minLength (above {MAX_LENGTH})" if isinstance(lo, int) and lo > 0 else "minLength")
            lo = 0
        if hi is not None and not (isinstance(hi, int) and not isinstance(hi, bool) and lo <= hi <= MAX_LENGTH):
            if not (isinstance(hi, int) and not isinstance(hi, bool) and hi > MAX_LENGTH):
                self._note(path, "maxLength")  # (a bound above MAX_LENGTH holds anyway: strings are shorter)
            hi = None
        return lo, hi

    def _number(self, schema: Mapping[str, Any], t: str, path: str) -> Node:
        """An integer or number lexeme within the schema's bounds (``multipleOf`` is noted)."""
        if "multipleOf" in schema:
            self._note(path, "multipleOf")
        if not any(k in schema for k in _BOUNDS):
            return INT_LEX if t == "integer" else NUM_LEX
        lo, hi = bounds(schema)
        rx = (integer_range if t == "integer" else number_range)(lo, hi)
        if rx is None:
            self._note(path, "minimum / maximum (no value satisfies)")
            return INT_LEX if t == "integer" else NUM_LEX
        return Lex(f"/{rx[0]}/", rx[1])

    def allowed_values(self, schema: Mapping[str, Any], path: str) -> list[Any]:
        """The ``const`` / ``enum`` values that also satisfy the rest of ``schema`` (its ``type``,
        bounds, lengths…; checked with jsonschema against the current root, for its ``$ref`` s). When
        none does, all of them (noted: the schema admits no value)."""
        values = [schema["const"]] if "const" in schema else list(schema["enum"])
        rest = {k: v for k, v in schema.items() if k not in ("const", "enum") and k not in _ANNOTATIONS}
        if not rest:
            return values
        keep = [v for v in values if _admits(self.root, rest, v)]
        if not keep:
            self._note(path, "enum (no value satisfies the rest of the schema)")
            return values
        return keep

    # -- DSML-style parameters ---------------------------------------------------------------

    def param_value(self, schema: Any, path: str, raw_suffix: str, text_excludes: tuple[str, ...]) -> tuple[Node | None, Node | None]:
        """The two ways a tool parameter may be written: (raw string value ending in ``raw_suffix``,
        JSON value of the non-string part); either is None when the schema allows no such value."""
        if isinstance(schema, Mapping) and "$ref" in schema and isinstance(schema["$ref"], str):
            target = self._resolve(schema["$ref"])
            if target is not None:
                return self.param_value(target, path, raw_suffix, text_excludes)
        free = Text(text_excludes, raw_suffix)
        if not isinstance(schema, Mapping) or schema == {}:
            return free, self.value(schema, path)
        if "const" in schema or isinstance(schema.get("enum"), list) and schema["enum"]:
            values = self.allowed_values(schema, path)
            schema = {k: v for k, v in schema.items() if k not in ("const", "enum")}
            schema["enum"] = values
        strings, rest = _split_strings(schema)
        if strings == "any" and ("minLength" in schema or "maxLength" in schema):
            lo, hi = self._lengths(schema, path)
            if (lo, hi) == (0, None):
                pass
            elif (lo, hi) == (1, None):
                free = Text(text_excludes, raw_suffix, nonempty=True)
            else:  # a bounded length: only the JSON form (string="false" "…"), whose lexeme counts
                strings, rest = None, schema
        if strings is None:
            raw = None
        elif strings == "any":
            raw = free
            for key in ("pattern", "format"):
                if key in schema:
                    self._note(path, f"{key} (raw string value)")
        else:
            raw = seq(alt(*(Lit(s) for s in strings)), Lit(raw_suffix))
        return raw, (None if rest is None else self.value(rest, path))

    def _resolve(self, ref: str) -> Any:
        target: Any = self.root
        if not ref.startswith("#/"):
            return None
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if not (isinstance(target, Mapping) and part in target):
                return None
            target = target[part]
        return target


#: keywords that restrict a string beyond its type (a raw DSML value cannot be checked against them)
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")


def _split_strings(schema: Mapping[str, Any]) -> tuple[Any, Any]:
    """(string part, rest of the schema): the string part is ``"any"``, a tuple of allowed strings, or
    None; the rest is a schema for the non-string values or None."""
    if "const" in schema:
        v = schema["const"]
        return ((v,), None) if isinstance(v, str) else (None, schema)
    if isinstance(schema.get("enum"), list):
        strs = tuple(v for v in schema["enum"] if isinstance(v, str))
        others = [v for v in schema["enum"] if not isinstance(v, str)]
        return (strs or None), ({**schema, "enum": others} if others else None)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            str_parts: list[Any] = []
            rest: list[Any] = []
            for b in branches:
                merged = {**base, **b} if isinstance(b, Mapping) else None
                if merged is not None and any(k in merged for k in _STRING_KEYWORDS):
                    s, r = None, merged  # a restricted string: only its JSON form, whose lexeme checks it
                else:
                    s, r = _split_strings(merged) if merged is not None else ("any", b)
                if s is not None:
                    str_parts.append(s)
                if r is not None:
                    rest.append(r)
            if not str_parts:
                strings: Any = None
            elif "any" in str_parts:
                strings = "any"
            else:
                strings = tuple(dict.fromkeys(x for p in str_parts for x in p))
            return strings, ({key: rest} if rest else None)
    types = schema.get("type")
    if isinstance(types, str):
        types = [types]
    if isinstance(types, list):
        others = [t for t in types if t != "string"]
        strings = "any" if "string" in types else None
        if not others:
            return strings, None
        return strings, {**schema, "type": others if len(others) > 1 else others[0]}
    if "properties" in schema or "items" in schema:
        return None, schema
    return "any", schema


def _admits(root: Any, schema: Mapping[str, Any], value: Any) -> bool:
    """``value`` satisfies ``schema`` (local ``$ref`` s against ``root``); True when the check
    itself fails (an invalid schema is refused elsewhere)."""
    import jsonschema  # loaded when an enum sits beside other keywords
    from jsonschema import validators

    try:
        cls = validators.validator_for(root if isinstance(root, Mapping) else {}, default=jsonschema.Draft202012Validator)
        return bool(cls(root if isinstance(root, Mapping) else {}).evolve(schema=dict(schema)).is_valid(value))
    except Exception:  # noqa: BLE001 - a schema jsonschema cannot read is reported by the meta-schema check
        return True
