"""``apply_chat_template``: every DeepSeek prompt format by template revision, shaped like transformers'.

Training and evaluation pipelines render message dicts with ``tokenizer.apply_chat_template``;
:func:`apply_chat_template` takes the same arguments and names the revision instead of loading a
tokenizer, so they can switch. It returns exactly what the published template or reference encoder
renders — its quirks included (``docs/earlier-generations.md`` lists them) — and, with
``tokenize=True``, the ids under that generation's vocabulary with special ids only where the
template writes its special tokens: text from the messages is always ordinary text, so a message
containing ``<｜User｜>`` or ``<think>`` cannot forge a turn (an HF tokenizer's ``encode`` of the
rendered text would turn those spellings into control tokens).

Revisions (:data:`REVISIONS`): ``V3-2412``, ``V3-0324`` (DeepSeek-V3), ``R1-2501``, ``R1-2502``,
``R1-0528`` (DeepSeek-R1), ``V3.1``, ``V3.2-Exp`` (DeepSeek-V3.1, V3.1-Terminus, V3.2-Exp),
``V3.2`` (DeepSeek's ``encoding_dsv32.py``), ``V4`` (``encoding_dsv4.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recipe.encodings.v3_shared.segments import ChatTemplateError
from recipe.prompt import Prompt, encode_prompt
from recipe.tokenizer import Tokenizer, load_tokenizer, load_v3_tokenizer

__all__ = ["apply_chat_template", "render_chat_template", "ChatTemplateError", "REVISIONS", "Revision"]

Message = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Revision:
    """One template revision: how to render it and which vocabulary encodes it.

    Attributes:
        name: the revision name (``"R1-0528"``).
        encoding: the model family it belongs to (an encoding name of the table).
        render: ``(messages, tools, add_generation_prompt, continue_final_message, thinking, kwargs) -> Prompt``.
        tokenizer: the generation's default vocabulary.
    """

    name: str
    encoding: str
    render: Callable[[Sequence[Message], Sequence[Any] | None, bool, bool, bool | None, dict[str, Any]], Prompt]
    tokenizer: Callable[[], Tokenizer]


def _no_kwargs(name: str, kwargs: Mapping[str, Any]) -> None:
    if kwargs:
        raise TypeError(f"the {name} template takes no keyword argument {sorted(kwargs)[0]!r}")


def _v3(name: str) -> Callable[..., Prompt]:
    def render(messages, tools, gen, cont, thinking, kwargs):  # type: ignore[no-untyped-def]
        from recipe.encodings.deepseek_v3.template import render_messages

        _no_kwargs(name, kwargs)  # the V3 templates ignore ``tools`` and ``thinking``
        return render_messages(messages, name, add_generation_prompt=gen, continue_final_message=cont)

    return render


def _r1(name: str) -> Callable[..., Prompt]:
    def render(messages, tools, gen, cont, thinking, kwargs):  # type: ignore[no-untyped-def]
        from recipe.encodings.deepseek_r1.template import render_messages

        _no_kwargs(name, kwargs)  # the R1 templates ignore ``tools`` and ``thinking``
        return render_messages(messages, name, add_generation_prompt=gen, continue_final_message=cont)

    return render


def _v31(name: str) -> Callable[..., Prompt]:
    def render(messages, tools, gen, cont, thinking, kwargs):  # type: ignore[no-untyped-def]
        from recipe.encodings.deepseek_v3_1.template import render_messages

        _no_kwargs(name, kwargs)
        return render_messages(messages, name, tools=tools, add_generation_prompt=gen, continue_final_message=cont,
                               thinking=bool(thinking))

    return render


def _mode(thinking: bool | None, kwargs: dict[str, Any]) -> str:
    """The reference encoders' ``thinking_mode`` from ``thinking`` and/or the keyword itself."""
    mode = kwargs.pop("thinking_mode", None)
    if thinking is not None:
        wanted = "thinking" if thinking else "chat"
        if mode is not None and mode != wanted:
            raise ValueError(f"thinking={thinking} contradicts thinking_mode={mode!r}")
        return wanted
    return "chat" if mode is None else mode


def _with_tools(messages: Sequence[Message], tools: Sequence[Any] | None) -> list[Message]:
    """Tools ride on a message for the reference encoders: on the first message when it is a system
    or developer message (as DeepSeek's tests attach them), else on a new empty system message."""
    out = list(messages)
    if not tools:
        return out
    first = out[0] if out else None
    if isinstance(first, Mapping) and first.get("role") in ("system", "developer"):
        if first.get("tools"):
            raise ValueError("tools= given, but the first message already carries tools")
        out[0] = {**first, "tools": list(tools)}
    else:
        out.insert(0, {"role": "system", "content": "", "tools": list(tools)})
    return out


def _check_generation_prompt(name: str, messages: Sequence[Message], gen: bool, cont: bool) -> None:
    """The reference encoders have no generation-prompt switch: ``False`` is accepted where it
    changes nothing (the conversation ends with an assistant turn)."""
    if gen and cont:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    last = messages[-1] if messages else None
    if not gen and not cont and not (isinstance(last, Mapping) and last.get("role") == "assistant"):
        raise ValueError(
            f"the {name} encoder has no generation-prompt switch: after a user or tool turn its prompt always opens "
            "the assistant turn; add_generation_prompt=False is accepted only for a conversation ending with an assistant")


def _v32(messages, tools, gen, cont, thinking, kwargs):  # type: ignore[no-untyped-def]
    from recipe.encodings.deepseek_v3_2.reference import render_messages

    _check_generation_prompt("V3.2", messages, gen, cont)
    mode = _mode(thinking, kwargs)
    return render_messages(_with_tools(messages, tools), mode, continue_final_message=cont, **kwargs)


def _v4(messages, tools, gen, cont, thinking, kwargs):  # type: ignore[no-untyped-def]
    from recipe.encodings.deepseek_v4.reference import ReferenceEncodingError, render_messages

    _check_generation_prompt("V4", messages, gen, cont)
    mode = _mode(thinking, kwargs)
    msgs = _with_tools(messages, tools)
    if cont:
        last = msgs[-1] if msgs else None
        if not (isinstance(last, Mapping) and last.get("role") == "assistant"):
            raise ChatTemplateError("V4: continue_final_message needs a final assistant message")
        msgs[-1] = {**last, "wo_eos": True}
    try:
        return render_messages(msgs, mode, **kwargs)
    except ReferenceEncodingError as exc:
        raise ChatTemplateError(str(exc)) from exc


#: Revision name -> :class:`Revision`. (DeepSeek-V4.1's reference encoder would be one more row; not yet.)
REVISIONS: Mapping[str, Revision] = {
    r.name: r
    for r in (
        Revision("V3-2412", "deepseek_v3", _v3("V3-2412"), load_v3_tokenizer),
        Revision("V3-0324", "deepseek_v3", _v3("V3-0324"), load_v3_tokenizer),
        Revision("R1-2501", "deepseek_r1", _r1("R1-2501"), load_v3_tokenizer),
        Revision("R1-2502", "deepseek_r1", _r1("R1-2502"), load_v3_tokenizer),
        Revision("R1-0528", "deepseek_r1", _r1("R1-0528"), load_v3_tokenizer),
        Revision("V3.1", "deepseek_v3_1", _v31("V3.1"), load_v3_tokenizer),
        Revision("V3.2-Exp", "deepseek_v3_1", _v31("V3.2-Exp"), load_v3_tokenizer),
        Revision("V3.2", "deepseek_v3_2", _v32, load_v3_tokenizer),
        Revision("V4", "deepseek_v4", _v4, load_tokenizer),
    )
}


def render_chat_template(
    messages: Sequence[Message],
    *,
    template: str,
    tools: Sequence[Any] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    thinking: bool | None = None,
    **encoder_kwargs: Any,
) -> Prompt:
    """The prompt a DeepSeek template revision renders for ``messages``, as segments
    (:class:`~recipe.prompt.Prompt`): which parts are the template's special tokens, where each
    message starts.

    Args:
        messages: OpenAI-shaped message dicts (``role``, ``content``, ``reasoning_content``,
            ``tool_calls`` with ``function.arguments`` as JSON text, ``tool_call_id``; V3.2 / V4 also
            ``tools`` / ``response_format`` on a system or developer message). Never mutated.
        template: a revision of :data:`REVISIONS`.
        tools: OpenAI-shaped tools. V3 / R1: ignored (their templates do not render tools); V3.1 /
            V3.2-Exp: the model card's ``## Tools`` block, as one more system message; V3.2 / V4:
            attached to the first message if it is a system or developer message, else to a new
            empty system message in front.
        add_generation_prompt: open the assistant turn where the template does. The reference
            encoders (V3.2, V4) always do; ``False`` is accepted there only for a conversation that
            ends with an assistant turn.
        continue_final_message: cut the prompt right after the last message's content (transformers'
            rule; trailing whitespace of the content kept), e.g. to continue a partial answer.
        thinking: the thinking switch. V3.1 / V3.2-Exp: the template's ``thinking`` variable; V3.2 /
            V4: ``thinking_mode`` ``"thinking"`` / ``"chat"``; V3 / R1: ignored. ``None``: the
            template's default (off; V3.2 / V4: ``"chat"`` unless ``thinking_mode`` is given).
        encoder_kwargs: V3.2: ``thinking_mode``, ``context``, ``drop_thinking``,
            ``add_default_bos_token``; V4: those and ``reasoning_effort``. The jinja revisions take none.

    Raises:
        ChatTemplateError: the template or encoder refuses the messages (where the published one
            raises: e.g. R1-0528 with ``content: None``, a dict ``arguments`` in a jinja template,
            V3.2 thinking mode without reasoning after the last user message).
        ValueError: an unknown revision, or contradictory arguments.
        TypeError: a keyword argument the revision does not take.
    """
    rev = REVISIONS.get(template)
    if rev is None:
        raise ValueError(f"unknown template revision {template!r}; known: {', '.join(REVISIONS)}")
    if add_generation_prompt and continue_final_message:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ChatTemplateError("messages must be a list of message dicts")
    return rev.render(messages, tools, add_generation_prompt, continue_final_message, thinking, dict(encoder_kwargs))


def apply_chat_template(messages: Sequence[Message], *, template: str, tokenize: bool = False, **kwargs: Any) -> str | list[int]:
    """The prompt a DeepSeek template revision renders for ``messages``: text, or token ids.

    Args:
        messages, template: as :func:`render_chat_template`.
        tokenize: return token ids (under the revision's vocabulary) instead of text.
        kwargs: ``tools``, ``add_generation_prompt`` (default true), ``continue_final_message``,
            ``thinking`` and the encoders' keyword arguments, as :func:`render_chat_template`
            describes them (transformers' ``apply_chat_template`` names).

    Returns:
        The prompt text, or with ``tokenize=True`` its ids: special ids only where the template
        writes special tokens, every message-derived text encoded as ordinary text.

    Raises:
        ChatTemplateError, ValueError, TypeError: as :func:`render_chat_template`.
    """
    prompt = render_chat_template(messages, template=template, **kwargs)
    return encode_prompt(REVISIONS[template].tokenizer(), prompt) if tokenize else prompt.text
