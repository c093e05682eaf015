/* recipe.cache._chainhash: the SHA-256 block-key chains of recipe.cache.keys, outside the interpreter.
 *
 * Same bytes as the pure-Python chains in cache_keys.py (which stay the fallback when this module
 * is not built); SHA-256 itself is OpenSSL's (libcrypto, the library CPython's hashlib uses).
 *
 *   native(parent, ids, block_size, tails) -> list[bytes]
 *       h_i = SHA-256(h_{i-1} || uint32-LE ids of block i || tails[i]);  ids in [0, 2**32)
 *   vllm(parent, ids, block_size, tails) -> list[bytes]
 *       h_i = SHA-256(83 58 20 || h_{i-1} || CBOR array head(block_size) || CBOR uint of each id
 *                     || tails[i])                                          ids in [0, 2**64)
 *
 * parent: bytes (h_{-1}); ids: a sequence of ints with at least len(tails) * block_size items (only
 * those are read; an exact list or tuple is read in place, anything else is copied with list());
 * tails: a sequence of bytes, one per block (its length is the block count).
 * Raises TypeError for a non-integer id, OverflowError for one out of range, ValueError for bad
 * shapes or a list that an __index__ method (or a finalizer) resized while it was read.
 *
 * The GIL is held for the whole call (about 1 ms per 128k ids): no other thread can change the
 * list in between, so the keys are those of the list as the call found it, as in the Python
 * chains. Only Python code the call itself runs (an id's __index__, a finalizer during an
 * allocation) can change it, and the item array is fetched again after each such point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* SHA256_Init/Update/Final: deprecated in OpenSSL 3 in favour of EVP, but still the same
 * (SHA-NI / AVX2) code without EVP's per-call provider dispatch, which would cost more than the
 * hash itself at small blocks. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#define DIGEST 32

/* The value of an exact int below 2**30 (one CPython digit / a compact int), read without a call.
 * Returns 0 for anything else (the general path in read_id then decides). */
static inline int
small_int(PyObject *item, uint32_t *out)
{
    if (!PyLong_CheckExact(item)) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (!PyUnstable_Long_IsCompact((PyLongObject *)item)) {
        return 0;
    }
    Py_ssize_t v = PyUnstable_Long_CompactValue((PyLongObject *)item);
    if (v < 0 || v > 0x3FFFFFFF) {
        return 0;
    }
    *out = (uint32_t)v;
#else
    Py_ssize_t size = Py_SIZE(item);
    if (size == 0) {
        *out = 0;
    }
    else if (size == 1) {
        *out = (uint32_t)((PyLongObject *)item)->ob_digit[0];
    }
    else {
        return 0;
    }
#endif
    return 1;
}

/* Id i of seq (a PySequence_Fast result) as an unsigned 64-bit value <= max (array("I"/"Q", ...)
 * semantics: ints and objects with __index__). The items are re-read on every call because an
 * __index__ method may change a list under us. Returns -1 with an exception set. */
static int
read_id(PyObject *seq, Py_ssize_t i, uint64_t max, uint64_t *out)
{
    if (i >= PySequence_Fast_GET_SIZE(seq)) {
        PyErr_SetString(PyExc_ValueError, "the ids changed size while being read");
        return -1;
    }
    PyObject *item = PySequence_Fast_ITEMS(seq)[i], *num = item;
    if (!PyLong_Check(item)) {
        Py_INCREF(item);
        num = PyNumber_Index(item);
        if (num == NULL) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* not an int-like; other errors pass */
                PyErr_Format(PyExc_TypeError, "token id must be an int, not %.100s", Py_TYPE(item)->tp_name);
            }
            Py_DECREF(item);
            return -1;
        }
        Py_DECREF(item);
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(num);
    if (num != item) {
        Py_DECREF(num);
    }
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    if (v > max) {
        PyErr_Format(PyExc_OverflowError, "token id %llu is out of range", v);
        return -1;
    }
    *out = v;
    return 0;
}

/* v as 4 little-endian bytes at p. */
static inline void
store_le32(uint8_t *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 4);
#else
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
#endif
}

/* Id i of seq into *v, for a loop over i in [0, n) holding *items = PySequence_Fast_ITEMS(seq).
 * Exact small ints are read inline; anything else goes through read_id, after which *items is
 * fetched again (an __index__ method may have resized the list). Returns -1 with an exception set. */
static inline int
next_id(PyObject *seq, PyObject ***items, Py_ssize_t i, Py_ssize_t n, uint64_t max, uint64_t *v)
{
    uint32_t small;
    if (small_int((*items)[i], &small)) {
        *v = small;
        return 0;
    }
    if (read_id(seq, i, max, v) < 0) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) < n) {
        PyErr_SetString(PyExc_ValueError, "the ids changed size while being read");
        return -1;
    }
    *items = PySequence_Fast_ITEMS(seq);
    return 0;
}

typedef struct {
    PyObject *ids;       /* PySequence_Fast result (owned) */
    PyObject *tails;     /* tuple of bytes (owned) */
    const uint8_t *parent;
    Py_ssize_t block_size, n_blocks;
} Job;

static void
job_free(Job *job)
{
    Py_XDECREF(job->ids);
    Py_XDECREF(job->tails);
}

/* Parse (parent, ids, block_size, tails) into a Job. Returns -1 with an exception set. */
static int
job_init(Job *job, PyObject *args)
{
    const char *parent;
    Py_ssize_t parent_len;
    PyObject *ids, *tails;
    memset(job, 0, sizeof(*job));
    /* y#: read-only bytes only, which cannot change while the GIL is released; the call's
     * argument tuple keeps the object alive. */
    if (!PyArg_ParseTuple(args, "y#OnO:chain", &parent, &parent_len, &ids, &job->block_size, &tails)) {
        return -1;
    }
    job->parent = (const uint8_t *)parent;
    if (parent_len != DIGEST) {
        PyErr_SetString(PyExc_ValueError, "parent must be a 32-byte digest");
        return -1;
    }
    if (job->block_size < 1) {
        PyErr_SetString(PyExc_ValueError, "block_size must be >= 1");
        return -1;
    }
    job->tails = PySequence_Tuple(tails);
    if (job->tails == NULL) {
        return -1;
    }
    job->n_blocks = PyTuple_GET_SIZE(job->tails);
    /* exact types only: a list subclass's own __getitem__/__iter__ must not be bypassed */
    if (PyList_CheckExact(ids) || PyTuple_CheckExact(ids)) {
        Py_INCREF(ids);
        job->ids = ids;
    }
    else {
        job->ids = PySequence_List(ids);
        if (job->ids == NULL) {
            return -1;
        }
    }
    if (job->n_blocks > PY_SSIZE_T_MAX / job->block_size
        || PySequence_Fast_GET_SIZE(job->ids) < job->n_blocks * job->block_size) {
        PyErr_SetString(PyExc_ValueError, "fewer ids than len(tails) * block_size");
        return -1;
    }
    for (Py_ssize_t i = 0; i < job->n_blocks; i++) {
        PyObject *t = PyTuple_GET_ITEM(job->tails, i);
        if (!PyBytes_Check(t)) {
            PyErr_Format(PyExc_TypeError, "tails[%zd] must be bytes, not %.100s", i, Py_TYPE(t)->tp_name);
            return -1;
        }
    }
    return 0;
}

/* CBOR head of major type `major` with argument v, shortest form (RFC 8949 §4.2.1). */
static size_t
cbor_head(uint8_t *p, uint8_t major, uint64_t v)
{
    uint8_t m = (uint8_t)(major << 5);
    if (v < 24) {
        p[0] = m | (uint8_t)v;
        return 1;
    }
    int n = v < 0x100 ? 1 : v < 0x10000 ? 2 : v < 0x100000000ull ? 4 : 8;
    p[0] = m | (uint8_t)(n == 1 ? 24 : n == 2 ? 25 : n == 4 ? 26 : 27);
    for (int k = 0; k < n; k++) {
        p[1 + k] = (uint8_t)(v >> (8 * (n - 1 - k)));
    }
    return 1 + (size_t)n;
}

/* Ids are encoded CHUNK at a time into one small buffer, which is then hashed: the working set
 * stays in cache and no large allocation is paged in per call. */
#define CHUNK 4096
#define MAX_ID_BYTES 9 /* CBOR uint64 */

typedef struct {
    const Job *job;
    int vllm;
    uint8_t head[MAX_ID_BYTES]; /* vllm: CBOR array head of block_size */
    size_t head_len;
    PyObject *out;       /* list of n_blocks bytes objects, filled in order */
    Py_ssize_t block;    /* block being hashed */
    int open;            /* ctx holds a started block */
    const uint8_t *parent;
    SHA256_CTX ctx;
} Chain;

/* Feed the current block `len` bytes of encoded ids (starting it if needed). */
static void
feed(Chain *c, const uint8_t *data, size_t len)
{
    static const uint8_t vllm_prefix[3] = {0x83, 0x58, 0x20}; /* array(3), bytes(32): the parent */
    if (!c->open) {
        SHA256_Init(&c->ctx);
        if (c->vllm) {
            SHA256_Update(&c->ctx, vllm_prefix, sizeof(vllm_prefix));
        }
        SHA256_Update(&c->ctx, c->parent, DIGEST);
        if (c->vllm) {
            SHA256_Update(&c->ctx, c->head, c->head_len);
        }
        c->open = 1;
    }
    if (len) {
        SHA256_Update(&c->ctx, data, len);
    }
}

/* Close the current block with its tail; its digest becomes the next parent. */
static void
finish(Chain *c)
{
    const Job *job = c->job;
    PyObject *tail = PyTuple_GET_ITEM(job->tails, c->block); /* bytes, checked in job_init */
    if (PyBytes_GET_SIZE(tail)) {
        SHA256_Update(&c->ctx, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
    }
    uint8_t *d = (uint8_t *)PyBytes_AS_STRING(PyList_GET_ITEM(c->out, c->block));
    SHA256_Final(d, &c->ctx);
    c->parent = d;
    c->block++;
    c->open = 0;
}

/* The chain over job's ids: a list of n_blocks 32-byte keys, or NULL with an exception set. */
static PyObject *
run(const Job *job, int vllm)
{
    Chain c;
    memset(&c, 0, sizeof(c));
    c.job = job;
    c.vllm = vllm;
    c.parent = job->parent;
    c.head_len = cbor_head(c.head, 4, (uint64_t)job->block_size);
    uint64_t max = vllm ? UINT64_MAX : 0xFFFFFFFFu;
    size_t width = vllm ? MAX_ID_BYTES : 4;
    uint8_t *buf = PyMem_Malloc(width * CHUNK);
    size_t *cuts = PyMem_Malloc(sizeof(size_t) * (CHUNK + 1)); /* block ends inside a chunk */
    c.out = PyList_New(job->n_blocks);
    if (buf == NULL || cuts == NULL || c.out == NULL) {
        if (c.out != NULL) {
            PyErr_NoMemory();
        }
        goto fail;
    }
    /* The keys' bytes objects exist before hashing starts, which writes into them: no one else
     * holds the list until it is returned. After this, only read_id (an id that is not a small
     * exact int) runs Python code or allocates, and next_id fetches the item array again after it. */
    for (Py_ssize_t i = 0; i < job->n_blocks; i++) {
        PyObject *key = PyBytes_FromStringAndSize(NULL, DIGEST);
        if (key == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(c.out, i, key);
    }
    Py_ssize_t n = job->n_blocks * job->block_size, left = job->block_size;
    for (Py_ssize_t pos = 0; pos < n; pos += CHUNK) {
        Py_ssize_t end = pos + CHUNK < n ? pos + CHUNK : n;
        /* fetched here, after the allocations above (a finalizer they trigger may resize a list) */
        if (PySequence_Fast_GET_SIZE(job->ids) < n) {
            PyErr_SetString(PyExc_ValueError, "the ids changed size while being read");
            goto fail;
        }
        PyObject **items = PySequence_Fast_ITEMS(job->ids);
        size_t at = 0, n_cuts = 0;
        for (Py_ssize_t i = pos; i < end; i++) {
            uint64_t v;
            if (next_id(job->ids, &items, i, n, max, &v) < 0) {
                goto fail;
            }
            if (!vllm) {
                store_le32(buf + at, (uint32_t)v);
                at += 4;
            }
            else if (v < 24) {
                buf[at++] = (uint8_t)v;
            }
            else {
                at += cbor_head(buf + at, 0, v);
            }
            if (--left == 0) {
                cuts[n_cuts++] = at;
                left = job->block_size;
            }
        }
        size_t off = 0;
        for (size_t k = 0; k < n_cuts; k++) {
            feed(&c, buf + off, cuts[k] - off);
            finish(&c);
            off = cuts[k];
        }
        if (off < at) {
            feed(&c, buf + off, at - off);
        }
    }
    PyMem_Free(buf);
    PyMem_Free(cuts);
    return c.out;
fail:
    PyMem_Free(buf);
    PyMem_Free(cuts);
    Py_XDECREF(c.out);
    return NULL;
}

static PyObject *
chain_call(PyObject *args, int vllm)
{
    Job job;
    PyObject *result = NULL;
    if (job_init(&job, args) == 0) {
        result = run(&job, vllm);
    }
    job_free(&job);
    return result;
}

static PyObject *
native(PyObject *Py_UNUSED(self), PyObject *args)
{
    return chain_call(args, 0);
}

static PyObject *
vllm(PyObject *Py_UNUSED(self), PyObject *args)
{
    return chain_call(args, 1);
}

static PyMethodDef methods[] = {
    {"native", native, METH_VARARGS,
     "native(parent, ids, block_size, tails) -> list[bytes]: SHA-256(h || uint32-LE ids || tail) per block."},
    {"vllm", vllm, METH_VARARGS,
     "vllm(parent, ids, block_size, tails) -> list[bytes]: vLLM sha256_cbor per block (tail = CBOR extra keys)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "recipe.cache._chainhash",
    "SHA-256 block-key chains of recipe.cache.keys in C (OpenSSL's SHA-256).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__chainhash(void)
{
    return PyModule_Create(&module);
}
