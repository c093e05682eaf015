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
    "is_json",
    "is_tag_prefix",
    "key_json",
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
_FIXED_TAGS = {
    tag: kind
    for sp in SPELLINGS
    for tag, kind in (
        (f"{OPEN}{sp.block}>", T_OPEN_BLOCK),
        (f"{CLOSE}{sp.block}>", T_CLOSE_BLOCK),
        (f"{CLOSE}{sp.invoke}>", T_CLOSE_INVOKE),
        (f"{CLOSE}{sp.parameter}>", T_CLOSE_PARAM),
    )
}
_ATTR = '"[^"<>\\n]*"'
_NAMES = '[^"<>\\n]+'
_INVOKE_RE = re.compile(
    "|".join(f'{re.escape(OPEN + sp.invoke)} name="({_NAMES})"(?: [A-Za-z_]+={_ATTR})*>' for sp in SPELLINGS))
#: ``string`` is optional: a parameter written without it has its kind inferred (``is_string`` None)
_PARAM_RE = re.compile(
    "|".join(f'{re.escape(OPEN + sp.parameter)} name="({_NAMES})"(?: string="([^"<>\\n]*)")?>' for sp in SPELLINGS))
_STRING_ATTR = {"true": True, "false": False}
_CLASSIFIED: dict[str, tuple[int, str, bool | None]] = {}
#: closers of every spelling, for the scans that need them as literals
CLOSE_BLOCKS = tuple(f"{CLOSE}{sp.block}>" for sp in SPELLINGS)
CLOSE_INVOKES = tuple(f"{CLOSE}{sp.invoke}>" for sp in SPELLINGS)
CLOSE_PARAMS = tuple(f"{CLOSE}{sp.parameter}>" for sp in SPELLINGS)


#: the structural tags with a fixed text, and the heads of those that carry a name
_TAG_TEXTS = tuple(_FIXED_TAGS)
_NAMED_HEADS = tuple(f'{OPEN}{n} name="' for sp in SPELLINGS for n in (sp.invoke, sp.parameter))


def is_tag_prefix(text: str) -> bool:
    """True when ``text`` (held at the end of the output, no ``>`` yet) is the start of a
    structural tag: a fixed tag's prefix, or an invoke / parameter opener up to its attributes."""
    return (any(t.startswith(text) for t in _TAG_TEXTS) or any(h.startswith(text) for h in _NAMED_HEADS)
            or any(text.startswith(h) for h in _NAMED_HEADS))


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


def classify(tag: str) -> tuple[int, str, bool | None]:
    """(kind, name, is_string) of a complete ``<…>`` DSML tag text (memoised: tags repeat).

    ``is_string`` is set for parameter openers: True / False for ``string="true"`` / ``"false"``,
    None when the attribute is missing or has another value (the caller infers the kind).
    """
    hit = _CLASSIFIED.get(tag)
    if hit is not None:
        return hit
    kind = _FIXED_TAGS.get(tag)
    if kind is not None:
        hit = kind, "", False
    elif m := _INVOKE_RE.fullmatch(tag):
        hit = T_INVOKE, next(g for g in m.groups() if g is not None), False
    elif m := _PARAM_RE.fullmatch(tag):
        k = next(n for n, g in enumerate(m.groups()) if g is not None)
        hit = T_PARAM, m.group(k + 1), _STRING_ATTR.get(m.group(k + 2))
    else:
        hit = T_OTHER, "", False
    if len(_CLASSIFIED) < 4096:
        _CLASSIFIED[tag] = hit
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


#: parameter name -> ``"name": `` (filled by :func:`key_json`; read directly on hot paths).
KEY_JSON: dict[str, str] = {}


def key_json(key: str) -> str:
    """``"key": `` (JSON-escaped key and separator), memoised: parameter names repeat."""
    k = encode_basestring(key) + ": "
    if len(KEY_JSON) < 4096:
        KEY_JSON[key] = k
    return k
