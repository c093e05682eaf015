"""Shared pieces of the output-grammar tests: golden turns, requests in three APIs, soundness checks.

A *golden turn* is what a well-behaved model writes after the prompt: rendered by DeepSeek's
reference encoder semantics (``recipe.encode_messages``: an assistant message after the user turn),
cut where the prompt ends, tokenised as the template would (special spellings → their ids, text
runs → ``encode_ordinary``).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import jsonschema
from hypothesis import assume
from hypothesis import strategies as st

import recipe
from recipe.encodings.deepseek_v4.constants import DSML, EOS, THINK_END
from recipe.encodings.deepseek_v4.grammar import text_excludes
from recipe.encodings.table import get_encoding
from recipe.output.events import Finish, ToolCallEnd, ToolCallStart, TextDelta
from recipe.schema.turn import turn_spec
from recipe.schema.validation import validate_instance
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()
EOS_ID, DSML_ID, THINK_END_ID = (TOK.special_tokens[s] for s in (EOS, DSML, THINK_END))
_OUT_SPECIALS = re.compile("(" + "|".join(map(re.escape, (DSML, THINK_END, EOS))) + ")")
#: words no generated text may hold (the grammar excludes them from free text)
EXCLUDED = text_excludes(get_encoding("deepseek_v4").special_tokens) + ("DSML",)


def out_ids(text: str) -> list[int]:
    """Completion text -> ids as the template would tokenise it (``｜DSML｜``, ``</think>``, EOS special)."""
    ids: list[int] = []
    for i, part in enumerate(_OUT_SPECIALS.split(text)):
        if i % 2:
            ids.append(TOK.special_tokens[part])
        elif part:
            ids += TOK.encode_ordinary(part)
    return ids


def clean(text: str) -> bool:
    """No excluded word in ``text`` (generated free text must be writable under the grammar)."""
    return not any(w in text for w in EXCLUDED)


# ---------------------------------------------------------------------------------------------
# random tools, arguments and answers
# ---------------------------------------------------------------------------------------------

free_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(clean)
word = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_"), min_size=1, max_size=8)

_LEAVES = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "string", "enum": ["low", "mid", "high"]},
    {"type": ["string", "null"]},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "array", "items": {"type": "string"}},
]


@st.composite
def prop_schema(draw: Any, depth: int = 0) -> dict[str, Any]:
    if depth < 1 and draw(st.integers(0, 5)) == 0:
        props = draw(st.dictionaries(word, prop_schema(depth + 1), min_size=1, max_size=2))
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    return dict(draw(st.sampled_from(_LEAVES)))


@st.composite
def object_schema(draw: Any, strict: bool) -> dict[str, Any]:
    props = draw(st.dictionaries(word, prop_schema(), max_size=4))
    required = list(props) if strict else [k for k in props if draw(st.booleans())]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


@st.composite
def value_for(draw: Any, schema: dict[str, Any]) -> Any:
    t = schema.get("type")
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    if isinstance(t, list):
        t = draw(st.sampled_from(t))
    if t == "string":
        return draw(free_text)
    if t == "integer":
        return draw(st.integers(-(10**15), 10**15))
    if t == "number":
        return draw(st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: round(f, 4))))
    if t == "boolean":
        return draw(st.booleans())
    if t == "null":
        return None
    if t == "array":
        return draw(st.lists(value_for(schema["items"]), max_size=3))
    props = schema.get("properties", {})
    req = set(schema.get("required", []))
    return {k: draw(value_for(s)) for k, s in props.items() if k in req or draw(st.booleans())}


@st.composite
def tools(draw: Any) -> list[dict[str, Any]]:
    names = draw(st.lists(st.text(st.sampled_from("abcxyz_-0189"), min_size=1, max_size=10), min_size=1, max_size=3, unique=True))
    out = []
    for n in names:
        strict = draw(st.booleans())
        out.append({"name": n, "strict": strict, "parameters": draw(object_schema(strict))})
    return out


# ---------------------------------------------------------------------------------------------
# requests in three APIs
# ---------------------------------------------------------------------------------------------


def request(api: str, tools: list[dict[str, Any]], choice: str, thinking: bool, parallel: bool,
            answer_schema: dict[str, Any] | None) -> dict[str, Any]:
    """A request body in ``api`` declaring ``tools`` (``choice``: auto | none | required | the name)."""
    msgs = [{"role": "user", "content": "Go."}]
    named = choice not in ("auto", "none", "required")
    if api == "chat":
        body: dict[str, Any] = {"model": "deepseek-v4-pro", "messages": msgs,
                                "thinking": {"type": "enabled" if thinking else "disabled"}}
        if tools:
            body["tools"] = [{"type": "function", "function": {"name": t["name"], "parameters": t["parameters"],
                                                               "strict": t["strict"]}} for t in tools]
            body["tool_choice"] = {"type": "function", "function": {"name": choice}} if named else choice
            if not parallel:
                body["parallel_tool_calls"] = False
        if answer_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "A", "schema": answer_schema, "strict": True}}
        return body
    if api == "responses":
        body = {"model": "deepseek-v4-pro", "input": "Go.", "reasoning": {"effort": "high" if thinking else "none"}}
        if tools:
            body["tools"] = [{"type": "function", "name": t["name"], "parameters": t["parameters"], "strict": t["strict"]}
                             for t in tools]
            body["tool_choice"] = {"type": "function", "name": choice} if named else choice
            if not parallel:
                body["parallel_tool_calls"] = False
        if answer_schema is not None:
            body["text"] = {"format": {"type": "json_schema", "name": "A", "schema": answer_schema, "strict": True}}
        return body
    body = {"model": "deepseek-v4-pro", "max_tokens": 1024, "messages": msgs,
            "thinking": {"type": "enabled", "budget_tokens": 1024} if thinking else {"type": "disabled"}}
    if tools:
        body["tools"] = [{"name": t["name"], "input_schema": t["parameters"]} for t in tools]
        tc: dict[str, Any] = {"type": "tool", "name": choice} if named else {"type": {"required": "any"}.get(choice, choice)}
        if not parallel and choice != "none":
            tc["disable_parallel_tool_use"] = True
        body["tool_choice"] = tc
    return body


# ---------------------------------------------------------------------------------------------
# golden turns
# ---------------------------------------------------------------------------------------------


@st.composite
def golden_turn(draw: Any, prep: Any) -> list[int]:
    """A well-formed turn for ``prep`` (per its spec), rendered with the reference encoder semantics."""
    spec = turn_spec(prep.conversation, prep.parsing)
    calls: list[dict[str, Any]] = []
    if spec.calls != "none":
        lo = 1 if spec.calls == "required" else 0
        hi = 3 if spec.parallel else 1
        n = draw(st.integers(lo, hi))
        for i in range(n):
            tool = draw(st.sampled_from(spec.tools))
            args = draw(value_for(tool.parameters))
            calls.append({"id": f"c{i}", "type": "function",
                          "function": {"name": tool.name, "arguments": json.dumps(args, ensure_ascii=False)}})
    content = ""
    if not calls:
        if spec.answer == "json":
            value = draw(value_for(spec.answer_schema))
            content = json.dumps(value, ensure_ascii=False, indent=draw(st.sampled_from([None, 2])))
        else:
            content = draw(free_text)
    elif spec.mode == "tools_auto":
        content = draw(free_text)
    reasoning = draw(free_text) if spec.starts_in == "reasoning" else None
    mode = "thinking" if spec.starts_in == "reasoning" else "chat"
    user = {"role": "user", "content": "Go."}
    asst: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if calls:
        asst["tool_calls"] = calls
    prompt = recipe.encode_messages([user], mode)
    full = recipe.encode_messages([user, asst], mode, drop_thinking=False)
    assert full.startswith(prompt)
    text = full[len(prompt):]
    if spec.starts_in == "tool_block":
        opener = f"\n\n<{DSML}tool_calls>\n"
        assert text.startswith(opener), text
        text = text[len(opener):]
    return out_ids(text)


# ---------------------------------------------------------------------------------------------
# soundness: what the parser makes of an output the grammar accepted
# ---------------------------------------------------------------------------------------------


def parse(prep: Any, ids: list[int]) -> tuple[list[tuple[str, Any]], str, Finish]:
    """(calls as (name, arguments value), content, Finish) from the family's parser."""
    parser = get_encoding(prep.encoding).new_parser(prep.parsing, TOK)
    events = parser.push(ids) + parser.finish("stop")
    names: dict[int, str] = {}
    calls: list[tuple[str, Any]] = []
    content = []
    for e in events:
        if isinstance(e, ToolCallStart):
            names[e.index] = e.name
        elif isinstance(e, ToolCallEnd):
            calls.append((names[e.index], json.loads(e.arguments)))
        elif isinstance(e, TextDelta):
            content.append(e.text)
    fin = events[-1]
    assert isinstance(fin, Finish)
    return calls, "".join(content), fin


def assert_sound(prep: Any, ids: list[int], args: str = "auto") -> None:
    """The parser reads ``ids`` with no note; calls name declared tools, arguments are valid JSON
    that satisfies the schema where the grammar enforced it, tool_choice and parallel calls honoured,
    a JSON answer satisfies its schema."""
    spec = turn_spec(prep.conversation, prep.parsing, args)  # type: ignore[arg-type]
    calls, content, fin = parse(prep, ids)
    assert fin.notes == (), (fin.notes, TOK.decode(ids))
    tools = {t.name: t for t in spec.tools}
    for name, value in calls:
        assert name in tools, name
        assert isinstance(value, dict)
        if tools[name].schema_args:
            jsonschema.validate(value, tools[name].parameters)
    if spec.calls == "none":
        assert not calls
    if spec.calls == "required":
        assert calls
    if not spec.parallel:
        assert len(calls) <= 1
    if not calls and spec.answer == "json":
        assert validate_instance(recipe.jsonfmt.parse_json_value(content), spec.answer_schema) == []


# ---------------------------------------------------------------------------------------------
# mask-guided random walks
# ---------------------------------------------------------------------------------------------

_PREFER_TEXT = ["</", "<", ">", "\n", '"', "}", "]", ",", ": ", "0", "1", "7", " ", "true", "null", "a", "x", "{", "[", "-"]
PREFER = sorted({i for s in _PREFER_TEXT for i in TOK.encode_ordinary(s)} | {EOS_ID, DSML_ID, THINK_END_ID})


def walk(matcher: Any, rng: random.Random, budget: int = 300) -> list[int] | None:
    """Sample ids from the mask until the turn ends (None if it did not within ``budget`` ids): forced
    ids first, else often a marker token (EOS, ``｜DSML｜``, ``</think>``) or a short structural token
    when allowed — more often as the budget runs out — else any allowed id."""
    import numpy as np

    ids: list[int] = []
    prefer = np.array(PREFER)
    marks = np.array([EOS_ID, DSML_ID, THINK_END_ID])
    for step in range(budget):
        forced = matcher.forced()
        if forced:
            for t in forced:
                assert matcher.accept(t)
            ids += forced
            continue
        mask = matcher.mask()
        on = lambda a: a[((mask[a // 32].astype(np.int64) >> (a % 32)) & 1) == 1]  # noqa: E731
        urge = step / budget
        r = rng.random()
        marks_on, prefer_on = on(marks), on(prefer)
        eos_on = EOS_ID in marks_on
        marks_on = marks_on[marks_on != EOS_ID]
        if eos_on and r < 0.03 + urge / 2:
            pick = EOS_ID
        elif len(marks_on) and r < 0.35 + urge:
            pick = int(marks_on[rng.randrange(len(marks_on))])
        elif len(prefer_on) and r < 0.8 + urge:
            pick = int(prefer_on[rng.randrange(len(prefer_on))])
        else:
            pick = -1
            for _ in range(32):  # rejection sampling: most of the vocabulary is allowed in free text
                cand = rng.randrange(TOK.n_vocab)
                if (int(mask[cand // 32]) >> (cand % 32)) & 1:
                    pick = cand
                    break
            if pick < 0:
                allowed = matcher.allowed(mask)
                assert len(allowed), TOK.decode(ids)
                pick = int(allowed[rng.randrange(len(allowed))])
        assert matcher.accept(pick), (pick, TOK.decode(ids))
        ids.append(pick)
        if matcher.finished:
            return ids
    return None


def mutate(ids: list[int], rng: random.Random) -> list[int]:
    """One random single-token mutation: substitute, delete, insert or swap (ids from the whole
    vocabulary, specials included)."""
    ids = list(ids)
    kind = rng.choice("sdiw")
    pos = rng.randrange(len(ids))
    new = rng.choice([EOS_ID, DSML_ID, THINK_END_ID, 128803, 0, *PREFER, rng.randrange(TOK.n_vocab)])
    if kind == "s":
        ids[pos] = new
    elif kind == "d":
        del ids[pos]
    elif kind == "i":
        ids.insert(pos, new)
    elif pos + 1 < len(ids):
        ids[pos], ids[pos + 1] = ids[pos + 1], ids[pos]
    return ids


def prepared(body: dict[str, Any], api: str) -> Any:
    """``recipe.prepare`` or a hypothesis rejection for a body the API refuses."""
    try:
        return recipe.prepare(body, api)  # type: ignore[arg-type]
    except recipe.RequestError:
        assume(False)
