"""deepseek-recipe 0.2.0 (DeepSeek's own library) as a test oracle: same request -> its prompt, ids, conversion."""

from __future__ import annotations

import functools
from typing import Any

import pytest

dr = pytest.importorskip("deepseek_recipe")

from recipe.tokenizer import default_tokenizer_path  # noqa: E402

REQUEST_CLASSES = {"chat": "ChatCompletionRequest", "responses": "ResponsesRequest", "messages": "MessagesRequest"}
_STAGES = {
    "ReasoningStart": "reasoning",
    "ReasoningContinuation": "reasoning_continuation",
    "ContentContinuation": "content_continuation",
}


@functools.lru_cache(maxsize=1)
def options() -> Any:
    """deepseek-recipe's defaults plus recipe's extra names (V4: both spellings of Pro and Flash;
    V4.1: the lowercase spelling), so both sides have the same model table."""
    o = dr.ConversionOptions()
    for name in ("deepseek-v4-pro", "deepseek-v4-flash", "DeepSeek-V4-Flash"):
        o = o.with_model_alias(name, dr.ModelVersion.DeepseekV4Pro)
    return o.with_model_alias("deepseek-v4.1-flash", dr.ModelVersion.DeepseekV41Flash)


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    """deepseek-recipe's ``Tokenizer`` of the embedded vocabulary (built once: about a second)."""
    return dr.Tokenizer.from_file(str(default_tokenizer_path()))


@functools.lru_cache(maxsize=1)
def encoder() -> Any:
    return dr.DeepseekV4Encoding().with_tokenizer(tokenizer())


@functools.lru_cache(maxsize=1)
def encoder_v41() -> Any:
    """``DeepseekV41Encoding`` with the synthetic V4.1-shaped vocabulary (tests/v41_support.py)."""
    from v41_support import synthetic_v41_path

    return dr.DeepseekV41Encoding().with_tokenizer(dr.Tokenizer.from_file(str(synthetic_v41_path())))


def encoder_for(model_version: Any) -> Any:
    """The oracle's encoding for a converted request's model version (V4.1 ids: synthetic vocabulary)."""
    return encoder_v41() if model_version == dr.ModelVersion.DeepseekV41Flash else encoder()


def image_sources(rendered: Any) -> list[dict[str, Any]]:
    """A rendered prompt's image sources as the conformance rows list them."""
    return [{"kind": str(s.kind), "detail": str(s.detail), "path": s.path, "url": s.url, "data_url": s.data_url}
            for s in rendered.image_sources]


def convert(api: str, body: Any) -> dict[str, Any]:
    """Run deepseek-recipe on ``body``: ``{"ok": True, prompt, special_ranges, token_ids, conversion}``
    or ``{"ok": False, "stage": "parse"|"convert", "message": ...}``."""
    cls = getattr(dr, REQUEST_CLASSES[api])
    try:
        req = cls(body)
    except ValueError as exc:
        return {"ok": False, "stage": "parse", "message": str(exc)}
    try:
        cr = req.convert(options())
    except dr.ConversionError as exc:
        return {"ok": False, "stage": "convert", "message": str(exc)}
    conv = cr.conversation
    enc = encoder_for(cr.model_version)
    rp = enc.render_conversation(conv)
    io, po = cr.inference_options, cr.parsing_options
    oc = io.output_constraint
    stage = po.thinking_initial_stage
    return {
        "ok": True,
        "prompt": rp.prompt,
        "special_ranges": [list(r) for r in rp.special_ranges],
        "token_ids": list(enc.encode(conv)),
        "image_sources": image_sources(rp),
        "conversion": {
            "thinking": conv.thinking_mode == "thinking" if isinstance(conv.thinking_mode, str) else stage is not None,
            "output_constraint": None if oc is None else {"kind": str(oc.kind), "schema": oc.schema},
            "parse_tool_calls": po.parse_tool_calls,
            "starts_in_tool_calls": po.starts_in_tool_calls,
            "parse_json_output": po.parse_json_output,
            "thinking_stage": None if stage is None else _STAGES[str(stage).rsplit(".", 1)[-1]],
            "stop_sequences": list(po.stop_sequences),
            "max_tokens": io.max_tokens,
            "temperature": io.temperature,
            "top_p": io.top_p,
            "logprobs": io.logprobs,
            "top_logprobs": io.top_logprobs,
            "seed": io.seed,
        },
    }
