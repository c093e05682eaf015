"""JSON parsing and printing with deepseek-recipe 0.2.0's number rules and prompt layout.

Source of the rules: deepseek-recipe 0.2.0 as observed (behaviour map §1.2.6, §1.9, §4):

* **Parsing** (tool-call arguments, tool schemas, request bodies): integers inside
  ``[-2**63, 2**64 - 1]`` stay ``int``; integers outside become ``float``; ``-0`` becomes ``-0.0``;
  a number whose float value overflows (``1e400``, a 400-digit integer) is an error, as are
  ``NaN``/``Infinity``, trailing garbage, trailing commas, lone surrogate escapes and raw control
  characters in strings. Whitespace is ``" \\t\\n\\r"`` only. Duplicate keys: the last value wins,
  at the position of the first.
* **Printing**: the prompt printer uses separators ``", "`` / ``": "``, the compact printer ``","`` /
  ``":"``. Non-ASCII is printed raw; escapes are ``\\" \\\\ \\n \\t \\r \\b \\f`` and ``\\u00xx``
  (lowercase) for the other control characters; U+007F and U+2028 are raw. Floats use the
  shortest round-trip digits, fixed notation when the decimal exponent E satisfies
  ``-5 <= E < 16`` (``.0`` appended when integral), otherwise ``d[.ddd]e±X`` (``1e+16``,
  ``1.5e-7``). Non-finite floats print as ``null``. Key order is preserved.

The hot path is orjson (its string escaping and float format are exactly the rules above; checked
at import, with a pure-Python printer as the fallback).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from recipe.errors import RequestError

__all__ = [
    "surrogate_path",
    "format_float_python",
    "dumps_prompt_python",
    "JSONNumberOutOfRange",
    "parse_json_value",
    "loads_request",
    "check_request_depth",
    "dumps_prompt",
    "dumps_compact",
    "format_float",
    "dumps_wire",
    "jsonl_values",
    "too_deep",
    "too_deep_path",
    "nesting_message",
    "utf8_error",
    "MAX_DEPTH",
    "copy_json",
]

_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1


class JSONNumberOutOfRange(ValueError):
    """A JSON number whose value does not fit an f64 (``1e400``); deepseek-recipe rejects it.

    Attributes:
        line: 1-based line of the number's last character.
        column: 1-based column of the number's last character (serde_json's convention).
    """

    def __init__(self, line: int, column: int) -> None:
        super().__init__(f"number out of range at line {line} column {column}")
        self.line = line
        self.column = column


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

#: A JSON string token or a JSON number token (used only on slow/error paths).
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)', re.S)


def _line_col(text: str, end: int) -> tuple[int, int]:
    """1-based (line, column) of the character at index ``end - 1`` (serde_json convention)."""
    line = text.count("\n", 0, end) + 1
    start = text.rfind("\n", 0, end) + 1
    return line, end - start


def _find_out_of_range(text: str) -> JSONNumberOutOfRange | None:
    """The first number token outside strings whose float value overflows, if any."""
    for m in _TOKEN_RE.finditer(text):
        num = m.group(1)
        if num is not None and math.isinf(float(num)):
            return JSONNumberOutOfRange(*_line_col(text, m.end(1)))
    return None


def _int_hook(s: str) -> int | float:
    if s == "-0":
        return -0.0
    if len(s) <= 20:
        n = int(s)
        if _I64_MIN <= n <= _U64_MAX:
            return n
    f = float(s)
    if math.isinf(f):
        raise OverflowError(s)
    return f


def _float_hook(s: str) -> float:
    f = float(s)
    if math.isinf(f):
        raise OverflowError(s)
    return f


def _reject_constant(s: str) -> Any:
    raise ValueError(f"invalid JSON literal {s}")


_SLOW_DECODER = json.JSONDecoder(parse_int=_int_hook, parse_float=_float_hook, parse_constant=_reject_constant)


#: Deepest container nesting serde_json (deepseek-recipe's parser) accepts; one more is an error.
MAX_DEPTH = 127


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests containers more than ``limit`` levels deep (iterative, leaves skipped:
    strings and the other JSON scalars by one type check, anything else by ``isinstance``)."""
    if not isinstance(value, (dict, list)):
        return False
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            return True
        for child in node.values() if type(node) is dict or isinstance(node, dict) else node:
            t = type(child)
            if t is str:
                continue
            if t is dict or t is list or (t not in _SCALARS and isinstance(child, (dict, list))):
                push((child, depth + 1))
    return False


def surrogate_path(value: Any) -> str | None:
    """Field path (``messages[0].content``; keys too: ``metadata.k\\udfff``, the surrogate written as
    its escape so the path itself is valid Unicode; ``""`` for the value itself)
    of the first string holding a lone surrogate (U+D800..U+DFFF, which UTF-8 cannot carry and a JSON
    body cannot send), or None when there is none.

    A dict body built in Python (``json.loads`` of ``"\\ud800"`` gives one) skips the JSON parser that
    refuses these; one ``orjson.dumps`` pass (C) clears the common case, the walk runs only when it
    fails. Values that are not JSON types are not looked into (pydantic judges them).
    """
    try:
        orjson.dumps(value)
        return None
    except (TypeError, orjson.JSONEncodeError):
        pass
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if _SURROGATE_RE.search(node):
                return path
        elif isinstance(node, dict):
            for key, child in reversed(list(node.items())):
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and _SURROGATE_RE.search(key):  # named by its escape
                    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", where)
                stack.append((child, where))
        elif isinstance(node, (list, tuple)):
            stack.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(node))))
    return None


#: JSON scalar types other than str (a leaf of these types is never a container).
_SCALARS = frozenset({int, float, bool, type(None)})


def too_deep_path(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Field path (``metadata.a[0].b``; ``""`` for the value itself) of the first container nested
    more than ``limit`` levels deep, or None when ``value`` is within the limit. For error messages:
    slower than :func:`too_deep`."""
    if not isinstance(value, (dict, list)):
        return None
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        node, depth, path = stack.pop()
        if depth > limit:
            return path
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1, f"{path}.{key}" if path else str(key)))
        else:
            for i, child in enumerate(node):
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1, f"{path}[{i}]"))
    return None


#: A JSON string or a bracket (for locating the first over-deep container in JSON text).
_STRUCT_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _too_deep_offset(text: str, limit: int = MAX_DEPTH) -> int | None:
    depth = 0
    for m in _STRUCT_RE.finditer(text):
        c = m.group()
        if c == "[" or c == "{":
            depth += 1
            if depth > limit:
                return m.start()
        elif c == "]" or c == "}":
            depth -= 1
    return None


def nesting_message(value: Any = None, text: str | None = None, limit: int = MAX_DEPTH) -> tuple[str, str | None]:
    """``(message, field path or None)`` for a JSON value (and/or its text) nested deeper than
    ``limit``: ``recursion limit exceeded: nesting deeper than 127 levels at metadata.a.a… (line 1
    column 846)`` — serde_json's words, then the limit, the path when known, the place in the text."""
    path = too_deep_path(value, limit) if value is not None else None
    where = ""
    if path:
        where += f" at {path if len(path) <= 80 else f'{path[:60]}…{path[-16:]}'}"
    offset = _too_deep_offset(text, limit) if text is not None else None
    if offset is not None:
        where += " (line {} column {})".format(*_line_col(text, offset + 1))
    return f"recursion limit exceeded: nesting deeper than {limit} levels{where}", path or None


def utf8_error(exc: UnicodeDecodeError) -> str:
    """A reader's description of undecodable UTF-8: ``not UTF-8: invalid start byte 0xff at byte
    offset 52`` (the offending bytes in hex and the 0-based offset of the first one)."""
    bad = bytes(exc.object[exc.start:exc.end])
    return f"not UTF-8: {exc.reason} 0x{bad.hex()} at byte offset {exc.start}"


class _DepthError(ValueError):
    """Nesting past :data:`MAX_DEPTH` (carries the field path for the request error's ``param``)."""

    def __init__(self, message: str, path: str | None) -> None:
        super().__init__(message)
        self.path = path


def _may_be_too_deep(text: str | bytes) -> bool:
    """False when a short ``text`` has at most :data:`MAX_DEPTH` opening brackets, so no value
    parsed from it can nest deeper (two counts in C instead of a walk over the parsed value, for
    tool-call arguments and other small documents); True (walk) for long texts, where the walk over
    the parsed containers is cheaper than counting every character."""
    if len(text) > 8192:
        return True
    if isinstance(text, str):
        return text.count("[") + text.count("{") > MAX_DEPTH
    data = bytes(text) if not isinstance(text, bytes) else text
    return data.count(b"[") + data.count(b"{") > MAX_DEPTH


def _parse_text(text: str | bytes, check_depth: bool = True) -> Any:
    """Shared body of :func:`parse_json_value` / :func:`loads_request`; raises ValueError
    (also for nesting deeper than :data:`MAX_DEPTH`, as serde_json's recursion limit)."""
    value = _parse_unchecked(text)
    if check_depth and _may_be_too_deep(text) and too_deep(value):
        raw = text if isinstance(text, str) else bytes(text).decode("utf-8")
        raise _DepthError(*nesting_message(value, raw))
    return value


def _not_utf8(text: bytes) -> str | None:
    """The UTF-8 problem of ``text`` (with line and column), or None if it decodes."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = text.count(b"\n", 0, exc.start) + 1
        column = exc.start - (text.rfind(b"\n", 0, exc.start) + 1) + 1
        return f"{utf8_error(exc)} (line {line} column {column})"
    return None


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


#: An integer ``-0`` token outside strings, searched from the start of a valid JSON text: the
#: prefix before it is a run of non-string characters and whole string literals (possessive, so
#: the search is one linear pass in C).
_NEG_ZERO_TOKEN = re.compile(r'\A(?:[^"-]++|"(?:[^"\\]++|\\.)*+"|-(?!0(?![0-9.eE])))*+-0(?![0-9.eE])', re.S)
#: A ``-0`` that is not the start of ``-0.5``, ``-01`` or ``-0e1``: an integer ``-0`` token, or the
#: same characters inside a string (sre finds its first character with a fast scan: ~3x ``find``).
_NEG_ZERO_CANDIDATE = re.compile(r"-0(?![0-9.eE])")
_NEG_ZERO_CANDIDATE_BYTES = re.compile(rb"-0(?![0-9.eE])")


def _has_neg_zero(text: str | bytes) -> bool:
    """Whether the valid JSON ``text`` holds an integer ``-0`` token (which orjson reads as ``0``).

    A candidate is looked for first (one regex search, over the UTF-8 bytes: one byte per ASCII
    character instead of up to four, and the parser has just made them); only when one exists is
    the text scanned for one outside strings."""
    if isinstance(text, str):
        if _NEG_ZERO_CANDIDATE_BYTES.search(text.encode("utf-8", "surrogatepass")) is None:
            return False
    else:
        data = text if isinstance(text, bytes) else bytes(text)
        if _NEG_ZERO_CANDIDATE_BYTES.search(data) is None:
            return False
        text = data.decode("utf-8")
    return _NEG_ZERO_TOKEN.search(text) is not None


def _parse_unchecked(text: str | bytes) -> Any:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if isinstance(text, (bytes, bytearray, memoryview)):
            problem = _not_utf8(bytes(text))
            if problem is not None:
                raise ValueError(problem) from None
            text = bytes(text).decode("utf-8")
        elif "surrogates" in exc.msg and (m := _SURROGATE_RE.search(text)) is not None:
            raise ValueError(f"not UTF-8: lone surrogate U+{ord(m.group()):04X} at character offset {m.start()}") from None
        if exc.msg.startswith("depth limit"):  # orjson stops at 1024 levels; report ours
            raise _DepthError(*nesting_message(None, text)) from None
        oor = _find_out_of_range(text) if "infinity" in str(exc) else None
        if oor is not None:
            raise oor from None
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    # orjson reads the integer -0 as 0; deepseek-recipe keeps the sign (as a float).
    if _has_neg_zero(text):
        if not isinstance(text, str):
            text = bytes(text).decode("utf-8")
        value = _SLOW_DECODER.decode(text)
    return value


def parse_json_value(text: str | bytes) -> Any:
    """Parse one JSON document with deepseek-recipe's number rules (see module docstring).

    Args:
        text: JSON text (``str``) or UTF-8 bytes; surrounding JSON whitespace is allowed.

    Returns:
        dict / list / str / int / float / bool / None, objects as ``dict`` in document order.

    Raises:
        JSONNumberOutOfRange: a number overflows f64 (a ValueError subclass).
        ValueError: anything else that is not exactly one valid JSON value.
    """
    return _parse_text(text)


def loads_request(data: str | bytes, *, check_depth: bool = True) -> Any:
    """Parse a whole request body with the same number rules as :func:`parse_json_value`.

    Args:
        check_depth: False leaves the check of :data:`MAX_DEPTH` to the caller
            (:func:`check_request_depth`, which can skip parts of the value it knows are within it).

    Raises:
        RequestError: ``stage="parse"``, status 400, message ``"invalid JSON request: …"``;
            for an overflowing number exactly deepseek-recipe's
            ``invalid JSON request: number out of range at line L column C``.
    """
    try:
        return _parse_text(data, check_depth)
    except ValueError as exc:
        path = exc.path if isinstance(exc, _DepthError) else None
        raise RequestError(f"invalid JSON request: {exc}", param=path, stage="parse") from None


def check_request_depth(value: Any, text: str | bytes, walked: Any = None) -> None:
    """The nesting check :func:`loads_request` makes, for a ``value`` it parsed from ``text`` with
    ``check_depth=False``: the containers of ``walked`` (default ``value``) are walked — a value
    that holds ``value``'s containers at their same depths, less those known to be within the limit
    (e.g. the body with a list of messages shortened to the ones not seen before).

    Raises:
        RequestError: as :func:`loads_request` (the message and path of ``value``'s first container
            nested too deep).
    """
    if _may_be_too_deep(text) and too_deep(value if walked is None else walked):
        raw = text if isinstance(text, str) else bytes(text).decode("utf-8")
        message, path = nesting_message(value, raw)
        raise RequestError(f"invalid JSON request: {message}", param=path, stage="parse")


# ---------------------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------------------


def format_float(value: float) -> str:
    """Format a float as deepseek-recipe does (§1.2.6): ``1000.0``, ``0.00001``, ``1e+16``, ``1.5e-7``.

    Non-finite values give ``"null"`` (serde_json's behaviour).
    """
    if not math.isfinite(value):
        return "null"
    r = repr(value)
    if "e" not in r:
        return r  # Python uses fixed notation for -4 <= E < 16: identical to the target there
    mantissa, exp_text = r.split("e")
    exponent = int(exp_text)
    if exponent == -5:
        sign = "-" if mantissa.startswith("-") else ""
        return sign + "0.0000" + mantissa.lstrip("-").replace(".", "")
    return f"{mantissa}e{'+' if exponent > 0 else '-'}{abs(exponent)}"


_encode_str = json.encoder.encode_basestring  # C-accelerated; escapes exactly the target's set


def format_float_python(value: float) -> str:
    """Format a float as Python's ``repr`` does (``1e-05``, ``1e+16``), the DeepSeek-V4.1 prompt's
    rule (deepseek-recipe's V4.1 path and DeepSeek's reference encoders, ``json.dumps``);
    non-finite values give ``"null"``."""
    return float.__repr__(value) if math.isfinite(value) else "null"


def _py_dumps(value: Any, comma: str, colon: str, fmt_float: Callable[[float], str] = format_float) -> str:
    """Pure-Python printer (fallback when orjson cannot print the value)."""
    parts: list[str] = []
    append = parts.append

    def emit(v: Any) -> None:
        if isinstance(v, str):
            append(_encode_str(v))
        elif v is None:
            append("null")
        elif v is True:
            append("true")
        elif v is False:
            append("false")
        elif isinstance(v, int):
            append(int.__repr__(v))
        elif isinstance(v, float):
            append(fmt_float(v))
        elif isinstance(v, dict):
            append("{")
            first = True
            for k, item in v.items():
                if not isinstance(k, str):
                    raise TypeError(f"JSON object keys must be str, not {type(k).__name__}")
                if not first:
                    append(comma)
                first = False
                append(_encode_str(k))
                append(colon)
                emit(item)
            append("}")
        elif isinstance(v, (list, tuple)):
            append("[")
            for i, item in enumerate(v):
                if i:
                    append(comma)
                emit(item)
            append("]")
        else:
            raise TypeError(f"{type(v).__name__} is not JSON serialisable")

    emit(value)
    return "".join(parts)


#: Layout of orjson's OPT_INDENT_2 output (a newline plus indentation; never inside strings).
_COMMA_LAYOUT_RE = re.compile(r",\n *")
_LAYOUT_RE = re.compile(r"\n *")

_PROBE = [1e16, 1e-5, 1.5e-7, 100.0, -0.0, 5e-324, 1.7976931348623157e308, 1e15, 0.0001, 1e-6]
_ORJSON_OK = (
    orjson.dumps(_PROBE).decode() == "[" + ",".join(format_float(f) for f in _PROBE) + "]"
    and orjson.dumps("\x00\x1f\x7f\u2028\b\f\n\r\t\"\\é") == '"\\u0000\\u001f\x7f\u2028\\b\\f\\n\\r\\t\\"\\\\é"'.encode()
)


def _orjson_compact(value: Any) -> str | None:
    if not _ORJSON_OK:
        return None
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # big int, non-str key, foreign type: let the Python printer decide
        return None


def dumps_compact(value: Any) -> str:
    """Compact JSON (separators ``","`` / ``":"``) as in ``OutputConstraint.schema`` (§4).

    Raises:
        TypeError: a value that is not dict/list/tuple/str/int/float/bool/None, or a non-str key.
    """
    out = _orjson_compact(value)
    return out if out is not None else _py_dumps(value, ",", ":")


def dumps_prompt(value: Any) -> str:
    """JSON as printed inside the V4 prompt (separators ``", "`` / ``": "``; §1.2.6).

    Fast path: orjson's indented output (``": "`` already; raw newlines occur only as layout,
    since newlines inside strings are escaped), with the layout collapsed to ``", "``.

    Raises:
        TypeError: as :func:`dumps_compact`.
    """
    if isinstance(value, str):
        return _encode_str(value)
    if _ORJSON_OK:
        try:
            out = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
        except TypeError:
            return _py_dumps(value, ", ", ": ")
        return _LAYOUT_RE.sub("", _COMMA_LAYOUT_RE.sub(", ", out))
    return _py_dumps(value, ", ", ": ")


def dumps_prompt_python(value: Any) -> str:
    """JSON as printed inside the DeepSeek-V4.1 prompt: :func:`dumps_prompt` with Python's float
    format (:func:`format_float_python`), i.e. ``json.dumps(value, ensure_ascii=False)``.

    Raises:
        TypeError: as :func:`dumps_compact`.
    """
    if isinstance(value, str):
        return _encode_str(value)
    try:
        return _json_dumps_python(value)
    except (ValueError, TypeError):  # a non-finite float ("null") or a non-str key (TypeError below)
        return _py_dumps(value, ", ", ": ", format_float_python)


_json_dumps_python = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False).encode


# ---------------------------------------------------------------------------------------------
# Wire output (responses, SSE events, stored items)
# ---------------------------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps_wire(value: Any, *, indent: bool = False) -> bytes:
    """Compact UTF-8 JSON bytes for API output (orjson; non-finite floats print as ``null``).

    Integers beyond 64 bits and lone surrogates (which orjson refuses) are printed by a slower
    fallback (exact integers, ``\\udXXX`` escapes), so a client's odd value never breaks a response.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)
    except TypeError:
        # ASCII escapes keep lone surrogates (which UTF-8 cannot carry) as valid JSON escapes
        return json.dumps(_finite(value), ensure_ascii=True, separators=(",", ":") if not indent else None, indent=2 if indent else None).encode()


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (fast orjson round trip; exact fallback for big integers)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONDecodeError):
        import copy

        return copy.deepcopy(value)


def jsonl_values(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """The values of a JSON Lines file, in order, each with its line number (from 1); blank lines
    are skipped. Lines end at ``\\n`` only (a JSON string may hold U+2028, U+0085 …, where
    :meth:`str.splitlines` would split). Each line is read by :func:`json.loads`.

    Raises:
        OSError, UnicodeDecodeError: the file cannot be read as UTF-8 (by this call, before any value).
        ValueError: ``PATH:LINE: reason`` for a line that is not JSON (when the iteration reaches it).
    """
    with open(path, encoding="utf-8") as f:
        return _jsonl_values(os.fspath(path), f.read().split("\n"))


def _jsonl_values(path: str, lines: list[str]) -> Iterator[tuple[int, Any]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
        yield n, value
