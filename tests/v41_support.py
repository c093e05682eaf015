"""DeepSeek-V4.1 test support: the synthetic V4.1-shaped vocabulary, and recipe vs deepseek-recipe
on one request of any API, compared field by field.

The synthetic vocabulary is the embedded DeepSeek-V4 ``tokenizer.json`` with three added tokens
renamed (ids 128799 -> ``<｜System｜>``, 129264 -> ``<｜image｜>``, 129279 ->
``<|place_holder_mm_span_0442|>``), as the conformance set describes. It exercises the id path
(public sources put V4.1's ``<｜System｜>`` at 128799 and its image token at 129264); it is *not*
DeepSeek-V4.1's vocabulary and is built in a temporary directory, never shipped.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS, Options
from recipe.pipeline import prepare
from recipe.tokenizer import Tokenizer, default_tokenizer_path, load_tokenizer

MODEL = "deepseek-v4.1-flash"
#: id -> new spelling, the three renames of the synthetic vocabulary.
SYNTH_RENAMES = {128799: "<｜System｜>", 129264: "<｜image｜>", 129279: "<|place_holder_mm_span_0442|>"}
#: deepseek-recipe OutputConstraint kind names -> ours.
ORACLE_KINDS = {"Json": "json", "Regex": "regex", "ToolCall": "tool_call", "ToolCallRequired": "tool_call_required"}
CONVERSION_KEYS = (
    "thinking", "output_constraint", "parse_tool_calls", "starts_in_tool_calls", "parse_json_output",
    "thinking_stage", "stop_sequences", "max_tokens", "temperature", "top_p", "logprobs", "top_logprobs", "seed",
)


@functools.lru_cache(maxsize=1)
def synthetic_v41_path() -> Path:
    """Path of the synthetic V4.1-shaped ``tokenizer.json`` (written once per process)."""
    data = json.loads(default_tokenizer_path().read_text(encoding="utf-8"))
    for tok in data["added_tokens"]:
        if tok["id"] in SYNTH_RENAMES:
            tok["content"] = SYNTH_RENAMES[tok["id"]]
    directory = Path(tempfile.mkdtemp(prefix="recipe-synth-v41-"))
    atexit.register(shutil.rmtree, directory, True)
    path = directory / "tokenizer.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def synthetic_v41_tokenizer() -> Tokenizer:
    """The synthetic V4.1-shaped vocabulary as a recipe :class:`Tokenizer`."""
    return load_tokenizer(synthetic_v41_path())


def with_model(body: dict[str, Any], model: str = MODEL) -> dict[str, Any]:
    """``body`` with its model name replaced."""
    return {**body, "model": model}


def sources(prep: Any) -> list[dict[str, Any]]:
    """A prepared request's image sources as the conformance rows list them."""
    return [
        {"kind": s.kind, "detail": s.detail, "path": s.path,
         "url": s.url if s.kind == "url" else None, "data_url": s.url if s.kind == "data_url" else None}
        for s in prep.image_sources
    ]


def ours(api: str, body: Any, options: Options = PARITY_OPTIONS, tokenizer: Tokenizer | None = None) -> dict[str, Any]:
    """recipe's answer shaped like ``oracle.convert``: ``{"ok": True, prompt, special_ranges,
    token_ids, image_sources, conversion}`` or ``{"ok": False, stage, message}``. Ids use the
    synthetic vocabulary unless ``tokenizer`` is given."""
    try:
        prep = prepare(body, api, options=options, tokenizer=tokenizer or synthetic_v41_tokenizer())
    except RequestError as err:
        return {"ok": False, "stage": err.stage, "message": err.message}
    conv = prep.conversion()
    return {
        "ok": True,
        "prompt": prep.prompt.text,
        "special_ranges": [list(r) for r in prep.prompt.special_ranges],
        "token_ids": prep.token_ids,
        "image_sources": sources(prep),
        "conversion": {k: conv[k] for k in CONVERSION_KEYS},
    }


def normalise(theirs: dict[str, Any]) -> dict[str, Any]:
    """The oracle's answer with its enum spellings mapped onto ours (in place; returns it)."""
    if theirs.get("ok"):
        oc = theirs["conversion"]["output_constraint"]
        if oc is not None:
            kind = oc["kind"].rsplit(".", 1)[-1]
            oc["kind"] = ORACLE_KINDS.get(kind, kind)
        for s in theirs["image_sources"]:
            s["kind"] = s["kind"].rsplit(".", 1)[-1].lower().replace("dataurl", "data_url")
            s["detail"] = s["detail"].rsplit(".", 1)[-1].lower()
    return theirs


_V41_ERRORS = ("image", "Image", "file", "base64", "invalid url", "defer_loading", "tool_addition")


def _v41_specific(message: str) -> bool:
    """A conversion error only V4.1 gives (images, files, deferred tools): its wording must match.
    Other conversion errors are V4's, whose check order the V4 suites compare (Messages: wording;
    Chat and Responses: the stage)."""
    return any(word in message for word in _V41_ERRORS)


def compare(api: str, body: Any, options: Options = PARITY_OPTIONS) -> dict[str, Any]:
    """Assert that recipe answers ``body`` as deepseek-recipe does: accept/reject, the stage (and a
    conversion error's message, see :func:`_v41_specific`), prompt, special ranges, image sources, token ids (synthetic V4.1
    vocabulary) and conversion values. Returns recipe's answer."""
    import oracle

    wire = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    theirs = normalise(oracle.convert(api, wire))
    mine = ours(api, wire, options)
    assert mine["ok"] == theirs["ok"], (mine.get("message"), theirs.get("message"))
    if not mine["ok"]:
        assert mine["stage"] == theirs["stage"], (mine["message"], theirs["message"])
        if mine["stage"] == "convert" and (api == "messages" or _v41_specific(mine["message"]) or _v41_specific(theirs["message"])):
            assert mine["message"] == theirs["message"], (mine["message"], theirs["message"])
        return mine
    if _first_message_prefix(mine, theirs):  # deviation 22: our output starts where our prompt does
        theirs["conversion"] = {**theirs["conversion"], "thinking_stage": "content_continuation"}
    for key in ("prompt", "special_ranges", "image_sources", "token_ids", "conversion"):
        assert mine[key] == theirs[key], (key, mine[key], theirs[key])
    return mine


def _first_message_prefix(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """deepseek-recipe's V4.1 prompt continues a first-message prefix after ``</think>`` while its
    ``thinking_stage`` says reasoning (docs/streaming.md, deviation 22): true when both prompts are
    that shape, recipe starts the output in the answer and deepseek-recipe in the reasoning."""
    tail = mine["prompt"].rsplit("<｜Assistant｜>", 1)[-1]
    return (
        mine["prompt"] == theirs["prompt"] and mine["prompt"].count("<｜Assistant｜>") == 1
        and tail.startswith("</think>") and "<｜User｜>" not in mine["prompt"]
        and theirs["conversion"]["thinking"] is True
        and theirs["conversion"]["thinking_stage"] in ("reasoning", "reasoning_continuation")
        and mine["conversion"]["thinking_stage"] == "content_continuation"
    )
