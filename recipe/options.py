"""Per-request behaviour as one immutable value: model table, thinking default, limits, switches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

__all__ = ["Options", "DEFAULT_MODELS", "DEFAULT_OPTIONS"]

#: API model name -> encoding name. Matched exactly and case-sensitively (as deepseek-recipe does).
DEFAULT_MODELS: Mapping[str, str] = MappingProxyType(
    {
        "DeepSeek-V4-Pro": "deepseek_v4",
        "DeepSeek-V4-Flash": "deepseek_v4",
        "deepseek-v4-pro": "deepseek_v4",
        "deepseek-v4-flash": "deepseek_v4",
    }
)


@dataclass(frozen=True, slots=True)
class Options:
    """Conversion options (never read from globals or the environment).

    Attributes:
        models: API model name -> encoding name; other names are rejected with a 400.
        default_thinking: thinking mode when the request says nothing about thinking or effort.
        thinking_max_tokens: upper bound for ``max_tokens`` in thinking mode.
        non_thinking_max_tokens: upper bound for ``max_tokens`` otherwise.
        reasoning_content_behavior: ``fill_empty`` (history assistant turns without reasoning get
            empty reasoning) or ``reject`` (thinking mode requires reasoning after the last user turn).
        context_limit: the model's context window in tokens (for ``resolve_max_tokens``).
    """

    models: Mapping[str, str] = field(default_factory=lambda: DEFAULT_MODELS)
    default_thinking: bool = True
    thinking_max_tokens: int = 393216
    non_thinking_max_tokens: int = 393216
    reasoning_content_behavior: Literal["fill_empty", "reject"] = "fill_empty"
    context_limit: int = 1048576

    def with_model(self, name: str, encoding: str = "deepseek_v4") -> Options:
        """A copy whose model table also maps ``name`` to ``encoding``."""
        return replace(self, models=MappingProxyType({**self.models, name: encoding}))


DEFAULT_OPTIONS = Options()
