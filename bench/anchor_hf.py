"""The anchor for the earlier DeepSeek generations: transformers' ``apply_chat_template`` + HF ``tokenizers``.

A serving or training stack without recipe renders a DeepSeek-V3 / R1 / V3.1 prompt with
transformers' ``apply_chat_template`` on the model's published chat template and HF ``tokenizers``
encodes it. That pair, on the same V3 ``tokenizer.json`` recipe embeds, is the anchor here. The
template strings are the ones the tests use (``fixtures/deepseek_v3x/templates.json``).

DeepSeek-V3.2 has no chat template (its encoder is a Python file, not vendored here): its anchor is
the reference prompt text (recipe's ``encode_messages``, which reproduces DeepSeek's fixtures byte
for byte) encoded by transformers' tokenizer call — the tokenization half of DeepSeek's pipeline.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path
from typing import Any

from recipe.tokenizer import V3_TOKENIZER_FILE

TEMPLATES = Path(__file__).resolve().parent.parent / "fixtures" / "deepseek_v3x" / "templates.json"
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"


def tokenizer(revision: str | None = None) -> Any:
    """transformers' ``PreTrainedTokenizerFast`` over the V3 ``tokenizer.json``, with the chat template
    of ``revision`` (``"R1-0528"`` …) when given."""
    import tokenizers
    from transformers import PreTrainedTokenizerFast

    hf = tokenizers.Tokenizer.from_str(lzma.decompress(V3_TOKENIZER_FILE.read_bytes()).decode("utf-8"))
    tok = PreTrainedTokenizerFast(tokenizer_object=hf, bos_token=BOS, eos_token=EOS)
    if revision is not None:
        tok.chat_template = json.loads(TEMPLATES.read_text(encoding="utf-8"))["templates"][revision]["chat_template"]
    return tok


def chat_ids(tok: Any, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    """``tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)``'s ids."""
    out = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, **kwargs)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def text_ids(tok: Any, text: str) -> list[int]:
    """transformers' tokenizer call on a rendered prompt (``add_special_tokens=False``)."""
    return list(tok(text, add_special_tokens=False)["input_ids"])
