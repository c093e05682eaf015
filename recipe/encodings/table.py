"""The encoding table: encoding name -> :class:`~recipe.encodings.base.Encoding` record.

Adding a model family: its package under ``recipe/encodings/`` and one row in :data:`ENCODINGS`.
The default model table (:data:`recipe.options.DEFAULT_MODELS`) is derived from the records'
``models``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from recipe.encodings import deepseek_r1, deepseek_v3, deepseek_v3_1, deepseek_v3_2, deepseek_v4, deepseek_v41
from recipe.encodings.base import Encoding

__all__ = ["ENCODINGS", "MODELS", "get_encoding"]

#: Encoding name -> record.
ENCODINGS: Mapping[str, Encoding] = MappingProxyType({
    deepseek_v4.ENCODING.name: deepseek_v4.ENCODING,
    deepseek_v41.ENCODING.name: deepseek_v41.ENCODING,
    deepseek_v3_2.ENCODING.name: deepseek_v3_2.ENCODING,
    deepseek_v3_1.ENCODING.name: deepseek_v3_1.ENCODING,
    deepseek_r1.ENCODING.name: deepseek_r1.ENCODING,
    deepseek_v3.ENCODING.name: deepseek_v3.ENCODING,
})

#: API model name -> encoding name, from every record's ``models`` (matched exactly).
MODELS: Mapping[str, str] = MappingProxyType({m: e.name for e in ENCODINGS.values() for m in e.models})


def get_encoding(name: str) -> Encoding:
    """The record of encoding ``name``. Raises ``KeyError`` (naming the known encodings) if unknown."""
    try:
        return ENCODINGS[name]
    except KeyError:
        raise KeyError(f"unknown encoding {name!r}; known: {', '.join(ENCODINGS)}") from None
