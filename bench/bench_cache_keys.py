"""Prefix-cache key speed: ``python bench/bench_cache_keys.py [--repeat N] [--keys N]``.

Hashes a 128k-token prompt (tokenized Python stdlib source, and uniform random ids over the V4
vocabulary) at block sizes 16/64/256 with every scheme, against the anchor measured in the same
run: vLLM's ``sha256_cbor`` written with cbor2 + hashlib. Checks the vllm scheme's keys are
identical to the anchor's, then times longest-prefix lookups in a MemoryPrefixIndex holding
``--keys`` block keys. Prints medians (ms) and ratios (anchor time / scheme time).
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

import cbor2

from recipe.cache_keys import KeySpec, block_keys
from recipe.prefix_index import MemoryPrefixIndex

N_TOKENS = 128 * 1024
SEED = "0"


def anchor(ids: list[int], block_size: int) -> list[bytes]:
    """vLLM v1 ``hash_block_tokens`` with ``sha256_cbor`` (cbor2 + hashlib), seed "0", no extras."""
    h = hashlib.sha256(cbor2.dumps(SEED, canonical=True)).digest()
    out = []
    for i in range(0, len(ids) - block_size + 1, block_size):
        h = hashlib.sha256(cbor2.dumps((h, tuple(ids[i : i + block_size]), None), canonical=True)).digest()
        out.append(h)
    return out


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


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
    schemes = {
        "native": KeySpec("native", model="deepseek-v4", tokenizer="fp"),
        "native-xxh3": KeySpec("native-xxh3", model="deepseek-v4", tokenizer="fp"),
        "vllm": KeySpec("vllm", hash_seed=SEED),
    }
    print(f"hashing {N_TOKENS} tokens; median of {repeat} runs, ms (ratio = anchor / scheme)")
    print(f"{'workload':12} {'B':>4} {'anchor cbor2':>13} " + " ".join(f"{n:>20}" for n in schemes))
    for name, ids in workloads().items():
        for b in (16, 64, 256):
            ref = anchor(ids, b)
            mine = block_keys(ids, KeySpec("vllm", b, hash_seed=SEED)).keys
            assert list(mine) == ref, "vllm scheme keys differ from the cbor2 reference"
            t_ref = median_ms(lambda: anchor(ids, b), repeat)
            cells = []
            for spec in schemes.values():
                s = KeySpec(spec.scheme, b, spec.model, spec.tokenizer, spec.salt, spec.hash_seed)
                t = median_ms(lambda: block_keys(ids, s), repeat)
                cells.append(f"{t:8.2f} ({t_ref / t:5.1f}x)")
            print(f"{name:12} {b:4d} {t_ref:13.2f} " + " ".join(f"{c:>20}" for c in cells))
    print("vllm scheme keys identical to the cbor2 reference: yes")


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
        t = median_ms(lambda: index.scores(ns, keys), repeat)
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
