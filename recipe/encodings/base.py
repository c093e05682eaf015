"""The record every model family exports: what the pipeline and the output driver need of it.

An :class:`Encoding` is a value, not a hard-wired import: ``prepare`` looks it up by the name the
model table gives (:func:`recipe.encodings.table.get_encoding`) and renders with it; the driver asks
it for an output parser. Families keep heavy modules (parser, reference encoder) behind small
factory functions so that looking up a record stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from recipe.conversation import Conversation, ParsingOptions
    from recipe.output.events import OutputEvent
    from recipe.prompt import Prompt
    from recipe.schema.turn import GrammarBuilder
    from recipe.tokenizer import Tokenizer

__all__ = ["Encoding", "RequestRules", "OutputParser", "ParserFactory", "Checkpoint", "ResumableRender", "lazy", "family_record"]


class OutputParser(Protocol):
    """An incremental completion parser (one per output): token ids or text in, output events out.

    Feed :meth:`push` / :meth:`push_text` in any chunking, then :meth:`finish`; each returns the new
    events, the last one a :class:`~recipe.output.events.Finish` once the output has ended. Never raises
    on model output (degraded output is a note on the ``Finish``).
    """

    @property
    def finished(self) -> bool:
        """True once the output has ended; later pushes return ``[]``."""
        ...

    def push(self, token_ids: Sequence[int]) -> list[OutputEvent]:
        """Feed completion token ids. Raises ``KeyError`` for an id outside the vocabulary."""
        ...

    def push_text(self, text: str, token_count: int = 0) -> list[OutputEvent]:
        """Feed decoded text that accounts for ``token_count`` tokens."""
        ...

    def finish(self, reason: str = "stop") -> list[OutputEvent]:
        """End of output (the backend's finish reason); returns the held text and the Finish."""
        ...


class ParserFactory(Protocol):
    """``factory(options, tokenizer, *, tool_call_id=None, eos_token_ids=(…)) -> OutputParser``."""

    def __call__(
        self,
        options: ParsingOptions,
        tokenizer: Tokenizer,
        *,
        tool_call_id: Callable[[int], str] | int | str | None = None,
        eos_token_ids: Sequence[int] = ...,
    ) -> OutputParser: ...


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A point of a rendered prompt where rendering can resume (see :class:`ResumableRender`).

    Attributes:
        messages: the conversation's ``messages[:messages]`` are rendered completely in
            ``segments[:segments]``, and no message after them can change those segments (in any
            conversation with the same :meth:`ResumableRender.context`).
        segments: segment index; ``segments[segments]`` is a special token (or the end), so the
            token ids of ``segments[:segments]`` are a prefix of the prompt's ids.
        starts: how many ``Prompt.message_starts`` entries precede this point.
        state: what the family needs to render the following messages (immutable; opaque here).
    """

    messages: int
    segments: int
    starts: int
    state: Any = None


@dataclass(frozen=True, slots=True)
class ResumableRender:
    """A family's rendering, resumable at :class:`Checkpoint` s (what the prompt cache needs).

    Contract: let ``a`` and ``b`` be conversations with equal ``context`` (compared as JSON) and
    ``a.messages[:cp.messages] == b.messages[:cp.messages]``, ``cp`` a checkpoint of
    ``render(a, None)`` whose prompt is ``pa``. Then ``render(b, (pa, cp))`` returns the same prompt
    as ``render(b, None)`` (built from ``pa.segments[:cp.segments]`` without looking at
    ``b.messages[:cp.messages]`` again) and the checkpoints of ``render(b, None)`` that lie after ``cp``.
    Every checkpoint's ``messages`` is one of ``boundaries(conversation)``.

    Attributes:
        context: ``conversation -> JSON-serialisable value``: everything besides the message prefix
            that the rendering of a prefix reads (settings, and messages hoisted out of place).
        boundaries: ``conversation -> ascending message counts`` where ``render`` may place a
            checkpoint (cheap: it decides from each message alone, never renders).
        render: ``(conversation, resume) -> (prompt, checkpoints)``; ``resume`` is None or an
            earlier ``(prompt, checkpoint)``.
    """

    context: Callable[[Conversation], Any]
    boundaries: Callable[[Conversation], list[int]]
    render: Callable[[Conversation, tuple[Prompt, Checkpoint] | None], tuple[Prompt, tuple[Checkpoint, ...]]]


@dataclass(frozen=True, slots=True)
class RequestRules:
    """What a family changes in request conversion (deepseek-recipe keys these on the model
    version); the API adapters read them. The defaults are DeepSeek-V4's.

    Attributes:
        system_in_place: Responses ``developer`` items, Chat ``developer`` messages and Messages
            ``role: "system"`` messages become system messages (V4: user messages / a
            ``<system-reminder>`` user text).
        image_token: images become this special-token spelling in the message text plus an
            :class:`~recipe.conversation.ImageSource` (validated); None: the text
            ``[Unsupported Image]``, unvalidated.
        deferred_tools: Messages ``defer_loading`` tools are kept out of the tools block, and
            ``tool_addition`` blocks and tool results' ``tool_reference``s re-list tools (V4: all
            ignored after validation).
        top_p: the sampling rule's name in :data:`recipe.api.common.TOP_P_RULES` (``v4`` | ``v41``).
        apply_patch: the Responses ``apply_patch`` tool description's name in
            :data:`recipe.api.apply_patch.APPLY_PATCH_DESCRIPTIONS` (``v4`` | ``v41``).
        namespaces: how Responses namespace tools are flattened (:func:`recipe.api.responses.flat_name`):
            ``v4`` (``ns__name``) | ``v41`` (``ns::name``, the namespace's description prepended).
        tool_search: Responses ``tool_search_call`` / ``tool_search_output`` items are a call and its
            result, and the tools found join the request's as deferred tools
            (:mod:`recipe.api.tool_search`; V4: the items are ignored).
    """

    system_in_place: bool = False
    image_token: str | None = None
    deferred_tools: bool = False
    top_p: str = "v4"
    apply_patch: str = "v4"
    namespaces: str = "v4"
    tool_search: bool = False


@dataclass(frozen=True, slots=True)
class Encoding:
    """One model family's prompt format and output format.

    Attributes:
        name: the encoding name the model table maps to (``"deepseek_v4"``).
        render: ``Conversation -> Prompt`` (special and text segments), the API path.
        new_parser: builds the incremental output parser for one completion (:class:`ParserFactory`).
        encode_messages: the family's reference encoder (DeepSeek's published message-dict
            semantics), prompt text out; ``None`` when the family has none.
        encode_messages_to_ids: the same, token ids out (template specials only); or ``None``.
        special_tokens: spelling -> id in the family's default vocabulary, for every special token
            the template emits that this vocabulary has.
        stop_tokens: spellings of the tokens that end an output (EOS first).
        models: the API model names mapped to this encoding by default (matched exactly).
        tokenizer: the family's default vocabulary (``() -> Tokenizer``, built once per process).
        grammar: the family's output-grammar builder (``(TurnSpec, Tokenizer) -> GrammarParts``,
            :mod:`recipe.schema.turn`) for constrained decoding; None when the family has none.
        resumable: the family's :class:`ResumableRender`, or None (then ``prepare`` never reuses an
            earlier prompt of this family).
        request: the family's request-conversion rules (:class:`RequestRules`).
        required_specials: special tokens that identify a vocabulary as this family's: with a
            vocabulary that lacks one, ``prepare`` gives the prompt but no token ids (asking for
            them raises :class:`~recipe.tokenizer.MissingSpecialTokenError`). Empty when the default
            vocabulary is the family's own.
        vocabulary_hint: how to supply the family's vocabulary, for that error ("" when the
            default vocabulary is the family's own).
        thinking: ``switch`` (the request turns thinking on or off), ``always`` (the format always
            reasons, e.g. DeepSeek-R1) or ``never`` (no reasoning, e.g. DeepSeek-V3); the API
            adapters resolve a request's thinking with it.
        parsing: ``(conversation, default parsing options) -> parsing options`` when the family's
            prompt decides where the output starts differently from the API default (e.g. V3.1 has
            no thinking after tool results); None keeps the default.
        renders_tools: the prompt shows the model the request's tool definitions; False for a
            template without a tool section (DeepSeek-V3, R1), whose requests with tools get a note
            (or a 400: ``Options.unrendered_input``).
        renders_response_format: the prompt shows the model the request's JSON response format;
            False for the template families (DeepSeek-V3, R1, V3.1), which render none.
    """

    name: str
    render: Callable[[Conversation], Prompt]
    new_parser: ParserFactory
    encode_messages: Callable[..., str] | None
    encode_messages_to_ids: Callable[..., list[int]] | None
    special_tokens: Mapping[str, int]
    stop_tokens: tuple[str, ...]
    models: tuple[str, ...]
    tokenizer: Callable[[], Tokenizer]
    grammar: GrammarBuilder | None = None
    resumable: ResumableRender | None = None
    request: RequestRules = RequestRules()
    required_specials: tuple[str, ...] = ()
    vocabulary_hint: str = ""
    thinking: Literal["switch", "always", "never"] = "switch"
    parsing: Callable[[Conversation, ParsingOptions], ParsingOptions] | None = None
    renders_tools: bool = True
    renders_response_format: bool = True

    def stop_ids(self, tokenizer: Tokenizer | None = None) -> tuple[int, ...]:
        """Ids of :attr:`stop_tokens` in ``tokenizer`` (default: the family's vocabulary); a stop
        token the vocabulary lacks is left out."""
        specials = (tokenizer if tokenizer is not None else self.tokenizer()).special_tokens
        return tuple([specials[s] for s in self.stop_tokens if s in specials])

    def missing_special(self, tokenizer: Tokenizer) -> str | None:
        """The first of :attr:`required_specials` that ``tokenizer`` lacks, or None."""
        specials = tokenizer.special_tokens
        for s in self.required_specials:
            if s not in specials:
                return s
        return None

    def __repr__(self) -> str:
        return f"Encoding({self.name!r})"

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary: name, models, special tokens, stop tokens, thinking."""
        return {"name": self.name, "models": list(self.models), "special_tokens": dict(self.special_tokens),
                "stop_tokens": list(self.stop_tokens), "thinking": self.thinking}


def lazy(module: str, name: str, doc: str = "", **fixed: Any) -> Callable[..., Any]:
    """``module.name(*args, **fixed, **kwargs)``, ``module`` imported on the first call (a family's
    reference encoder, parser and grammar modules load only when used).

    Args:
        module: the module's dotted name.
        name: the callable in it.
        doc: the wrapper's docstring (default: names the target).
        fixed: keyword arguments every call passes (e.g. a parser's call syntax).

    Raises:
        ImportError, AttributeError: on the first call, when the module or the name does not exist.
    """
    target: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not target:
            import importlib

            target.append(getattr(importlib.import_module(module), name))
        return target[0](*args, **fixed, **kwargs) if fixed else target[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc or f"``{module}.{name}``, imported on first use."
    return call


def family_record(
    package: str,
    render: Callable[[Conversation], Prompt],
    new_parser: ParserFactory,
    special_tokens: Mapping[str, int],
    tokenizer: Callable[[], Tokenizer],
    models: tuple[str, ...],
    **fields: Any,
) -> Encoding:
    """The :class:`Encoding` of the family whose package is ``package`` (the package's ``__name__``):
    named after the package, with EOS as its stop token and, unless ``fields`` give both, the
    package's ``reference`` module as its reference encoder (``encode_messages`` /
    ``encode_messages_to_ids``, imported on first use).

    Args:
        render, new_parser, special_tokens, tokenizer, models: the record's attributes of those names.
        fields: any other attribute of the record.
    """
    from recipe.encodings.specials import EOS

    if "encode_messages" not in fields:
        fields["encode_messages"] = lazy(f"{package}.reference", "encode_messages")
        fields["encode_messages_to_ids"] = lazy(f"{package}.reference", "encode_messages_to_ids")
    fields.setdefault("stop_tokens", (EOS,))
    return Encoding(package.rpartition(".")[2], render, new_parser, special_tokens=special_tokens, models=models,
                    tokenizer=tokenizer, **fields)
