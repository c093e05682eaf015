"""Server startup (``ServeConfig.warm`` / ``gc_freeze``): the vocabulary and output-parser tables are
loaded before the first request, and what startup loaded is frozen out of the cyclic collector's
walks. Each case runs in a fresh interpreter (the vocabulary cache and the frozen generation are
process-wide), through the app's real lifespan (Starlette's TestClient), with an in-process engine
that needs no vocabulary of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = """
import gc, json, sys
from starlette.testclient import TestClient
import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.tokenizer import default_tokenizer

async def engine(request):
    yield [1]

warm, freeze = sys.argv[1] == "1", sys.argv[2] == "1"
app = recipe.serve.app(engine, config=ServeConfig(warm=warm, gc_freeze=freeze))
before = default_tokenizer.cache_info().currsize, gc.get_freeze_count()
with TestClient(app.starlette) as client:
    during = default_tokenizer.cache_info().currsize, gc.get_freeze_count()
    status = client.get("/health").status_code
print(json.dumps({"before": before, "during": during, "status": status}))
"""


def _startup(warm: bool, freeze: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, str(int(warm)), str(int(freeze))], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("warm,freeze", [(True, True), (False, False), (True, False)])
def test_startup_warms_and_freezes_as_configured(warm: bool, freeze: bool) -> None:
    r = _startup(warm, freeze)
    assert r["status"] == 200
    assert r["before"] == [0, 0]  # building the app loads no vocabulary and freezes nothing
    vocab, frozen = r["during"]
    assert vocab == (1 if warm else 0)
    if freeze:
        assert frozen > 10_000  # the imported modules, the vocabulary and its tables
    else:
        assert frozen == 0
