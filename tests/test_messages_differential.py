"""Hypothesis differential test: generated Messages requests through recipe and through deepseek-recipe 0.2.0.

Compared: accept/reject, the stage of a rejection (and the exact message of a conversion error),
the prompt, its special ranges, the token ids and the conversion values; on top, every tool_use id
and tool_result id must survive into the Conversation.
"""

from __future__ import annotations

from hypothesis import event, given, settings

import oracle
from messages_strategies import messages_requests, wire
from messages_support import normalise_oracle, run_messages
from recipe.conversation import AssistantMessage, ToolMessage


def _ids(body) -> tuple[list[str], list[str]]:
    uses, results = [], []
    for m in body["messages"]:
        for b in m["content"] if isinstance(m["content"], list) else ():
            if b.get("type") == "tool_use":
                uses.append(b["id"])
            elif b.get("type") == "tool_result":
                results.append(b["tool_use_id"])
    return uses, results


@settings(max_examples=250, deadline=None)
@given(messages_requests())
def test_messages_match_deepseek_recipe(body):
    text = wire(body)
    theirs = normalise_oracle(oracle.convert("messages", text))
    ours = run_messages(text)
    event("accepted" if theirs["ok"] else f"rejected at {theirs['stage']}")
    assert ours["ok"] == theirs["ok"], (ours.get("message"), theirs.get("message"))
    if not ours["ok"]:
        assert ours["stage"] == theirs["stage"], (ours["message"], theirs["message"])
        if ours["stage"] == "convert":
            assert ours["message"] == theirs["message"]
        return
    assert ours["prompt"] == theirs["prompt"]
    assert ours["special_ranges"] == theirs["special_ranges"]
    assert ours["token_ids"] == theirs["token_ids"]
    assert ours["conversion"] == theirs["conversion"]
    conv = ours["conv"]
    uses, results = _ids(body)
    assert [c.id for m in conv.messages if isinstance(m, AssistantMessage) for c in m.tool_calls] == uses
    assert [m.tool_call_id for m in conv.messages if isinstance(m, ToolMessage)] == results
