"""Oracles and data for the DeepSeek V3 / R1 / V3.1 / V3.2 tests (V3 vocabulary).

* :func:`jinja_render`: the published chat-template strings (``fixtures/deepseek_v3x/templates.json``)
  rendered by transformers' own jinja renderer (``render_jinja_template``: its sandbox, its
  ``continue_final_message`` rule), ``None`` values kept as transformers < 5 passed them;
* :func:`card_tools_block`: the V3.1 model card's ``## Tools`` text, written here from the card's
  description (reference/deepseek-v3x-formats.md §4), independently of recipe's;
* :func:`hf_v3`: HF ``tokenizers`` on the same V3 ``tokenizer.json`` (added tokens matched in text).
"""

from __future__ import annotations

import functools
import json
import lzma
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
V3X = FIXTURES / "deepseek_v3x"
BOS = "<｜begin▁of▁sentence｜>"
JINJA_REVISIONS = ("V3-2412", "V3-0324", "R1-2501", "R1-2502", "R1-0528", "V3.1", "V3.2-Exp")


def rows(generation: str) -> list[dict[str, Any]]:
    """The conformance rows of one generation file (``v3``, ``r1``, ``v3.1``, ``v3.2``)."""
    return [json.loads(line) for line in (V3X / f"{generation}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


@functools.cache
def templates() -> dict[str, str]:
    data = json.loads((V3X / "templates.json").read_text(encoding="utf-8"))
    return {k: v["chat_template"] for k, v in data["templates"].items()}


def card_tools_block(tools: list[dict[str, Any]]) -> str:
    """The V3.1 model card's tools block (the conformance vectors' layout choice)."""
    sections = []
    for t in tools:
        f = t["function"]
        desc = f.get("description")
        sections.append(f"### {f['name']}\nDescription: {'' if desc is None else desc}\n\nParameters: {json.dumps(f.get('parameters', {}))}")
    return (
        "## Tools\nYou have access to the following tools:\n\n" + "\n\n".join(sections) + "\n\n"
        "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>"
        "{{additional_tool_calls}}<｜tool▁calls▁end｜>\n\nWhere:\n"
        "- `tool_call_name` must be an exact match to one of the available tools\n"
        "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
        "- For multiple tool calls, chain them directly without separators or spaces"
    )


def jinja_render(
    revision: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    thinking: bool | None = None,
) -> str:
    """The template string of ``revision`` rendered by transformers (raises what it raises)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    msgs = [dict(m) for m in messages]
    if tools and revision in ("V3.1", "V3.2-Exp"):
        msgs.append({"role": "system", "content": card_tools_block(tools)})
    kwargs: dict[str, Any] = {"bos_token": BOS}
    if thinking is not None:
        kwargs["thinking"] = thinking
    rendered, _ = render_jinja_template(
        conversations=[msgs], chat_template=templates()[revision], add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message, **kwargs,
    )
    return rendered[0]


@functools.cache
def hf_v3():
    """HF ``tokenizers`` with the V3 vocabulary (added tokens recognised in text, as ``encode`` does)."""
    import tokenizers

    from recipe.tokenizer import V3_TOKENIZER_FILE

    return tokenizers.Tokenizer.from_str(lzma.decompress(V3_TOKENIZER_FILE.read_bytes()).decode("utf-8"))
