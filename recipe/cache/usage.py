"""Cached-token accounting: how many prompt tokens a prefix-cache match serves, and each API's
usage fields for them. Plain arithmetic, no hashing: the API output encoders import this module
without loading the key chains.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["cached_prompt_tokens", "PromptUsage"]


def cached_prompt_tokens(prompt_len: int, matched_blocks: int, block_size: int) -> int:
    """Prompt tokens served from cache: ``matched_blocks * block_size``, capped so at least the
    last prompt token is recomputed (``<= floor((prompt_len - 1) / block_size) * block_size``).

    Raises:
        ValueError: a negative length or count, or ``block_size < 1``.
    """
    if prompt_len < 0 or matched_blocks < 0 or block_size < 1:
        raise ValueError("prompt_len and matched_blocks must be >= 0 and block_size >= 1")
    if prompt_len == 0:
        return 0
    return min(matched_blocks, (prompt_len - 1) // block_size) * block_size


@dataclass(frozen=True, slots=True)
class PromptUsage:
    """Prompt tokens and how many came from the prefix cache, in each API's vocabulary.

    Raises ValueError unless ``0 <= cached_tokens <= prompt_tokens``.
    """

    prompt_tokens: int
    cached_tokens: int

    def __post_init__(self) -> None:
        if not 0 <= self.cached_tokens <= self.prompt_tokens:
            raise ValueError(f"need 0 <= cached_tokens ({self.cached_tokens}) <= prompt_tokens ({self.prompt_tokens})")

    @property
    def prompt_cache_hit_tokens(self) -> int:
        """DeepSeek Chat Completions ``usage.prompt_cache_hit_tokens``."""
        return self.cached_tokens

    @property
    def prompt_cache_miss_tokens(self) -> int:
        """DeepSeek ``usage.prompt_cache_miss_tokens`` (hit + miss = prompt_tokens)."""
        return self.prompt_tokens - self.cached_tokens

    @property
    def uncached_input_tokens(self) -> int:
        """Anthropic Messages ``usage.input_tokens``: input tokens excluding cache reads."""
        return self.prompt_tokens - self.cached_tokens

    @property
    def cache_read_input_tokens(self) -> int:
        """Anthropic Messages ``usage.cache_read_input_tokens``."""
        return self.cached_tokens

    def cost(self, hit_per_million: float, miss_per_million: float) -> float:
        """Prompt cost for per-million-token prices of cache hits and misses."""
        return (self.cached_tokens * hit_per_million + self.prompt_cache_miss_tokens * miss_per_million) / 1e6
