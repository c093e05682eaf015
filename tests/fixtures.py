"""Paths and loaders for the conformance data copied into fixtures/ (tests read only the project's own files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def jsonl(relpath: str) -> list[dict[str, Any]]:
    """Rows of a JSON-lines fixture file."""
    with open(FIXTURES / relpath, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def api_requests(api: str) -> list[dict[str, Any]]:
    """Rows of fixtures/api/requests.jsonl for one API (deepseek-recipe 0.2.0 parity vectors)."""
    return [r for r in jsonl("api/requests.jsonl") if r["api"] == api]
