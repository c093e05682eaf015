"""Input the model does not see as sent, said in the response instead of dropped without a word.

What a request may carry that the model family's prompt cannot show it:

- tool definitions on a family whose template has no tool section (DeepSeek-V3, R1: the template
  renders only the calls of the history), while the output is still parsed for calls; a JSON
  response format on a family whose template has no place for it (DeepSeek-V3, R1, V3.1), while
  the answer is still checked against it;
- images (and documents) on a family without image input (DeepSeek-V4): each becomes the text
  ``[Unsupported Image]`` (``[Unsupported Document]``, ``[Unsupported document type: …]``), as
  deepseek-recipe renders them;
- Messages ``tool_choice {"type": "any"}``: rendered as ``auto`` (deepseek-recipe's mapping), so the
  prompt does not require a call.

``Options.unrendered_input`` decides: ``note`` (default) renders the request as before and puts one
note per kind in the response's ``recipe.notes`` (:func:`input_notes`); ``reject`` makes it a 400
naming the field; ``ignore`` is deepseek-recipe's silence (the parity options).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from recipe.conversation import Conversation
from recipe.encodings.base import Encoding
from recipe.errors import RequestError
from recipe.options import Options

__all__ = ["input_notes", "NOTE_KINDS"]

#: The request field that holds the conversation, per API (where images and documents are).
_CONVERSATION = {"chat": "messages", "responses": "input", "messages": "messages"}


def _in_every_api(name: str) -> dict[str, str]:
    return {"chat": name, "responses": name, "messages": name}


#: kind -> (the request field a 400 names, per API; the note's text with ``{n}`` the count)
NOTE_KINDS: dict[str, tuple[dict[str, str], str]] = {
    "tools": (_in_every_api("tools"),
              "tools_not_rendered: this model's prompt format has no tool section, so the model was not shown the "
              "{n} tool definition(s); calls it writes are still parsed"),
    "response_format": ({"chat": "response_format", "responses": "text.format", "messages": "output_config.format"},
                        "response_format_not_rendered: this model's prompt format has no place for the response "
                        "format, so the model was not shown it; the answer is still checked against it"),
    "image": (_CONVERSATION,
              "image_not_rendered: this model reads no images: {n} image(s) became the text [Unsupported Image]"),
    "document": (_CONVERSATION,
                 "document_not_rendered: this model reads no documents: {n} document(s) became an [Unsupported …] "
                 "placeholder"),
    "tool_choice_any": (_in_every_api("tool_choice"),
                        "tool_choice_any_as_auto: tool_choice {{\"type\": \"any\"}} was rendered as auto: the prompt "
                        "does not require a tool call"),
}


def input_notes(api: str, dropped: Sequence[str], conversation: Conversation, family: Encoding,
                options: Options) -> tuple[str, ...]:
    """The notes for what the request's conversion rendered without the model seeing it.

    Args:
        api: ``chat`` | ``responses`` | ``messages``.
        dropped: what the conversion recorded (``image``, ``document``, ``tool_choice_any``; one entry
            per occurrence; :func:`recipe.api.common.note_dropped`).
        conversation: the converted request (its tools).
        family: the model family's record (``renders_tools``).
        options: ``unrendered_input`` decides (see the module docstring).

    Returns:
        One note per kind, in :data:`NOTE_KINDS` order; ``()`` with ``ignore``.

    Raises:
        RequestError: with ``reject``, a 400 on the first kind's field.
    """
    mode = options.unrendered_input
    if mode == "ignore":
        return ()
    counts: Counter[str] = Counter()
    for kind in dropped:  # (Counter(list) asks the Mapping ABC first: ~20x a dict update)
        counts[kind] += 1
    if conversation.tools and not family.renders_tools:
        counts["tools"] = len(conversation.tools)
    if conversation.response_format.type not in ("text", None) and not family.renders_response_format:
        counts["response_format"] = 1
    if not counts:
        return ()
    notes = []
    for kind, (fields, text) in NOTE_KINDS.items():
        n = counts.get(kind)
        if not n:
            continue
        note = text.format(n=n)
        if mode == "reject":
            raise RequestError(f"This model cannot take the request as sent: {note.split(': ', 1)[1]}.",
                               param=fields.get(api))
        notes.append(note)
    return tuple(notes)
