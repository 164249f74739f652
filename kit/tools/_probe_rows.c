/* The probe CSV's common case, parsed without Polars' general CSV reader (kit/tools/probe.py).
 *
 * Polars' CSV reader spends two thirds of a CSV -> Parquet conversion parsing (BENCHMARKS.md,
 * "Ingest"), most of it on generality a probe file never needs: quoting, type inference,
 * arbitrary float syntax. This module parses the layout the probe writes
 * ("seq,op,size,count,time,call,warmup", and ",pair,round" after it in contention mode; plain
 * digits, times as d.ddddddddde-XX) and applies the tidy mapping of probe._tidy, one pass,
 * outside the GIL.
 *
 * It accepts a strict subset of what the Polars path accepts, and gives the same values:
 * integers of plain digits in their column's range, floats of plain decimal digits with an
 * optional fraction and exponent whose value is exact by Clinger's fast path (at most 19
 * significant digits, a mantissa of at most 2^53, a power of ten in 10^-22..10^22: one
 * correctly rounded IEEE operation, which is what a correctly rounded parser such as Polars'
 * returns), and only rows every check of probe._tidy passes. Anything else (a sign, "nan", "\r\n", a missing or
 * extra field, an unknown op, a value out of range, more digits) returns -1 and the caller
 * uses the Polars path for that slice, whose nulls and messages name the bad line.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The dataset's op codes, in the order of probe._FAST_OPS. */
enum { OP_PINGPONG, OP_SEND, OP_RECV, OP_ISEND, OP_IRECV, OP_STREAM, OP_ISEND_CALL,
       OP_IRECV_CALL };

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Digits up to `stop`; 0 if none, more than 19, or the value above `max`. */
static int parse_uint(const char **pp, const char *end, char stop, uint64_t max,
                      uint64_t *out) {
    const char *p = *pp;
    uint64_t v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (++digits > 19)
            return 0;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (digits == 0 || v > max || p >= end || *p != stop)
        return 0;
    *out = v;
    *pp = p + 1;
    return 1;
}

/* Decimal digits appended to the mantissa m (sig: its significant digits so far); how many,
 * or -1 past 19 significant digits (m would no longer be exact). */
static int take_digits(const char **pp, const char *end, uint64_t *m, int *sig) {
    const char *p = *pp;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (*m || *p != '0')
            (*sig)++;
        if (*sig > 19)
            return -1;
        *m = *m * 10 + (uint64_t)(*p - '0');
        digits++;
        p++;
    }
    *pp = p;
    return digits;
}

/* digits[.digits][(e|E)[+|-]digits] up to `stop`, exact by Clinger's fast path; 0 otherwise. */
static int parse_float(const char **pp, const char *end, char stop, double *out) {
    const char *p = *pp;
    uint64_t m = 0;
    int sig = 0, exp10 = 0;
    if (take_digits(&p, end, &m, &sig) <= 0)
        return 0;
    if (p < end && *p == '.') {
        p++;
        const int frac = take_digits(&p, end, &m, &sig);
        if (frac <= 0)
            return 0;
        exp10 = -frac;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int neg = 0, e = 0, edigits = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            neg = *p == '-';
            p++;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            if (++edigits > 4)
                return 0;
            e = e * 10 + (*p - '0');
            p++;
        }
        if (edigits == 0)
            return 0;
        exp10 += neg ? -e : e;
    }
    if (p >= end || *p != stop)
        return 0;
    if (m > (UINT64_C(1) << 53))
        return 0;
    const double x = (double)m;
    if (m == 0)
        *out = 0.0;
    else if (exp10 >= 0 && exp10 <= 22)
        *out = x * POW10[exp10];
    else if (exp10 < 0 && exp10 >= -22)
        *out = x / POW10[-exp10];
    else
        return 0;
    *pp = p + 1;
    return 1;
}

/* One of the probe's ops followed by a comma; its code, or -1. */
static int parse_op(const char **pp, const char *end) {
    static const char *const names[6] = {"pingpong", "send", "recv", "isend", "irecv", "stream"};
    static const size_t lens[6] = {8, 4, 4, 5, 5, 6};
    const char *p = *pp;
    int o;
    switch (p < end ? *p : 0) {
    case 'p': o = OP_PINGPONG; break;
    case 's': o = p + 1 < end && p[1] == 't' ? OP_STREAM : OP_SEND; break;
    case 'r': o = OP_RECV; break;
    case 'i': o = p + 1 < end && p[1] == 'r' ? OP_IRECV : OP_ISEND; break;
    default: return -1;
    }
    const size_t len = lens[o];
    if ((size_t)(end - p) <= len || memcmp(p, names[o], len) != 0 || p[len] != ',')
        return -1;
    *pp = p + len + 1;
    return o;
}

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int take(PyObject *obj, Buf *b, int writable, Py_ssize_t itemsize, Py_ssize_t need,
                const char *name) {
    if (PyObject_GetBuffer(obj, &b->view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                                   : PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    b->held = 1;
    if (b->view.len < need * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: room for %zd values needed", name, need);
        return 0;
    }
    return 1;
}

/* The output columns, their item sizes and names. */
enum { OUT_OP, OUT_TIME, OUT_SIZE, OUT_SEQ, OUT_N, OUT_WARM, OUT_PAIR, NOUT };
static const Py_ssize_t OUT_ITEM[NOUT] = {1, 8, 8, 4, 4, 1, 2};
static const char *const OUT_NAME[NOUT] = {"op", "time", "size", "seq", "n", "warmup", "pair"};

/* The rows of `data` into the output buffers out[]; their count, or -1 for the Polars path. */
static Py_ssize_t parse_rows(const char *p, const char *end, int with_calls, int extended,
                             uint64_t max_size, double max_time, Buf *out) {
    uint8_t *op = out[OUT_OP].view.buf, *warm = out[OUT_WARM].view.buf;
    double *time = out[OUT_TIME].view.buf;
    uint64_t *size = out[OUT_SIZE].view.buf;
    uint32_t *seq = out[OUT_SEQ].view.buf, *n = out[OUT_N].view.buf;
    uint16_t *pair = out[OUT_PAIR].view.buf;
    Py_ssize_t r = 0;
    while (p < end) {
        uint64_t v_seq, v_size, v_count, v_warm, v_pair = 0, v_round;
        double t, call = 0.0;
        int has_call = 0, o;
        if (!parse_uint(&p, end, ',', UINT32_MAX, &v_seq) || (o = parse_op(&p, end)) < 0
            || !parse_uint(&p, end, ',', max_size, &v_size)
            || !parse_uint(&p, end, ',', UINT32_MAX, &v_count) || v_count < 1
            || !parse_float(&p, end, ',', &t) || t > max_time)
            return -1;
        if (p < end && *p == ',')
            p++;  /* no call time */
        else if (!parse_float(&p, end, ',', &call) || call > max_time)
            return -1;
        else
            has_call = 1;
        const int async = o == OP_ISEND || o == OP_IRECV;
        /* without with_calls an isend/irecv row would lose its call value: the Polars path
         * flags it */
        if (async && !with_calls)
            return -1;
        if (extended) {  /* ...,warmup,pair,round: the round is the dataset's seq */
            if (!parse_uint(&p, end, ',', 1, &v_warm)
                || !parse_uint(&p, end, ',', UINT16_MAX - 1, &v_pair)
                || !parse_uint(&p, end, '\n', UINT32_MAX, &v_round))
                return -1;
            v_seq = v_round;
        } else if (!parse_uint(&p, end, '\n', 1, &v_warm)) {
            return -1;
        }
        for (int k = 0; k < (async && has_call ? 2 : 1); k++, r++) {
            op[r] = (uint8_t)(k == 0 ? o : o == OP_ISEND ? OP_ISEND_CALL : OP_IRECV_CALL);
            time[r] = k == 1 ? call
                      : o == OP_PINGPONG ? t / 2 : o == OP_STREAM ? t / (double)v_count : t;
            size[r] = v_size;
            seq[r] = (uint32_t)v_seq;
            n[r] = (uint32_t)v_count;
            warm[r] = (uint8_t)v_warm;
            if (extended)
                pair[r] = (uint16_t)v_pair;
        }
    }
    return r;
}

/* parse(data, with_calls, extended, max_size, max_time, out) -> rows, or -1 for the Polars path.
 *
 * data: whole lines of a probe CSV without its header, classic or (extended) contention mode.
 * out: writable buffers for op (uint8 codes), time (float64), size (uint64), seq (uint32),
 * n (uint32), warmup (uint8) and pair (uint16, extended only), with room for one row per
 * line, two with with_calls. Rows as probe._tidy makes them: pingpong time / 2, stream
 * time / count, an isend/irecv row with a call time followed by its *_call row when
 * with_calls; in contention mode seq is the round. */
static PyObject *parse(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *odata, *oout;
    int with_calls, extended;
    unsigned long long max_size;
    double max_time;
    if (!PyArg_ParseTuple(args, "OppKdO!", &odata, &with_calls, &extended, &max_size,
                          &max_time, &PyTuple_Type, &oout))
        return NULL;
    if (PyTuple_GET_SIZE(oout) != NOUT) {
        PyErr_Format(PyExc_ValueError, "out: %d buffers expected", NOUT);
        return NULL;
    }
    Buf data = {.held = 0}, out[NOUT];
    for (int i = 0; i < NOUT; i++)
        out[i].held = 0;
    Py_ssize_t rows = -1;
    if (take(odata, &data, 0, 1, 0, "data")) {
        const char *p = data.view.buf, *end = p + data.view.len;
        Py_ssize_t lines = 0;
        for (const char *q = p; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
            lines++;
        const Py_ssize_t cap = with_calls ? 2 * lines : lines;
        int ok = 1;
        for (int i = 0; i < NOUT && ok; i++)
            ok = take(PyTuple_GET_ITEM(oout, i), &out[i], 1, OUT_ITEM[i],
                      i == OUT_PAIR && !extended ? 0 : cap, OUT_NAME[i]);
        if (ok) {
            Py_BEGIN_ALLOW_THREADS
            rows = parse_rows(p, end, with_calls, extended, max_size, max_time, out);
            Py_END_ALLOW_THREADS
        }
    }
    if (data.held)
        PyBuffer_Release(&data.view);
    for (int i = 0; i < NOUT; i++)
        if (out[i].held)
            PyBuffer_Release(&out[i].view);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(rows);
}

/* lines(data) -> the number of newlines in data (the output buffers' size). */
static PyObject *lines(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    const char *p = view.buf, *end = p + view.len;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        count++;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_VARARGS, "Parse a slice of a probe CSV into row buffers."},
    {"lines", lines, METH_O, "Count the newlines in a buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_probe_rows",
    "The probe CSV's common case, parsed in C (see kit/tools/probe.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__probe_rows(void) { return PyModule_Create(&module); }
