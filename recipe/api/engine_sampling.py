"""The sampling fields vLLM's and SGLang's own servers take beyond temperature / top_p: checked
here, carried to the engine in :class:`~recipe.conversation.ExtraSampling`.

A request may set them at the top level of its body (the ``extra_body`` of the openai SDK puts them
there): ``top_k``, ``min_p``, ``repetition_penalty``, ``presence_penalty``, ``frequency_penalty``,
``logit_bias``, ``min_tokens``, ``stop_token_ids``, ``seed`` (Responses, Messages: Chat has its own
field) and ``n`` (Chat only). Each wrong value is a 400 naming the field. With
``Options.engine_sampling="ignore"`` (deepseek-recipe 0.2.0, which range-checks Chat's penalties and
refuses ``n`` other than 1, ignoring the rest) none of them is read.
"""

from __future__ import annotations

import math
from typing import Any

from recipe.conversation import ExtraSampling
from recipe.errors import RequestError

__all__ = ["FIELDS", "extra_sampling", "read_seed", "values_of", "MAX_N", "MAX_LOGIT_BIAS"]

#: The body fields :func:`extra_sampling` reads.
FIELDS = ("top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
          "min_tokens", "stop_token_ids", "n")
_FIELDS = frozenset(FIELDS)
#: Most choices one request may ask for (OpenAI's limit for ``n``).
MAX_N = 128
#: Most entries in ``logit_bias`` and in ``stop_token_ids``.
MAX_LOGIT_BIAS = 1024
_U32 = 2**32 - 1


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(f"Invalid {field} value: expected a number, got {_show(value)}", param=field)
    return float(value)


def _integer(value: Any, field: str, low: int, high: int = _U32) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(f"Invalid {field} value: expected an integer in [{low}, {high}], got {_show(value)}",
                           param=field)
    return value


def _in(value: Any, field: str, low: float, high: float, open_low: bool = False) -> float:
    v = _number(value, field)
    if v < low or v > high or (open_low and v == low):
        bounds = f"({low:g}, {high:g}]" if open_low else f"[{low:g}, {high:g}]"
        raise RequestError(f"Invalid {field} value, the valid range of {field} is {bounds}", param=field)
    return v


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _logit_bias(value: Any, field: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(value, dict):
        raise RequestError(f"Invalid {field} value: expected an object mapping token ids to biases", param=field)
    if len(value) > MAX_LOGIT_BIAS:
        raise RequestError(f"Invalid {field} value: at most {MAX_LOGIT_BIAS} entries, got {len(value)}", param=field)
    out = []
    for key, bias in value.items():
        tid = key if isinstance(key, int) and not isinstance(key, bool) else None
        if isinstance(key, str) and key.isascii() and key.isdigit():
            tid = int(key)
        if tid is None or not 0 <= tid <= _U32:
            raise RequestError(f"Invalid {field} key {_show(key)}: expected a token id (a non-negative integer)",
                               param=f"{field}.{key}")
        out.append((tid, _in(bias, f"{field}.{key}", -100, 100)))
    return tuple(out)


def _stop_ids(value: Any, field: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise RequestError(f"Invalid {field} value: expected a list of token ids", param=field)
    if len(value) > MAX_LOGIT_BIAS:
        raise RequestError(f"Invalid {field} value: at most {MAX_LOGIT_BIAS} ids, got {len(value)}", param=field)
    return tuple(_integer(v, f"{field}[{i}]", 0) for i, v in enumerate(value))


def extra_sampling(values: dict[str, Any], *, n_field: bool) -> ExtraSampling | None:
    """The checked :class:`ExtraSampling` of a request's ``values`` (field name -> the value as
    sent; absent or None: not set), or None when none is set.

    Args:
        values: the request's values of :data:`FIELDS` (others are ignored).
        n_field: the API has ``n`` (Chat Completions); elsewhere an ``n`` other than 1 is refused.

    Raises:
        RequestError: a value of the wrong type or out of range (``param``: the field's path):
            ``top_k`` an integer >= -1 (0 and -1: off), ``min_p`` in [0, 1], the penalties in
            [-2, 2], ``repetition_penalty`` in (0, 2], ``logit_bias`` token ids to biases in
            [-100, 100], ``min_tokens`` and ``stop_token_ids`` non-negative integers, ``n`` in
            [1, :data:`MAX_N`].
    """
    if not values:
        return None
    top_k = values.get("top_k")
    if top_k is not None:
        top_k = _integer(top_k, "top_k", -1)
        if top_k <= 0:
            top_k = None
    min_p = values.get("min_p")
    if min_p is not None:
        min_p = _in(min_p, "min_p", 0, 1)
    penalties = []
    for key in ("presence_penalty", "frequency_penalty"):
        v = values.get(key)
        penalties.append(None if v is None else _in(v, key, -2, 2))
    rep = values.get("repetition_penalty")
    if rep is not None:
        rep = _in(rep, "repetition_penalty", 0, 2, open_low=True)
    bias = values.get("logit_bias")
    if bias is not None:
        bias = _logit_bias(bias, "logit_bias") or None
    min_tokens = values.get("min_tokens")
    if min_tokens is not None:
        min_tokens = _integer(min_tokens, "min_tokens", 0) or None
    stops = values.get("stop_token_ids")
    stops = () if stops is None else tuple(dict.fromkeys(_stop_ids(stops, "stop_token_ids")))
    n = values.get("n")
    n = 1 if n is None else _integer(n, "n", 1, MAX_N)
    if n > 1 and not n_field:
        raise RequestError("Invalid n value: several choices (n > 1) are served on Chat Completions only", param="n")
    if (top_k is None and min_p is None and penalties == [None, None] and rep is None and bias is None
            and min_tokens is None and not stops and n == 1):
        return None
    return ExtraSampling(top_k=top_k, min_p=min_p, presence_penalty=penalties[0], frequency_penalty=penalties[1],
                         repetition_penalty=rep, logit_bias=bias, min_tokens=min_tokens, stop_token_ids=stops, n=n)


def read_seed(value: Any, field: str = "seed") -> int | None:
    """A ``seed`` read where the API's wire model does not type it (Responses, Messages): None, or
    an integer in [0, 2**64 - 1] (Chat's u64).

    Raises:
        RequestError: anything else, naming ``field``.
    """
    if value is None:
        return None
    return _integer(value, field, 0, 2**64 - 1)


def values_of(request: Any) -> dict[str, Any]:
    """The :data:`FIELDS` values of a parsed request model (None where it has no such field); empty
    when the body set none of them (pydantic's ``model_fields_set``: the common request)."""
    if _FIELDS.isdisjoint(request.model_fields_set):
        return {}
    return {k: getattr(request, k, None) for k in FIELDS}
