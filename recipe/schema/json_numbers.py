"""Bounded JSON numbers as lexemes: ``minimum`` / ``maximum`` / ``exclusiveMinimum`` /
``exclusiveMaximum`` of ``integer`` and ``number`` schemas, enforced by the grammar.

An integer range becomes a regular expression over decimal digits (the usual split by digit count
and shared prefixes: ``[1, 250]`` is ``[1-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|250``). A bounded
``number`` is the bounded integers, plus decimals ``k.F`` (1–32 fraction digits) whose whole interval
``[k, k+1)`` (or ``(-(k+1), -k]``) lies inside the bounds, and no exponent: every number the lexeme
matches satisfies the bounds (some valid numbers, such as ``0.5`` under ``minimum: 0.25``, are not
writable — the grammar is never looser than the schema, sometimes tighter); at an exclusive integer
bound ``k``, decimals ``k.F`` whose last digit is not 0 (``0.25`` under ``exclusiveMinimum: 0``). Integers stay within
recipe's 19-digit bound (:data:`recipe.schema.json_grammar.INT_LEX`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["INT_MAX", "bounds", "integer_range", "number_range"]

#: the largest integer magnitude the grammar writes (19 digits)
INT_MAX = 10**19 - 1

_Class = tuple[int, int]  # digits lo..hi


def _num(v: Any) -> float | int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return v


def bounds(schema: Mapping[str, Any]) -> tuple[tuple[Any, bool] | None, tuple[Any, bool] | None]:
    """``(lower, upper)``, each ``(value, exclusive)`` or None, from the schema's bound keywords
    (draft 4's boolean ``exclusiveMinimum`` / ``exclusiveMaximum`` included; the tightest wins)."""
    lo: tuple[Any, bool] | None = None
    hi: tuple[Any, bool] | None = None
    mn, mx = _num(schema.get("minimum")), _num(schema.get("maximum"))
    emn, emx = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if mn is not None:
        lo = (mn, emn is True)
    if mx is not None:
        hi = (mx, emx is True)
    if _num(emn) is not None and (lo is None or emn >= lo[0]):
        lo = (emn, True)
    if _num(emx) is not None and (hi is None or emx <= hi[0]):
        hi = (emx, True)
    return lo, hi


def _int_bounds(lo: tuple[Any, bool] | None, hi: tuple[Any, bool] | None) -> tuple[int, int]:
    a = -INT_MAX if lo is None else (math.floor(lo[0]) + 1 if lo[1] else math.ceil(lo[0]))
    b = INT_MAX if hi is None else (math.ceil(hi[0]) - 1 if hi[1] else math.floor(hi[0]))
    return max(a, -INT_MAX), min(b, INT_MAX)


def _same_length(a: str, b: str) -> list[list[_Class]]:
    """Digit-class sequences matching exactly the numbers ``a..b`` written with ``len(a)`` digits."""
    if not a:
        return [[]]
    if a[0] == b[0]:
        d = int(a[0])
        return [[(d, d), *rest] for rest in _same_length(a[1:], b[1:])]
    n = len(a) - 1
    first, last = int(a[0]), int(b[0])
    out: list[list[_Class]] = []
    tail: list[list[_Class]] = []
    if a[1:] != "0" * n:
        out += [[(first, first), *rest] for rest in _same_length(a[1:], "9" * n)]
        first += 1
    if b[1:] != "9" * n:
        tail = [[(last, last), *rest] for rest in _same_length("0" * n, b[1:])]
        last -= 1
    if first <= last:
        out.append([(first, last), *[(0, 9)] * n])
    return out + tail


def _nonneg(a: int, b: int) -> list[list[_Class]]:
    """Digit-class sequences matching the integers ``a..b`` (``0 <= a <= b``), no leading zeros."""
    out: list[list[_Class]] = []
    for width in range(len(str(a)), len(str(b)) + 1):
        lo = a if width == len(str(a)) else 10 ** (width - 1)
        hi = b if width == len(str(b)) else 10**width - 1
        if lo <= hi:
            out += _same_length(str(lo), str(hi))
    return out


def _rx(classes: list[_Class]) -> str:
    parts: list[str] = []
    for lo, hi in classes:
        parts.append(str(lo) if lo == hi else f"[{lo}-{hi}]")
    out, i = "", 0
    while i < len(parts):  # runs of [0-9] as [0-9]{n}
        j = i
        while j < len(parts) and parts[j] == parts[i]:
            j += 1
        out += parts[i] + (f"{{{j - i}}}" if j - i > 1 and len(parts[i]) > 1 else parts[i] * (j - i - 1))
        i = j
    return out


def _ebnf(classes: list[_Class]) -> str:
    return " ".join(f'"{lo}"' if lo == hi else f"[{lo}-{hi}]" for lo, hi in classes) or '""'


def _alts(seqs: list[list[_Class]]) -> tuple[str, str]:
    return "|".join(_rx(s) for s in seqs), " | ".join(_ebnf(s) for s in seqs)


def _signed(a: int, b: int, suffix_rx: str = "", suffix_ebnf: str = "", zero_negative: bool = False) -> list[tuple[str, str]]:
    """(regex, ebnf) alternatives for the integers ``a..b`` (with ``suffix`` after each);
    ``zero_negative``: the negative side includes ``-0`` (decimals ``-0.F``)."""
    out: list[tuple[str, str]] = []
    neg_lo = 0 if zero_negative else 1
    if a < 0 or (zero_negative and a <= 0):
        k_lo, k_hi = max(neg_lo, -b), -a
        if k_lo <= k_hi:
            rx, eb = _alts(_nonneg(k_lo, k_hi))
            out.append((f"-(?:{rx}){suffix_rx}", f'"-" ({eb}){(" " + suffix_ebnf) if suffix_ebnf else ""}'))
    if b >= 0:
        lo = max(a, 0)
        if lo <= b:
            rx, eb = _alts(_nonneg(lo, b))
            out.append((f"(?:{rx}){suffix_rx}", f"({eb}){(' ' + suffix_ebnf) if suffix_ebnf else ''}"))
    return out


def integer_range(lo: tuple[Any, bool] | None, hi: tuple[Any, bool] | None) -> tuple[str, str] | None:
    """``(regex, ebnf)`` of the JSON integers inside the bounds, or None when no integer is."""
    a, b = _int_bounds(lo, hi)
    if a > b:
        return None
    alts = _signed(a, b)
    return "|".join(r for r, _ in alts), " | ".join(f"({e})" for _, e in alts)


_FRAC_RX, _FRAC_EBNF = "\\.[0-9]{1,32}", '"." [0-9]{1,32}'
_NZ_FRAC_RX, _NZ_FRAC_EBNF = "\\.[0-9]{0,31}[1-9]", '"." [0-9]{0,31} [1-9]'


def number_range(lo: tuple[Any, bool] | None, hi: tuple[Any, bool] | None) -> tuple[str, str] | None:
    """``(regex, ebnf)`` of JSON numbers inside the bounds (see the module docstring), or None."""
    alts: list[tuple[str, str]] = []
    ints = integer_range(lo, hi)
    if ints is not None:
        alts.append(ints)
    # k.F >= 0 lies in [k, k+1): needs k >= lo (k > lo when exclusive: k.0 == k) and k + 1 <= hi
    p_lo = 0 if lo is None else max(0, math.floor(lo[0]) + 1 if lo[1] else math.ceil(lo[0]))
    p_hi = INT_MAX if hi is None else min(INT_MAX, math.floor(hi[0]) - 1)
    if p_lo <= p_hi:
        alts += _signed(p_lo, p_hi, _FRAC_RX, _FRAC_EBNF)
    # -(k.F) lies in (-(k+1), -k]: needs -k <= hi (-k < hi when exclusive) and -(k+1) >= lo
    n_lo = 0 if hi is None else max(0, math.floor(-hi[0]) + 1 if hi[1] else math.ceil(-hi[0]))
    n_hi = INT_MAX if lo is None else min(INT_MAX, math.floor(-lo[0]) - 1)
    if n_lo <= n_hi:
        rx, eb = _alts(_nonneg(n_lo, n_hi))
        alts.append((f"-(?:{rx}){_FRAC_RX}", f'"-" ({eb}) {_FRAC_EBNF}'))
    # at an exclusive integer bound k: k.F (or -k.F) with a non-zero last digit, so never k itself
    if lo is not None and lo[1] and float(lo[0]).is_integer() and 0 <= lo[0] and (hi is None or lo[0] + 1 <= hi[0]):
        k = int(lo[0])
        alts.append((f"{k}{_NZ_FRAC_RX}", f'"{k}" {_NZ_FRAC_EBNF}'))
    if hi is not None and hi[1] and float(hi[0]).is_integer() and hi[0] <= 0 and (lo is None or hi[0] - 1 >= lo[0]):
        k = int(-hi[0])
        alts.append((f"-{k}{_NZ_FRAC_RX}", f'"-{k}" {_NZ_FRAC_EBNF}'))
    if not alts:
        return None
    return "|".join(f"(?:{r})" for r, _ in alts), " | ".join(f"({e})" for _, e in alts)
