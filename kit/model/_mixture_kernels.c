/* Compiled kernels of the noise model's 1-D Gaussian mixture (kit/model/noise.py).
 *
 * Why C: a noise mixture is fitted on 1,000-2,000 samples with 2-3 components, where each
 * numpy call does a few microseconds of work and the fit makes tens of them per EM step or
 * Newton evaluation; a 33 k fit spends about half its CPU there. One pass over the samples
 * here does what those calls do, with the same formulas (noise.py keeps the numpy versions
 * as the reference the tests check these against).
 *
 * Arguments are buffers of C doubles (numpy float64 arrays, contiguous); no numpy headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_K 8
#define MAX_P (3 * MAX_K - 1)
#define BLOCK 8
#define HALF_LOG_2PI 0.91893853320467274178

/* A read-only or writable buffer of n doubles, or a Python error. */
static int get_doubles(PyObject *obj, Py_buffer *view, Py_ssize_t n, int writable,
                       const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    if (view->itemsize != (Py_ssize_t)sizeof(double) || view->format == NULL ||
        strcmp(view->format, "d") != 0 || (n >= 0 && view->len != n * (Py_ssize_t)sizeof(double))) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd contiguous float64 values", what, n);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ln-weights of softmax(a[0..k-1]). */
static void log_weights(const double *a, int k, double *lw) {
    double mx = a[0], s = 0.0;
    for (int j = 1; j < k; j++)
        if (a[j] > mx) mx = a[j];
    for (int j = 0; j < k; j++)
        s += exp(a[j] - mx);
    double lse = mx + log(s);
    for (int j = 0; j < k; j++)
        lw[j] = a[j] - lse;
}

/* gmm_newton_terms(x, th, k, g, h) -> log-likelihood; fills g (3k-1) and h ((3k-1)^2).
 * noise._gmm_newton_terms_numpy documents the parametrisation and the Hessian. */
static PyObject *gmm_newton_terms(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oth, *og, *oh;
    int k;
    if (!PyArg_ParseTuple(args, "OOiOO", &ox, &oth, &k, &og, &oh))
        return NULL;
    if (k < 1 || k > MAX_K) {
        PyErr_Format(PyExc_ValueError, "k must be 1..%d", MAX_K);
        return NULL;
    }
    const int P = 3 * k - 1;
    Py_buffer bx, bth, bg, bh;
    if (get_doubles(ox, &bx, -1, 0, "x") < 0)
        return NULL;
    if (get_doubles(oth, &bth, P, 0, "th") < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    if (get_doubles(og, &bg, P, 1, "g") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bth);
        return NULL;
    }
    if (get_doubles(oh, &bh, (Py_ssize_t)P * P, 1, "h") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bth);
        PyBuffer_Release(&bg);
        return NULL;
    }
    const double *x = bx.buf, *th = bth.buf;
    double *g = bg.buf, *h = bh.buf;
    const Py_ssize_t n = bx.len / (Py_ssize_t)sizeof(double);

    double a[MAX_K], lw[MAX_K], w[MAX_K], mu[MAX_K], isd[MAX_K], c[MAX_K];
    a[0] = 0.0;
    for (int j = 1; j < k; j++)
        a[j] = th[j - 1];
    log_weights(a, k, lw);
    for (int j = 0; j < k; j++) {
        w[j] = exp(lw[j]);
        mu[j] = th[k - 1 + j];
        isd[j] = exp(-th[2 * k - 1 + j]);
        c[j] = lw[j] - th[2 * k - 1 + j] - HALF_LOG_2PI;
    }
    double m0[MAX_K] = {0}, m1[MAX_K] = {0}, m2[MAX_K] = {0}, m3[MAX_K] = {0},
           m4[MAX_K] = {0};
    /* H: upper triangle of sum b b^T over samples, b a sample's scores. Each of its
     * entries is summed in BLOCK lanes (sample i into lane i % BLOCK), added up at the end:
     * element-wise updates of a block vectorise where one running sum per entry cannot
     * (without reassociating), and a sum over samples of these products cost more than
     * the rest of the pass. */
    double G[MAX_P] = {0}, H[MAX_P * MAX_P] = {0}, B[MAX_P][BLOCK];
    static const double zero_lanes[BLOCK] = {0};
    double (*HL)[BLOCK] = calloc((size_t)P * (size_t)P, sizeof(double[BLOCK]));
    double GL[MAX_P][BLOCK] = {{0}};
    if (HL == NULL) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bth);
        PyBuffer_Release(&bg);
        PyBuffer_Release(&bh);
        return PyErr_NoMemory();
    }
    double ll = 0.0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i0 = 0; i0 < n; i0 += BLOCK) {
        const int m = (int)(n - i0 < BLOCK ? n - i0 : BLOCK);
        for (int t = 0; t < m; t++) {
            const double xi = x[i0 + t];
            double z[MAX_K], r[MAX_K];
            double mx = -INFINITY;
            int top = 0;
            for (int j = 0; j < k; j++) {
                z[j] = (xi - mu[j]) * isd[j];
                r[j] = c[j] - 0.5 * (z[j] * z[j]);
                if (r[j] > mx) {
                    mx = r[j];
                    top = j;
                }
            }
            double tot = 0.0;
            for (int j = 0; j < k; j++) {  /* exp(0) is 1: one exp fewer (exp costs) */
                r[j] = j == top && isfinite(mx) ? 1.0 : exp(r[j] - mx);
                tot += r[j];
            }
            ll += log(tot) + mx;
            const double itot = 1.0 / tot;
            for (int j = 0; j < k; j++) {
                r[j] *= itot;
                double rz = r[j] * z[j], rzz = rz * z[j], rz3 = rzz * z[j];
                m0[j] += r[j];
                m1[j] += rz;
                m2[j] += rzz;
                m3[j] += rz3;
                m4[j] += rz3 * z[j];
                B[k - 1 + j][t] = rz * isd[j];
                B[2 * k - 1 + j][t] = rzz - r[j];
            }
            for (int j = 1; j < k; j++)
                B[j - 1][t] = r[j] - w[j];
        }
        for (int p = 0; p < P; p++)  /* a short last block: its unused lanes add zeros */
            if (m < BLOCK)
                memcpy(B[p] + m, zero_lanes, sizeof(double) * (size_t)(BLOCK - m));
        for (int p = 0; p < P; p++) {
            const double *bp = B[p];
            for (int t = 0; t < BLOCK; t++)
                GL[p][t] += bp[t];
            for (int q = p; q < P; q++) {
                const double *bq = B[q];
                double *acc = HL[p * P + q];
                for (int t = 0; t < BLOCK; t++)
                    acc[t] += bp[t] * bq[t];
            }
        }
    }
    for (int p = 0; p < P; p++)
        for (int t = 0; t < BLOCK; t++) {
            G[p] += GL[p][t];
            for (int q = p; q < P; q++)
                H[p * P + q] += HL[p * P + q][t];
        }
    Py_END_ALLOW_THREADS
    for (int p = 0; p < P; p++) {
        g[p] = G[p];
        for (int q = p; q < P; q++)
            h[p * P + q] = h[q * P + p] = -H[p * P + q];
    }
    /* The weights' block: (ew^T m0) ew - n (diag w - w w^T), ew[j][a] = [j == a+1] - w[a+1]. */
    for (int p = 0; p < k - 1; p++)
        for (int q = p; q < k - 1; q++) {  /* one value for both halves: h stays symmetric */
            double s = 0.0;
            for (int j = 0; j < k; j++)
                s += ((j == p + 1) - w[p + 1]) * m0[j] * ((j == q + 1) - w[q + 1]);
            s -= (double)n * ((p == q ? w[p + 1] : 0.0) - w[p + 1] * w[q + 1]);
            h[p * P + q] += s;
            if (q != p)
                h[q * P + p] += s;
        }
    for (int p = 0; p < k - 1; p++)
        for (int j = 0; j < k; j++) {
            double ew = (j == p + 1) - w[p + 1];
            double rsmu = isd[j] * m1[j], rsl = m2[j] - m0[j];
            int im = k - 1 + j, il = 2 * k - 1 + j;
            h[p * P + im] += ew * rsmu;
            h[p * P + il] += ew * rsl;
            h[im * P + p] += ew * rsmu;
            h[il * P + p] += ew * rsl;
        }
    for (int j = 0; j < k; j++) {
        int im = k - 1 + j, il = 2 * k - 1 + j;
        double cross = isd[j] * (m3[j] - 3.0 * m1[j]);
        h[im * P + im] += isd[j] * isd[j] * (m2[j] - m0[j]);
        h[im * P + il] += cross;
        h[il * P + im] += cross;
        h[il * P + il] += m4[j] - 4.0 * m2[j] + m0[j];
    }
    PyBuffer_Release(&bx);
    PyBuffer_Release(&bth);
    PyBuffer_Release(&bg);
    PyBuffer_Release(&bh);
    free(HL);
    return PyFloat_FromDouble(ll);
}

/* gmm_em_step(x, th, k, out) -> log-likelihood at th; out (3k) gets EM's update of th.
 * th = (ln weights up to a constant, means, ln sds); sds are floored at 1e-4. */
static PyObject *gmm_em_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oth, *oout;
    int k;
    if (!PyArg_ParseTuple(args, "OOiO", &ox, &oth, &k, &oout))
        return NULL;
    if (k < 1 || k > MAX_K) {
        PyErr_Format(PyExc_ValueError, "k must be 1..%d", MAX_K);
        return NULL;
    }
    Py_buffer bx, bth, bout;
    if (get_doubles(ox, &bx, -1, 0, "x") < 0)
        return NULL;
    if (get_doubles(oth, &bth, 3 * k, 0, "th") < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    if (get_doubles(oout, &bout, 3 * k, 1, "out") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bth);
        return NULL;
    }
    const double *x = bx.buf, *th = bth.buf;
    double *out = bout.buf;
    const Py_ssize_t n = bx.len / (Py_ssize_t)sizeof(double);
    double *resp = malloc((size_t)(n > 0 ? n : 1) * (size_t)k * sizeof(double));
    if (resp == NULL) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bth);
        PyBuffer_Release(&bout);
        return PyErr_NoMemory();
    }
    double lw[MAX_K], mu[MAX_K], isd[MAX_K], c[MAX_K];
    log_weights(th, k, lw);
    for (int j = 0; j < k; j++) {
        mu[j] = th[k + j];
        isd[j] = exp(-th[2 * k + j]);
        c[j] = lw[j] - th[2 * k + j] - HALF_LOG_2PI;
    }
    double nk[MAX_K] = {0}, sx[MAX_K] = {0}, ss[MAX_K] = {0}, ll = 0.0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double *r = resp + i * k, mx = -INFINITY, tot = 0.0;
        for (int j = 0; j < k; j++) {
            double z = (x[i] - mu[j]) * isd[j];
            r[j] = c[j] - 0.5 * (z * z);
            if (r[j] > mx) mx = r[j];
        }
        for (int j = 0; j < k; j++) {
            r[j] = exp(r[j] - mx);
            tot += r[j];
        }
        ll += log(tot) + mx;
        for (int j = 0; j < k; j++) {
            r[j] /= tot;
            nk[j] += r[j];
            sx[j] += r[j] * x[i];
        }
    }
    for (int j = 0; j < k; j++) {
        nk[j] += 1e-12;
        mu[j] = sx[j] / nk[j];
    }
    for (Py_ssize_t i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            double d = x[i] - mu[j];
            ss[j] += resp[i * k + j] * (d * d);
        }
    Py_END_ALLOW_THREADS
    for (int j = 0; j < k; j++) {
        double sd = sqrt(ss[j] / nk[j]);
        out[j] = log(nk[j] / (double)n);
        out[k + j] = mu[j];
        out[2 * k + j] = log(sd > 1e-4 ? sd : 1e-4);
    }
    free(resp);
    PyBuffer_Release(&bx);
    PyBuffer_Release(&bth);
    PyBuffer_Release(&bout);
    return PyFloat_FromDouble(ll);
}

static PyMethodDef methods[] = {
    {"gmm_newton_terms", gmm_newton_terms, METH_VARARGS,
     "gmm_newton_terms(x, th, k, g, h) -> log-likelihood; fills gradient g and Hessian h."},
    {"gmm_em_step", gmm_em_step, METH_VARARGS,
     "gmm_em_step(x, th, k, out) -> log-likelihood at th; out gets EM's update."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mixture_kernels",
    "Compiled kernels of the noise model's Gaussian mixture (see noise.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mixture_kernels(void) { return PyModule_Create(&module); }
