"""deepseek-recipe 0.2.0, the benchmarks' anchor, set up the same way in every bench script.

``dr`` is the ``deepseek_recipe`` module, or None when it is not installed (scripts that can run
without the anchor check it; the helpers below raise ImportError then).
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
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
    """``ConversionOptions`` with ``deepseek-v4-pro`` mapped to DeepSeek-V4-Pro (and
    ``deepseek-v4.1-flash`` to DeepSeek-V4.1-Flash)."""
    d = _require()
    return (d.ConversionOptions().with_model_alias("deepseek-v4-pro", d.ModelVersion.DeepseekV4Pro)
            .with_model_alias("deepseek-v4.1-flash", d.ModelVersion.DeepseekV41Flash))


@functools.cache
def synthetic_v41_path() -> Path:
    """A V4.1-shaped ``tokenizer.json`` for measuring the V4.1 path: the embedded V4 file with ids
    128799 / 129264 / 129279 renamed ``<｜System｜>`` / ``<｜image｜>`` / a placeholder (the
    conformance set's synthetic vocabulary; not DeepSeek-V4.1's, written to a temporary directory)."""
    data = json.loads(default_tokenizer_path().read_text(encoding="utf-8"))
    renames = {128799: "<｜System｜>", 129264: "<｜image｜>", 129279: "<|place_holder_mm_span_0442|>"}
    for tok in data["added_tokens"]:
        tok["content"] = renames.get(tok["id"], tok["content"])
    directory = Path(tempfile.mkdtemp(prefix="recipe-bench-v41-"))
    atexit.register(shutil.rmtree, directory, True)
    (directory / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return directory / "tokenizer.json"


def tokenizer() -> Any:
    """The anchor's ``Tokenizer`` built from the same ``tokenizer.json`` as ours."""
    return _require().Tokenizer.from_file(str(default_tokenizer_path()))


def encoding() -> Any:
    """``DeepseekV4Encoding`` with :func:`tokenizer` (conversation -> prompt token ids)."""
    return _require().DeepseekV4Encoding().with_tokenizer(tokenizer())


def encoding_v41() -> Any:
    """``DeepseekV41Encoding`` with the synthetic V4.1-shaped vocabulary (:func:`synthetic_v41_path`)."""
    d = _require()
    return d.DeepseekV41Encoding().with_tokenizer(d.Tokenizer.from_file(str(synthetic_v41_path())))


def encoder(request_class: str, v41: bool = False) -> Callable[[str], list[int]]:
    """``body (JSON text) -> prompt token ids`` through the anchor: ``dr.<request_class>(body)``,
    ``convert(options())``, ``encode`` (e.g. ``ChatCompletionRequest``, ``MessagesRequest``); ``v41``:
    with ``DeepseekV41Encoding`` and the synthetic V4.1 vocabulary."""
    cls = getattr(_require(), request_class)
    opts, enc = options(), (encoding_v41() if v41 else encoding())

    def run(body: str) -> list[int]:
        return list(enc.encode(cls(body).convert(opts).conversation))

    return run
