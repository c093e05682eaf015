"""Hostile inputs for the SHA-256 key chains: the C extension (recipe.cache._chainhash) against the Python
chains and independent oracles (cbor2 + hashlib for vllm, struct + hashlib for the documented native
layout), for odd containers and int-likes, invalid ids, lists changed while read, block sizes around
the C reader's 4,096-id chunk, threads, leaks, and bad arguments to the extension itself.

Tests of the C path skip visibly where the optional extension is not compiled. The crash
reproducers (a list cleared by another thread or by a finalizer while the C chain reads it) run in
a subprocess, so a regression fails one test instead of killing the run.
"""

from __future__ import annotations

import gc
import hashlib
import os
import struct
import subprocess
import sys
import textwrap
import threading
from array import array
from concurrent.futures import ThreadPoolExecutor

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.cache import keys as cache_keys
from recipe.cache.keys import KeyChain, KeySpec, block_keys

np = pytest.importorskip("numpy")  # a declared dependency; the numpy id containers need it

CHUNK = 4096  # ids the C reader encodes into its buffer at a time (recipe/cache/_chainhash.c)
BAD_IDS = r"token ids must be ints in \[0, 2\*\*(32|64)\)"


# ---------------------------------------------------------------- independent oracles


def native_oracle(ids, block_size, model="", tokenizer="", salt=None):
    """docs/cache-keys.md, scheme native: root and h_i = SHA-256(h ‖ uint32-LE ids ‖ uint32 0)."""

    def lp(text):
        raw = (text or "").encode()
        return struct.pack("<I", len(raw)) + raw

    h = hashlib.sha256(b"recipe/prefix-cache\x00" + lp("native-sha256/1") + lp(model) + lp(tokenizer)
                       + struct.pack("<I", block_size) + lp(salt)).digest()
    out = []
    for start in range(0, len(ids) - block_size + 1, block_size):
        h = hashlib.sha256(h + struct.pack(f"<{block_size}I", *ids[start:start + block_size]) + bytes(4)).digest()
        out.append(h)
    return out


def vllm_oracle(ids, block_size, seed="0", salt=None):
    """vLLM v1 sha256_cbor chain, cbor2 canonical: h_i = sha256(cbor((h, tuple(block), extra)))."""
    h = hashlib.sha256(cbor2.dumps(seed, canonical=True)).digest()
    out = []
    for start in range(0, len(ids) - block_size + 1, block_size):
        extra = (salt,) if salt and start == 0 else None
        h = hashlib.sha256(cbor2.dumps((h, tuple(ids[start:start + block_size]), extra), canonical=True)).digest()
        out.append(h)
    return out


def spec_of(scheme, block_size):
    return KeySpec(scheme, block_size, hash_seed="0")


def oracle(scheme, ids, block_size):
    ids = [int(i) for i in ids]
    return native_oracle(ids, block_size) if scheme == "native" else vllm_oracle(ids, block_size)


# ---------------------------------------------------------------- choosing the chain implementation

IMPLS = ["c", "pure", "numpy"]  # numpy: the vectorised vllm encoder (native has one Python chain)
SCHEME_IMPLS = [(s, i) for s in ("native", "vllm") for i in IMPLS if (s, i) != ("native", "numpy")]


@pytest.fixture
def impl(request, monkeypatch):
    """Force the C chain ("c", skipped when not compiled) or a Python chain ("pure" / "numpy")."""
    name = request.param
    if name == "c":
        if not cache_keys.ACCELERATED:
            pytest.skip("recipe.cache._chainhash is not compiled here (optional): C-only case")
    else:
        monkeypatch.setattr(cache_keys, "_chainhash", None)
    monkeypatch.setattr(cache_keys, "NUMPY_MIN_TOKENS", 0 if name == "numpy" else 1 << 62)
    return name


def need_c():
    if not cache_keys.ACCELERATED:
        pytest.skip("recipe.cache._chainhash is not compiled here (optional): C-only case")
    from recipe.cache import _chainhash

    return _chainhash


class Index:
    """An int-like id (``__index__`` only), optionally running ``hook`` when read."""

    def __init__(self, value, hook=None):
        self.value, self.hook = value, hook

    def __index__(self):
        if self.hook is not None:
            self.hook()
        return self.value


class WeirdInt(int):
    """An int subclass whose __index__/__int__ lie: array() and the C reader use the int value."""

    def __index__(self):
        return 1

    def __int__(self):
        return 2


def chain_state(kc):
    return list(kc.keys), kc.num_tokens, kc._parent, list(kc._pending)


# ---------------------------------------------------------------- containers and int-likes


IDS = [0, 23, 24, 255, 256, 65_535, 65_536, 129_279, 2**31 - 1, 2**32 - 1, 7, 1] * 3  # every CBOR width

CONTAINERS = {
    "list": list,
    "tuple": tuple,
    "generator": lambda ids: (i for i in ids),
    "range": lambda ids: range(len(ids)),  # its own ids: 0 .. n-1
    "array-I": lambda ids: array("I", ids),
    "array-Q": lambda ids: array("Q", ids),
    "np-uint32": lambda ids: np.array(ids, np.uint32),
    "np-int64": lambda ids: np.array(ids, np.int64),
    "np-uint64": lambda ids: np.array(ids, np.uint64),
    "np-int32-small": lambda ids: np.array([i % 2**31 for i in ids], np.int32),
    "np-scalars": lambda ids: [np.uint32(i) for i in ids],
    "bools-and-ints": lambda ids: [True, False] + list(ids[2:]),
    "int-likes": lambda ids: [Index(i) for i in ids],
    "lying-int-subclass": lambda ids: [WeirdInt(i) for i in ids],
    "bytes": lambda ids: bytes(i % 256 for i in ids),  # an iterable of ints, taken as such
}


def plain(container, ids):
    """The ids a container stands for, as plain ints (independently of the code under test)."""
    made = CONTAINERS[container](ids)
    if container == "range":
        return list(made)
    if container == "generator":
        return list(ids)
    if container == "lying-int-subclass":
        return [int.__index__(i) for i in made]  # int's own value, not the overridden methods
    if container == "int-likes":
        return [i.value for i in made]
    return [int(i) for i in made]


@pytest.mark.parametrize(("scheme", "impl"), SCHEME_IMPLS, indirect=["impl"])
@pytest.mark.parametrize("block_size", [1, 4, 7, 36])
@pytest.mark.parametrize("container", list(CONTAINERS))
def test_every_id_container_gives_the_oracle_keys(container, scheme, block_size, impl):
    want = oracle(scheme, plain(container, IDS), block_size)
    assert len(want) == len(IDS) // block_size
    assert list(block_keys(CONTAINERS[container](IDS), spec_of(scheme, block_size)).keys) == want


@pytest.mark.parametrize("impl", IMPLS, indirect=True)
def test_vllm_64_bit_ids_and_their_containers(impl):
    ids = [2**32, 2**64 - 1, 2**63, 0, 24, 2**40 + 3, 5, 2**32 - 1]
    want = vllm_oracle(ids, 4)
    for made in (ids, tuple(ids), array("Q", ids), np.array(ids, np.uint64), [Index(i) for i in ids]):
        assert list(block_keys(made, spec_of("vllm", 4)).keys) == want


# ---------------------------------------------------------------- invalid ids: ValueError, chain unchanged


BAD = {
    "negative": -1,
    "huge": 2**100,
    "negative-huge": -(2**70),
    "2**64": 2**64,
    "float": 1.0,
    "nan": float("nan"),
    "None": None,
    "str": "1",
    "bytes": b"1",
    "np-negative": np.int32(-1),
    "np-float": np.float64(3.0),
    "np-bool": np.True_,
    "index-negative": Index(-5),
    "index-huge": Index(2**64),
    "index-returns-float": Index(2.0),
}


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
@pytest.mark.parametrize("at", [0, 13, CHUNK + 5, CHUNK + 17])  # block 0 / 2nd chunk / trailing partial
@pytest.mark.parametrize("bad", list(BAD))
def test_invalid_ids_raise_value_error_and_leave_the_chain_unchanged(bad, at, scheme, impl):
    kc = KeyChain(spec_of(scheme, 16))
    kc.extend(list(range(21)))  # one key and 5 pending ids
    before = chain_state(kc)
    ids = list(range(100, 100 + CHUNK + 11))  # with the 5 pending and the bad id: 4113 ids, 257 blocks + 1
    ids.insert(at, BAD[bad])  # at CHUNK + 17: in the trailing partial block
    with pytest.raises(ValueError, match=BAD_IDS):
        kc.extend(ids)
    assert chain_state(kc) == before
    good = list(range(300, 343))  # still usable, and still the oracle chain
    kc.extend(good)
    assert kc.keys == oracle(scheme, list(range(21)) + good, 16)


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
def test_native_rejects_ids_that_only_vllm_accepts(impl):
    for bad in (2**32, np.uint64(2**32), Index(2**63)):
        with pytest.raises(ValueError, match=r"2\*\*32"):
            block_keys([1, 2, bad, 3], spec_of("native", 2))
        assert list(block_keys([1, 2, bad, 3], spec_of("vllm", 2)).keys) == vllm_oracle([1, 2, int(bad), 3], 2)


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_errors_inside_index_propagate_unchanged(scheme, impl):
    def boom():
        raise KeyboardInterrupt  # never turned into a ValueError, never swallowed

    kc = KeyChain(spec_of(scheme, 4))
    for at in (1, 5):
        with pytest.raises(KeyboardInterrupt):
            kc.extend([1, 2, 3, 4, 5, 6, 7, 8][:at] + [Index(9, boom)] + [1] * 7)
        assert chain_state(kc) == ([], 0, kc.spec.root(), [])


# ---------------------------------------------------------------- block sizes, chunks, incremental feeding


@pytest.mark.parametrize(("scheme", "impl"), SCHEME_IMPLS, indirect=["impl"])
@pytest.mark.parametrize("block_size", [1, CHUNK - 1, CHUNK, CHUNK + 1, 5000, 3 * CHUNK + 7, 20_000])
def test_block_sizes_around_the_c_chunk(block_size, scheme, impl):
    ids = [(i * 2_654_435_761) % (2**32 if i % 3 else 300) for i in range(3 * CHUNK + 50)]
    if block_size == 1:
        ids = ids[:1500]  # the oracle's per-block cbor2 call is the slow part here
    want = oracle(scheme, ids, block_size)
    assert len(want) == len(ids) // block_size
    assert list(block_keys(ids, spec_of(scheme, block_size)).keys) == want
    kc = KeyChain(spec_of(scheme, block_size))  # fed in pieces crossing block and chunk boundaries
    got, at = [], 0
    for size in (1, CHUNK - 3, 2, block_size, CHUNK + 1, len(ids)):
        got += kc.extend(ids[at:at + size])
        at += size
    assert got == want and kc.keys == want and kc.num_tokens == len(ids)


@pytest.mark.parametrize(("scheme", "impl"), SCHEME_IMPLS, indirect=["impl"])
def test_blocks_above_65535_ids_use_the_4_byte_cbor_array_head(scheme, impl):
    ids = [(i * 7) % 2**32 for i in range(2 * 65_537 + 3)]
    assert list(block_keys(ids, spec_of(scheme, 65_537)).keys) == oracle(scheme, ids, 65_537)


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_empty_and_shorter_than_a_block(scheme, impl):
    for ids in ([], [5], list(range(63))):
        kc = KeyChain(spec_of(scheme, 64))
        assert kc.extend(ids) == [] and kc.keys == [] and kc.num_tokens == len(ids)
        assert block_keys(ids, spec_of(scheme, 64)).keys == ()
    kc = KeyChain(spec_of(scheme, 2**31 - 1))  # the largest block size KeySpec allows
    assert kc.extend(range(1000)) == [] and kc.num_tokens == 1000


@settings(max_examples=120, deadline=None)
@given(
    ids=st.lists(st.integers(0, 23) | st.integers(0, 129_279) | st.integers(0, 2**32 - 1), max_size=400),
    block_size=st.integers(1, 40),
    cuts=st.lists(st.integers(0, 400), max_size=5),
    scheme=st.sampled_from(["native", "vllm"]),
    c=st.booleans(),
    wrap=st.sampled_from(["list", "tuple", "array-I", "np-uint64", "int-likes"]),
)
def test_random_prompts_fed_in_pieces_match_the_oracle(ids, block_size, cuts, scheme, c, wrap):
    saved = cache_keys._chainhash
    if not c:
        cache_keys._chainhash = None
    try:
        kc = KeyChain(spec_of(scheme, block_size))
        got, start = [], 0
        for end in sorted(cuts) + [len(ids)]:
            piece = ids[start:max(start, end)]
            got += kc.extend(CONTAINERS[wrap](piece))
            start = max(start, end)
    finally:
        cache_keys._chainhash = saved
    want = oracle(scheme, ids, block_size)
    assert got == want and kc.keys == want and kc.num_tokens == len(ids)


def test_a_large_prompt_matches_the_oracle():
    ids = [(i * 7919) % 129_280 for i in range(1_000_000)]
    for scheme in ("native", "vllm"):
        want = native_oracle(ids, 4096) if scheme == "native" else None
        got = block_keys(ids, spec_of(scheme, 4096)).keys
        assert len(got) == 244
        if want is not None:
            assert list(got) == want
        else:  # cbor2 over 1M ids is slow: check the first, a middle and the last blocks' chain links
            assert list(got[:2]) == vllm_oracle(ids[:8192], 4096)
            h = got[-2]
            last = hashlib.sha256(cbor2.dumps((h, tuple(ids[243 * 4096:244 * 4096]), None), canonical=True)).digest()
            assert got[-1] == last


# ---------------------------------------------------------------- lists changed while they are read


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_index_replacing_a_later_item_is_read_live(scheme, impl):
    ids: list = list(range(200, 216))
    ids[3] = Index(3, hook=lambda: ids.__setitem__(9, 99_999))  # before position 9 is read
    got = block_keys(ids, spec_of(scheme, 4)).keys
    assert list(got) == oracle(scheme, [200, 201, 202, 3, 204, 205, 206, 207, 208, 99_999] + list(range(210, 216)), 4)


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_index_growing_the_list_keys_the_ids_there_when_the_call_began(scheme, impl):
    ids: list = list(range(64))
    ids[10] = Index(10, hook=lambda: ids.extend(range(5000, 5000 + 20_000)))  # reallocates the list
    got = block_keys(ids, spec_of(scheme, 16)).keys
    assert list(got) == oracle(scheme, list(range(64)), 16)


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_index_shrinking_the_list_is_a_value_error_and_the_chain_is_unchanged(scheme, impl):
    for shrink in (list.clear, lambda lst: lst.__delitem__(slice(20, None))):
        ids: list = list(range(64))
        ids[10] = Index(10, hook=lambda: shrink(ids))
        kc = KeyChain(spec_of(scheme, 16))
        with pytest.raises(ValueError, match="changed size"):
            kc.extend(ids)
        assert chain_state(kc) == ([], 0, kc.spec.root(), [])


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_index_writing_a_bad_id_into_the_pending_tail_is_rejected(scheme, impl):
    ids: list = list(range(10))  # block size 4: two blocks, ids 8 and 9 pending
    ids[3] = Index(3, hook=lambda: ids.__setitem__(9, "x"))
    kc = KeyChain(spec_of(scheme, 4))
    with pytest.raises(ValueError, match=BAD_IDS):
        kc.extend(ids)
    assert chain_state(kc) == ([], 0, kc.spec.root(), [])


class ShiftedList(list):
    """A list subclass whose indexing (not its iteration) adds 1 to every id."""

    def __getitem__(self, i):
        got = super().__getitem__(i)
        return [x + 1 for x in got] if isinstance(i, slice) else got + 1


@pytest.mark.parametrize("scheme", ["native", "vllm"])
def test_list_subclasses_give_the_same_keys_in_c_and_python(scheme, monkeypatch):
    need_c()
    ids = ShiftedList(range(16))
    keys_c = block_keys(ids, spec_of(scheme, 4)).keys
    monkeypatch.setattr(cache_keys, "_chainhash", None)
    keys_py = block_keys(ids, spec_of(scheme, 4)).keys
    assert keys_c == keys_py
    assert list(keys_c) in (oracle(scheme, list(range(16)), 4), oracle(scheme, list(range(1, 17)), 4))


# ---------------------------------------------------------------- threads


def test_many_chains_hashed_concurrently_equal_the_single_threaded_keys():
    ids = [(i * 40_503) % 129_280 for i in range(3 * CHUNK + 100)]
    jobs = [(scheme, b, ids[: len(ids) - 7 * k]) for k in range(4) for scheme in ("native", "vllm") for b in (16, 5000)]
    want = {i: block_keys(p, spec_of(s, b)).keys for i, (s, b, p) in enumerate(jobs)}
    assert list(want[0]) == native_oracle(jobs[0][2], 16)

    def run(i):
        s, b, p = jobs[i]
        kc = KeyChain(spec_of(s, b))
        for at in range(0, len(p), 3001):
            kc.extend(p[at:at + 3001])
        return i, tuple(kc.keys), block_keys(p, spec_of(s, b)).keys

    with ThreadPoolExecutor(6) as pool:
        for i, incremental, whole in pool.map(run, list(want) * 4):
            assert incremental == whole == want[i]


def test_one_list_hashed_by_many_threads_at_once():
    ids = [(i * 2_654_435_761) % 2**32 for i in range(4 * CHUNK + 3)]
    want = tuple(native_oracle(ids, 64))
    with ThreadPoolExecutor(6) as pool:
        assert all(k == want for k in pool.map(lambda _: block_keys(ids, spec_of("native", 64)).keys, range(24)))


@pytest.mark.parametrize("impl", IMPLS[:2], indirect=True)
def test_one_keychain_extended_from_two_threads_is_some_serial_order(impl):
    kc = KeyChain(spec_of("native", 4))
    inside, other_done = threading.Event(), threading.Event()

    def gate():  # thread A is inside extend: let thread B extend the same chain meanwhile
        inside.set()
        other_done.wait(0.5)  # a lock in extend makes B wait for A instead: A goes on after 0.5 s

    a = threading.Thread(target=kc.extend, args=([Index(1, gate), 2, 3, 4],))
    b = threading.Thread(target=lambda: (kc.extend([5, 6, 7, 8, 9]), other_done.set()))
    a.start()
    assert inside.wait(5)
    b.start()
    a.join(5)
    b.join(5)
    serial = [1, 2, 3, 4, 5, 6, 7, 8, 9], [5, 6, 7, 8, 9, 1, 2, 3, 4]
    assert kc.num_tokens == 9
    assert kc.keys in [native_oracle(ids, 4) for ids in serial]


def _run_isolated(code):
    """Run ``code`` in a fresh interpreter importing this same recipe package; (returncode, output)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(cache_keys.__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_list_cleared_by_another_thread_during_c_hashing_does_not_crash():
    need_c()
    rc, out = _run_isolated("""
        import threading
        from recipe.cache.keys import KeySpec, block_keys

        class Signal:  # the first id: tells the other thread that the C chain is reading the list
            def __index__(self):
                inside.set()
                return 7

        for trial in range(3):
            inside = threading.Event()
            ids = [7] * 5_000_000  # 40 MB of item pointers: mmap'ed, unmapped again by clear()
            ids[0] = Signal()
            t = threading.Thread(target=lambda: (inside.wait(10), ids.clear()))
            t.start()
            try:
                print("keys", len(block_keys(ids, KeySpec("native", 1024)).keys))
            except ValueError as exc:
                print("ValueError", exc)
            t.join()
    """)
    assert rc == 0, out
    assert all(line in ("ValueError the ids changed size while being read", "keys 4882")
               for line in out.splitlines()), out


def test_a_gc_finalizer_clearing_the_ids_inside_the_c_call_does_not_crash():
    need_c()
    rc, out = _run_isolated("""
        import gc
        from recipe.cache import _chainhash

        ids = list(range(1000, 1064))
        tails = (b"",) * 4

        class Bomb:
            def __del__(self):
                ids.clear()

        gc.disable()
        bomb = Bomb()
        bomb.cycle = bomb
        del bomb
        keep = [[] for _ in range(200)]  # empties the list free list: PyList_New allocates (and collects)
        gc.enable()
        gc.set_threshold(1)
        try:
            print("keys", len(_chainhash.native(bytes(32), ids, 16, tails)))
        except ValueError as exc:
            print("ValueError", exc)
    """)
    assert rc == 0, out
    assert out.strip() in ("ValueError the ids changed size while being read", "keys 4"), out


# ---------------------------------------------------------------- the extension called directly


def test_chainhash_direct_calls_match_the_layouts_with_any_tails():
    ch = need_c()
    parent = hashlib.sha256(b"p").digest()
    ids = [0, 23, 24, 255, 256, 65_536, 2**32 - 1, 9]
    tails = [b"", b"\x01\x02", b"x" * 100, b"\xf6"]
    h, native = parent, []
    for i, t in enumerate(tails):
        h = hashlib.sha256(h + struct.pack("<2I", *ids[2 * i:2 * i + 2]) + t).digest()
        native.append(h)
    assert ch.native(parent, ids, 2, tails) == native
    h, vllm = parent, []
    for i, t in enumerate(tails):  # the tail is the already-encoded third array item
        body = cbor2.dumps(tuple(ids[2 * i:2 * i + 2]), canonical=True)
        h = hashlib.sha256(b"\x83\x58\x20" + h + body + t).digest()
        vllm.append(h)
    assert ch.vllm(parent, ids + [1, 2, 3], 2, iter(tails)) == vllm  # extra ids unread, any iterable of tails


class BytesSub(bytes):
    pass


@pytest.mark.parametrize("fn", ["native", "vllm"])
def test_chainhash_rejects_bad_arguments_without_crashing(fn):
    f = getattr(need_c(), fn)
    p = bytes(32)
    bad_calls = [
        ((), TypeError),
        ((p, [1, 2], 2), TypeError),
        ((p, [1, 2], 2, [b""], 5), TypeError),
        (("x" * 32, [1, 2], 2, [b""]), TypeError),
        ((None, [1, 2], 2, [b""]), TypeError),
        ((memoryview(p), [1, 2], 2, [b""]), TypeError),
        ((bytes(33), [1, 2], 2, [b""]), ValueError),
        ((b"", [], 2, []), ValueError),
        ((p, None, 2, [b""]), TypeError),
        ((p, 12, 2, [b""]), TypeError),
        ((p, "ab", 2, [b""]), TypeError),  # a str is a sequence of str, not of ints
        ((p, [1, 2], 2.0, [b""]), TypeError),
        ((p, [1, 2], "2", [b""]), TypeError),
        ((p, [1, 2], -1, [b""]), ValueError),
        ((p, [1, 2], -(2**63), [b""]), ValueError),
        ((p, [1, 2], 2**63, [b""]), OverflowError),
        ((p, [1, 2, 3], 2**62, [b"", b"", b""]), ValueError),  # n_blocks * block_size overflows
        ((p, [1, 2], 2, None), TypeError),
        ((p, [1, 2], 2, 5), TypeError),
        ((p, [1, 2], 2, [bytearray(2)]), TypeError),
        ((p, [1, 2], 2, [memoryview(b"ab")]), TypeError),
        ((p, [1, 2], 2, [None]), TypeError),
        ((p, [1, 2, 3], 2, [b"", b""]), ValueError),  # fewer ids than blocks
        ((p, [1, -2], 2, [b""]), OverflowError),
        ((p, [1, 2**64], 2, [b""]), OverflowError),
        ((p, [1, 2.0], 2, [b""]), TypeError),
    ]
    for args, exc in bad_calls:
        with pytest.raises(exc):
            f(*args)
    assert f(p, [1, 2], 2, [BytesSub(b"t")]) == f(p, [1, 2], 2, [b"t"])  # bytes subclasses are bytes
    assert f(p, {1: 0, 2: 0}, 2, (b"",)) == f(p, [1, 2], 2, [b""])  # any iterable is listed first
    assert f(p, [1, 2], 2, []) == [] and f(p, [], 1, ()) == []


def _rss_kib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS read from /proc (Linux)")
def test_no_leaks_over_many_calls_including_error_paths():
    ch = need_c()
    p = bytes(32)

    def boom():
        raise RuntimeError("boom")

    calls = [
        lambda: block_keys(list(range(64)), spec_of("native", 4)),
        lambda: block_keys([Index(10**9 + i) for i in range(64)], spec_of("vllm", 4)),  # fresh ints
        lambda: block_keys([Index(10**9 + i) for i in range(63)] + [Index(-10**9)], spec_of("native", 4)),
        lambda: block_keys([1, 2, 3, -1] * 4, spec_of("native", 4)),
        lambda: block_keys([1, 2, 3, 2**64] * 4, spec_of("vllm", 4)),
        lambda: block_keys([1, 2, Index(1.5), 3], spec_of("vllm", 4)),
        lambda: block_keys([1, 2, Index(3, boom), 3], spec_of("native", 4)),
        lambda: block_keys(list(range(CHUNK + 8)) + [None] + [0] * 7, spec_of("native", 8)),
        lambda: ch.native(p, [1, 2], 2, [b"", "x"]),
        lambda: ch.vllm(p, [1, 2, 3, "a"], 2, [b"", b""]),
        lambda: ch.vllm(bytes(31), [1, 2], 2, [b""]),
        lambda: ch.native(p, [1], 2, [b""]),
        lambda: ch.vllm(p, 5, 2, [b""]),
    ]

    def run(rounds):
        for _ in range(rounds):
            for call in calls:
                try:
                    call()
                except (ValueError, TypeError, OverflowError, RuntimeError):
                    pass
        gc.collect()

    run(100)
    blocks, rss = sys.getallocatedblocks(), _rss_kib()
    run(1500)
    assert sys.getallocatedblocks() - blocks < 500  # a leaked object per call would be >= 1,500
    assert _rss_kib() - rss < 16 * 1024  # a leaked 36 kB chunk buffer per call would be > 50 MB
