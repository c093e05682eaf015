"""Which model families a server can serve: the families whose vocabulary its engines run.

A model family's prompt ids only mean something to an engine that runs the family's vocabulary
(``<think>`` is id 128798 in DeepSeek-V3's and 128821 in DeepSeek-V4's). The server narrows its
model table to the families of the vocabulary ``recipe serve --vocabulary`` names or, without it,
the vocabulary its vLLM replicas tokenize :data:`~recipe.serve.engines.base.VOCABULARY_PROBE` with;
other model names get the API's own unknown-model error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import MappingProxyType

from recipe.encodings.table import ENCODINGS
from recipe.options import Options
from recipe.serve.engines.base import VOCABULARY_PROBE
from recipe.tokenizer import Tokenizer, load_tokenizer, load_v3_tokenizer

__all__ = ["VOCABULARIES", "family_vocabulary", "vocabulary_of", "narrow"]

#: Vocabulary name -> its loader: ``v4`` DeepSeek-V4's (recipe's default; V4 and V4.1 families),
#: ``v3`` DeepSeek-V3's (V3, R1, V3.1, V3.2 families).
VOCABULARIES: dict[str, Callable[[], Tokenizer]] = {"v4": load_tokenizer, "v3": load_v3_tokenizer}


def family_vocabulary(encoding: str) -> str | None:
    """The vocabulary name (:data:`VOCABULARIES`) of encoding ``encoding``'s default vocabulary
    (imports the family's package), or None for a family whose vocabulary is another one.

    Raises:
        KeyError: an unknown encoding name.
    """
    loader = ENCODINGS[encoding].tokenizer
    return next((name for name, load in VOCABULARIES.items() if load is loader), None)


def vocabulary_of(probe_ids: Sequence[int]) -> str | None:
    """The name of the vocabulary that encodes :data:`VOCABULARY_PROBE` (special tokens as such, no
    BOS) as ``probe_ids``, or None when none of :data:`VOCABULARIES` does (another vocabulary)."""
    ids = list(probe_ids)
    return next((name for name, load in VOCABULARIES.items()
                 if load().encode_with_special_tokens(VOCABULARY_PROBE) == ids), None)


def narrow(options: Options, vocabularies: Iterable[str]) -> Options:
    """``options`` with its model table (and the aliases of the models left) narrowed to the
    families whose default vocabulary is one of ``vocabularies``.

    Raises:
        ValueError: an unknown vocabulary name.
    """
    keep = set(vocabularies)
    unknown = keep - VOCABULARIES.keys()
    if unknown:
        raise ValueError(f"unknown vocabulary {sorted(unknown)[0]!r}; expected one of {', '.join(VOCABULARIES)}")
    served = {e for e in set(options.models.values()) if family_vocabulary(e) in keep}
    models = {m: e for m, e in options.models.items() if e in served}
    aliases = {n: a for n, a in options.aliases.items() if a.target in models}
    return replace(options, models=MappingProxyType(models), aliases=MappingProxyType(aliases))
