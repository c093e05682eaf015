"""Deterministic generators of benchmark requests (Chat Completions bodies)."""

from __future__ import annotations

import json
import random
from typing import Any

_WORDS = (
    "the model reads a request and renders a prompt with tools results reasoning cache prefix token block "
    "agent loop file patch test build error value python function class return import module config server "
    "latency throughput memory stream event delta parser state machine schema argument call id name"
).split()
_CJK = "模型读取请求并渲染提示词工具结果推理缓存前缀令牌"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{k}",
            "description": f"Tool number {k}: " + " ".join(_WORDS[k : k + 12]),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "file path"},
                    "limit": {"type": "integer", "minimum": 1},
                    "flags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["path"],
            },
        },
    }
    for k in range(10)
]


_LETTERS = "etaoinshrdlcumwfgypbvkjxqz"


def _word(rng: random.Random) -> str:
    """A pseudo-word: common words half the time, random letter strings otherwise (little repetition)."""
    if rng.random() < 0.5:
        return rng.choice(_WORDS)
    return "".join(rng.choice(_LETTERS[: rng.randint(8, 26)]) for _ in range(rng.randint(2, 11)))


def _prose(rng: random.Random, n_words: int) -> str:
    words = [_word(rng) for _ in range(n_words)]
    for k in range(0, n_words, 17):
        words[k] = words[k].capitalize()
    return " ".join(words) + "."


def _code(rng: random.Random, n_lines: int) -> str:
    lines = []
    for k in range(n_lines):
        indent = "    " * rng.randint(0, 3)
        w = [_word(rng) for _ in range(3)]
        lines.append(f"{indent}{w[0]}_{k} = {w[1]}({w[2]!r}, {rng.randint(0, 9999)})  # {rng.choice(_CJK)}")
    return "\n".join(lines)


def short_request() -> dict[str, Any]:
    """System + user, thinking with the default effort (≈ 99 prompt tokens)."""
    return {
        "model": "deepseek-v4-pro",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
            {"role": "user", "content": "What is the capital of France, and why is it famous?"},
        ],
    }


def agentic_request(assistant_turns: int = 55, seed: int = 7, lines_per_result: int = 60) -> dict[str, Any]:
    """A long agent conversation: system prompt, several user turns, ``assistant_turns`` assistant turns
    with reasoning and 1–2 tool calls each, code/prose tool results; 10 tools; thinking, effort high."""
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": _prose(rng, 900)}]
    call_no = 0
    for turn in range(assistant_turns):
        if turn % 8 == 0:
            msgs.append({"role": "user", "content": _prose(rng, 60)})
        calls = []
        for _ in range(rng.choice((1, 1, 2))):
            calls.append(
                {
                    "id": f"call_{call_no:04d}",
                    "type": "function",
                    "function": {
                        "name": f"tool_{rng.randrange(10)}",
                        "arguments": f'{{"path": "src/{rng.choice(_WORDS)}.py", "limit": {rng.randint(1, 500)}, "flags": ["-v", "{rng.choice(_WORDS)}"]}}',
                    },
                }
            )
            call_no += 1
        msgs.append(
            {
                "role": "assistant",
                "content": _prose(rng, rng.randint(0, 30)),
                "reasoning_content": _prose(rng, rng.randint(40, 120)),
                "tool_calls": calls,
            }
        )
        for c in calls:
            body = _code(rng, lines_per_result) if rng.random() < 0.7 else _prose(rng, lines_per_result * 8)
            msgs.append({"role": "tool", "tool_call_id": c["id"], "content": body})
    return {"model": "deepseek-v4-pro", "messages": msgs, "tools": TOOLS, "reasoning_effort": "high"}


def next_request(req: dict[str, Any], seed: int = 8) -> dict[str, Any]:
    """``req`` plus one more tool round: an assistant call and its result (the agent loop's next request)."""
    rng = random.Random(seed)
    cid = "call_9999"
    extra = [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": _prose(rng, 60),
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "tool_1", "arguments": '{"path": "x.py"}'}}],
        },
        {"role": "tool", "tool_call_id": cid, "content": _code(rng, 80)},
    ]
    return {**req, "messages": req["messages"] + extra}


# --- workload 2: a coding agent (other shapes than agentic_request) ---------------------------------

_SYSTEM_RULES = (
    "You are an interactive coding agent working in the user's repository. Follow these rules.",
    "# Tone\nBe concise. Answer in the user's language. Never invent file contents: read them first.",
    "# Tools\nUse `read_file` before `edit_file`; `old_string` must match the file exactly, indentation included.",
    "# Tests\nRun the narrowest test first (`pytest -q tests/test_x.py -k name`), then the whole suite.",
    "# Git\nNever force-push. Commit messages: imperative mood, one line, then a blank line and details.",
    "# 安全\n不要执行破坏性命令（`rm -rf /`、`git reset --hard`），除非用户明确要求。回答请使用用户的语言。",
)

CODING_TOOLS = [
    {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}
    for name, desc, params in (
        ("read_file", "Read a file from the repository. Returns numbered lines (`  12→text`). Use offset/limit for large files.",
         {"type": "object", "properties": {"file_path": {"type": "string", "description": "absolute path"},
                                           "offset": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 1, "maximum": 2000}},
          "required": ["file_path"], "additionalProperties": False}),
        ("edit_file", "Replace `old_string` by `new_string` in a file. Fails unless old_string occurs exactly once (or replace_all).",
         {"type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"},
                                           "new_string": {"type": "string"}, "replace_all": {"type": "boolean", "default": False}},
          "required": ["file_path", "old_string", "new_string"], "additionalProperties": False}),
        ("write_file", "Create or overwrite a file.",
         {"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"]}),
        ("bash", "Run a shell command in the repository root (timeout in ms, default 120000). Output is truncated to 30000 characters.",
         {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number", "maximum": 600000},
                                           "description": {"type": "string", "description": "5-10 words: what the command does"}},
          "required": ["command"]}),
        ("grep", "Search file contents with a regular expression (ripgrep syntax).",
         {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"},
                                           "output_mode": {"enum": ["content", "files_with_matches", "count"]}, "-n": {"type": "boolean"}},
          "required": ["pattern"]}),
        ("glob", "Find files by name pattern, newest first.", {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
        ("list_dir", "List a directory.", {"type": "object", "properties": {"path": {"type": "string"}, "ignore": {"type": "array", "items": {"type": "string"}}}}),
        ("todo_write", "Update the task list.",
         {"type": "object", "properties": {"todos": {"type": "array", "items": {"type": "object", "properties": {
             "content": {"type": "string"}, "status": {"enum": ["pending", "in_progress", "completed"]}, "id": {"type": "string"}},
             "required": ["content", "status", "id"]}}}, "required": ["todos"]}),
        ("web_fetch", "Fetch a URL and answer a question about its content.",
         {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}, "prompt": {"type": "string"}}, "required": ["url", "prompt"]}),
        ("task", "Start a sub-agent for a self-contained task and return its final report.",
         {"type": "object", "properties": {"description": {"type": "string"}, "prompt": {"type": "string"}}, "required": ["description", "prompt"]}),
    )
]

#: Common English and programming words, most frequent first (sampled with Zipf weights: real prose
#: repeats words, which deepseek-recipe's tokenizer caches; random letter strings would flatter us).
_ENGLISH = (
    "the of and to a in is it that for you this be on with as are was have not we can if but at or by an "
    "from will all so do one there which file test they use what when more should then would about code "
    "function line error this value need now return call first check let me see new because here just also "
    "make only run time like could into where each case other these some than fix tests change way read how "
    "look data path type before after both still does same config update module output input list string "
    "class method name result back version build issue number current problem add remove set get because "
    "something already works seems since again instead using called found right passes failing failed need "
    "probably likely maybe actually next already write import expected actual missing wrong edge empty "
    "handle handled message request response server client cache key index parse parser stream token "
    "tokens block blocks state loop branch commit main merge review comment docs documentation user users "
    "default option options argument arguments parameter parameters field fields object objects array "
    "length size limit offset count total memory slow fast performance benchmark profile caller callee "
    "helper wrapper interface implementation library package dependency version upgrade release"
).split()
_ZIPF = [1.0 / (k + 1) for k in range(len(_ENGLISH))]


def _english(rng: random.Random, n_words: int) -> str:
    """Prose drawn from :data:`_ENGLISH` with Zipf weights, sentences of 6–18 words."""
    words = rng.choices(_ENGLISH, weights=_ZIPF, k=n_words)
    out: list[str] = []
    k = 0
    while k < n_words:
        m = rng.randint(6, 18)
        sentence = words[k : k + m]
        out.append(" ".join([sentence[0].capitalize(), *sentence[1:]]) + rng.choice(".....?:"))
        k += m
    return " ".join(out)


_IDENT = ("config", "parser", "token", "cache", "request", "stream", "schema", "result", "block", "value", "index", "state")
_CJK_COMMENTS = ("处理缓存命中", "解析请求体", "流式输出的状态机", "检查工具调用参数", "计算前缀哈希", "错误时返回默认值")
_CJK_USER = (
    "请帮我看看为什么 `test_stream.py` 里的流式测试偶尔失败，先别改代码，告诉我原因。",
    "好的，按你说的改吧。改完跑一下相关测试，再把整个测试套件跑一遍。",
    "顺便把 README 里关于缓存的那一段也更新一下，写清楚内存上限。",
)
_EN_USER = (
    "The CI is red on main: `tests/test_cache.py::test_eviction` fails with an off-by-one. Can you find and fix it?",
    "Also the parser chokes on Windows paths like C:\\Users\\dev\\a.py; add a regression test.",
    "Looks good. Please squash this into one commit with a clear message.",
)


def _py_lines(rng: random.Random, n_lines: int) -> list[str]:
    """Lines of a plausible Python module (identifiers repeat, as in real code)."""
    lines: list[str] = []
    k = 0
    while len(lines) < n_lines:
        a, b = rng.choice(_IDENT), rng.choice(_IDENT)
        lines += [
            f"def {a}_{b}_{k}(self, {b}: dict[str, Any], limit: int = {rng.randint(1, 4096)}) -> list[str]:",
            f'    """{_english(rng, rng.randint(6, 14))}"""',
            f"    # {rng.choice(_CJK_COMMENTS)}",
            f"    out = [x for x in {b}.get({a!r}, ()) if len(x) <= limit]",
            "    if not out:",
            f"        raise ValueError(f\"no {a} in {{{b}!r}}\")",
            "    return sorted(out)",
            "",
        ]
        k += 1
    return lines[:n_lines]


def _py_file(rng: random.Random, n_lines: int) -> str:
    """Numbered lines of a Python module, as a file-reading tool returns them (``  12→text``)."""
    return "\n".join(f"{i + 1:6}→{line}" for i, line in enumerate(_py_lines(rng, n_lines)))


def _edit_args(rng: random.Random) -> dict[str, Any]:
    a, b = rng.choice(_IDENT), rng.choice(_IDENT)
    old = f"    out = [x for x in {b}.get({a!r}, ()) if len(x) <= limit]\n    if not out:"
    new = f"    out = [x for x in {b}.get({a!r}, ()) if len(x) < limit]  # {rng.choice(_CJK_COMMENTS)}\n    if not out and strict:"
    return {"file_path": f"/repo/src/{a}/{b}.py", "old_string": old, "new_string": new}


def _small_result(rng: random.Random, name: str, args: dict[str, Any]) -> str:
    if name == "edit_file":
        return f"The file {args['file_path']} has been updated."
    if name == "bash":
        n = rng.randint(3, 60)
        return f"{'.' * n}{'F' if rng.random() < 0.2 else ''}\n{n} passed in {rng.random() * 9:.2f}s"
    if name == "grep":
        return "\n".join(f"src/{rng.choice(_IDENT)}/{rng.choice(_IDENT)}.py:{rng.randint(1, 900)}:    {rng.choice(_IDENT)} = {rng.choice(_IDENT)}()"
                         for _ in range(rng.randint(1, 8)))
    if name == "list_dir":
        return "\n".join(f"- {rng.choice(_IDENT)}{rng.choice(('.py', '/', '.md', '.toml'))}" for _ in range(rng.randint(3, 15)))
    return "ok"


def coding_agent_request(assistant_turns: int = 50, seed: int = 11) -> dict[str, Any]:
    """A coding agent's conversation (other shapes than :func:`agentic_request`): a long system prompt
    (rules, CJK, code), 10 tools with nested schemas, several user turns (English and Chinese), 50
    assistant turns with short reasoning and 1–3 calls (reads, edits with code arguments, shell,
    grep), mostly small tool results and some long numbered file reads; thinking, effort max
    (≈ 100k prompt tokens)."""
    rng = random.Random(seed)
    system = "\n\n".join(_SYSTEM_RULES) + "\n\n# Project notes\n\n" + "\n\n".join(
        _english(rng, 120) + "\n\n```python\n" + "\n".join(_py_lines(rng, 16)) + "\n```" for _ in range(12))
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}]
    users = [u for pair in zip(_EN_USER, _CJK_USER) for u in pair]
    call_no = 0
    for turn in range(assistant_turns):
        if turn % 9 == 0:
            msgs.append({"role": "user", "content": users[(turn // 9) % len(users)]})
        calls = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            name = rng.choice(("read_file", "read_file", "edit_file", "bash", "grep", "list_dir", "todo_write"))
            if name == "read_file":
                args: dict[str, Any] = {"file_path": f"/repo/src/{rng.choice(_IDENT)}/{rng.choice(_IDENT)}.py", "offset": rng.randint(0, 400)}
            elif name == "edit_file":
                args = _edit_args(rng)
            elif name == "bash":
                args = {"command": f"cd /repo && python -m pytest -q tests/test_{rng.choice(_IDENT)}.py -k '{rng.choice(_IDENT)} and not slow' 2>&1 | tail -n 30",
                        "description": "Run the focused tests"}
            elif name == "grep":
                args = {"pattern": rf"def {rng.choice(_IDENT)}_\w+\(", "path": "/repo/src", "-n": True}
            elif name == "list_dir":
                args = {"path": f"/repo/{rng.choice(_IDENT)}"}
            else:
                args = {"todos": [{"content": _english(rng, 8), "status": rng.choice(("pending", "in_progress", "completed")), "id": str(k)} for k in range(rng.randint(2, 5))]}
            calls.append((f"call_{rng.getrandbits(40):010x}_{call_no}", name, args))
            call_no += 1
        msgs.append({
            "role": "assistant",
            "content": "" if rng.random() < 0.6 else _english(rng, rng.randint(5, 40)),
            "reasoning_content": _english(rng, rng.randint(15, 90)) + ("\n\n我需要先确认这个函数的调用方。" if rng.random() < 0.3 else ""),
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
                           for cid, name, args in calls],
        })
        for cid, name, args in calls:
            body = _py_file(rng, rng.randint(140, 370)) if name == "read_file" else _small_result(rng, name, args)
            msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
    return {"model": "deepseek-v4-pro", "messages": msgs, "tools": CODING_TOOLS, "reasoning_effort": "max", "stream": True,
            "max_tokens": 32768}


def coding_next_request(req: dict[str, Any], seed: int = 12) -> dict[str, Any]:
    """``req`` plus the agent's next round: an assistant turn with an edit call and its one-line result."""
    rng = random.Random(seed)
    args = _edit_args(rng)
    extra = [
        {"role": "assistant", "content": "", "reasoning_content": _english(rng, 40),
         "tool_calls": [{"id": "call_next_0", "type": "function", "function": {"name": "edit_file", "arguments": json.dumps(args, ensure_ascii=False)}}]},
        {"role": "tool", "tool_call_id": "call_next_0", "content": _small_result(rng, "edit_file", args)},
    ]
    return {**req, "messages": req["messages"] + extra}


def coding_short_request() -> dict[str, Any]:
    """The coding agent's kind of short request: three tools, thinking at max effort, a Chinese
    question with a code snippet (≈ 900 prompt tokens, most of them the tools block)."""
    question = "这个函数为什么在空列表时抛异常？\n\n```python\ndef first(xs):\n    return xs[0]\n```"
    return {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": question}],
            "tools": CODING_TOOLS[:3], "reasoning_effort": "max", "stream": True}


# --- workload 3: an analyst's chat with tools (other shapes than both agents above) ---------------

ANALYST_TOOLS = [
    {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}
    for name, desc, params in (
        ("search_docs", "Full-text search over the knowledge base; returns the best passages with their scores.",
         {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
                                           "filters": {"type": "object", "properties": {"product": {"enum": ["api", "console", "billing"]},
                                                                                        "since": {"type": "string", "format": "date"}}}},
          "required": ["query"]}),
        ("sql", "Run a read-only SQL query on the analytics warehouse; rows come back as CSV.",
         {"type": "object", "properties": {"query": {"type": "string"}, "max_rows": {"type": "integer", "default": 200}}, "required": ["query"]}),
        ("get_ticket", "One support ticket with its full thread.",
         {"type": "object", "properties": {"ticket_id": {"type": "string", "pattern": "^T-[0-9]+$"}}, "required": ["ticket_id"]}),
        ("fetch_url", "Fetch a web page as Markdown.",
         {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
    )
]


def _csv_rows(rng: random.Random, n: int) -> str:
    head = "day,region,plan,requests,errors,p50_ms,p99_ms,revenue_usd"
    rows = [f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},{rng.choice(('eu-west', 'us-east', 'ap-south'))},"
            f"{rng.choice(('free', 'pro', 'team', 'enterprise'))},{rng.randint(10, 10**7)},{rng.randint(0, 5000)},"
            f"{rng.uniform(5, 300):.1f},{rng.uniform(50, 9000):.1f},{rng.uniform(0, 10**5):.2f}" for _ in range(n)]
    return "\n".join([head, *rows])


def _log_lines(rng: random.Random, n: int) -> str:
    levels = ("INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG")
    return "\n".join(f"2026-11-{rng.randint(1, 30):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z "
                     f"{rng.choice(levels)} [{rng.choice(_IDENT)}-{rng.randint(1, 64)}] {_english(rng, rng.randint(4, 16))} "
                     f"req={rng.getrandbits(48):012x} dur={rng.randint(1, 4000)}ms" for _ in range(n))


def _page(rng: random.Random, n_sections: int) -> str:
    parts = [f"# {_english(rng, 6).rstrip('.?:')}"]
    for k in range(n_sections):
        parts.append(f"## {k + 1}. {_english(rng, 4).rstrip('.?:')}\n\n{_english(rng, rng.randint(60, 220))}")
        if rng.random() < 0.4:
            parts.append("| metric | before | after |\n|---|---|---|\n" + "\n".join(
                f"| {rng.choice(_IDENT)} | {rng.randint(1, 999)} | {rng.randint(1, 999)} |" for _ in range(rng.randint(3, 8))))
    return "\n\n".join(parts)


def _analyst_result(rng: random.Random, name: str) -> str:
    """Tool results of widely varied sizes: a few bytes to tens of kilobytes."""
    size = rng.choice(("tiny", "small", "small", "medium", "medium", "large"))
    if name == "search_docs":
        n = {"tiny": 0, "small": 2, "medium": 6, "large": 15}[size]
        hits = [{"doc": f"kb/{rng.choice(_IDENT)}-{rng.randint(1, 999)}.md", "score": round(rng.random(), 4),
                 "passage": _english(rng, rng.randint(30, 120))} for _ in range(n)]
        return json.dumps({"hits": hits, "total": n}, ensure_ascii=False)
    if name == "sql":
        return _csv_rows(rng, {"tiny": 1, "small": 8, "medium": 60, "large": 400}[size])
    if name == "get_ticket":
        return "\n\n".join(f"**{rng.choice(('customer', 'agent'))}** ({rng.randint(1, 28)} Nov): {_english(rng, rng.randint(10, 90))}"
                           for _ in range({"tiny": 1, "small": 3, "medium": 8, "large": 25}[size]))
    return _page(rng, {"tiny": 1, "small": 2, "medium": 5, "large": 14}[size]) if rng.random() < 0.7 else \
        _log_lines(rng, {"tiny": 2, "small": 20, "medium": 120, "large": 700}[size])


def analyst_chat_request(turns: int = 50, seed: int = 21) -> dict[str, Any]:
    """An analyst's chat (other shapes than the agents): a short system prompt, a user question every
    turn (some as content-part arrays), assistant answers in prose (reasoning on some), the last
    question not answered yet, tool calls on about half the turns with results of widely varied sizes (JSON search hits, CSV rows, ticket
    threads, Markdown pages, log dumps), thinking switched on by ``thinking`` (no effort), a
    temperature and a completion limit (75k–190k prompt tokens at 50 turns, ≈ 135k typical: the
    result sizes vary that much from seed to seed)."""
    rng = random.Random(seed)
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a data analyst for the support and platform teams. "
                                   "Cite the tool output you rely on, say when data is missing, and keep answers under 300 words."}]
    call_no = 0
    for turn in range(turns):
        question = _english(rng, rng.randint(8, 40))
        if rng.random() < 0.25:
            msgs.append({"role": "user", "content": [{"type": "text", "text": question},
                                                     {"type": "text", "text": f"Context: ticket T-{rng.randint(1000, 99999)}"}]})
        else:
            msgs.append({"role": "user", "content": question})
        for _ in range(rng.choice((0, 0, 1, 1, 2))):  # tool rounds before the answer
            calls = []
            for _ in range(rng.choice((1, 1, 2))):
                name = rng.choice(("search_docs", "sql", "sql", "get_ticket", "fetch_url"))
                args = {"search_docs": {"query": _english(rng, 5), "top_k": rng.randint(1, 20)},
                        "sql": {"query": f"SELECT day, region, sum(requests) FROM usage WHERE plan = '{rng.choice(('pro', 'team'))}' GROUP BY 1, 2"},
                        "get_ticket": {"ticket_id": f"T-{rng.randint(1000, 99999)}"},
                        "fetch_url": {"url": f"https://status.example.com/incidents/{rng.randint(1, 500)}"}}[name]
                calls.append((f"call_{call_no}", name, args))
                call_no += 1
            msgs.append({"role": "assistant", "content": None,
                         "tool_calls": [{"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                                        for cid, n, a in calls]})
            for cid, name, _ in calls:
                msgs.append({"role": "tool", "tool_call_id": cid, "content": _analyst_result(rng, name)})
        msgs.append(_answer(rng))
    msgs.append({"role": "user", "content": _english(rng, rng.randint(8, 40))})  # the question being asked
    return {"model": "deepseek-v4-pro", "messages": msgs, "tools": ANALYST_TOOLS, "thinking": {"type": "enabled"},
            "temperature": 0.3, "max_tokens": 4096}


def _answer(rng: random.Random) -> dict[str, Any]:
    answer: dict[str, Any] = {"role": "assistant", "content": _english(rng, rng.randint(30, 200))}
    if rng.random() < 0.5:
        answer["reasoning_content"] = _english(rng, rng.randint(20, 80))
    return answer


def analyst_next_request(req: dict[str, Any], seed: int = 22) -> dict[str, Any]:
    """``req`` plus the chat's next turn: the assistant's answer to the last question and the user's
    follow-up."""
    rng = random.Random(seed)
    return {**req, "messages": req["messages"] + [_answer(rng), {"role": "user", "content": _english(rng, 25)}]}
