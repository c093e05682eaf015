"""DeepSeek-V4 encoding (V4-Pro and V4-Flash share it): prompt rendering and output parsing."""

from recipe.encodings.deepseek_v4.render import render

__all__ = ["render"]
