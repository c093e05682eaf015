"""Message token spans of a rendered prompt, and `recipe cache diff` naming the message that breaks a prefix."""

from __future__ import annotations

import copy
import json

from recipe.cli.main import main
from recipe.pipeline import prepare
from recipe.prompt import message_token_spans
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
BODY = {
    "model": "deepseek-v4-pro",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "user", "content": "And tomorrow?"},
    ],
    "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
}


def test_spans_tile_the_prompt_and_start_at_each_group():
    prep = prepare(BODY, "chat")
    spans = message_token_spans(TOK, prep.prompt)
    assert [m for m, _, _ in spans] == [0, 1, 2, 3]  # system section, user, assistant, tool+user run
    assert spans[0][1] == 1 and spans[-1][2] == len(prep.token_ids)
    assert all(a[2] == b[1] for a, b in zip(spans, spans[1:]))
    starts = [prep.token_ids[s] for _, s, _ in spans[1:]]
    assert starts == [128803, 128804, 128803]  # <｜User｜>, <｜Assistant｜>, <｜User｜>


def test_cache_diff_names_the_message_whose_rendering_changed(tmp_path, capsys):
    later = copy.deepcopy(BODY)
    later["messages"][2]["reasoning_content"] = "Look it up again."  # history rewritten: a cache miss from here
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(BODY))
    b.write_text(json.dumps(later))
    code = main(["cache", "diff", str(a), str(b), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["message_index"] == 2
