"""DeepSeek-V3.2 prompts from the reference encoder's message dicts, as text or as safe token ids.

The semantics of DeepSeek's ``encoding/encoding_dsv32.py`` (``encode_messages``; read, not
copied), reproduced byte for byte — DeepSeek's own fixtures are tests
(``tests/test_v3x_templates.py``). Messages are OpenAI-shaped dicts; ``tools`` and
``response_format`` ride on a ``system`` or ``developer`` message:

* ``system``: its content, then ``\\n\\n`` + the tools block, then ``\\n\\n## Response Format:…``;
  each system message renders in place (two in a row are simply concatenated);
* ``developer``: ``<｜User｜>`` + tools/format sections + ``\\n\\n# The user's message is: `` + content;
* ``user`` / ``developer`` end with ``<｜Assistant｜>`` + ``<think>`` (the last one, thinking mode) or
  ``</think>``;
* ``assistant``: in thinking mode and after the last user message, ``reasoning_content</think>``;
  then the content (never think-stripped) and the DSML ``function_calls`` block, then EOS;
* ``tool``: results matched to the preceding assistant's calls **by position** (``tool_call_id`` is
  ignored), ``\\n\\n<function_results>`` … ``\\n</function_results>\\n\\n`` + ``<think>`` / ``</think>``.

Only BOS, EOS, ``<｜User｜>``, ``<｜Assistant｜>``, ``<think>`` and ``</think>`` are special; the DSML
markup (``｜DSML｜`` is not a token of the V3 vocabulary) and all message text are ordinary text.

Reproduced quirks (each as the reference behaves): ``drop_thinking`` changes no prompt the
reference renders (reasoning before the last user message is never rendered), except that in
thinking mode it removes ``developer`` (and unknown-role) messages before the last user message,
which shifts the reference's indices and makes it fail — raised here as :class:`ChatTemplateError`;
a ``None`` user content prints ``None``; a tool message with no preceding assistant reads the
*last* message's calls (Python's ``messages[-1]``).

Deliberate differences: every failure of the reference (``DS32EncodingError``, ``AssertionError``,
``KeyError``, ``json`` errors) is a :class:`ChatTemplateError` (a ``ValueError``); arguments given
as a dict (not JSON text) are accepted as SGLang's and lmdeploy's copies accept them; the
caller's dicts are never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from recipe.encodings.dsml_reference import (
    CallSyntax,
    Param,
    drop_thinking_messages,
    fmt,
    ids_of,
    last_user_index,
    params,
    render_tool_calls,
    text_of,
)
from recipe.encodings.dsml_reference import to_json as _to_json
from recipe.encodings.v3_shared.constants import ASSISTANT, BOS, EOS, THINK_END, THINK_START, USER
from recipe.encodings.v3_shared.segments import ChatTemplateError, Out
from recipe.prompt import Prompt
from recipe.tokenizer import load_v3_tokenizer

__all__ = ["render_messages", "encode_messages", "encode_messages_to_ids", "tools_block", "RESPONSE_FORMAT_HEAD"]

Message = Mapping[str, Any]
_DSML = "｜DSML｜"

#: The tools block (DeepSeek's ``TOOLS_SYSTEM_TEMPLATE`` text, with its blank lines), split around
#: the ``<think>`` / ``</think>`` of its example (special tokens) and the schema lines.
_TOOLS_HEAD = (
    "## Tools\n\nYou have access to a set of tools you can use to answer the user's question.\n"
    f'You can invoke functions by writing a "<{_DSML}function_calls>" block like the following as part of '
    "your reply to the user:\n"
    f"<{_DSML}function_calls>\n"
    f'<{_DSML}invoke name="$FUNCTION_NAME">\n'
    f'<{_DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{_DSML}parameter>\n'
    "...\n"
    f"</{_DSML}invoke>\n"
    f'<{_DSML}invoke name="$FUNCTION_NAME2">\n'
    "...\n"
    f"</{_DSML}invoke>\n"
    f"</{_DSML}function_calls>\n\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, while lists and "
    'objects should use JSON format. The "string" attribute should be set to "true" for string type parameters '
    'and "false" for other types (numbers, booleans, arrays, objects).\n\n'
    "If the thinking_mode is enabled, then after function results you should strongly consider outputting a "
    "thinking block. Here is an example:\n\n"
    f"<{_DSML}function_calls>\n...\n</{_DSML}function_calls>\n\n"
    "<function_results>\n...\n</function_results>\n\n"
)
_TOOLS_EXAMPLE = "...thinking about results"
_TOOLS_MID = "\n\nHere are the functions available in JSONSchema format:\n<functions>\n"
_TOOLS_TAIL = "\n</functions>\n"
#: ``\n\n`` + this + the JSON of the message's ``response_format``.
RESPONSE_FORMAT_HEAD = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
_DEVELOPER_HEAD = "\n\n# The user's message is: "
_MODES = ("chat", "thinking")


def to_json(value: Any) -> str:
    """Python ``json.dumps`` with non-ASCII kept (``", "`` / ``": "``), as the reference's ``to_json``.
    Raises :class:`ChatTemplateError` for a value it cannot print."""
    return _to_json(value, ChatTemplateError)


def tools_block(out: Out, functions: Sequence[str]) -> None:
    """The ``## Tools`` block with one JSON line per function (already dumped)."""
    out.lit(_TOOLS_HEAD)
    out.special(THINK_START)
    out.lit(_TOOLS_EXAMPLE)
    out.special(THINK_END)
    out.lit(_TOOLS_MID)
    out.text("\n".join(functions))
    out.lit(_TOOLS_TAIL)


def _sections(out: Out, msg: Message) -> None:
    """``\\n\\n`` + tools block and ``\\n\\n`` + response format of a system/developer message."""
    tools = msg.get("tools")
    if tools:
        try:
            functions = [to_json(t["function"]) for t in tools]
        except (KeyError, TypeError) as exc:
            raise ChatTemplateError(f"a tool has no 'function': {exc}") from exc
        out.lit("\n\n")
        tools_block(out, functions)
    response_format = msg.get("response_format")
    if response_format:
        out.lit("\n\n" + RESPONSE_FORMAT_HEAD)
        out.text(to_json(response_format))


def _arguments(raw: Any) -> list[Param]:
    """The parameters of a call (``json.loads`` of the text; a dict as it is)."""
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ChatTemplateError(f"tool call arguments are not JSON: {exc}") from exc
    if not isinstance(args, dict):
        raise ChatTemplateError("tool call arguments must be a JSON object")
    return params(args, ChatTemplateError)


#: V3.2's tool calls: ``function_calls`` blocks, arguments read as above.
_CALLS = CallSyntax("function_calls", "invoke", "parameter", _arguments)
#: Roles kept before the last user message when reasoning is dropped.
_KEEP_ROLES = ("user", "system", "tool")


def _message(out: Out, index: int, messages: Sequence[Message], thinking: bool, last_user: int,
             require_reasoning: bool = True) -> None:
    if not 0 <= index < len(messages):
        raise ChatTemplateError(
            f"message index {index} out of range for {len(messages)} messages (the reference fails here: in thinking "
            "mode with drop_thinking it removes developer messages before the last user message)")
    msg = messages[index]
    role = msg.get("role")
    content = msg.get("content")
    if role == "system":
        out.content(index, fmt(content or ""))
        _sections(out, msg)
    elif role == "developer":
        if not content:
            raise ChatTemplateError("a developer message needs non-empty content")
        out.special(USER)
        _sections(out, msg)
        out.lit(_DEVELOPER_HEAD)
        out.content(index, fmt(content))
        out.special(ASSISTANT)
        out.special(THINK_START if index == last_user and thinking else THINK_END)
    elif role == "user":
        out.special(USER)
        out.content(index, fmt(content))
        out.special(ASSISTANT)
        out.special(THINK_START if index == last_user and thinking else THINK_END)
    elif role == "tool":
        prev = index - 1
        owner = messages[prev]
        while prev >= 0 and owner.get("role") == "tool":
            prev -= 1
            owner = messages[prev]
        if not (index == 0 or (prev >= 0 and owner.get("role") == "assistant")):
            raise ChatTemplateError(f"tool message {index} does not follow an assistant message")
        order = index - prev
        calls = owner.get("tool_calls")
        if not (calls and len(calls) >= order):
            raise ChatTemplateError(f"tool message {index} has no matching tool call (results are matched by position)")
        if order == 1:
            out.lit("\n\n<function_results>")
        out.lit("\n<result>")
        out.content(index, fmt(content))
        out.lit("</result>")
        if order == len(calls):
            out.lit("\n</function_results>\n\n")
            out.special(THINK_START if index >= last_user and thinking else THINK_END)
    elif role == "assistant":
        calls = msg.get("tool_calls")
        reasoning = msg.get("reasoning_content")
        if thinking and index > last_user:
            if require_reasoning and not (reasoning or calls):
                raise ChatTemplateError(
                    f"thinking mode: assistant message {index} after the last user message has neither "
                    "reasoning_content nor tool_calls")
            out.text(fmt(reasoning or ""))
            out.special(THINK_END)
        out.content(index, fmt(content or ""))
        if calls:
            render_tool_calls(out, calls, _CALLS, ChatTemplateError)
        out.special(EOS)
    else:
        raise ChatTemplateError(f"unknown role: {role!r}")


def render_messages(
    messages: Sequence[Message],
    thinking_mode: str,
    context: Sequence[Message] | None = None,
    drop_thinking: bool = True,
    add_default_bos_token: bool = True,
    *,
    continue_final_message: bool = False,
    require_reasoning: bool = True,
) -> Prompt:
    """The V3.2 reference prompt as segments (template specials vs. plain text).

    Args:
        messages: message dicts to render (see the module docstring).
        thinking_mode: ``"thinking"`` or ``"chat"``.
        context: earlier messages (already in the model's cache): they shape the rendering (which is
            the last user message, which call a result answers) but are not emitted, and no BOS is added.
        drop_thinking: as the reference (see the module docstring: it only removes developer messages
            before the last user message in thinking mode).
        add_default_bos_token: start with BOS (only without ``context``).
        continue_final_message: beyond the reference: cut the prompt right after the last message's
            content (transformers' ``continue_final_message``), e.g. to continue an assistant turn.
        require_reasoning: beyond the reference: ``False`` renders empty reasoning for an assistant
            turn after the last user message without reasoning or calls (thinking mode) instead of
            raising.

    Returns:
        A :class:`~recipe.prompt.Prompt` whose ``text`` equals the reference ``encode_messages``;
        ``message_starts`` index ``context + messages``.

    Raises:
        ChatTemplateError: whatever the reference rejects (invalid mode, unknown role, an assistant
            without reasoning after the last user message in thinking mode, tool results without a
            matching call, arguments that are not a JSON object, …), or (``continue_final_message``)
            a last message whose content the encoder does not write.
    """
    context = list(context or ())
    full: list[Message] = [*context, *messages]
    for i, m in enumerate(full):
        if not isinstance(m, Mapping):
            raise ChatTemplateError(f"message {i} is not a dict")
    out = Out()
    if add_default_bos_token and not context:
        out.special(BOS)
    if thinking_mode == "thinking" and drop_thinking:
        # before the last user message: no reasoning, no developer (or unknown-role) messages
        full = drop_thinking_messages(full, last_user_index(full), _KEEP_ROLES)
    if messages and thinking_mode not in _MODES:
        raise ChatTemplateError(f"invalid thinking_mode {thinking_mode!r}; expected 'chat' or 'thinking'")
    thinking = thinking_mode == "thinking"
    last_user = last_user_index(full)
    for idx in range(len(context), len(context) + len(messages)):
        out.mark(idx)
        _message(out, idx, full, thinking, last_user, require_reasoning)
    return out.finish(messages, continue_final_message, len(context))


encode_messages = text_of(render_messages, """The prompt text of DeepSeek's V3.2 ``encode_messages``,
byte for byte (arguments and errors as :func:`render_messages`). For token ids use
:func:`encode_messages_to_ids`, never a special-token-aware encode of this text (message text may
contain special-token spellings).""")

encode_messages_to_ids = ids_of(render_messages, load_v3_tokenizer, """Token ids of :func:`encode_messages`'s
prompt under the V3 vocabulary (default; ``tokenizer=`` another): special ids only where the encoder
writes its special tokens, message text always ordinary text.

Raises:
    ChatTemplateError: as :func:`render_messages`.
""")
