"""Exact-spelling DSML tags and tool-call argument JSON, for the output parser (:mod:`.output`).

A tool-call block in the DeepSeek-V4 output format::

    <｜DSML｜tool_calls>
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

DeepSeek-V4.1 writes the tag names with a leading space (``<｜DSML｜ calls>``, `` invoke``,
`` parameter``); both spellings are exact markup (:data:`SPELLINGS`) for every model, mixed in one
block too, as deepseek-recipe reads them.

* :func:`read_tag` finds where a tag starting at ``<`` ends, :func:`classify` says which tag it
  is (one of the ``T_*`` kinds, with the invoke / parameter name);
* arguments are built as JSON text: ``"key": `` from :func:`key_json`, ``string="true"`` values
  as JSON strings, ``string="false"`` values raw when :func:`is_json` (checked first with the
  cheaper :data:`SIMPLE_JSON`) accepts them, else as JSON strings.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from json.encoder import encode_basestring  # type: ignore[attr-defined]

__all__ = [
    "BLOCK_ALT",
    "BLOCK_NAMES",
    "INVOKE_ALT",
    "INVOKE_NAMES",
    "PARAM_ALT",
    "PARAM_NAMES",
    "CLOSE",
    "CLOSE_BLOCKS",
    "CLOSE_INVOKES",
    "CLOSE_PARAMS",
    "SPELLINGS",
    "Spelling",
    "KEY_JSON",
    "OPEN",
    "SIMPLE_JSON",
    "TAG_MAX",
    "T_CLOSE_BLOCK",
    "T_CLOSE_INVOKE",
    "T_CLOSE_PARAM",
    "T_INVOKE",
    "T_OPEN_BLOCK",
    "T_OTHER",
    "T_PARAM",
    "classify",
    "dialect",
    "Dialect",
    "V4_DIALECT",
    "is_json",
    "is_tag_prefix",
    "key_json",
    "value_json",
    "read_tag",
]


@dataclass(frozen=True, slots=True)
class Spelling:
    """One exact spelling of the DSML tool-call tags: ``<PREFIX>BLOCK>``, ``<PREFIX>INVOKE name="…">``,
    ``<PREFIX>PARAMETER name="…" string="…">`` and their closers ``</PREFIX>…>`` (the closer prefix is
    the opener prefix with ``/`` after ``<``)."""

    prefix: str
    block: str
    invoke: str
    parameter: str


#: the exact spellings the parser reads as the format itself, for every model and mixed in one block
#: (one more spelling is one more row; every row must share :data:`OPEN` as its opener prefix, which
#: the content scanner looks for).
SPELLINGS: tuple[Spelling, ...] = (
    Spelling("<｜DSML｜", "tool_calls", "invoke", "parameter"),  # DeepSeek-V4
    Spelling("<｜DSML｜", " calls", " invoke", " parameter"),  # DeepSeek-V4.1: a leading space
)
#: how every exact opener / closer starts.
OPEN = SPELLINGS[0].prefix
CLOSE = "</" + OPEN[1:]
assert all(sp.prefix == OPEN for sp in SPELLINGS)
#: the tag names of every spelling, as regex alternatives (the fast path's bulk regexes)
BLOCK_NAMES = tuple(sp.block for sp in SPELLINGS)
INVOKE_NAMES = tuple(sp.invoke for sp in SPELLINGS)
PARAM_NAMES = tuple(sp.parameter for sp in SPELLINGS)
BLOCK_ALT = "(?:" + "|".join(map(re.escape, BLOCK_NAMES)) + ")"
INVOKE_ALT = "(?:" + "|".join(map(re.escape, INVOKE_NAMES)) + ")"
PARAM_ALT = "(?:" + "|".join(map(re.escape, PARAM_NAMES)) + ")"
#: longest tag text read while looking for its ``>``; longer means "not a tag".
TAG_MAX = 512

# tag kinds
T_OPEN_BLOCK, T_CLOSE_BLOCK, T_INVOKE, T_CLOSE_INVOKE, T_PARAM, T_CLOSE_PARAM, T_OTHER = range(7)


@dataclass(frozen=True, slots=True)
class Dialect:
    """The lookup tables of one set of spellings (a dialect, from :func:`dialect`): fixed tag texts
    -> kind, the invoke / parameter opener regexes, the classification memo, the fixed tags and
    named-tag heads (for :func:`is_tag_prefix`), blanks then a block closer (``block_end``), and the
    spellings themselves."""

    fixed: dict[str, int]
    invoke_re: re.Pattern[str]
    param_re: re.Pattern[str]
    memo: dict[str, tuple[int, str, bool | None]]
    tag_texts: tuple[str, ...]
    named_heads: tuple[str, ...]
    block_end: re.Pattern[str]
    spellings: tuple[Spelling, ...] = ()


_ATTR = '"[^"<>\\n]*"'
_NAMES = '[^"<>\\n]+'
_DIALECTS: dict[tuple[Spelling, ...], Dialect] = {}


def dialect(spellings: tuple[Spelling, ...] = SPELLINGS) -> Dialect:
    """The tables of a set of spellings (cached): every spelling must use :data:`OPEN` as prefix.

    Raises:
        ValueError: a spelling with another prefix (the content scanner looks for :data:`OPEN`).
    """
    hit = _DIALECTS.get(spellings)
    if hit is not None:
        return hit
    if not spellings or any(sp.prefix != OPEN for sp in spellings):
        raise ValueError(f"DSML spellings must all start with {OPEN!r}")
    fixed = {
        tag: kind
        for sp in spellings
        for tag, kind in (
            (f"{OPEN}{sp.block}>", T_OPEN_BLOCK),
            (f"{CLOSE}{sp.block}>", T_CLOSE_BLOCK),
            (f"{CLOSE}{sp.invoke}>", T_CLOSE_INVOKE),
            (f"{CLOSE}{sp.parameter}>", T_CLOSE_PARAM),
        )
    }
    invoke_re = re.compile(
        "|".join(f'{re.escape(OPEN + sp.invoke)} name="({_NAMES})"(?: [A-Za-z_]+={_ATTR})*>' for sp in spellings))
    #: ``string`` is optional: a parameter written without it has its kind inferred (``is_string`` None)
    param_re = re.compile(
        "|".join(f'{re.escape(OPEN + sp.parameter)} name="({_NAMES})"(?: string="([^"<>\\n]*)")?>'
                 for sp in spellings))
    heads = tuple(f'{OPEN}{n} name="' for sp in spellings for n in (sp.invoke, sp.parameter))
    ends = "|".join(re.escape(f"{CLOSE}{sp.block}>") for sp in spellings)
    hit = Dialect(fixed, invoke_re, param_re, {}, tuple(fixed), heads, re.compile(f"[ \\t\\r\\n]*(?:{ends})"),
                  spellings)
    _DIALECTS[spellings] = hit
    return hit


#: DeepSeek-V4's dialect (:data:`SPELLINGS`), the default of every reader
V4_DIALECT = dialect(SPELLINGS)
_FIXED_TAGS = V4_DIALECT.fixed
_INVOKE_RE = V4_DIALECT.invoke_re
_PARAM_RE = V4_DIALECT.param_re
_STRING_ATTR = {"true": True, "false": False}
_CLASSIFIED = V4_DIALECT.memo
#: closers of every spelling, for the scans that need them as literals
CLOSE_BLOCKS = tuple(f"{CLOSE}{sp.block}>" for sp in SPELLINGS)
CLOSE_INVOKES = tuple(f"{CLOSE}{sp.invoke}>" for sp in SPELLINGS)
CLOSE_PARAMS = tuple(f"{CLOSE}{sp.parameter}>" for sp in SPELLINGS)


def is_tag_prefix(text: str, t: Dialect = V4_DIALECT) -> bool:
    """True when ``text`` (held at the end of the output, no ``>`` yet) is the start of a
    structural tag of the dialect ``t``: a fixed tag's prefix, or an invoke / parameter opener up
    to its attributes."""
    return (any(x.startswith(text) for x in t.tag_texts) or any(h.startswith(text) for h in t.named_heads)
            or any(text.startswith(h) for h in t.named_heads))


def read_tag(s: str, j: int, plen: int) -> int:
    """End index (after ``>``) of the tag starting at ``s[j]`` whose first ``plen`` characters are
    known; -1: need more text; -2: not a tag (a newline or ``<`` first, or longer than
    :data:`TAG_MAX`)."""
    lim = j + TAG_MAX
    gt = s.find(">", j + plen, lim)
    stop = gt if gt >= 0 else min(len(s), lim)
    nl = s.find("\n", j + plen, stop)
    lt = s.find("<", j + plen, stop)
    if nl >= 0 or lt >= 0:
        return -2
    if gt >= 0:
        return gt + 1
    return -1 if len(s) < lim else -2


def classify(tag: str, t: Dialect = V4_DIALECT) -> tuple[int, str, bool | None]:
    """(kind, name, is_string) of a complete ``<…>`` DSML tag text (memoised: tags repeat).

    ``t``: the dialect (default DeepSeek-V4's; DeepSeek-V3.2's block is ``function_calls``).
    ``is_string`` is set for parameter openers: True / False for
    ``string="true"`` / ``"false"``, None when the attribute is missing or has another value (the
    caller infers the kind).
    """
    memo = t.memo
    hit = memo.get(tag)
    if hit is not None:
        return hit
    kind = t.fixed.get(tag)
    if kind is not None:
        hit = kind, "", False
    elif m := t.invoke_re.fullmatch(tag):
        hit = T_INVOKE, next(g for g in m.groups() if g is not None), False
    elif m := t.param_re.fullmatch(tag):
        k = next(n for n, g in enumerate(m.groups()) if g is not None)
        hit = T_PARAM, m.group(k + 1), _STRING_ATTR.get(m.group(k + 2))
    else:
        hit = T_OTHER, "", False
    if len(memo) < 4096:
        memo[tag] = hit
    return hit


def _reject_constant(name: str) -> None:
    raise ValueError(name)


def _finite_int(text: str) -> int:
    if len(text) > 300 and math.isinf(float(text)):
        raise ValueError(f"number out of range: {text[:20]}…")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"number out of range: {text}")
    return value


#: one strict decoder (json.loads with options would build a new one per call); numbers that
#: overflow f64 (``1e999``) are refused, as serde refuses them
_JSON_DECODE = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_finite_int).decode
#: a JSON number or literal (the common string="false" values), skipping json.loads.
#: (bounded digits, so the value cannot overflow f64: longer numbers go through :func:`is_json`)
SIMPLE_JSON = re.compile(
    r"[ \t\r\n]*(?:-?(?:0|[1-9][0-9]{0,199})(?:\.[0-9]{1,200})?(?:[eE][+-]?[0-9]{1,2})?|true|false|null)[ \t\r\n]*"
)


def is_json(raw: str) -> bool:
    """True when ``raw`` is one JSON value (surrounding JSON blanks allowed; NaN / Infinity refused)."""
    try:
        _JSON_DECODE(raw)
    except (ValueError, RecursionError):
        return False
    return True


def value_json(raw: str, is_string: bool) -> tuple[str, bool]:
    """A parameter's value as JSON text, and whether the model wrote it wrongly: a string value
    (``string="true"``) escaped; any other value as written when it is one JSON value, else escaped
    as a string (``True``: not JSON, the ``invalid_json_argument`` note)."""
    if is_string:
        return encode_basestring(raw), False
    if SIMPLE_JSON.fullmatch(raw) or is_json(raw):
        return raw, False
    return encode_basestring(raw), True


#: parameter name -> ``"name": `` (filled by :func:`key_json`; read directly on hot paths).
KEY_JSON: dict[str, str] = {}


def key_json(key: str) -> str:
    """``"key": `` (JSON-escaped key and separator), memoised: parameter names repeat."""
    k = encode_basestring(key) + ": "
    if len(KEY_JSON) < 4096:
        KEY_JSON[key] = k
    return k
