/*
 * headwater.records._arrow: records sections decoded straight into Arrow column buffers.
 *
 * A reader that hands records on as Arrow columns (the Spark connector) has no use
 * for a Python object per record: this module decodes the records section of each
 * RecordBatch v2 (already CRC-checked and decompressed by the caller) in one pass and
 * appends every field to the buffers of Arrow columns:
 *
 *   ColumnsBuilder(headers)
 *       .add(data, count, base_offset, base_timestamp, log_append_time,
 *            timestamp_type, start, end) -> records added
 *       .reserve(records, data_bytes)  (optional: room for what comes, allocated once)
 *       .finish() -> tuple of buffers (see headwater.records.columns.Columns)
 *
 * Only records with start <= offset < end are kept.  Values are copied once, from
 * the section into the column's data buffer.  Buffers are little-endian as the
 * machine is (Arrow's native layout): offset and timestamp int64 (timestamps in
 * microseconds), timestampType int32, key and value as Arrow binary (a validity
 * bitmap, int32 offsets, data), and with headers a list<struct<key string, value
 * binary>>.  finish() hands each buffer out as a read-only Memory object (buffer
 * protocol) that pyarrow wraps without copying.
 *
 * The byte format and its checks are those of headwater.records.record_codec
 * (PythonRecordCodec is the reference; _speedups.decode is the same in C): a bad
 * section raises CorruptRecordError naming the record, and nothing of that
 * section is kept.  headwater.records.columns holds the pure-Python builder that
 * produces the same buffers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *CorruptRecordError; /* headwater.errors.CorruptRecordError */

/* ---- Memory: a finished buffer, exported through the buffer protocol -------- */

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} Memory;

static void Memory_dealloc(Memory *self) {
    PyMem_RawFree(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Memory_getbuffer(Memory *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : (void *)"", self->len, 1,
                             flags);
}

static Py_ssize_t Memory_len(Memory *self) { return self->len; }

static PyBufferProcs Memory_as_buffer = {(getbufferproc)Memory_getbuffer, NULL};
static PySequenceMethods Memory_as_sequence = {.sq_length = (lenfunc)Memory_len};

static PyTypeObject MemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "headwater.records._arrow.Memory",
    .tp_basicsize = sizeof(Memory),
    .tp_dealloc = (destructor)Memory_dealloc,
    .tp_as_buffer = &Memory_as_buffer,
    .tp_as_sequence = &Memory_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only column buffer made by ColumnsBuilder.finish().",
};

/* ---- growable buffers ------------------------------------------------------- */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} buf_t;

static int buf_grow(buf_t *b, Py_ssize_t need) {
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *p = PyMem_RawRealloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(buf_t *b, Py_ssize_t extra) {
    if (extra <= b->cap - b->len) return 0;
    if (extra > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    return buf_grow(b, b->len + extra);
}

/* Hand the bytes over to a new Memory object; the buffer is empty afterwards. */
static PyObject *buf_release(buf_t *b) {
    Memory *m = PyObject_New(Memory, &MemoryType);
    if (m == NULL) return NULL;
    m->data = b->p;
    m->len = b->len;
    if (b->p != NULL && b->len < b->cap) { /* give back what was reserved and not used */
        char *p = PyMem_RawRealloc(b->p, (size_t)(b->len ? b->len : 1));
        if (p != NULL) m->data = p;
    }
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)m;
}

static void buf_free(buf_t *b) {
    PyMem_RawFree(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* An Arrow binary (or string) column: validity bitmap, int32 offsets, data. */
typedef struct {
    buf_t bits, offsets, data;
    Py_ssize_t count, nulls;
} binary_t;

static int binary_init(binary_t *c) {
    if (buf_reserve(&c->offsets, 4) < 0) return -1;
    memset(c->offsets.p, 0, 4);
    c->offsets.len = 4;
    return 0;
}

static void binary_free(binary_t *c) {
    buf_free(&c->bits);
    buf_free(&c->offsets);
    buf_free(&c->data);
    c->count = c->nulls = 0;
}

/* Append one item: n bytes at p, or a null when p is NULL.  The data stay below 2 GiB
 * (int32 offsets), which the caller ensures by the size of what it adds. */
static inline int binary_append(binary_t *c, const uint8_t *p, Py_ssize_t n) {
    Py_ssize_t i = c->count;
    if ((i & 7) == 0) {
        if (buf_reserve(&c->bits, 1) < 0) return -1;
        c->bits.p[c->bits.len++] = 0;
    }
    if (buf_reserve(&c->offsets, 4) < 0) return -1;
    if (p != NULL) {
        if (n > INT32_MAX - c->data.len) {
            PyErr_SetString(PyExc_OverflowError,
                            "an Arrow binary column holds less than 2 GiB: add fewer batches");
            return -1;
        }
        if (buf_reserve(&c->data, n) < 0) return -1;
        if (n) memcpy(c->data.p + c->data.len, p, (size_t)n);
        c->data.len += n;
        c->bits.p[i >> 3] |= (char)(1 << (i & 7));
    } else {
        c->nulls++;
    }
    int32_t end = (int32_t)c->data.len;
    memcpy(c->offsets.p + c->offsets.len, &end, 4);
    c->offsets.len += 4;
    c->count++;
    return 0;
}

/* Undo appends back to count items (a section that turned out corrupt). */
static void binary_truncate(binary_t *c, Py_ssize_t count, Py_ssize_t nulls) {
    c->count = count;
    c->nulls = nulls;
    c->offsets.len = 4 * (count + 1);
    int32_t end;
    memcpy(&end, c->offsets.p + 4 * count, 4);
    c->data.len = end;
    c->bits.len = (count + 7) >> 3;
    if (count & 7) c->bits.p[count >> 3] &= (char)((1 << (count & 7)) - 1);
}

/* (validity or None, null count, offsets, data); the column is empty afterwards. */
static PyObject *binary_release(binary_t *c) {
    PyObject *bits;
    if (c->nulls == 0) {
        buf_free(&c->bits);
        bits = Py_NewRef(Py_None);
    } else {
        bits = buf_release(&c->bits);
    }
    PyObject *out = NULL;
    PyObject *offsets = buf_release(&c->offsets);
    PyObject *data = buf_release(&c->data);
    if (bits != NULL && offsets != NULL && data != NULL)
        out = Py_BuildValue("(OnOO)", bits, c->nulls, offsets, data);
    Py_XDECREF(bits);
    Py_XDECREF(offsets);
    Py_XDECREF(data);
    return out;
}

/* ---- decoding --------------------------------------------------------------- */

enum { RD_OK = 0, RD_PAST_END = -1, RD_TOO_LONG = -2 };

/* Read a zigzag varint of at most 10 bytes whose value fits 64 bits. */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
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
        if (shift == 63 && (b & 0x7E)) return RD_TOO_LONG;
        z |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
    }
    *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    *pp = p;
    return RD_OK;
}

/* Strict UTF-8, as Python's decoder takes it (no overlongs, surrogates or > U+10FFFF). */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0) return 0;
            if (c == 0xED && s[i + 1] >= 0xA0) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90) return 0;
            if (c == 0xF4 && s[i + 1] >= 0x90) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

typedef struct {
    PyObject_HEAD
    int with_headers;
    Py_ssize_t count; /* records kept */
    buf_t offsets, timestamps, types;
    binary_t key, value;
    buf_t header_offsets; /* int32 per record + 1: where its headers start in the children */
    binary_t header_key, header_value;
} ColumnsBuilder;

static void builder_free(ColumnsBuilder *self) {
    buf_free(&self->offsets);
    buf_free(&self->timestamps);
    buf_free(&self->types);
    binary_free(&self->key);
    binary_free(&self->value);
    buf_free(&self->header_offsets);
    binary_free(&self->header_key);
    binary_free(&self->header_value);
    self->count = 0;
}

static int builder_start(ColumnsBuilder *self) {
    if (binary_init(&self->key) < 0 || binary_init(&self->value) < 0) return -1;
    if (self->with_headers) {
        if (binary_init(&self->header_key) < 0 || binary_init(&self->header_value) < 0 ||
            buf_reserve(&self->header_offsets, 4) < 0)
            return -1;
        memset(self->header_offsets.p, 0, 4);
        self->header_offsets.len = 4;
    }
    return 0;
}

static int Builder_init(ColumnsBuilder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"headers", NULL};
    int headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "p", kwlist, &headers)) return -1;
    builder_free(self);
    self->with_headers = headers;
    return builder_start(self);
}

static void Builder_dealloc(ColumnsBuilder *self) {
    builder_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int as_int64(PyObject *obj, int64_t *out, const char *what) {
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int", what);
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

#define FAIL_AT(k)        \
    do {                  \
        fail_kind = (k);  \
        goto fail;        \
    } while (0)

#define READ(dst)                                  \
    do {                                           \
        int rc_ = read_varint(&p, end, &(dst));    \
        if (rc_ != RD_OK) {                        \
            fail_at = p - start;                   \
            FAIL_AT(rc_);                          \
        }                                          \
    } while (0)

#define FAIL(...)                                               \
    do {                                                        \
        PyOS_snprintf(text, sizeof(text), __VA_ARGS__);         \
        FAIL_AT(1);                                             \
    } while (0)

/* A builder made without __init__ has no offsets buffers to append to. */
static int builder_ready(ColumnsBuilder *self) {
    if (self->key.offsets.p != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "ColumnsBuilder.__init__ was not called");
    return 0;
}

static PyObject *Builder_add(ColumnsBuilder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!builder_ready(self)) return NULL;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "add(data, count, base_offset, base_timestamp, "
                                         "log_append_time, timestamp_type, start, end)");
        return NULL;
    }
    int64_t count, base_offset, base_timestamp, append_time = 0, ts_type, lo, hi;
    PyObject *log_append_time = args[4];
    if (as_int64(args[1], &count, "count") < 0 ||
        as_int64(args[2], &base_offset, "base_offset") < 0 ||
        as_int64(args[3], &base_timestamp, "base_timestamp") < 0 ||
        as_int64(args[5], &ts_type, "timestamp_type") < 0 ||
        as_int64(args[6], &lo, "start") < 0 || as_int64(args[7], &hi, "end") < 0)
        return NULL;
    if (log_append_time != Py_None &&
        as_int64(log_append_time, &append_time, "log_append_time") < 0)
        return NULL;
    if (ts_type < INT32_MIN || ts_type > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "timestamp_type must fit an int32");
        return NULL;
    }
    if (count < 0) {
        PyErr_Format(CorruptRecordError, "negative recordsCount %lld", (long long)count);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *start = view.buf, *p = start, *end = start + view.len;
    /* Where the columns stood, to undo a section that turns out corrupt. */
    Py_ssize_t kept0 = self->count, key_nulls0 = self->key.nulls,
               value_nulls0 = self->value.nulls, hcount0 = self->header_key.count,
               hnulls0 = self->header_value.nulls;
    Py_ssize_t index = 0, fail_at = 0;
    int fail_kind = 0;
    char text[200];
    int32_t type32 = (int32_t)ts_type;
    /* Every record takes at least 7 bytes: more than len/7 + 1 cannot be there. */
    Py_ssize_t most = count < view.len / 7 + 1 ? (Py_ssize_t)count : view.len / 7 + 1;
    if (buf_reserve(&self->offsets, 8 * most) < 0 || buf_reserve(&self->timestamps, 8 * most) < 0 ||
        buf_reserve(&self->types, 4 * most) < 0 ||
        (self->with_headers && buf_reserve(&self->header_offsets, 4 * most) < 0))
        goto error;
    for (; index < (Py_ssize_t)count; index++) {
        int64_t length, ts_delta, offset_delta, n, offset, timestamp;
        const uint8_t *key = NULL, *value = NULL;
        Py_ssize_t key_len = 0, value_len = 0;
        if (index >= most) FAIL_AT(RD_PAST_END);
        READ(length);
        const uint8_t *body = p;
        if (p >= end) FAIL_AT(RD_PAST_END);
        p++; /* attributes, unused */
        READ(ts_delta);
        READ(offset_delta);
        READ(n);
        if (n >= 0) {
            if (n > end - p) FAIL_AT(RD_PAST_END);
            key = p;
            key_len = (Py_ssize_t)n;
            p += n;
        } else if (n != -1) {
            FAIL("key length %lld", (long long)n);
        }
        READ(n);
        if (n >= 0) {
            if (n > end - p) FAIL_AT(RD_PAST_END);
            value = p;
            value_len = (Py_ssize_t)n;
            p += n;
        } else if (n != -1) {
            FAIL("value length %lld", (long long)n);
        }
        if (__builtin_add_overflow(base_offset, offset_delta, &offset))
            FAIL("offset %lld + %lld overflows 64 bits", (long long)base_offset,
                 (long long)offset_delta);
        int keep = lo <= offset && offset < hi;
        int64_t headers;
        READ(headers);
        if (headers < 0) FAIL("negative header count %lld", (long long)headers);
        if (headers > (end - p) / 2) FAIL_AT(RD_PAST_END); /* at least two bytes each */
        for (int64_t h = 0; h < headers; h++) {
            READ(n);
            if (n < 0) FAIL("header key length %lld", (long long)n);
            if (n > end - p) FAIL_AT(RD_PAST_END);
            if (!utf8_valid(p, (Py_ssize_t)n)) FAIL("header key is not UTF-8");
            if (keep && self->with_headers && binary_append(&self->header_key, p, n) < 0)
                goto error;
            p += n;
            READ(n);
            const uint8_t *hv = NULL;
            if (n >= 0) {
                if (n > end - p) FAIL_AT(RD_PAST_END);
                hv = p;
                p += n;
            } else if (n != -1) {
                FAIL("header value length %lld", (long long)n);
            } else {
                n = 0;
            }
            if (keep && self->with_headers &&
                binary_append(&self->header_value, hv, (Py_ssize_t)n) < 0)
                goto error;
        }
        if ((int64_t)(p - body) != length)
            FAIL("record length %lld disagrees with its fields (%lld)", (long long)length,
                 (long long)(p - body));
        if (!keep) continue;
        if (log_append_time != Py_None) {
            timestamp = append_time;
        } else if (__builtin_add_overflow(base_timestamp, ts_delta, &timestamp)) {
            FAIL("timestamp %lld + %lld overflows 64 bits", (long long)base_timestamp,
                 (long long)ts_delta);
        }
        int64_t micros;
        if (__builtin_mul_overflow(timestamp, (int64_t)1000, &micros))
            FAIL("timestamp %lld ms does not fit microseconds in 64 bits", (long long)timestamp);
        if (binary_append(&self->key, key, key_len) < 0 ||
            binary_append(&self->value, value, value_len) < 0)
            goto error;
        memcpy(self->offsets.p + self->offsets.len, &offset, 8);
        self->offsets.len += 8;
        memcpy(self->timestamps.p + self->timestamps.len, &micros, 8);
        self->timestamps.len += 8;
        memcpy(self->types.p + self->types.len, &type32, 4);
        self->types.len += 4;
        if (self->with_headers) {
            Py_ssize_t hn = self->header_key.count;
            if (hn > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "more than 2**31 headers in one batch");
                goto error;
            }
            int32_t h32 = (int32_t)hn;
            memcpy(self->header_offsets.p + self->header_offsets.len, &h32, 4);
            self->header_offsets.len += 4;
        }
        self->count++;
    }
    if (p != end) {
        PyErr_Format(CorruptRecordError, "%zd bytes left after the %lld records the header declares",
                     (Py_ssize_t)(end - p), (long long)count);
        goto error;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(self->count - kept0);
fail:
    if (fail_kind == RD_PAST_END) {
        PyErr_Format(CorruptRecordError,
                     "record %zd of %lld runs past the end of the records section", index,
                     (long long)count);
    } else if (fail_kind == RD_TOO_LONG) {
        PyErr_Format(CorruptRecordError,
                     "record %zd of %lld: varint before record byte %zd is longer than 10 "
                     "bytes or overflows 64 bits",
                     index, (long long)count, fail_at);
    } else {
        PyErr_Format(CorruptRecordError, "record %zd of %lld: %s", index, (long long)count, text);
    }
error:
    PyBuffer_Release(&view);
    /* Nothing of a bad section stays in the columns. */
    self->count = kept0;
    self->offsets.len = 8 * kept0;
    self->timestamps.len = 8 * kept0;
    self->types.len = 4 * kept0;
    binary_truncate(&self->key, kept0, key_nulls0);
    binary_truncate(&self->value, kept0, value_nulls0);
    if (self->with_headers) {
        self->header_offsets.len = 4 * (kept0 + 1);
        binary_truncate(&self->header_key, hcount0, 0);
        binary_truncate(&self->header_value, hcount0, hnulls0);
    }
    return NULL;
}

/*
 * finish() -> (count, offsets, timestamps, timestamp_types, key, value, headers) where key
 * and value are (validity or None, null count, int32 offsets, data) and headers is None
 * or (int32 list offsets, header count, key column, value column).  The builder starts
 * empty again afterwards.
 */
static PyObject *Builder_finish(ColumnsBuilder *self, PyObject *unused) {
    if (!builder_ready(self)) return NULL;
    PyObject *offsets = NULL, *timestamps = NULL, *types = NULL, *key = NULL, *value = NULL,
             *headers = NULL, *out = NULL;
    Py_ssize_t count = self->count;
    if ((offsets = buf_release(&self->offsets)) == NULL ||
        (timestamps = buf_release(&self->timestamps)) == NULL ||
        (types = buf_release(&self->types)) == NULL || (key = binary_release(&self->key)) == NULL ||
        (value = binary_release(&self->value)) == NULL)
        goto done;
    if (self->with_headers) {
        Py_ssize_t hn = self->header_key.count;
        PyObject *hoffsets = buf_release(&self->header_offsets);
        PyObject *hkey = hoffsets ? binary_release(&self->header_key) : NULL;
        PyObject *hvalue = hkey ? binary_release(&self->header_value) : NULL;
        if (hvalue != NULL) headers = Py_BuildValue("(OnOO)", hoffsets, hn, hkey, hvalue);
        Py_XDECREF(hoffsets);
        Py_XDECREF(hkey);
        Py_XDECREF(hvalue);
        if (headers == NULL) goto done;
    } else {
        headers = Py_NewRef(Py_None);
    }
    out = Py_BuildValue("(nOOOOOO)", count, offsets, timestamps, types, key, value, headers);
done:
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(types);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    builder_free(self);
    if (builder_start(self) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

/* reserve(records, data_bytes): room for that many more records and value bytes, so a
 * fetch answer's columns are allocated once rather than grown (and copied) by doubling. */
static PyObject *Builder_reserve(ColumnsBuilder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!builder_ready(self)) return NULL;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "reserve(records, data_bytes)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[0]), data = PyLong_AsSsize_t(args[1]);
    if ((n == -1 || data == -1) && PyErr_Occurred()) return NULL;
    if (n < 0 || data < 0 || n > PY_SSIZE_T_MAX / 8) {
        PyErr_SetString(PyExc_ValueError, "reserve() takes non-negative sizes");
        return NULL;
    }
    if (buf_reserve(&self->offsets, 8 * n) < 0 || buf_reserve(&self->timestamps, 8 * n) < 0 ||
        buf_reserve(&self->types, 4 * n) < 0 || buf_reserve(&self->key.offsets, 4 * n) < 0 ||
        buf_reserve(&self->value.offsets, 4 * n) < 0 ||
        buf_reserve(&self->key.bits, n / 8 + 1) < 0 ||
        buf_reserve(&self->value.bits, n / 8 + 1) < 0 || buf_reserve(&self->value.data, data) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Builder_get_count(ColumnsBuilder *self, void *closure) {
    return PyLong_FromSsize_t(self->count);
}

static PyObject *Builder_get_data_size(ColumnsBuilder *self, void *closure) {
    return PyLong_FromSsize_t(self->key.data.len + self->value.data.len +
                              self->header_key.data.len + self->header_value.data.len);
}

static PyMethodDef Builder_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Builder_add, METH_FASTCALL,
     "add(data, count, base_offset, base_timestamp, log_append_time, timestamp_type, start, "
     "end) -> records kept"},
    {"reserve", (PyCFunction)(void (*)(void))Builder_reserve, METH_FASTCALL,
     "reserve(records, data_bytes): room for more records and value bytes"},
    {"finish", (PyCFunction)Builder_finish, METH_NOARGS,
     "finish() -> the column buffers; the builder is empty afterwards"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Builder_getset[] = {
    {"count", (getter)Builder_get_count, NULL, "records added since the last finish()", NULL},
    {"data_size", (getter)Builder_get_data_size, NULL,
     "bytes of keys, values and headers held", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "headwater.records._arrow.ColumnsBuilder",
    .tp_basicsize = sizeof(ColumnsBuilder),
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Arrow column buffers of decoded records sections (see _arrow.c).",
    .tp_methods = Builder_methods,
    .tp_getset = Builder_getset,
    .tp_init = (initproc)Builder_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "headwater.records._arrow",
    "Records sections decoded into Arrow column buffers (see _arrow.c).", -1, NULL,
};

PyMODINIT_FUNC PyInit__arrow(void) {
    if (CorruptRecordError == NULL) {
        PyObject *mod = PyImport_ImportModule("headwater.errors");
        if (mod == NULL) return NULL;
        CorruptRecordError = PyObject_GetAttrString(mod, "CorruptRecordError");
        Py_DECREF(mod);
        if (CorruptRecordError == NULL) return NULL;
    }
    if (PyType_Ready(&MemoryType) < 0 || PyType_Ready(&BuilderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "ColumnsBuilder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&MemoryType);
    if (PyModule_AddObject(m, "Memory", (PyObject *)&MemoryType) < 0) {
        Py_DECREF(&MemoryType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
