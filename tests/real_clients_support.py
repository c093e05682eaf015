"""Support for the real-client tests: a scripted model, a recording session, fixture files.

:class:`ScriptedModel` plays the model behind ``tests/sdk_server.py``: while the conversation holds
fewer assistant tool-call turns than ``rounds`` (and tools are declared) it answers with a DSML tool call to a
declared tool, with arguments built from the tool's JSON schema; after that it answers with a final
text, or with a JSON instance of the requested response format. The reasoning prefix and the
tool-call opener follow the prompt's tail (``<think>`` / ``<｜DSML｜tool_calls>``), so the SDK loops
run several rounds whatever thinking mode or tool choice the request asked for.

:func:`recording` runs one server for one loop, records every request with its status and (for
Responses) the final response object, fails with the server's error messages when a request was
refused, and writes ``fixtures/real_clients/<name>.jsonl`` (one ``{"api", "body", "status",
"response"?}`` object per line) when the file is missing or ``RECIPE_RECORD_REAL_CLIENTS=1``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdk_server import Server, serve

from recipe.conversation import AssistantMessage
from recipe.pipeline import PreparedRequest, prepare
from recipe.store.conversations import MemoryStore, remember
from recipe.tokenizer import load_tokenizer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "real_clients"
MODEL = "deepseek-v4-pro"
DSML = "｜DSML｜"
#: final text of every loop (the SDK shows it to the caller)
FINAL_TEXT = "It is sunny in Paris, 21 degrees."
#: the text before every scripted tool-call block
CALL_TEXT = "Let me check."
#: what every scripted tool returns (tests look for it in later prompts)
TOOL_OUTPUT = "sunny, 21 C"


def schema_instance(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A small JSON value valid for ``schema`` (the subset SDKs generate: pydantic / tool schemas).

    Objects get every property (strict schemas require them all); ``$ref`` follows ``#/$defs/…``
    and ``#/definitions/…``; unions take their first non-null branch; enums their first value.
    """
    if not isinstance(schema, dict) or depth > 12:
        return "x"
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return schema_instance(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            branches = [b for b in schema[key] if not (isinstance(b, dict) and b.get("type") == "null")]
            return schema_instance((branches or schema[key])[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        return {k: schema_instance(v, defs, depth + 1) for k, v in (schema.get("properties") or {}).items()}
    return {
        "array": lambda: [schema_instance(schema.get("items", {}), defs, depth + 1)] * max(1, schema.get("minItems", 1)),
        "string": lambda: "Paris",
        "integer": lambda: 3,
        "number": lambda: 2.5,
        "boolean": lambda: True,
        "null": lambda: None,
    }.get(kind, lambda: "Paris")()


def dsml_invoke(name: str, arguments: dict[str, Any]) -> str:
    """One ``<｜DSML｜invoke>`` element (strings raw, other values as JSON)."""
    params = "".join(
        f'<{DSML}parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
        f"{v if isinstance(v, str) else json.dumps(v)}</{DSML}parameter>\n"
        for k, v in arguments.items()
    )
    return f'<{DSML}invoke name="{name}">\n{params}</{DSML}invoke>\n'


@dataclass
class ScriptedModel:
    """The model callback: tool calls for ``rounds`` rounds, then the final answer.

    Attributes:
        prepare_kw: the server's ``prepare`` keyword arguments (so a store expands the history).
        rounds: assistant tool-call turns the conversation must hold before the final answer.
        parallel: call two tools at once in the first round when two or more are declared.
        preps: every request's :class:`PreparedRequest`, in order (for assertions on prompts).
    """

    prepare_kw: dict[str, Any] = field(default_factory=dict)
    rounds: int = 2
    parallel: bool = False
    preps: list[PreparedRequest] = field(default_factory=list)

    def text(self, prep: PreparedRequest) -> str:
        """The completion text for ``prep`` (specials spelled out)."""
        conv = prep.conversation
        done = sum(isinstance(m, AssistantMessage) and bool(m.tool_calls) for m in conv.messages)
        tail = prep.prompt.text
        must_call = conv.tool_choice.mode == "required"
        call = bool(conv.tools) and conv.tool_choice.mode != "none" and (must_call or done < self.rounds)
        out = f"Round {done}: thinking it over.</think>" if tail.endswith("<think>") else ""
        if call:
            named = [t for t in conv.tools if t.name == conv.tool_choice.name]
            tools = named or list(conv.tools)
            picks = tools[:2] if self.parallel and done == 0 and not named and len(tools) > 1 else [tools[done % len(tools)]]
            invokes = "".join(dsml_invoke(t.name, schema_instance(t.parameters)) for t in picks)
            if tail.endswith(f"{DSML}tool_calls>\n"):
                return out + invokes + f"</{DSML}tool_calls>"
            # no text before the call when a response format constrains the content
            lead = f"{CALL_TEXT}\n\n" if conv.response_format.type == "text" else ""
            return out + lead + f"<{DSML}tool_calls>\n" + invokes + f"</{DSML}tool_calls>"
        fmt = conv.response_format
        if fmt.type == "json_schema":
            return out + json.dumps(schema_instance(fmt.schema))
        if fmt.type == "json_object":
            return out + json.dumps({"answer": FINAL_TEXT})
        return out + FINAL_TEXT

    def __call__(self, api: str, body: dict, headers: Any) -> tuple[list[int], str, None]:
        prep = prepare(body, api, **self.prepare_kw)
        self.preps.append(prep)
        return load_tokenizer().encode_with_special_tokens(self.text(prep)), "stop", None


@dataclass
class Session:
    """One recorded loop: the server, the model, the Responses finals by request identity."""

    name: str
    server: Server
    model: ScriptedModel
    finals: dict[int, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    def records(self) -> list[dict[str, Any]]:
        """Every request as ``{"api", "body", "status", "response"?}`` (status 200 or the error's)."""
        refused = {id(body): payload for _, body, payload in self.server.errors}
        out = []
        for api, body in self.server.requests:
            rec: dict[str, Any] = {"api": api, "body": body, "status": 400 if id(body) in refused else 200}
            if api == "responses" and id(body) in self.finals:
                rec["response"] = self.finals[id(body)]
            out.append(rec)
        return out

    def failures(self) -> list[str]:
        """One line per refused request: API, error message, the start of the body."""
        return [f"{api}: {json.dumps(payload.get('error', payload))[:400]} | body: {json.dumps(body)[:300]}"
                for api, body, payload in self.server.errors]


def save_fixture(name: str, records: list[dict[str, Any]]) -> None:
    """Write ``fixtures/real_clients/<name>.jsonl`` (missing file, or ``RECIPE_RECORD_REAL_CLIENTS=1``)."""
    path = FIXTURES / f"{name}.jsonl"
    if path.exists() and os.environ.get("RECIPE_RECORD_REAL_CLIENTS") != "1":
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records), encoding="utf-8")


@contextmanager
def recording(name: str, *, rounds: int = 2, store: MemoryStore | None = None, parallel: bool = False,
              min_requests: int = 1) -> Iterator[Session]:
    """Serve one client loop; afterwards assert every request was answered 2xx and save the fixture.

    An exception from the client inside the block is re-raised after the check, so a refused
    request fails with the server's own error message rather than the SDK's.
    """
    prepare_kw = {"store": store} if store is not None else {}
    model = ScriptedModel(prepare_kw=prepare_kw, rounds=rounds, parallel=parallel)
    finals: dict[int, Any] = {}

    def keep(api: str, body: dict, final: Any) -> None:
        finals[id(body)] = final
        if store is not None and api == "responses" and isinstance(final, dict):
            remember(store, body, final)

    with serve(model, prepare_kw=prepare_kw, after_response=[keep], prompt_tokens=20, cached_tokens=5) as server:
        session = Session(name, server, model, finals)
        raised: BaseException | None = None
        try:
            yield session
        except Exception as exc:  # noqa: BLE001 - reported below, with the server's errors first
            raised = exc
    failures = session.failures()
    assert not failures, f"{name}: {len(failures)} of {len(server.requests)} requests refused:\n" + "\n".join(failures)
    if raised is not None:
        raise raised
    assert len(server.requests) >= min_requests, f"{name}: only {len(server.requests)} requests"
    save_fixture(name, session.records())


def fixture_files() -> list[Path]:
    """Every recorded fixture file."""
    return sorted(FIXTURES.glob("*.jsonl")) if FIXTURES.exists() else []


def read_fixture(path: Path) -> list[dict[str, Any]]:
    """The records of one fixture file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- bodies deepseek-recipe can answer


def _forced(api: str, body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    if api == "messages":
        return isinstance(choice, dict) and choice.get("type") == "tool"
    return choice == "required" or (isinstance(choice, dict) and choice.get("type") == "function")


def _tool_fields(api: str, tool: dict[str, Any]) -> dict[str, Any]:
    return tool["function"] if api == "chat" and isinstance(tool.get("function"), dict) else tool


def _has_format(api: str, body: dict[str, Any]) -> bool:
    fmt = body.get("response_format") if api == "chat" else (body.get("text") or {}).get("format")
    return isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object")


def _drop_format(api: str, body: dict[str, Any]) -> dict[str, Any]:
    if api == "chat":
        return {k: v for k, v in body.items() if k != "response_format"}
    return {**body, "text": {k: v for k, v in (body.get("text") or {}).items() if k != "format"}}


def equivalent_body(api: str, body: dict[str, Any], developer: str = "user") -> dict[str, Any]:
    """``body`` rewritten into what deepseek-recipe accepts and recipe must render identically, for
    classes 1, 2, 5, 6 and the chain of 7 (strict flags are left for :func:`equivalent_prompt`):

    Chat ``developer`` → ``developer`` (``user``; ``system`` for DeepSeek-V4.1, as its Responses
    developer items); ``redacted_thinking`` blocks dropped; ``"type": "custom"`` dropped
    from Messages tools; a forced tool choice turns thinking off (Chat ``thinking`` disabled,
    Responses effort ``none``, Messages ``thinking`` disabled); ``previous_response_id`` dropped
    (pass an expanded body).
    """
    b = copy.deepcopy({k: v for k, v in body.items() if k != "previous_response_id"})
    if api == "chat":
        for m in b.get("messages") or ():
            if isinstance(m, dict) and m.get("role") == "developer":
                m["role"] = developer
    if api == "messages":
        for m in b.get("messages") or ():
            if isinstance(m, dict) and isinstance(m.get("content"), list):
                m["content"] = [x for x in m["content"] if not (isinstance(x, dict) and x.get("type") == "redacted_thinking")]
        if isinstance(b.get("tools"), list):
            b["tools"] = [{k: v for k, v in t.items() if (k, v) != ("type", "custom")} for t in b["tools"]]
    if _forced(api, b):
        if api == "chat":
            b.pop("reasoning_effort", None)
            b["thinking"] = {"type": "disabled"}
        elif api == "responses":
            b["reasoning"] = {"effort": "none"}
        else:
            b["thinking"] = {"type": "disabled"}
    return b


def reads_differently(api: str, body: dict[str, Any]) -> bool:
    """A Messages body whose ``tool_choice {"type": "any"}``, strict tools or ``output_config.format``
    recipe honours by default where deepseek-recipe ignores them (``Options.anthropic_tool_choice_any``
    / ``anthropic_strict_tools`` / ``anthropic_output_format``)."""
    if api != "messages":
        return False
    tc, oc, tools = body.get("tool_choice"), body.get("output_config"), body.get("tools")
    strict = isinstance(tools, list) and any(isinstance(t, dict) and t.get("strict") is True for t in tools)
    return (isinstance(tc, dict) and tc.get("type") == "any" and bool(tools)) or strict or (
        isinstance(oc, dict) and oc.get("format") is not None)


def equivalent_prompt(api: str, body: dict[str, Any], convert: Any, developer: str = "user") -> tuple[str, Any] | None:
    """What recipe must produce for a body deepseek-recipe refuses, built from deepseek-recipe's own
    answers: ``("ids", token_ids)`` when :func:`equivalent_body` is accepted as is, or
    ``("text", prompt)`` for classes 3 and 4 — the prompt of the body with every tool non-strict
    (accepted next to a response format), whose schema line of each originally strict tool is
    replaced by that tool's line when deepseek-recipe renders it strict without the format.
    None when no rewrite is accepted. ``convert`` is ``oracle.convert``.
    """
    b = equivalent_body(api, body, developer)
    first = convert(api, b)
    if first["ok"]:
        return "ids", first["token_ids"]
    tools = [t for t in b.get("tools") or () if isinstance(t, dict)]
    strict = [t for t in tools if _tool_fields(api, t).get("strict") is True]
    if not strict:
        return None
    loose = copy.deepcopy(b)
    for t in loose["tools"]:
        if isinstance(t, dict):
            _tool_fields(api, t).pop("strict", None)
    base = convert(api, loose)
    only_strict = convert(api, {**(_drop_format(api, b) if _has_format(api, b) else b), "tools": strict,
                                **({"tool_choice": "auto"} if api != "messages" else {})})
    if not (base["ok"] and only_strict["ok"]):
        return None
    lines = {}
    for line in only_strict["prompt"].split("\n"):
        if line.startswith('{"name": '):
            lines[json.loads(line)["name"]] = line
    out = []
    for line in base["prompt"].split("\n"):
        if line.startswith('{"name": '):
            line = lines.get(json.loads(line)["name"], line)
        out.append(line)
    return "text", "\n".join(out)
