"""recipe's render / derender routes for tests: a ``--render-only`` server (uvicorn on 127.0.0.1, port
0), a JSON POST, the vLLM 0.32 fixtures those routes are checked against, and a refusal check.

The fixtures (fixtures/vllm_render/, written by tests/render_make_vectors.py from a running vLLM 0.32)
are vLLM's own field sets (``fields.json``) and its answers to the same requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from serve_support import Running, running

from recipe.serve.config import ServeConfig
from recipe.serve.server import app
from recipe.serve.tenants import Tenants

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "vllm_render"
#: vLLM 0.32's field sets, by wire model (``generate_request``, ``sampling_params_defaults``, …).
FIELDS = json.loads((FIX / "fields.json").read_text(encoding="utf-8"))


def fixture_cases(name: str) -> dict[str, Any]:
    """The ``cases`` of ``fixtures/vllm_render/<name>.json``: {case: {route, request, status, response}}."""
    return json.loads((FIX / f"{name}.json").read_text(encoding="utf-8"))["cases"]


@contextmanager
def render_only(tenants: Tenants | None = None, **config: Any) -> Iterator[Running]:
    """``recipe serve --render-only`` (no warm-up, no gc freeze; ``config``: more ServeConfig fields)
    for the ``with`` block."""
    with running(app(config=ServeConfig(warm=False, gc_freeze=False, render_only=True, **config),
                     tenants=tenants)) as srv:
        yield srv


def post(url: str, path: str, body: Any, **headers: str) -> httpx.Response:
    """POST ``body`` as JSON to ``url + path`` (30 s timeout)."""
    return httpx.post(url + path, json=body, headers=headers, timeout=30)


def answered(url: str, case: dict[str, Any]) -> tuple[Any, Any]:
    """POST a fixture case's request to its route on ``url``: (recipe's JSON body, the body vLLM
    answered); asserts a 200."""
    r = post(url, case["route"], case["request"])
    assert r.status_code == 200, r.text
    return r.json(), case["response"]


def refused_param(url: str, path: str, body: Any, mutate: Callable[[Any], Any]) -> str:
    """``mutate`` a deep copy of ``body``, POST it to ``path``: asserts a 400 and returns the
    ``param`` its error names."""
    body = json.loads(json.dumps(body))
    mutate(body)
    r = post(url, path, body)
    assert r.status_code == 400, r.text
    return r.json()["error"]["param"]
