/*
 * headwater.client.producer._native: the producer's send path and callback loop in C.
 *
 *   run_thunks(...)           a produce batch's callbacks (BatchResult._run)
 *   SendPath(...).send(topic, key, value, partition, ts, callback) -> future | None
 *                             Producer.send's common case: partition choice and
 *                             the accumulator's append, under its lock
 *   murmur2(data)             Kafka's partitioner hash
 *
 * The Python code is the reference and the fallback: headwater.client.producer.native
 * picks this module when it is built and HEADWATER_PURE_PYTHON_RECORDS is not set.
 * SendPath reads the producer's own types (ProducerBatch, BatchResult,
 * RecordAccumulator) by their __slots__ and attribute names, checked when it is
 * made; it appends with the record codec's RecordsBuilder.append_future, whose C
 * function headwater.records._speedups exports in a capsule (one function, called
 * directly: no Python code runs, so the accumulator's lock still covers the whole
 * append, and no method call is paid per record).
 *
 * Plain CPython C API, no third-party build dependency: setuptools compiles it
 * from pyproject.toml.  Every function runs with the GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

static PyTypeObject *RecordsBuilderType; /* headwater.records._speedups.RecordsBuilder */
/* RecordsBuilder.append_future's C function, from _speedups' capsule: the whole
 * per-record append (record, callback thunk, future) in one C call. */
typedef PyObject *(*append_future_t)(PyObject *builder, PyObject *const *args, Py_ssize_t nargs);
static append_future_t append_future;
static PyObject *empty_headers;          /* () */

/* The two integer helpers below are copies of _speedups.c's (a few lines each):
 * sharing them would need a C API between the two extensions. */

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

static PyObject *sum_int64(int64_t a, int64_t b) {
    int64_t s;
    if (!__builtin_add_overflow(a, b, &s)) return PyLong_FromLongLong(s);
    PyObject *x = PyLong_FromLongLong(a), *y = PyLong_FromLongLong(b), *r = NULL;
    if (x != NULL && y != NULL) r = PyNumber_Add(x, y);
    Py_XDECREF(x);
    Py_XDECREF(y);
    return r;
}

/* ---- the producer's callbacks (thunks) ------------------------------------ */

/*
 * run_thunks(thunks, topic, partition, base_offset, log_append_time, error, cls, on_error):
 * BatchResult._run of headwater.client.producer.futures in C.  ``thunks`` is a flat list,
 * three items per thunk: (callback, index, timestamp) for a record's callback,
 * called as callback(cls(topic, partition, offset, timestamp), None), or
 * callback(None, error) when error is not None; (fn, -1, future) for a done
 * callback, called as fn(future).  offset is base_offset + index, or -1 when
 * base_offset < 0; timestamp is log_append_time unless that is None.  A callback
 * raising an Exception is passed to on_error(exc) and the rest still run; a
 * BaseException that is not an Exception (KeyboardInterrupt) stops the loop and
 * propagates, as the Python loop does.
 */
static PyObject *run_thunks(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "run_thunks(thunks, topic, partition, base_offset, "
                                         "log_append_time, error, cls, on_error)");
        return NULL;
    }
    PyObject *thunks = args[0], *topic = args[1], *partition = args[2];
    PyObject *log_append = args[4], *error = args[5], *on_error = args[7];
    if (!PyList_Check(thunks)) {
        PyErr_SetString(PyExc_TypeError, "thunks must be a list");
        return NULL;
    }
    if (!PyType_Check(args[6]) || !PyType_IsSubtype((PyTypeObject *)args[6], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[6];
    int64_t base;
    if (as_int64(args[3], &base, "base_offset") < 0) return NULL;
    for (Py_ssize_t i = 0; i + 2 < PyList_GET_SIZE(thunks); i += 3) {
        PyObject *fn = Py_NewRef(PyList_GET_ITEM(thunks, i));
        PyObject *index_obj = Py_NewRef(PyList_GET_ITEM(thunks, i + 1));
        PyObject *ts = Py_NewRef(PyList_GET_ITEM(thunks, i + 2));
        PyObject *res = NULL;
        int64_t index;
        if (as_int64(index_obj, &index, "index") == 0) {
            if (index < 0) {
                res = PyObject_CallOneArg(fn, ts);
            } else if (error != Py_None) {
                PyObject *call_args[2] = {Py_None, error};
                res = PyObject_Vectorcall(fn, call_args, 2, NULL);
            } else {
                PyObject *md = cls->tp_alloc(cls, 4);
                PyObject *offset = base >= 0 ? sum_int64(base, index) : PyLong_FromLong(-1);
                if (md != NULL && offset != NULL) {
                    PyObject *stamp = log_append == Py_None ? ts : log_append;
                    PyTuple_SET_ITEM(md, 0, Py_NewRef(topic));
                    PyTuple_SET_ITEM(md, 1, Py_NewRef(partition));
                    PyTuple_SET_ITEM(md, 2, offset);
                    PyTuple_SET_ITEM(md, 3, Py_NewRef(stamp));
                    offset = NULL;
                    PyObject *call_args[2] = {md, Py_None};
                    res = PyObject_Vectorcall(fn, call_args, 2, NULL);
                }
                Py_XDECREF(offset);
                Py_XDECREF(md);
            }
        }
        Py_DECREF(fn);
        Py_DECREF(index_obj);
        Py_DECREF(ts);
        if (res != NULL) {
            Py_DECREF(res);
            continue;
        }
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
        PyObject *logged = PyObject_CallOneArg(on_error, value != NULL ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        if (logged == NULL) return NULL;
        Py_DECREF(logged);
    }
    Py_RETURN_NONE;
}

/* ---- the producer's send fast path ---------------------------------------- */

/*
 * murmur2(data) -> int: Kafka's Utils.murmur2 (signed 32 bits, seed 0x9747b28c),
 * the same as headwater.client.producer.partitioner.murmur2.
 */
static int32_t murmur2_hash(const uint8_t *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t end = length - (length & 3);
    for (Py_ssize_t i = 0; i < end; i += 4) {
        uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
                     (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[end + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[end + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[end];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *murmur2(PyObject *module, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "murmur2(data: bytes), not %.100s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    return PyLong_FromLong(
        murmur2_hash((const uint8_t *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)));
}

/*
 * SendPath: Producer.send's common case in one C call (see
 * headwater.client.producer.accumulator.RecordAccumulator.native_send_path).
 *
 * send(topic, key, value, partition, timestamp_ms, callback) -> future or None.
 * It does what Producer.send followed by RecordAccumulator.try_append do, for a
 * record whose key and value are bytes or None, without headers, whose topic's
 * partitions are cached for the current metadata snapshot, whose partition is
 * given or chosen by the default partitioner without changing it (one
 * partition; murmur2 of the key; the topic's sticky partition), and whose
 * partition's newest batch is open and has room.  Everything else answers
 * None, having changed nothing, and the caller takes the Python path (which
 * raises, blocks or starts a batch as needed).
 *
 * The append runs holding the accumulator's own lock (its RLock, acquired and
 * released from here, waiting for it as try_append's ``with`` would), so every
 * invariant the accumulator keeps under that lock
 * holds: a batch is appended to only while open and queued, and abort_all,
 * expire and drain see either all of the record (builder, thunk, sizes) or
 * none of it.  When the append fills the batch, on_full(topic, partition,
 * count) is called after the lock is released (the producer's sticky
 * partitioner switch and the sender's wake-up, as on the Python path).
 */

typedef struct {
    PyObject_HEAD
    PyObject *acquire;      /* the accumulator lock's bound acquire */
    PyObject *release;      /* ... and release */
    PyObject *accumulator;  /* RecordAccumulator */
    PyObject *acc_dict;     /* its __dict__: _closed, _used_bytes (no class attribute shadows
                               them, checked at init, so this is attribute access) */
    PyObject *meta_dict;    /* the MetadataManager's __dict__: current */
    PyObject *queues;       /* its dict TopicPartition -> deque[ProducerBatch] */
    PyObject *metadata;     /* MetadataManager: .current */
    PyObject *tp_cache;     /* the producer's dict topic -> (snapshot, [TopicPartition]) */
    PyObject *sticky;       /* DefaultPartitioner's dict topic -> partition, or None */
    PyObject *future_type;  /* RecordFuture */
    PyObject *on_full;      /* on_full(topic, partition, count) */
    PyObject *batch_type;   /* ProducerBatch (slots): its fields are read by descriptor */
    PyObject *result_type;  /* BatchResult (slots) */
    PyMemberDef *m_closed, *m_size_bytes, *m_builder, *m_result, *m_thunks;
    Py_ssize_t batch_size, buffer_memory, max_request_size;
} SendPath;

/* The slot of ``name`` in ``type`` (a __slots__ member), for PyMember_GetOne/SetOne:
 * the attribute access of ``obj.name`` without the lookup, for objects of exactly
 * that type (the descriptor lives as long as the type, which the SendPath holds). */
static PyMemberDef *slot_member(PyObject *type, const char *name) {
    PyObject *descr = PyObject_GetAttrString(type, name);
    if (descr == NULL) return NULL;
    PyMemberDef *m = NULL;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
        ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX &&
        !(((PyMemberDescrObject *)descr)->d_member->flags & READONLY)) {
        m = ((PyMemberDescrObject *)descr)->d_member;
    } else {
        PyErr_Format(PyExc_TypeError, "%s.%s must be a writable __slots__ member",
                     ((PyTypeObject *)type)->tp_name, name);
    }
    Py_DECREF(descr);
    return m;
}

static PyObject *str_used_bytes, *str_current, *str_acc_closed;

static int SendPath_init(SendPath *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"lock", "accumulator", "queues", "metadata", "tp_cache", "sticky",
                             "future_type", "on_full", "batch_type", "result_type",
                             "batch_size", "buffer_memory", "max_request_size", NULL};
    PyObject *lock = NULL, *acc = NULL, *queues = NULL, *metadata = NULL, *tp_cache = NULL,
             *sticky = NULL, *future_type = NULL, *on_full = NULL, *batch_type = NULL,
             *result_type = NULL;
    Py_ssize_t batch_size = -1, buffer_memory = -1, max_request_size = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOO!OO!OOOO!O!nnn", kwlist, &lock, &acc,
                                     &PyDict_Type, &queues, &metadata, &PyDict_Type, &tp_cache,
                                     &sticky, &future_type, &on_full, &PyType_Type, &batch_type,
                                     &PyType_Type, &result_type, &batch_size, &buffer_memory,
                                     &max_request_size))
        return -1;
    if (!lock || !acc || !queues || !metadata || !tp_cache || !sticky || !future_type ||
        !on_full || !batch_type || !result_type || batch_size < 0 || buffer_memory < 0 ||
        max_request_size < 0) {
        PyErr_SetString(PyExc_TypeError, "SendPath needs every keyword argument (sizes >= 0)");
        return -1;
    }
    if (sticky != Py_None && !PyDict_Check(sticky)) {
        PyErr_SetString(PyExc_TypeError, "sticky must be a dict or None");
        return -1;
    }
    if (!PyType_Check(future_type) ||
        !PyType_IsSubtype((PyTypeObject *)future_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "future_type must be a tuple subclass");
        return -1;
    }
    if (self->acquire != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "SendPath already initialised");
        return -1;
    }
    if (!(self->m_closed = slot_member(batch_type, "closed")) ||
        !(self->m_size_bytes = slot_member(batch_type, "size_bytes")) ||
        !(self->m_builder = slot_member(batch_type, "builder")) ||
        !(self->m_result = slot_member(batch_type, "result")) ||
        !(self->m_thunks = slot_member(result_type, "thunks")))
        return -1;
    self->batch_type = Py_NewRef(batch_type);
    self->result_type = Py_NewRef(result_type);
    self->acquire = PyObject_GetAttrString(lock, "acquire");
    self->release = PyObject_GetAttrString(lock, "release");
    if (self->acquire == NULL || self->release == NULL) return -1;
    self->accumulator = Py_NewRef(acc);
    if (PyObject_HasAttr((PyObject *)Py_TYPE(acc), str_acc_closed) ||
        PyObject_HasAttr((PyObject *)Py_TYPE(acc), str_used_bytes) ||
        PyObject_HasAttr((PyObject *)Py_TYPE(metadata), str_current)) {
        PyErr_SetString(PyExc_TypeError, "accumulator._closed, accumulator._used_bytes and "
                                         "metadata.current must be plain instance attributes");
        return -1;
    }
    self->acc_dict = PyObject_GenericGetDict(acc, NULL);
    self->meta_dict = self->acc_dict ? PyObject_GenericGetDict(metadata, NULL) : NULL;
    if (self->meta_dict == NULL) return -1;
    self->queues = Py_NewRef(queues);
    self->metadata = Py_NewRef(metadata);
    self->tp_cache = Py_NewRef(tp_cache);
    self->sticky = Py_NewRef(sticky);
    self->future_type = Py_NewRef(future_type);
    self->on_full = Py_NewRef(on_full);
    self->batch_size = batch_size;
    self->buffer_memory = buffer_memory;
    self->max_request_size = max_request_size;
    return 0;
}

static int SendPath_traverse(SendPath *self, visitproc visit, void *arg) {
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->accumulator);
    Py_VISIT(self->acc_dict);
    Py_VISIT(self->meta_dict);
    Py_VISIT(self->queues);
    Py_VISIT(self->metadata);
    Py_VISIT(self->tp_cache);
    Py_VISIT(self->sticky);
    Py_VISIT(self->future_type);
    Py_VISIT(self->on_full);
    Py_VISIT(self->batch_type);
    Py_VISIT(self->result_type);
    return 0;
}

static int SendPath_clear(SendPath *self) {
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->accumulator);
    Py_CLEAR(self->acc_dict);
    Py_CLEAR(self->meta_dict);
    Py_CLEAR(self->queues);
    Py_CLEAR(self->metadata);
    Py_CLEAR(self->tp_cache);
    Py_CLEAR(self->sticky);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->on_full);
    Py_CLEAR(self->batch_type);
    Py_CLEAR(self->result_type);
    return 0;
}

static void SendPath_dealloc(SendPath *self) {
    PyObject_GC_UnTrack(self);
    SendPath_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* An attribute as a Py_ssize_t >= 0; -1 with an error set, or -2 (no error) when it is
 * not a non-negative int. */
static Py_ssize_t as_size(PyObject *v) {
    if (v == NULL) return -1;
    Py_ssize_t n = PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : -2;
    Py_DECREF(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    return n < 0 ? -2 : n;
}

static int set_size_item(PyObject *dict, PyObject *name, Py_ssize_t n) {
    PyObject *v = PyLong_FromSsize_t(n);
    if (v == NULL) return -1;
    int rc = PyDict_SetItem(dict, name, v);
    Py_DECREF(v);
    return rc;
}

static int set_size_member(PyObject *obj, PyMemberDef *m, Py_ssize_t n) {
    PyObject *v = PyLong_FromSsize_t(n);
    if (v == NULL) return -1;
    int rc = PyMember_SetOne((char *)obj, m, v);
    Py_DECREF(v);
    return rc;
}

/* The append itself, the lock held: 1 appended (*future set, *full), 0 not taken, -1 error. */
static int sendpath_append(SendPath *self, PyObject *tp, PyObject *const *record, Py_ssize_t size,
                           PyObject **future, int *full) {
    PyObject *flag = PyDict_GetItemWithError(self->acc_dict, str_acc_closed); /* borrowed */
    if (flag != Py_False) return PyErr_Occurred() ? -1 : 0; /* closed, or not a bool */
    Py_ssize_t used = as_size(Py_XNewRef(PyDict_GetItemWithError(self->acc_dict, str_used_bytes)));
    if (used < 0) return used == -1 ? -1 : 0;
    if (used > self->buffer_memory - size) return 0;
    PyObject *queue = PyDict_GetItemWithError(self->queues, tp); /* borrowed */
    if (queue == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t n = PyObject_Length(queue);
    if (n <= 0) return n < 0 ? -1 : 0;
    int rc = -1;
    PyObject *last = PySequence_GetItem(queue, n - 1), *builder = NULL, *result = NULL,
             *thunks = NULL;
    if (last == NULL) return -1;
    if (!Py_IS_TYPE(last, (PyTypeObject *)self->batch_type)) {
        rc = 0; /* not a ProducerBatch exactly (a test's stand-in): the Python path */
        goto done;
    }
    flag = PyMember_GetOne((const char *)last, self->m_closed);
    if (flag == NULL) goto done;
    int closed = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    if (closed != 0) {
        rc = closed < 0 ? -1 : 0;
        goto done;
    }
    Py_ssize_t batch_bytes = as_size(PyMember_GetOne((const char *)last, self->m_size_bytes));
    if (batch_bytes < 0) {
        rc = batch_bytes == -1 ? -1 : 0;
        goto done;
    }
    batch_bytes += size;
    if (batch_bytes > self->batch_size) {
        rc = 0;
        goto done;
    }
    builder = PyMember_GetOne((const char *)last, self->m_builder);
    result = builder ? PyMember_GetOne((const char *)last, self->m_result) : NULL;
    if (result == NULL) goto done;
    if (!Py_IS_TYPE(builder, RecordsBuilderType) ||
        !Py_IS_TYPE(result, (PyTypeObject *)self->result_type)) {
        rc = 0; /* another codec's builder: the Python path appends */
        goto done;
    }
    thunks = PyMember_GetOne((const char *)result, self->m_thunks);
    if (thunks == NULL) goto done;
    if (!PyList_CheckExact(thunks)) {
        rc = 0;
        goto done;
    }
    PyObject *args[8] = {record[0], record[1], record[2], record[3],
                         record[4], thunks,    result,    self->future_type};
    *future = append_future(builder, args, 8);
    if (*future == NULL) goto done;
    if (set_size_item(self->acc_dict, str_used_bytes, used + size) < 0 ||
        set_size_member(last, self->m_size_bytes, batch_bytes) < 0) {
        Py_CLEAR(*future);
        goto done;
    }
    *full = batch_bytes >= self->batch_size;
    if (*full && PyMember_SetOne((char *)last, self->m_closed, Py_True) < 0) {
        Py_CLEAR(*future);
        goto done;
    }
    rc = 1;
done:
    Py_DECREF(last);
    Py_XDECREF(builder);
    Py_XDECREF(result);
    Py_XDECREF(thunks);
    return rc;
}

static PyObject *SendPath_send(SendPath *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "send(topic, key, value, partition, timestamp_ms, callback)");
        return NULL;
    }
    if (self->acquire == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "SendPath not initialised");
        return NULL;
    }
    PyObject *topic = args[0], *key = args[1], *value = args[2], *partition = args[3],
             *stamp = args[4], *callback = args[5];
    if (!PyUnicode_CheckExact(topic) || (key != Py_None && !PyBytes_CheckExact(key)) ||
        (value != Py_None && !PyBytes_CheckExact(value)) ||
        (partition != Py_None && !PyLong_CheckExact(partition)) ||
        (stamp != Py_None && !PyLong_CheckExact(stamp)))
        Py_RETURN_NONE;
    Py_ssize_t size = 21; /* RECORD_OVERHEAD_BYTES */
    if (key != Py_None) size += PyBytes_GET_SIZE(key);
    if (value != Py_None) size += PyBytes_GET_SIZE(value);
    if (size > self->max_request_size) Py_RETURN_NONE;

    /* The topic's partitions, cached for the current metadata snapshot. */
    PyObject *meta = PyDict_GetItemWithError(self->meta_dict, str_current); /* borrowed */
    if (meta == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *cached = PyDict_GetItemWithError(self->tp_cache, topic); /* borrowed */
    int usable = cached != NULL && PyTuple_CheckExact(cached) && PyTuple_GET_SIZE(cached) == 2 &&
                 PyTuple_GET_ITEM(cached, 0) == meta && PyList_CheckExact(PyTuple_GET_ITEM(cached, 1));
    if (!usable) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *tps = PyTuple_GET_ITEM(cached, 1);
    Py_ssize_t count = PyList_GET_SIZE(tps), chosen;
    if (count == 0) Py_RETURN_NONE;
    if (partition != Py_None) {
        chosen = PyLong_AsSsize_t(partition);
        if (chosen == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (chosen < 0 || chosen >= count) Py_RETURN_NONE; /* the Python path raises */
    } else if (self->sticky == Py_None) {
        Py_RETURN_NONE; /* another partitioner: the Python path asks it */
    } else if (count == 1) {
        chosen = 0;
    } else if (key != Py_None) {
        int32_t h = murmur2_hash((const uint8_t *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key));
        chosen = (Py_ssize_t)((uint32_t)h & 0x7fffffffu) % count;
    } else {
        PyObject *current = PyDict_GetItemWithError(self->sticky, topic); /* borrowed */
        if (current == NULL || !PyLong_CheckExact(current)) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE; /* no sticky partition yet: the partitioner picks one */
        }
        chosen = PyLong_AsSsize_t(current);
        if (chosen == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (chosen < 0 || chosen >= count) Py_RETURN_NONE;
    }
    PyObject *tp = Py_NewRef(PyList_GET_ITEM(tps, chosen));

    PyObject *ts_obj;
    if (stamp == Py_None) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now); /* time.time_ns() // 1_000_000 */
        ts_obj = PyLong_FromLongLong((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
        if (ts_obj == NULL) {
            Py_DECREF(tp);
            return NULL;
        }
    } else {
        ts_obj = Py_NewRef(stamp);
    }

    PyObject *future = NULL;
    int full = 0, rc;
    PyObject *got = PyObject_CallNoArgs(self->acquire); /* may wait, without the GIL */
    if (got == NULL) {
        rc = -1;
    } else {
        Py_DECREF(got);
        PyObject *record[5] = {key, value, empty_headers, ts_obj, callback};
        rc = sendpath_append(self, tp, record, size, &future, &full);
        /* release whatever happened, keeping an error raised by the append */
        PyObject *type, *val, *tb;
        PyErr_Fetch(&type, &val, &tb);
        PyObject *released = PyObject_CallNoArgs(self->release);
        if (released == NULL) {
            Py_XDECREF(type);
            Py_XDECREF(val);
            Py_XDECREF(tb);
            Py_CLEAR(future);
            rc = -1;
        } else {
            Py_DECREF(released);
            PyErr_Restore(type, val, tb);
        }
    }
    Py_DECREF(ts_obj);
    if (rc == 1 && full) {
        PyObject *part = PyLong_FromSsize_t(chosen), *cnt = PyLong_FromSsize_t(count);
        PyObject *call_args[3] = {topic, part, cnt};
        PyObject *res = part && cnt ? PyObject_Vectorcall(self->on_full, call_args, 3, NULL) : NULL;
        Py_XDECREF(part);
        Py_XDECREF(cnt);
        if (res == NULL) {
            Py_CLEAR(future);
            rc = -1;
        } else {
            Py_DECREF(res);
        }
    }
    Py_DECREF(tp);
    if (rc < 0) return NULL;
    if (rc == 0) Py_RETURN_NONE;
    return future;
}

static PyMethodDef SendPath_methods[] = {
    {"send", (PyCFunction)(void (*)(void))SendPath_send, METH_FASTCALL,
     "send(topic, key, value, partition, timestamp_ms, callback) -> future, or None when "
     "the record needs Producer.send's Python path (nothing changed then)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SendPathType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "headwater.client.producer._native.SendPath",
    .tp_basicsize = sizeof(SendPath),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "SendPath(*, lock, accumulator, queues, metadata, tp_cache, sticky, "
              "future_type, on_full, batch_size, buffer_memory, max_request_size): "
              "Producer.send's common case in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)SendPath_init,
    .tp_dealloc = (destructor)SendPath_dealloc,
    .tp_traverse = (traverseproc)SendPath_traverse,
    .tp_clear = (inquiry)SendPath_clear,
    .tp_methods = SendPath_methods,
};

/* ---- module --------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"run_thunks", (PyCFunction)(void (*)(void))run_thunks, METH_FASTCALL,
     "run_thunks(thunks, topic, partition, base_offset, log_append_time, error, cls, "
     "on_error): a produce batch's callbacks (headwater.client.producer.futures)."},
    {"murmur2", (PyCFunction)murmur2, METH_O,
     "murmur2(data: bytes) -> int: Kafka's Utils.murmur2 (the default partitioner's hash)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "headwater.client.producer._native",
    "The producer's send path and callback loop in C (see _native.c).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (RecordsBuilderType == NULL) {
        PyObject *mod = PyImport_ImportModule("headwater.records._speedups");
        if (mod == NULL) return NULL;
        PyObject *t = PyObject_GetAttrString(mod, "RecordsBuilder");
        Py_DECREF(mod);
        if (t == NULL) return NULL;
        if (!PyType_Check(t)) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_TypeError, "RecordsBuilder must be a type");
            return NULL;
        }
        append_future = (append_future_t)PyCapsule_Import(
            "headwater.records._speedups._append_future_api", 0);
        if (append_future == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        RecordsBuilderType = (PyTypeObject *)t;
    }
    if (empty_headers == NULL) {
        empty_headers = PyTuple_New(0);
        if (empty_headers == NULL) return NULL;
    }
    if (str_used_bytes == NULL) {
        str_used_bytes = PyUnicode_InternFromString("_used_bytes");
        str_current = PyUnicode_InternFromString("current");
        str_acc_closed = PyUnicode_InternFromString("_closed");
        if (!str_used_bytes || !str_current || !str_acc_closed)
            return NULL;
    }
    if (PyType_Ready(&SendPathType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&SendPathType);
    if (PyModule_AddObject(m, "SendPath", (PyObject *)&SendPathType) < 0) {
        Py_DECREF(&SendPathType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
