"""Prefix-cache key speed: ``python bench/bench_cache_keys.py [--repeat N] [--keys N]``.

Hashes a 128k-token prompt (tokenized Python stdlib source, and uniform random ids over the V4
vocabulary) at block sizes 16/64/256 with every scheme, against the anchor measured in the same
run: vLLM v1's prefix-cache block hasher with ``sha256_cbor`` (cbor2 + hashlib), reproduced call
for call (see :func:`vllm_anchor`). The native and vllm chains run in C (``recipe.cache._chainhash``)
when it is compiled; the Python chains are timed beside them. Checks every vllm variant's keys are
identical to the anchor's, prints the native floor, then times longest-prefix lookups in a
MemoryPrefixIndex holding ``--keys`` block keys. Prints medians (ms) and ratios (anchor time /
scheme time); all timed functions run interleaved, so machine load hits them alike, and each
hashing call starts from cold CPU caches, so none profits from what the previous one left there.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import random
import statistics
import sysconfig
import time
from collections.abc import Callable, Sequence
from typing import Any, NewType

import cbor2

from recipe.cache import keys as cache_keys
from recipe.cache.keys import KeySpec, block_keys
from recipe.cache.index import MemoryPrefixIndex

N_TOKENS = 128 * 1024
SEED = "0"

# --------------------------------------------------------------------------- the anchor
# vLLM v1 computes a request's block keys in ``vllm/v1/core/kv_cache_utils.py``
# (``get_request_block_hasher`` -> ``generate_block_hash_extra_keys`` -> ``hash_block_tokens``)
# with ``vllm/utils/hashing.py::sha256_cbor``, slicing ``Request.all_token_ids`` (a read-only
# ``ConstantList`` view of a list, ``vllm/v1/utils.py``). Below, the same calls per block for a
# request without LoRA, multimodal inputs, cache salt or prompt embeddings, written for this
# benchmark: the Request object is built outside the timed call (the engine builds it anyway).

BlockHash = NewType("BlockHash", bytes)


def sha256_cbor(obj: Any) -> bytes:
    """vLLM ``sha256_cbor``: SHA-256 of canonical CBOR."""
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


NONE_HASH = BlockHash(sha256_cbor(SEED))  # vLLM's init_none_hash with PYTHONHASHSEED=SEED


class ReadOnlyIds(Sequence):
    """Like vLLM's ConstantList: a Python-level view whose slices are list slices."""

    def __init__(self, ids: list[int]) -> None:
        self._ids = ids

    def __getitem__(self, item):  # type: ignore[override]
        return self._ids[item]

    def __len__(self) -> int:
        return len(self._ids)


class EngineRequest:
    """The fields of vLLM's ``Request`` that the block hasher reads."""

    def __init__(self, prompt: list[int]) -> None:
        self._all_token_ids = prompt.copy()
        self.all_token_ids = ReadOnlyIds(self._all_token_ids)
        self.block_hashes: list[BlockHash] = []
        self.mm_features: list[Any] = []
        self.lora_request = None
        self.cache_salt: str | None = None
        self.prompt_embeds = None

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)


def _mm_keys(request: EngineRequest, start: int, end: int, mm_index: int) -> tuple[list[Any], int]:
    keys: list[Any] = []
    if not request.mm_features:
        return keys, mm_index
    raise NotImplementedError("the benchmark's requests carry no multimodal inputs")


def _lora_keys(request: EngineRequest) -> list[str]:
    if not request.lora_request:
        return []
    raise NotImplementedError("the benchmark's requests carry no LoRA")


def _embeds_keys(request: EngineRequest, start: int, end: int) -> list[bytes]:
    if request.prompt_embeds is None:
        return []
    raise NotImplementedError("the benchmark's requests carry no prompt embeddings")


def _extra_keys(request: EngineRequest, start: int, end: int, mm_index: int) -> tuple[tuple | None, int]:
    mm, mm_index = _mm_keys(request, start, end, mm_index)
    lora = _lora_keys(request)
    salt = [request.cache_salt] if (start == 0 and request.cache_salt) else []
    embeds = _embeds_keys(request, start, end)
    keys = lora + mm + salt + embeds
    if not keys:
        return None, mm_index
    return tuple(keys), mm_index


def _hash_block(hash_fn: Callable[[Any], bytes], parent: bytes | None, ids: Sequence[int], extra: tuple | None) -> BlockHash:
    if not parent:
        parent = NONE_HASH
    return BlockHash(hash_fn((parent, tuple(ids), extra)))


def vllm_anchor(request: EngineRequest, block_size: int) -> list[BlockHash]:
    """vLLM v1 ``request_block_hasher`` with ``sha256_cbor``: the keys of the request's new full blocks."""
    start = len(request.block_hashes) * block_size
    n = request.num_tokens
    if start + block_size > n:
        return []
    mm_index = 0 if start == 0 else -1
    parent = request.block_hashes[-1] if request.block_hashes else None
    keys: list[BlockHash] = []
    while True:
        end = start + block_size
        if end > n:
            break
        extra, mm_index = _extra_keys(request, start, end, mm_index)
        key = _hash_block(sha256_cbor, parent, request.all_token_ids[start:end], extra)
        keys.append(key)
        start += block_size
        parent = key
    return keys


def lean_anchor(ids: list[int], block_size: int) -> list[bytes]:
    """The same keys from a bare loop (no engine calls): the cost of cbor2 + hashlib alone."""
    h = NONE_HASH
    out = []
    for i in range(0, len(ids) - block_size + 1, block_size):
        h = hashlib.sha256(cbor2.dumps((h, tuple(ids[i : i + block_size]), None), canonical=True)).digest()
        out.append(h)
    return out


_SCRATCH = bytearray(64 << 20)  # larger than this machine's caches
_STRIDE = bytes(len(_SCRATCH[::64]))


def evict_caches() -> None:
    """Write one byte per 64-byte line of a 64 MiB buffer: the next call starts with cold CPU caches."""
    _SCRATCH[::64] = _STRIDE


def medians_ms(fns: dict[str, Callable[[], Any]], repeat: int, cold: bool = True) -> dict[str, float]:
    """Median wall time (ms) of each function, the functions run in turn ``repeat`` times.

    With ``cold``, the CPU caches are evicted before every timed call (untimed), so no function
    profits from data the previous one left in cache (a request's ids arrive after other work).
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            if cold:
                evict_caches()
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def python_chain(fn: Callable[[], Any], numpy: bool = True) -> Callable[[], Any]:
    """``fn`` run with the Python chains (C extension off), with or without the numpy encoder."""

    def run() -> Any:
        saved = cache_keys._chainhash, cache_keys.NUMPY_MIN_TOKENS
        cache_keys._chainhash = None
        if not numpy:
            cache_keys.NUMPY_MIN_TOKENS = 1 << 62
        try:
            return fn()
        finally:
            cache_keys._chainhash, cache_keys.NUMPY_MIN_TOKENS = saved

    return run


def workloads() -> dict[str, list[int]]:
    from recipe.tokenizer import load_tokenizer

    tok = load_tokenizer()
    text, ids = "", []
    for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        ids.extend(tok.encode_ordinary(text))
        if len(ids) >= N_TOKENS:
            break
    rng = random.Random(7)
    return {"stdlib-code": ids[:N_TOKENS], "uniform-ids": [rng.randrange(129_280) for _ in range(N_TOKENS)]}


def bench_hashing(repeat: int) -> None:
    impl = "C (recipe.cache._chainhash)" if cache_keys.ACCELERATED else "Python (recipe.cache._chainhash not compiled)"
    print(f"hashing {N_TOKENS} tokens; median of {repeat} interleaved runs, each from cold CPU caches, ms"
          f" (ratio = anchor / scheme); native and vllm chains: {impl}; -py/-numpy/-pure: the Python chains")
    cols = ["lean cbor2", "native", "native-py", "native-xxh3", "vllm", "vllm-numpy", "vllm-pure"]
    print(f"{'workload':12} {'B':>4} {'anchor':>7} " + " ".join(f"{c:>14}" for c in cols))
    floors = []
    for name, ids in workloads().items():
        for b in (16, 64, 256):
            request = EngineRequest(ids)
            ref = vllm_anchor(request, b)
            assert lean_anchor(ids, b) == ref, "the lean anchor differs from the engine path"
            vllm = KeySpec("vllm", b, hash_seed=SEED)
            for variant in (lambda: block_keys(ids, vllm), python_chain(lambda: block_keys(ids, vllm)),
                            python_chain(lambda: block_keys(ids, vllm), numpy=False)):
                assert list(variant().keys) == ref, "vllm scheme keys differ from the cbor2 reference"
            native = KeySpec("native", b, model="deepseek-v4", tokenizer="fp")
            assert block_keys(ids, native).keys == python_chain(lambda: block_keys(ids, native))().keys
            xxh3 = KeySpec("native-xxh3", b, model="deepseek-v4", tokenizer="fp")
            t = medians_ms(
                {
                    "anchor": lambda: vllm_anchor(request, b),
                    "lean cbor2": lambda: lean_anchor(ids, b),
                    "native": lambda: block_keys(ids, native),
                    "native-py": python_chain(lambda: block_keys(ids, native)),
                    "native-xxh3": lambda: block_keys(ids, xxh3),
                    "vllm": lambda: block_keys(ids, vllm),
                    "vllm-numpy": python_chain(lambda: block_keys(ids, vllm)),
                    "vllm-pure": python_chain(lambda: block_keys(ids, vllm), numpy=False),
                },
                repeat,
            )
            cells = [f"{t[c]:6.2f} ({t['anchor'] / t[c]:4.1f}x)" for c in cols]
            print(f"{name:12} {b:4d} {t['anchor']:7.2f} " + " ".join(f"{c:>14}" for c in cells))
            if name == "stdlib-code":
                floors.append((b, t["anchor"], t["native"], native_floor(ids, b, repeat)))
    print("vllm scheme keys (C, numpy and pure) identical to the cbor2 reference; native C = native Python: yes")
    print("\nnative floor (stdlib-code, cold caches as above), ms: the SHA-256 compressions this layout needs,")
    print("as one hashlib call over that many 64-byte blocks, plus reading the 128k Python ints (C: one block")
    print("of all ids, minus SHA-256 of its bytes). No single-threaded chain over list[int] ids beats their sum.")
    print(f"{'B':>4} {'anchor/20':>10} {'sha256 work':>12} {'read ids':>9} {'sum':>7} {'native':>7}")
    for b, t_anchor, t_native, (sha, read) in floors:
        print(f"{b:4d} {t_anchor / 20:10.2f} {sha:12.2f} {read:9.2f} {sha + read:7.2f} {t_native:7.2f}")


def native_floor(ids: list[int], block_size: int, repeat: int) -> tuple[float, float]:
    """(one SHA-256 over as many 64-byte blocks as the native chain compresses, reading the ids in C)."""
    per_block = -(-(32 + 4 * block_size + 4 + 9) // 64) * 64  # parent, ids, empty extras, SHA padding
    work = bytes(len(ids) // block_size * per_block)
    data = bytes(4 * len(ids))
    fns: dict[str, Callable[[], Any]] = {"work": lambda: hashlib.sha256(work).digest(),
                                         "data": lambda: hashlib.sha256(data).digest()}
    if cache_keys._chainhash is not None:
        one = cache_keys._chainhash.native
        fns["one block"] = lambda: one(bytes(32), ids, len(ids), [b""])
    t = medians_ms(fns, repeat)
    return t["work"], max(0.0, t.get("one block", t["data"]) - t["data"])


def bench_lookup(n_keys: int, repeat: int) -> None:
    index = MemoryPrefixIndex(max_entries=n_keys)
    ns = "bench"
    per_request = 2048  # a 128k-token prompt at B=64
    rng = random.Random(3)
    stored = []
    t0 = time.perf_counter()
    for r in range(n_keys // per_request + 1):
        keys = [rng.randbytes(32) for _ in range(per_request)]
        index.put(ns, keys, replica=f"r{r % 8}")
        stored.append(keys)
    fill = time.perf_counter() - t0
    print(f"\nlookup: {len(index)} keys stored (fill {fill:.1f} s)")
    for label, keys in (
        ("full hit, 2048 keys", stored[len(stored) // 2]),
        ("half hit, 2048 keys", stored[len(stored) // 3][:1024] + [rng.randbytes(32) for _ in range(1024)]),
        ("miss", [rng.randbytes(32) for _ in range(2048)]),
    ):
        t = medians_ms({"scores": lambda: index.scores(ns, keys)}, repeat, cold=False)["scores"]
        print(f"  {label:22} {t * 1000:9.1f} us per request ({t * 1e6 / len(keys):6.0f} ns per key)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ns = ap.parse_args()
    bench_hashing(ns.repeat)
    bench_lookup(ns.keys, ns.repeat)


if __name__ == "__main__":
    main()
