"""The encoding table: encoding name -> :class:`~recipe.encodings.base.Encoding` record.

Adding a model family: its package under ``recipe/encodings/`` and one :class:`Family` row in
:data:`FAMILIES`. A row names the family's package and its API model names, so the table knows every
model without importing any family: a family's package (its renderer, template, parser modules) is
imported when a request first names one of its models (:func:`get_encoding`). The default model
table (:data:`recipe.options.DEFAULT_MODELS`) is :data:`MODELS`, derived from the rows; a test
checks that each row's models are its record's ``models``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from recipe.encodings.base import Encoding

__all__ = ["Family", "FAMILIES", "ENCODINGS", "MODELS", "get_encoding"]


class Family(NamedTuple):
    """One row of the table: what is known of a family before its package is imported (a
    NamedTuple: every start-up builds this class, in one step where a dataclass takes six).

    Attributes:
        package: the family's package; its ``ENCODING`` attribute is the record (named ``name``).
        models: the API model names mapped to the family by default (the record's ``models``).
    """

    package: str
    models: tuple[str, ...]

    @property
    def name(self) -> str:
        """The encoding name: the package's last component (``"deepseek_v4"``)."""
        return self.package.rpartition(".")[2]


#: One row per family (the order of ``ENCODINGS``).
FAMILIES: tuple[Family, ...] = (
    Family("recipe.encodings.deepseek_v4",
           ("DeepSeek-V4-Pro", "DeepSeek-V4-Flash", "deepseek-v4-pro", "deepseek-v4-flash")),
    Family("recipe.encodings.deepseek_v41", ("DeepSeek-V4.1-Flash", "deepseek-v4.1-flash")),
    Family("recipe.encodings.deepseek_v3_2",
           ("deepseek-v3.2", "deepseek-v3.2-speciale", "DeepSeek-V3.2", "DeepSeek-V3.2-Speciale",
            "deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Speciale")),
    Family("recipe.encodings.deepseek_v3_1",
           ("deepseek-v3.1", "deepseek-v3.1-terminus", "deepseek-v3.2-exp", "DeepSeek-V3.1", "DeepSeek-V3.1-Terminus",
            "DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.1-Terminus",
            "deepseek-ai/DeepSeek-V3.2-Exp")),
    Family("recipe.encodings.deepseek_r1",
           ("deepseek-r1", "deepseek-r1-0528", "DeepSeek-R1", "DeepSeek-R1-0528",
            "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528")),
    Family("recipe.encodings.deepseek_v3",
           ("deepseek-v3", "deepseek-v3-0324", "DeepSeek-V3", "DeepSeek-V3-0324",
            "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-0324")),
)

_ROWS: Mapping[str, Family] = {f.name: f for f in FAMILIES}
_loaded: dict[str, Encoding] = {}  # the records looked up so far (a dict read per later lookup)


class _Records(Mapping[str, "Encoding"]):
    """Encoding name -> record, importing a family's package on first lookup of its name."""

    def __getitem__(self, name: str) -> Encoding:
        record = _loaded.get(name)
        if record is None:
            row = _ROWS[name]  # KeyError for an unknown name, before anything is imported
            record = _loaded[name] = importlib.import_module(row.package).ENCODING
        return record

    def __iter__(self) -> Iterator[str]:
        return iter(_ROWS)

    def __len__(self) -> int:
        return len(_ROWS)

    def __contains__(self, name: object) -> bool:
        return name in _ROWS

    def __repr__(self) -> str:
        return f"ENCODINGS({', '.join(_ROWS)})"


#: Encoding name -> record (read-only; a family is imported when its record is first looked up).
ENCODINGS: Mapping[str, Encoding] = _Records()

#: API model name -> encoding name, from every row's ``models`` (matched exactly).
MODELS: Mapping[str, str] = MappingProxyType({m: f.name for f in FAMILIES for m in f.models})


def get_encoding(name: str) -> Encoding:
    """The record of encoding ``name`` (its family's package is imported on first use). Raises
    ``KeyError`` (naming the known encodings) if unknown."""
    record = _loaded.get(name)  # the common case: one dict read
    if record is not None:
        return record
    try:
        return ENCODINGS[name]
    except KeyError:
        raise KeyError(f"unknown encoding {name!r}; known: {', '.join(_ROWS)}") from None
