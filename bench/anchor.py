"""deepseek-recipe 0.2.0, the benchmarks' anchor, set up the same way in every bench script.

``dr`` is the ``deepseek_recipe`` module, or None when it is not installed (scripts that can run
without the anchor check it; the helpers below raise ImportError then).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recipe.tokenizer import default_tokenizer_path

try:
    import deepseek_recipe as dr
except ImportError:  # pragma: no cover
    dr = None


def _require() -> Any:
    if dr is None:
        raise ImportError("deepseek-recipe (the benchmark anchor) is not installed")
    return dr


def options() -> Any:
    """``ConversionOptions`` with ``deepseek-v4-pro`` mapped to DeepSeek-V4-Pro."""
    d = _require()
    return d.ConversionOptions().with_model_alias("deepseek-v4-pro", d.ModelVersion.DeepseekV4Pro)


def tokenizer() -> Any:
    """The anchor's ``Tokenizer`` built from the same ``tokenizer.json`` as ours."""
    return _require().Tokenizer.from_file(str(default_tokenizer_path()))


def encoding() -> Any:
    """``DeepseekV4Encoding`` with :func:`tokenizer` (conversation -> prompt token ids)."""
    return _require().DeepseekV4Encoding().with_tokenizer(tokenizer())


def encoder(request_class: str) -> Callable[[str], list[int]]:
    """``body (JSON text) -> prompt token ids`` through the anchor: ``dr.<request_class>(body)``,
    ``convert(options())``, ``encode`` (e.g. ``ChatCompletionRequest``, ``MessagesRequest``)."""
    cls = getattr(_require(), request_class)
    opts, enc = options(), encoding()

    def run(body: str) -> list[int]:
        return list(enc.encode(cls(body).convert(opts).conversation))

    return run
