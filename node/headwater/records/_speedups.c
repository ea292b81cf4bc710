/*
 * headwater.records._speedups: the native record codec.
 *
 * Why C: the per-record varint format is the client's per-record cost (the
 * producer target is 300k records/s, the consumer 400k) and in pure Python it
 * is ~1-2.6 us per record.  This module does the same work with no Python
 * object per varint or slice:
 *
 *   encode(records, default_timestamp_ms) -> (bytes, base_ts, max_ts)
 *   decode(data, count, base_offset, base_timestamp, log_append_time[, prefix, cls])
 *       -> list
 *   RecordsBuilder(capacity)  .append(key, value, headers, ts) -> index
 *                             .append_thunk(key, value, headers, ts, callback, thunks)
 *                             .append_future(..., callback, thunks, result, cls) -> future
 *                             .records() / .batch(header_tail) when full
 *
 * The producer's own C code (its send path and callback loop) is a separate
 * extension, headwater.client.producer._native: this module knows no client type.
 *
 * The byte format is documented in record_codec.py (PythonRecordCodec is the
 * reference implementation; tests check both produce the same bytes and the
 * same errors).  decode() makes ConsumedRecord tuples directly with the
 * NamedTuple type's tp_alloc, without calling its Python constructor.
 *
 * Plain CPython C API, no third-party build dependency: setuptools compiles
 * it from pyproject.toml.  Every function runs with the GIL held and calls no
 * Python code between measuring a record and writing it, so a builder's
 * buffer cannot change under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static PyObject *CorruptRecordError; /* headwater.errors.CorruptRecordError */
static PyTypeObject *ConsumedRecordType; /* headwater.records.record.ConsumedRecord */

/* ---- zigzag varints ---------------------------------------------------- */

static inline uint64_t zigzag(int64_t n) {
    return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
}

static inline Py_ssize_t uvarint_size(uint64_t z) {
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline Py_ssize_t varint_size(int64_t n) { return uvarint_size(zigzag(n)); }

static inline char *put_varint(char *p, int64_t n) {
    uint64_t z = zigzag(n);
    while (z >= 0x80) {
        *p++ = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    return p;
}

/* ---- measuring and writing one record ---------------------------------- */

/* A key, value or header value: NULL (None) or a byte span. */
typedef struct {
    const char *ptr;
    Py_ssize_t len;
    int is_null;
    int has_view;
    Py_buffer view;
} span_t;

static int span_get(PyObject *obj, span_t *s, const char *what) {
    s->has_view = 0;
    if (obj == Py_None) {
        s->is_null = 1;
        s->ptr = NULL;
        s->len = 0;
        return 0;
    }
    s->is_null = 0;
    if (PyBytes_CheckExact(obj)) {
        s->ptr = PyBytes_AS_STRING(obj);
        s->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &s->view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes-like or None, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    s->has_view = 1;
    s->ptr = (const char *)s->view.buf;
    s->len = s->view.len;
    return 0;
}

static void span_release(span_t *s) {
    if (s->has_view) {
        PyBuffer_Release(&s->view);
        s->has_view = 0;
    }
}

static inline Py_ssize_t span_size(const span_t *s) {
    return s->is_null ? 1 : varint_size(s->len) + s->len;
}

static inline char *span_write(char *p, const span_t *s) {
    if (s->is_null) {
        *p++ = 0x01; /* zigzag(-1) */
        return p;
    }
    p = put_varint(p, s->len);
    memcpy(p, s->ptr, (size_t)s->len);
    return p + s->len;
}

typedef struct {
    const char *key;
    Py_ssize_t key_len;
    span_t value;
    PyObject *hold; /* a list made from a non-tuple header item, or NULL */
} header_t;

#define LOCAL_HEADERS 8

typedef struct {
    span_t key, value;
    PyObject *headers_seq; /* PySequence_Fast of the headers, or NULL */
    header_t *headers;
    Py_ssize_t n_headers, n_ready;
    header_t local[LOCAL_HEADERS];
    Py_ssize_t body; /* bytes after the length varint */
    Py_ssize_t total;
} record_t;

static void record_release(record_t *r) {
    span_release(&r->key);
    span_release(&r->value);
    for (Py_ssize_t i = 0; i < r->n_ready; i++) {
        span_release(&r->headers[i].value);
        Py_XDECREF(r->headers[i].hold);
    }
    if (r->headers != NULL && r->headers != r->local) PyMem_Free(r->headers);
    r->headers = NULL;
    r->n_ready = 0;
    Py_CLEAR(r->headers_seq);
}

static int record_headers(record_t *r, PyObject *headers) {
    r->headers_seq = NULL;
    r->headers = r->local;
    r->n_headers = 0;
    r->n_ready = 0;
    if (headers == Py_None) return 0;
    if (PyTuple_CheckExact(headers) && PyTuple_GET_SIZE(headers) == 0) return 0;
    if (!PyTuple_Check(headers) && !PyList_Check(headers)) {
        int truth = PyObject_IsTrue(headers);
        if (truth <= 0) return truth;
    }
    r->headers_seq = PySequence_Fast(headers, "record headers must be a sequence");
    if (r->headers_seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(r->headers_seq);
    if (n > LOCAL_HEADERS) {
        r->headers = PyMem_Malloc(sizeof(header_t) * (size_t)n);
        if (r->headers == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    r->n_headers = n;
    PyObject **items = PySequence_Fast_ITEMS(r->headers_seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        header_t *h = &r->headers[i];
        PyObject *item = items[i], *hkey, *hvalue;
        h->hold = NULL;
        if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2) {
            hkey = PyTuple_GET_ITEM(item, 0);
            hvalue = PyTuple_GET_ITEM(item, 1);
        } else {
            h->hold = PySequence_Fast(item, "a record header must be a (key, value) pair");
            if (h->hold == NULL) return -1;
            if (PySequence_Fast_GET_SIZE(h->hold) != 2) {
                Py_CLEAR(h->hold);
                PyErr_SetString(PyExc_ValueError, "a record header must be a (key, value) pair");
                return -1;
            }
            hkey = PySequence_Fast_GET_ITEM(h->hold, 0);
            hvalue = PySequence_Fast_GET_ITEM(h->hold, 1);
        }
        if (!PyUnicode_Check(hkey)) {
            Py_CLEAR(h->hold);
            PyErr_Format(PyExc_TypeError, "header keys are str, not %.100s",
                         Py_TYPE(hkey)->tp_name);
            return -1;
        }
        h->key = PyUnicode_AsUTF8AndSize(hkey, &h->key_len);
        if (h->key == NULL || span_get(hvalue, &h->value, "header value") < 0) {
            Py_CLEAR(h->hold);
            return -1;
        }
        r->n_ready = i + 1;
    }
    return 0;
}

/* Gather the record's fields and measure it; record_release() in every case. */
static int record_prepare(record_t *r, PyObject *key, PyObject *value, PyObject *headers,
                          int64_t timestamp_delta, int64_t offset_delta) {
    r->key.has_view = r->value.has_view = 0;
    r->headers_seq = NULL;
    r->headers = NULL;
    r->n_ready = 0;
    if (span_get(key, &r->key, "key") < 0) return -1;
    if (span_get(value, &r->value, "value") < 0) return -1;
    if (record_headers(r, headers) < 0) return -1;
    Py_ssize_t body = 1 + varint_size(timestamp_delta) + varint_size(offset_delta) +
                      span_size(&r->key) + span_size(&r->value) + varint_size(r->n_headers);
    for (Py_ssize_t i = 0; i < r->n_headers; i++) {
        header_t *h = &r->headers[i];
        body += varint_size(h->key_len) + h->key_len + span_size(&h->value);
    }
    r->body = body;
    r->total = varint_size(body) + body;
    return 0;
}

/* Write the record at p; with value_at != NULL the value's bytes are left out
 * (the caller keeps the value and inserts it later at *value_at). */
static char *record_write(const record_t *r, char *p, int64_t timestamp_delta,
                          int64_t offset_delta, char **value_at) {
    p = put_varint(p, r->body);
    *p++ = 0; /* attributes */
    p = put_varint(p, timestamp_delta);
    p = put_varint(p, offset_delta);
    p = span_write(p, &r->key);
    if (value_at != NULL) {
        p = put_varint(p, r->value.len);
        *value_at = p;
    } else {
        p = span_write(p, &r->value);
    }
    p = put_varint(p, r->n_headers);
    for (Py_ssize_t i = 0; i < r->n_headers; i++) {
        const header_t *h = &r->headers[i];
        p = put_varint(p, h->key_len);
        memcpy(p, h->key, (size_t)h->key_len);
        p += h->key_len;
        p = span_write(p, &h->value);
    }
    return p;
}

/* ---- a growing byte buffer ------------------------------------------------ */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} growbuf_t;

static int growbuf_reserve(growbuf_t *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static void growbuf_free(growbuf_t *b) {
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Append one record with the given deltas to buf. */
static int append_record(growbuf_t *buf, PyObject *key, PyObject *value, PyObject *headers,
                         int64_t timestamp_delta, int64_t offset_delta) {
    record_t r;
    int rc = -1;
    if (record_prepare(&r, key, value, headers, timestamp_delta, offset_delta) == 0 &&
        growbuf_reserve(buf, r.total) == 0) {
        char *end = record_write(&r, buf->data + buf->len, timestamp_delta, offset_delta, NULL);
        buf->len = end - buf->data;
        rc = 0;
    }
    record_release(&r);
    return rc;
}

static int as_int64(PyObject *obj, int64_t *out, const char *what) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s does not fit an int64", what);
        }
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

static int timestamp_delta(int64_t timestamp, int64_t base, int64_t *delta) {
    if (__builtin_sub_overflow(timestamp, base, delta)) {
        PyErr_Format(PyExc_ValueError,
                     "timestamp delta %lld - %lld does not fit a varlong (int64)",
                     (long long)timestamp, (long long)base);
        return -1;
    }
    return 0;
}

/* ---- encode ------------------------------------------------------------- */

static PyObject *codec_encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode(records, default_timestamp_ms)");
        return NULL;
    }
    int64_t default_ts;
    if (as_int64(args[1], &default_ts, "default_timestamp_ms") < 0) return NULL;
    PyObject *seq = PySequence_Fast(args[0], "records must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "no records to encode");
        return NULL;
    }
    growbuf_t buf = {NULL, 0, 0};
    int64_t base = 0, max_ts = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = PySequence_Fast(items[i], "a record must be a 4-tuple");
        if (rec == NULL) goto error;
        if (PySequence_Fast_GET_SIZE(rec) != 4) {
            Py_DECREF(rec);
            PyErr_SetString(PyExc_ValueError,
                            "a record must be (key, value, headers, timestamp_ms)");
            goto error;
        }
        PyObject **f = PySequence_Fast_ITEMS(rec);
        int64_t ts = default_ts, delta;
        if (f[3] != Py_None && as_int64(f[3], &ts, "timestamp_ms") < 0) {
            Py_DECREF(rec);
            goto error;
        }
        if (i == 0) base = max_ts = ts;
        if (ts > max_ts) max_ts = ts;
        int rc = timestamp_delta(ts, base, &delta);
        if (rc == 0) rc = append_record(&buf, f[0], f[1], f[2], delta, (int64_t)i);
        Py_DECREF(rec);
        if (rc < 0) goto error;
    }
    Py_DECREF(seq);
    PyObject *data = PyBytes_FromStringAndSize(buf.data, buf.len);
    growbuf_free(&buf);
    if (data == NULL) return NULL;
    return Py_BuildValue("(NLL)", data, (long long)base, (long long)max_ts);
error:
    Py_DECREF(seq);
    growbuf_free(&buf);
    return NULL;
}

/* ---- decode ------------------------------------------------------------- */

enum { RD_OK = 0, RD_PAST_END = -1, RD_TOO_LONG = -2 };

/* Read a zigzag varint of at most 10 bytes whose value fits 64 bits. */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* the common case: one byte */
        uint64_t z = *p;
        *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
        *pp = p + 1;
        return RD_OK;
    }
    uint64_t z = 0;
    for (int shift = 0;; shift += 7) {
        if (p >= end) return RD_PAST_END;
        if (shift >= 70) return RD_TOO_LONG;
        uint8_t b = *p++;
        if (shift == 63 && (b & 0x7E)) return RD_TOO_LONG; /* bits beyond 64 */
        z |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
    }
    *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    *pp = p;
    return RD_OK;
}

static PyObject *sum_int64(int64_t a, int64_t b) {
    int64_t s;
    if (!__builtin_add_overflow(a, b, &s)) return PyLong_FromLongLong(s);
    PyObject *x = PyLong_FromLongLong(a), *y = PyLong_FromLongLong(b), *r = NULL;
    if (x != NULL && y != NULL) r = PyNumber_Add(x, y);
    Py_XDECREF(x);
    Py_XDECREF(y);
    return r;
}

/* Error text for the record being decoded; the caller prefixes "record i of n". */
typedef struct {
    int kind; /* RD_PAST_END, RD_TOO_LONG or 1 for a message in text */
    Py_ssize_t at;
    char text[200];
} fail_t;

#define READ(dst)                                         \
    do {                                                  \
        int rc_ = read_varint(&p, end, &(dst));           \
        if (rc_ != RD_OK) {                               \
            fail->kind = rc_;                             \
            fail->at = p - start;                         \
            goto fail;                                    \
        }                                                 \
    } while (0)

#define FAIL(...)                                                  \
    do {                                                           \
        fail->kind = 1;                                            \
        PyOS_snprintf(fail->text, sizeof(fail->text), __VA_ARGS__); \
        goto fail;                                                 \
    } while (0)

/* Decode the headers at *pp into a tuple; NULL with fail set, or a Python error. */
static PyObject *decode_headers(const uint8_t **pp, const uint8_t *end, const uint8_t *start,
                                int64_t count, fail_t *fail) {
    const uint8_t *p = *pp;
    PyObject *out = NULL;
    if (count < 0) FAIL("negative header count %lld", (long long)count);
    if (count > (end - p) / 2) { /* each header takes at least two bytes */
        fail->kind = RD_PAST_END;
        goto fail;
    }
    out = PyTuple_New((Py_ssize_t)count);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t n;
        READ(n);
        if (n < 0) FAIL("header key length %lld", (long long)n);
        if (n > end - p) {
            fail->kind = RD_PAST_END;
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "strict");
        if (key == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto error;
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            PyObject *text = value ? PyObject_Str(value) : NULL;
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            if (text == NULL) goto error;
            const char *utf8 = PyUnicode_AsUTF8(text);
            fail->kind = 1;
            PyOS_snprintf(fail->text, sizeof(fail->text), "header key is not UTF-8: %s",
                          utf8 ? utf8 : "?");
            Py_DECREF(text);
            if (utf8 == NULL) goto error;
            goto fail;
        }
        p += n;
        PyObject *value;
        int rc = read_varint(&p, end, &n);
        if (rc != RD_OK) {
            Py_DECREF(key);
            fail->kind = rc;
            goto fail;
        }
        if (n >= 0) {
            if (n > end - p) {
                Py_DECREF(key);
                fail->kind = RD_PAST_END;
                goto fail;
            }
            value = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
            p += n;
        } else if (n == -1) {
            value = Py_NewRef(Py_None);
        } else {
            Py_DECREF(key);
            FAIL("header value length %lld", (long long)n);
        }
        if (value == NULL) {
            Py_DECREF(key);
            goto error;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyObject_GC_UnTrack(pair); /* a str and bytes or None: no cycle possible */
        PyTuple_SET_ITEM(out, i, pair);
    }
    PyObject_GC_UnTrack(out); /* untracked pairs only */
    *pp = p;
    return out;
fail:
    fail->at = p - start;
    Py_XDECREF(out);
    return NULL;
error:
    fail->kind = 0;
    Py_XDECREF(out);
    return NULL;
}

/*
 * Whether records of cls with prefix's items in front may be left out of the
 * cyclic garbage collector.  A record holds ints, bytes, None, a str and a
 * tuple of (str, bytes-or-None) pairs: nothing that can refer back to it, so
 * it can never be part of a cycle.  Tracked, a consumer's records (hundreds of
 * thousands a second, alive while they wait for poll) were traversed again and
 * again by collections they could never be freed by: about as much CPU as
 * decoding them.  cls must add nothing to the tuple (no __dict__, no slots, no
 * weak references), and prefix must hold only untracked objects (str, int).
 */
static int untrackable(PyTypeObject *cls, PyObject *prefix) {
    if (cls->tp_basicsize != PyTuple_Type.tp_basicsize || cls->tp_dictoffset != 0 ||
        cls->tp_weaklistoffset != 0)
        return 0;
    if (prefix != NULL)
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(prefix); i++)
            if (PyObject_GC_IsTracked(PyTuple_GET_ITEM(prefix, i))) return 0;
    return 1;
}

/*
 * A record of cls with n items, every one of them to be set before it is used or
 * released.  Untrackable: allocated untracked and not zeroed, as PyTuple_New does
 * (a tuple subclass that adds nothing is laid out as a tuple; from 3.14 on tuples
 * carry more than their items, so there the type's own allocator is used).
 * Otherwise the type's allocator, which zeroes and tracks it.
 */
static PyObject *new_record(PyTypeObject *cls, Py_ssize_t n, int untrack) {
#if PY_VERSION_HEX < 0x030E0000
    if (untrack) return (PyObject *)PyObject_GC_NewVar(PyTupleObject, cls, n);
#endif
    PyObject *rec = cls->tp_alloc(cls, n);
    if (rec != NULL && untrack) PyObject_GC_UnTrack(rec);
    return rec;
}

/*
 * decode(data, count, base_offset, base_timestamp, log_append_time[, prefix, cls]):
 * with prefix (a tuple) and cls (a tuple subclass), each record is a cls of
 * prefix's items followed by the five ConsumedRecord fields -- the consumer's
 * ConsumerRecord (topic, partition, ...) made in one allocation, not a
 * ConsumedRecord concatenated to (topic, partition) and re-typed in Python
 * (which costs more than decoding the record).
 */
static PyObject *codec_decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "decode(data, count, base_offset, base_timestamp, "
                                         "log_append_time[, prefix, cls])");
        return NULL;
    }
    PyTypeObject *cls = ConsumedRecordType;
    PyObject *prefix = NULL;
    Py_ssize_t plen = 0;
    if (nargs == 7) {
        if (!PyTuple_Check(args[5])) {
            PyErr_SetString(PyExc_TypeError, "prefix must be a tuple");
            return NULL;
        }
        if (!PyType_Check(args[6]) || !PyType_IsSubtype((PyTypeObject *)args[6], &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass");
            return NULL;
        }
        prefix = args[5];
        plen = PyTuple_GET_SIZE(prefix);
        cls = (PyTypeObject *)args[6];
    }
    int untrack = untrackable(cls, prefix);
    int64_t count, base_offset, base_timestamp;
    PyObject *log_append_time = args[4];
    if (as_int64(args[1], &count, "count") < 0 ||
        as_int64(args[2], &base_offset, "base_offset") < 0 ||
        as_int64(args[3], &base_timestamp, "base_timestamp") < 0)
        return NULL;
    if (log_append_time != Py_None && !PyLong_Check(log_append_time)) {
        PyErr_SetString(PyExc_TypeError, "log_append_time must be an int or None");
        return NULL;
    }
    if (count < 0) {
        PyErr_Format(CorruptRecordError, "negative recordsCount %lld", (long long)count);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *start = view.buf, *p = start, *end = start + view.len;
    /* Every record takes at least 7 bytes, so more than len/7 + 1 cannot succeed. */
    Py_ssize_t slots = count < view.len / 7 + 1 ? (Py_ssize_t)count : view.len / 7 + 1;
    PyObject *out = PyList_New(slots);
    PyObject *no_headers = PyTuple_New(0);
    PyObject *last_timestamp = NULL; /* shared by records with the same timestamp delta */
    int64_t last_ts_delta = 0;
    fail_t fail_storage, *fail = &fail_storage;
    Py_ssize_t index = 0;
    /*
     * Untracked records still count as allocations toward the next young collection
     * (one per 700 by default), and each would traverse the list being filled, and the
     * other young containers, for records it can never free: a consumer ran 136
     * collections per 100k records of 100 B, 10 without them (bench/consume_cpu.py).
     * So the collector is off while they are made, and on again before the buffer is
     * released (which may run an exporter's Python code).  The GIL is held all that
     * time (nothing in between runs Python code), so no other thread sees it off; the
     * first allocation after this call collects once, as it would have anyway.
     */
    int gc_was_enabled = untrack ? PyGC_Disable() : 0;
    if (out == NULL || no_headers == NULL) goto error;
    for (; index < (Py_ssize_t)count; index++) {
        int64_t length, ts_delta, offset_delta, n;
        PyObject *key = NULL, *value = NULL, *headers = NULL, *offset, *timestamp, *rec;
        if (index >= slots) {
            fail->kind = RD_PAST_END;
            goto fail;
        }
        READ(length);
        const uint8_t *body = p;
        if (p >= end) {
            fail->kind = RD_PAST_END;
            goto fail;
        }
        p++; /* attributes, unused */
        READ(ts_delta);
        READ(offset_delta);
        READ(n);
        if (n >= 0) {
            if (n > end - p) {
                fail->kind = RD_PAST_END;
                goto fail;
            }
            key = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
            if (key == NULL) goto error;
            p += n;
        } else if (n == -1) {
            key = Py_NewRef(Py_None);
        } else {
            FAIL("key length %lld", (long long)n);
        }
        {
            int rc = read_varint(&p, end, &n);
            if (rc != RD_OK) {
                Py_DECREF(key);
                fail->kind = rc;
                fail->at = p - start;
                goto fail;
            }
        }
        if (n >= 0) {
            if (n > end - p) {
                Py_DECREF(key);
                fail->kind = RD_PAST_END;
                goto fail;
            }
            value = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
            if (value == NULL) {
                Py_DECREF(key);
                goto error;
            }
            p += n;
        } else if (n == -1) {
            value = Py_NewRef(Py_None);
        } else {
            Py_DECREF(key);
            FAIL("value length %lld", (long long)n);
        }
        if (p < end && *p == 0) {
            headers = Py_NewRef(no_headers);
            p++;
        } else {
            int rc = read_varint(&p, end, &n);
            if (rc == RD_OK) {
                headers = decode_headers(&p, end, start, n, fail);
                if (headers == NULL) rc = fail->kind == 0 ? 2 : 3;
            } else {
                fail->kind = rc;
                fail->at = p - start;
                rc = 3;
            }
            if (rc != RD_OK) {
                Py_DECREF(key);
                Py_DECREF(value);
                if (rc == 2) goto error;
                goto fail;
            }
        }
        if ((int64_t)(p - body) != length) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            FAIL("record length %lld disagrees with its fields (%lld)", (long long)length,
                 (long long)(p - body));
        }
        offset = sum_int64(base_offset, offset_delta);
        if (log_append_time != Py_None) {
            timestamp = Py_NewRef(log_append_time);
        } else if (last_timestamp != NULL && ts_delta == last_ts_delta) {
            timestamp = Py_NewRef(last_timestamp);
        } else {
            timestamp = sum_int64(base_timestamp, ts_delta);
            if (timestamp != NULL) {
                Py_XSETREF(last_timestamp, Py_NewRef(timestamp));
                last_ts_delta = ts_delta;
            }
        }
        rec = offset == NULL || timestamp == NULL ? NULL : new_record(cls, 5 + plen, untrack);
        if (rec == NULL) {
            Py_XDECREF(offset);
            Py_XDECREF(timestamp);
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        for (Py_ssize_t i = 0; i < plen; i++)
            PyTuple_SET_ITEM(rec, i, Py_NewRef(PyTuple_GET_ITEM(prefix, i)));
        PyTuple_SET_ITEM(rec, plen, offset);
        PyTuple_SET_ITEM(rec, plen + 1, timestamp);
        PyTuple_SET_ITEM(rec, plen + 2, key);
        PyTuple_SET_ITEM(rec, plen + 3, value);
        PyTuple_SET_ITEM(rec, plen + 4, headers);
        PyList_SET_ITEM(out, index, rec);
    }
    if (p != end) {
        PyErr_Format(CorruptRecordError, "%zd bytes left after the %lld records the header declares",
                     (Py_ssize_t)(end - p), (long long)count);
        goto error;
    }
    if (gc_was_enabled) PyGC_Enable();
    PyBuffer_Release(&view);
    Py_DECREF(no_headers);
    Py_XDECREF(last_timestamp);
    return out;
fail:
    if (fail->kind == RD_PAST_END) {
        PyErr_Format(CorruptRecordError,
                     "record %zd of %lld runs past the end of the records section", index,
                     (long long)count);
    } else if (fail->kind == RD_TOO_LONG) {
        PyErr_Format(CorruptRecordError,
                     "record %zd of %lld: varint before record byte %zd is longer than 10 "
                     "bytes or overflows 64 bits",
                     index, (long long)count, fail->at);
    } else {
        PyErr_Format(CorruptRecordError, "record %zd of %lld: %s", index, (long long)count,
                     fail->text);
    }
error:
    if (gc_was_enabled) PyGC_Enable();
    PyBuffer_Release(&view);
    Py_XDECREF(no_headers);
    Py_XDECREF(last_timestamp);
    Py_XDECREF(out);
    return NULL;
}

/* ---- RecordsBuilder ------------------------------------------------------- */

/*
 * The builder writes records into a bytes object after HEADER_SIZE bytes left
 * for the batch header, so that batch() can fill in the header and hand the
 * very same object to gRPC: no copy of a MiB batch between send() and the
 * wire.  The object grows by doubling (_PyBytes_Resize, refcount 1: it is
 * never visible to Python before the builder is finished) and is shrunk to
 * its final size once.  After records() or batch() exposed it, it is never
 * written again; a second batch() (a new producer epoch) writes a copy.
 *
 * Large values (exact, hence immutable, bytes of at least REF_MIN_BYTES) are
 * not copied at append: the builder keeps a reference and where they go, and
 * copies them once when it is finished, into a buffer of the final size.  A
 * producer that runs ahead of its broker holds up to buffer_memory of queued
 * batches; copying each value at send() would write all of it to fresh
 * memory, whose first-touch page faults cost more than the copy itself
 * (measured: ~0.6 us per 1 KiB record), while finishing happens one
 * in-flight batch at a time into memory the allocator just got back.  Small
 * values are copied at once, while they are hot in the cache.
 */

#define REF_MIN_BYTES 512

typedef struct {
    PyObject *value; /* a bytes object */
    Py_ssize_t at;   /* where in buf its bytes belong */
} ref_t;

#define HEADER_SIZE 61
#define CRC_OFFSET 17
#define ATTRIBUTES_OFFSET 21
#define TAIL_SIZE (HEADER_SIZE - ATTRIBUTES_OFFSET)
#define LOG_OVERHEAD 12

static PyObject *crc32c_func; /* crc32c.crc32c(data, value=0) */
static PyObject *empty_headers; /* () */

typedef struct {
    PyObject_HEAD
    PyObject *buf;   /* bytes: header slot + records; NULL if lost to a failed resize */
    Py_ssize_t len;  /* bytes of buf in use */
    Py_ssize_t count;
    int64_t base_timestamp, max_timestamp;
    int finished;    /* buf has its final size; no appends */
    int shared;      /* buf was handed to Python: never write it again */
    ref_t *refs;     /* values to insert when finishing, in buf order */
    Py_ssize_t n_refs, cap_refs, ref_bytes;
} Builder;

static void builder_clear_refs(Builder *self) {
    for (Py_ssize_t i = 0; i < self->n_refs; i++) Py_DECREF(self->refs[i].value);
    PyMem_Free(self->refs);
    self->refs = NULL;
    self->n_refs = self->cap_refs = self->ref_bytes = 0;
}

static int builder_check(Builder *self) {
    if (self->buf == NULL) {
        PyErr_SetString(PyExc_MemoryError, "the builder lost its buffer (out of memory)");
        return -1;
    }
    return 0;
}

static int Builder_init(Builder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"capacity", NULL};
    Py_ssize_t capacity = 4096;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$n", kwlist, &capacity)) return -1;
    if (self->buf != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "RecordsBuilder already initialised");
        return -1;
    }
    if (capacity < 64) capacity = 64;
    if (capacity > PY_SSIZE_T_MAX - HEADER_SIZE) return PyErr_NoMemory(), -1;
    self->buf = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + capacity);
    if (self->buf == NULL) return -1;
    memset(PyBytes_AS_STRING(self->buf), 0, HEADER_SIZE);
    self->len = HEADER_SIZE;
    return 0;
}

static void Builder_dealloc(Builder *self) {
    builder_clear_refs(self);
    Py_XDECREF(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int builder_reserve(Builder *self, Py_ssize_t extra) {
    Py_ssize_t cap = PyBytes_GET_SIZE(self->buf);
    if (self->len + extra <= cap) return 0;
    while (cap < self->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) return PyErr_NoMemory(), -1;
        cap *= 2;
    }
    return _PyBytes_Resize(&self->buf, cap); /* on failure buf is freed and NULL */
}

static PyObject *Builder_append(Builder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "append(key, value, headers, timestamp_ms)");
        return NULL;
    }
    if (builder_check(self) < 0) return NULL;
    if (self->finished) {
        PyErr_SetString(PyExc_ValueError, "the builder is finished");
        return NULL;
    }
    int64_t ts, delta;
    if (as_int64(args[3], &ts, "timestamp_ms") < 0) return NULL;
    Py_ssize_t index = self->count;
    int64_t base = index == 0 ? ts : self->base_timestamp;
    if (timestamp_delta(ts, base, &delta) < 0) return NULL;
    record_t r;
    int rc = record_prepare(&r, args[0], args[1], args[2], delta, (int64_t)index);
    /* No Python code runs from here to the write: buf cannot change meanwhile. */
    PyObject *value = args[1];
    int by_ref = rc == 0 && PyBytes_CheckExact(value) && r.value.len >= REF_MIN_BYTES;
    if (by_ref && self->n_refs == self->cap_refs) {
        Py_ssize_t cap = self->cap_refs ? self->cap_refs * 2 : 64;
        ref_t *refs = PyMem_Realloc(self->refs, sizeof(ref_t) * (size_t)cap);
        if (refs == NULL) {
            PyErr_NoMemory();
            rc = -1;
        } else {
            self->refs = refs;
            self->cap_refs = cap;
        }
    }
    if (rc == 0) rc = builder_reserve(self, by_ref ? r.total - r.value.len : r.total);
    if (rc == 0) {
        char *start = PyBytes_AS_STRING(self->buf), *value_at = NULL;
        char *end = record_write(&r, start + self->len, delta, (int64_t)index,
                                 by_ref ? &value_at : NULL);
        self->len = end - start;
        if (by_ref) {
            self->refs[self->n_refs].value = Py_NewRef(value);
            self->refs[self->n_refs].at = value_at - start;
            self->n_refs++;
            self->ref_bytes += r.value.len;
        }
    }
    record_release(&r);
    if (rc < 0) return NULL;
    if (index == 0) {
        self->base_timestamp = self->max_timestamp = ts;
    } else if (ts > self->max_timestamp) {
        self->max_timestamp = ts;
    }
    self->count = index + 1;
    return PyLong_FromSsize_t(index);
}

/* append_thunk(key, value, headers, ts, callback, thunks) -> index: append, then,
 * when callback is not None, extend the list thunks with (callback, index, ts)
 * (the producer's send path: one C call for the record and its callback). */
static PyObject *Builder_append_thunk(Builder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "append_thunk(key, value, headers, timestamp_ms, callback, thunks: list)");
        return NULL;
    }
    PyObject *index = Builder_append(self, args, 4);
    if (index == NULL || args[4] == Py_None) return index;
    PyObject *thunks = args[5];
    if (PyList_Append(thunks, args[4]) < 0 || PyList_Append(thunks, index) < 0 ||
        PyList_Append(thunks, args[3]) < 0) {
        /* keep the list's length a multiple of three: the record is in the batch
         * without its callback, and the caller sees the error */
        Py_ssize_t n = PyList_GET_SIZE(thunks);
        PyList_SetSlice(thunks, n - n % 3, n, NULL);
        Py_DECREF(index);
        return NULL;
    }
    return index;
}

/* append_future(key, value, headers, ts, callback, thunks, result, cls) -> future:
 * append_thunk, then return cls((result, index, ts)) made with cls's tp_alloc (the
 * producer's RecordFuture, a tuple subclass): the whole per-record append of
 * Producer.send in one C call. */
static PyObject *Builder_append_future(Builder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyType_Check(args[7]) ||
        !PyType_IsSubtype((PyTypeObject *)args[7], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "append_future(key, value, headers, timestamp_ms, "
                                         "callback, thunks: list, result, cls: tuple subclass)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[7];
    PyObject *future = cls->tp_alloc(cls, 3); /* first: a failure here appends nothing */
    if (future == NULL) return NULL;
    PyObject *index = Builder_append_thunk(self, args, 6);
    if (index == NULL) {
        Py_DECREF(future);
        return NULL;
    }
    PyTuple_SET_ITEM(future, 0, Py_NewRef(args[6]));
    PyTuple_SET_ITEM(future, 1, index);
    PyTuple_SET_ITEM(future, 2, Py_NewRef(args[3]));
    return future;
}

/* The capsule's name: "<module>.<attribute>", as PyCapsule_Import wants it. */
#define APPEND_FUTURE_CAPSULE "headwater.records._speedups._append_future_api"

static int builder_finish(Builder *self) {
    if (builder_check(self) < 0) return -1;
    if (self->finished) return 0;
    if (self->n_refs == 0) {
        if (_PyBytes_Resize(&self->buf, self->len) < 0) return -1;
    } else {
        /* Interleave what was written with the values kept by reference. */
        PyObject *out = PyBytes_FromStringAndSize(NULL, self->len + self->ref_bytes);
        if (out == NULL) return -1;
        const char *src = PyBytes_AS_STRING(self->buf);
        char *dst = PyBytes_AS_STRING(out);
        Py_ssize_t done = 0;
        for (Py_ssize_t i = 0; i < self->n_refs; i++) {
            const ref_t *ref = &self->refs[i];
            memcpy(dst, src + done, (size_t)(ref->at - done));
            dst += ref->at - done;
            done = ref->at;
            Py_ssize_t n = PyBytes_GET_SIZE(ref->value);
            memcpy(dst, PyBytes_AS_STRING(ref->value), (size_t)n);
            dst += n;
        }
        memcpy(dst, src + done, (size_t)(self->len - done));
        Py_SETREF(self->buf, out);
        self->len += self->ref_bytes;
        builder_clear_refs(self);
    }
    self->finished = 1;
    return 0;
}

static PyObject *Builder_records(Builder *self, PyObject *unused) {
    if (builder_finish(self) < 0) return NULL;
    PyObject *view = PyMemoryView_FromObject(self->buf);
    if (view == NULL) return NULL;
    PyObject *start = PyLong_FromLong(HEADER_SIZE);
    PyObject *slice = start ? PySlice_New(start, NULL, NULL) : NULL;
    PyObject *section = slice ? PyObject_GetItem(view, slice) : NULL;
    Py_XDECREF(slice);
    Py_XDECREF(start);
    Py_DECREF(view);
    if (section != NULL) self->shared = 1;
    return section;
}

static inline void put_be32(char *p, uint32_t v) {
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static PyObject *Builder_batch(Builder *self, PyObject *tail) {
    if (!PyBytes_Check(tail) || PyBytes_GET_SIZE(tail) != TAIL_SIZE) {
        PyErr_Format(PyExc_ValueError, "batch(tail): tail must be the %d bytes from attributes on",
                     TAIL_SIZE);
        return NULL;
    }
    if (builder_finish(self) < 0) return NULL;
    if (self->count == 0) {
        PyErr_SetString(PyExc_ValueError, "a record batch needs at least one record");
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(self->buf);
    if (size - LOG_OVERHEAD > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the batch is larger than 2 GiB");
        return NULL;
    }
    PyObject *out;
    if (self->shared) {
        out = PyBytes_FromStringAndSize(PyBytes_AS_STRING(self->buf), size);
        if (out == NULL) return NULL;
    } else {
        out = Py_NewRef(self->buf);
    }
    char *p = PyBytes_AS_STRING(out);
    memcpy(p + ATTRIBUTES_OFFSET, PyBytes_AS_STRING(tail), TAIL_SIZE);
    PyObject *covered =
        PyMemoryView_FromMemory(p + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET, PyBUF_READ);
    PyObject *crc = covered ? PyObject_CallOneArg(crc32c_func, covered) : NULL;
    Py_XDECREF(covered);
    unsigned long value = crc ? PyLong_AsUnsignedLong(crc) : 0;
    Py_XDECREF(crc);
    if (crc == NULL || (value == (unsigned long)-1 && PyErr_Occurred())) {
        Py_DECREF(out);
        return NULL;
    }
    memset(p, 0, 8);                                     /* baseOffset 0 */
    put_be32(p + 8, (uint32_t)(size - LOG_OVERHEAD));    /* batchLength */
    put_be32(p + 12, 0xFFFFFFFFu);                       /* partitionLeaderEpoch -1 */
    p[16] = 2;                                           /* magic */
    put_be32(p + CRC_OFFSET, (uint32_t)value);           /* crc of [21, end) */
    self->shared = 1;
    return out;
}

static PyObject *Builder_get_count(Builder *self, void *closure) {
    return PyLong_FromSsize_t(self->count);
}

static PyObject *Builder_get_size(Builder *self, void *closure) {
    return PyLong_FromSsize_t(self->len - HEADER_SIZE + self->ref_bytes);
}

static PyObject *Builder_get_base_timestamp(Builder *self, void *closure) {
    if (self->count == 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->base_timestamp);
}

static PyObject *Builder_get_max_timestamp(Builder *self, void *closure) {
    if (self->count == 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->max_timestamp);
}

static PyObject *Builder_get_finished(Builder *self, void *closure) {
    return PyBool_FromLong(self->finished);
}

static PyMethodDef Builder_methods[] = {
    {"append", (PyCFunction)(void (*)(void))Builder_append, METH_FASTCALL,
     "append(key, value, headers, timestamp_ms) -> index: encode one record at the end."},
    {"append_thunk", (PyCFunction)(void (*)(void))Builder_append_thunk, METH_FASTCALL,
     "append_thunk(key, value, headers, timestamp_ms, callback, thunks) -> index: append, "
     "and add (callback, index, timestamp_ms) to the list thunks unless callback is None."},
    {"append_future", (PyCFunction)(void (*)(void))Builder_append_future, METH_FASTCALL,
     "append_future(key, value, headers, timestamp_ms, callback, thunks, result, cls) -> "
     "cls((result, index, timestamp_ms)): append_thunk and the record's future."},
    {"records", (PyCFunction)Builder_records, METH_NOARGS,
     "records() -> memoryview: the records section; finishes the builder."},
    {"batch", (PyCFunction)Builder_batch, METH_O,
     "batch(tail) -> bytes: the uncompressed batch with this 40-byte header tail "
     "(attributes..recordsCount), base offset 0, leader epoch -1 and its CRC; finishes "
     "the builder."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Builder_getset[] = {
    {"count", (getter)Builder_get_count, NULL, "records appended", NULL},
    {"size", (getter)Builder_get_size, NULL, "bytes of the records section", NULL},
    {"base_timestamp", (getter)Builder_get_base_timestamp, NULL, "first record's timestamp",
     NULL},
    {"max_timestamp", (getter)Builder_get_max_timestamp, NULL, "largest timestamp", NULL},
    {"finished", (getter)Builder_get_finished, NULL, "records() or batch() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "headwater.records._speedups.RecordsBuilder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordsBuilder(*, capacity=4096): records encoded as they are appended.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Builder_init,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_methods = Builder_methods,
    .tp_getset = Builder_getset,
};

/*
 * payload_bytes(records, key_index, value_index): the sum of len(record[key_index])
 * and len(record[value_index]) over a list of tuples, None counting 0 -- what
 * Kafka's perf tools count as bytes read.  A Python loop over the records (three
 * maps, a filter and a sum per field) costs a reader about a fifth of what
 * decoding them costs.
 */
static PyObject *payload_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "payload_bytes(records: list, key_index, value_index)");
        return NULL;
    }
    Py_ssize_t fields[2];
    for (int f = 0; f < 2; f++) {
        fields[f] = PyLong_AsSsize_t(args[1 + f]);
        if (fields[f] == -1 && PyErr_Occurred()) return NULL;
        if (fields[f] < 0) {
            PyErr_SetString(PyExc_ValueError, "field indexes must be >= 0");
            return NULL;
        }
    }
    PyObject *records = args[0];
    long long total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyTuple_Check(rec)) {
            PyErr_Format(PyExc_TypeError, "records[%zd] is not a tuple", i);
            return NULL;
        }
        for (int f = 0; f < 2; f++) {
            if (fields[f] >= PyTuple_GET_SIZE(rec)) {
                PyErr_Format(PyExc_IndexError, "records[%zd] has no field %zd", i, fields[f]);
                return NULL;
            }
            PyObject *item = PyTuple_GET_ITEM(rec, fields[f]);
            if (item == Py_None) continue;
            if (!PyBytes_Check(item)) {
                PyErr_Format(PyExc_TypeError, "records[%zd][%zd] is not bytes or None", i,
                             fields[f]);
                return NULL;
            }
            total += PyBytes_GET_SIZE(item);
        }
    }
    return PyLong_FromLongLong(total);
}

/* ---- module --------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))codec_encode, METH_FASTCALL,
     "encode(records, default_timestamp_ms) -> (data, base_timestamp, max_timestamp)"},
    {"decode", (PyCFunction)(void (*)(void))codec_decode, METH_FASTCALL,
     "decode(data, count, base_offset, base_timestamp, log_append_time[, prefix, cls]) -> list"},
    {"payload_bytes", (PyCFunction)(void (*)(void))payload_bytes, METH_FASTCALL,
     "payload_bytes(records, key_index, value_index) -> int: key and value bytes, None as 0"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "headwater.records._speedups",
    "The native record codec (see _speedups.c).", -1, module_methods,
};

static PyObject *import_attr(const char *module, const char *name) {
    PyObject *mod = PyImport_ImportModule(module);
    if (mod == NULL) return NULL;
    PyObject *attr = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    return attr;
}

PyMODINIT_FUNC PyInit__speedups(void) {
    if (CorruptRecordError == NULL) {
        CorruptRecordError = import_attr("headwater.errors", "CorruptRecordError");
        if (CorruptRecordError == NULL) return NULL;
    }
    if (ConsumedRecordType == NULL) {
        PyObject *t = import_attr("headwater.records.record", "ConsumedRecord");
        if (t == NULL) return NULL;
        if (!PyType_Check(t) || !PyType_IsSubtype((PyTypeObject *)t, &PyTuple_Type)) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_TypeError, "ConsumedRecord must be a tuple subclass");
            return NULL;
        }
        ConsumedRecordType = (PyTypeObject *)t;
    }
    if (crc32c_func == NULL) {
        crc32c_func = import_attr("crc32c", "crc32c");
        if (crc32c_func == NULL) return NULL;
    }
    if (empty_headers == NULL) {
        empty_headers = PyTuple_New(0);
        if (empty_headers == NULL) return NULL;
    }
    if (PyType_Ready(&BuilderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "RecordsBuilder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(m);
        return NULL;
    }
    /* RecordsBuilder.append_future's C function, for another extension to call without a
     * method call (the producer's SendPath, headwater.client.producer._native). */
    PyObject *api = PyCapsule_New((void *)Builder_append_future, APPEND_FUTURE_CAPSULE, NULL);
    if (api == NULL || PyModule_AddObject(m, "_append_future_api", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
