"""The special-token spellings every DeepSeek generation's prompt format shares (V3, R1, V3.1,
V3.2, V4, V4.1).

The spellings are the same in every vocabulary; their ids are not (``<think>`` / ``</think>`` are
128798 / 128799 in DeepSeek-V3's, 128821 / 128822 in DeepSeek-V4's): each family's constants
module maps them to its vocabulary's ids.
"""

from __future__ import annotations

__all__ = ["BOS", "EOS", "USER", "ASSISTANT", "THINK_START", "THINK_END"]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
THINK_START = "<think>"
THINK_END = "</think>"
