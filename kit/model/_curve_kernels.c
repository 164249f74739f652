/* Compiled kernels of the curve fits (kit/model/families.py, kit/model/segmentation.py):
 * the bounded Huber fit of a linear curve, t = a + b.s, in log time, and the between-size
 * variance that weighs the per-size medians the curves are fitted to.
 *
 * Why C: the bootstrap intervals refit every regime of every resample (120 resamples, 60
 * sizes each in a probe-like series). A linear fit is 3-4 Gauss-Newton steps of a dozen
 * numpy calls on 60 values, and the between-size variance a running median, a median and
 * a root search of as many: a few microseconds of work each behind several microseconds of
 * call overhead. Together they were about 40 % of the bootstrap's CPU.
 *
 * The Huber fit is the same algorithm, step for step, as families._huber_linear_numpy (the
 * reference the tests hold it to, and the fallback where this is not built): the same
 * active set, curvatures, halving line search, restart of a stalled fit and stopping rules;
 * its sums run in index
 * order, where numpy's matrix products use BLAS's order, so results agree to rounding. The
 * between-size variance takes the order statistics and the root search's grid numpy takes
 * (segmentation.between_size_variance and robust_tau2), so its values are numpy's bit for bit.
 *
 * Arguments are contiguous buffers of C doubles (numpy float64 arrays); no numpy headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* families._LINEAR_LO, _ROUNDING, _STALLED, _EXACT: change them there and here together.
 * Lower bounds of the scaled parameters: latency > 0, bandwidth term >= 0. */
static const double LO[2] = {1e-12, 0.0};
#define ROUNDING 1e-14
#define STALLED 1e-12
#define EXACT 1e-28

typedef struct {
    const double *s, *y, *sw;
    Py_ssize_t n;
    double f_scale, scale_a, scale_b;
} Problem;

/* numpy's pairwise sum of a double array (its add.reduce), so that a cost is the same
 * number numpy computes from the same terms. */
static double pairwise(const double *a, Py_ssize_t n) {
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

/* Residuals r = sw (ln f - y) and curve values f at q; the Huber cost of r. */
static double residuals(const Problem *pb, const double q[2], double *r, double *f,
                        double *work) {
    double fs = pb->f_scale, half_sq = 0.5 * (fs * fs);
    for (Py_ssize_t i = 0; i < pb->n; i++) {
        double fi = q[0] * pb->scale_a + q[1] * pb->scale_b * pb->s[i];
        double ri = pb->sw[i] * (log(fi) - pb->y[i]);
        double ai = fabs(ri);
        if (f != NULL)
            f[i] = fi;
        if (r != NULL)
            r[i] = ri;
        work[i] = ai <= fs ? 0.5 * ri * ri : fs * ai - half_sq;
    }
    return 0.0 + pairwise(work, pb->n);
}

static void clip(const double p[2], const double d[2], double t, double out[2]) {
    for (int j = 0; j < 2; j++) {
        double v = p[j] + t * d[j];
        out[j] = v > LO[j] || isnan(v) ? v : LO[j];  /* np.maximum keeps a NaN */
    }
}

/* families._descend: the first of p + d, p + d/2, .. that lowers the cost enough (Armijo),
 * halved again while that is lower. Returns 0 when no step down to d/2^40 does. */
static int descend(const Problem *pb, const double p[2], const double d[2], double cost,
                   const double grad[2], double *work, double trial[2], double *c_out,
                   double *t_out) {
    double t = 1.0, slack = 8 * DBL_EPSILON * fabs(cost);
    while (t >= 1e-12) {
        clip(p, d, t, trial);
        double c = residuals(pb, trial, NULL, NULL, work);
        double gain = 1e-4 * (grad[0] * (trial[0] - p[0]) + grad[1] * (trial[1] - p[1]));
        if (isfinite(c) && c <= cost + (gain < 0.0 ? gain : 0.0) + slack) {
            while (t >= 1e-12) {
                double half[2];
                clip(p, d, t / 2, half);
                double c_half = residuals(pb, half, NULL, NULL, work);
                if (!(c_half < c - slack))
                    break;
                trial[0] = half[0];
                trial[1] = half[1];
                c = c_half;
                t = t / 2;
            }
            *c_out = c;
            *t_out = t;
            return 1;
        }
        t *= 0.5;
    }
    return 0;
}

/* families._solve_small on the free parameters (LU with partial pivoting). 0: singular. */
static int solve_free(const double h[2][2], const double g[2], const int free_[2],
                      double d[2]) {
    d[0] = d[1] = 0.0;
    if (free_[0] && free_[1]) {
        double a11 = h[0][0], a12 = h[0][1], a21 = h[1][0], a22 = h[1][1];
        double b1 = -g[0], b2 = -g[1];
        if (fabs(a21) > fabs(a11)) {
            double t;
            t = a11; a11 = a21; a21 = t;
            t = a12; a12 = a22; a22 = t;
            t = b1; b1 = b2; b2 = t;
        }
        if (a11 == 0.0)
            return 0;
        double lower = a21 * (1.0 / a11);
        double u22 = a22 - lower * a12;
        if (u22 == 0.0)
            return 0;
        double x2 = (b2 - lower * b1) / u22;
        d[0] = (b1 - a12 * x2) / a11;
        d[1] = x2;
        return 1;
    }
    int j = free_[0] ? 0 : 1;
    if (h[j][j] == 0.0)
        return 0;
    d[j] = -g[j] / h[j][j];
    return 1;
}

/* families._restart: where a stalled fit goes on from. p with the first parameter that the
 * gradient pushes towards its bound put on it, where that lowers the cost; else the steepest
 * descent step scaled by the curvature's diagonal (descend). 0: neither lowers the cost. */
static int restart(const Problem *pb, double p[2], const double grad[2], const double diag[2],
                   double *cost, double *work) {
    for (int j = 0; j < 2; j++) {
        if (p[j] > LO[j] && grad[j] > 0) {
            double q[2] = {p[0], p[1]};
            q[j] = LO[j];
            double c = residuals(pb, q, NULL, NULL, work);
            if (c < *cost) {
                p[0] = q[0];
                p[1] = q[1];
                *cost = c;
                return 1;
            }
        }
    }
    double d[2], trial[2], c, t;
    for (int j = 0; j < 2; j++)
        d[j] = diag[j] > 0 ? -grad[j] / diag[j] : 0.0;
    if (!descend(pb, p, d, *cost, grad, work, trial, &c, &t) || !(c < *cost))
        return 0;
    p[0] = trial[0];
    p[1] = trial[1];
    *cost = c;
    return 1;
}

/* families._huber_linear_numpy's loop. p: start (clipped here), on return the answer;
 * *cost_out: the cost at p. */
static void huber_linear_loop(const Problem *pb, double p[2], int max_iter, double *r,
                              double *f, double *work, double *cost_out) {
    Py_ssize_t n = pb->n;
    double fs = pb->f_scale;
    const double zero[2] = {0.0, 0.0};
    clip(p, zero, 0.0, p);
    double cost = residuals(pb, p, r, f, work);
    double exact = EXACT * (double)n;
    int stalled = 0;
    for (int it = 0; it < max_iter; it++) {
        /* gradient J'(w r) and the two curvatures J' diag(c) J (c: inside, IRLS weight) */
        double grad[2] = {0.0, 0.0};
        double hin[2][2] = {{0.0, 0.0}, {0.0, 0.0}}, hwt[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
        for (Py_ssize_t i = 0; i < n; i++) {
            double j0 = pb->scale_a / f[i] * pb->sw[i];
            double j1 = pb->scale_b * pb->s[i] / f[i] * pb->sw[i];
            double ai = fabs(r[i]);
            int inside = ai <= fs;
            double wt = inside ? 1.0 : fs / (ai > 1e-300 ? ai : 1e-300);
            double wr = wt * r[i];
            grad[0] += j0 * wr;
            grad[1] += j1 * wr;
            if (inside) {
                hin[0][0] += j0 * j0;
                hin[0][1] += j0 * j1;
                hin[1][1] += j1 * j1;
            }
            hwt[0][0] += j0 * (j0 * wt);
            hwt[0][1] += j0 * (j1 * wt);
            hwt[1][1] += j1 * (j1 * wt);
        }
        hin[1][0] = hin[0][1];
        hwt[1][0] = hwt[0][1];
        if (stalled) {
            const double diag[2] = {hwt[0][0], hwt[1][1]};
            if (!restart(pb, p, grad, diag, &cost, work))
                break;
            residuals(pb, p, r, f, work);
            stalled = 0;
            continue;
        }
        int free_[2];
        for (int j = 0; j < 2; j++)
            free_[j] = !((p[j] <= LO[j] + 1e-15) && (grad[j] > 0));
        if (!free_[0] && !free_[1])
            break;
        double best[2] = {0.0, 0.0}, best_c = 0.0, best_t = 0.0, best_promise = 0.0;
        int n_steps = 0;
        double promised = -1.0;
        for (int k = 0; k < 2; k++) {
            double d[2];
            if (!solve_free(k == 0 ? hin : hwt, grad, free_, d))
                continue;
            double promise = -(grad[0] * d[0] + grad[1] * d[1]);
            if (fabs(promise) <= ROUNDING * cost + exact && n_steps == 0) {
                *cost_out = cost;
                return;
            }
            if (!(promise > 0))
                continue;
            if (promise > promised)
                promised = promise;
            double trial[2], c, t;
            if (descend(pb, p, d, cost, grad, work, trial, &c, &t)) {
                if (n_steps == 0 || c < best_c) {  /* min() keeps the first of equals */
                    best[0] = trial[0];
                    best[1] = trial[1];
                    best_c = c;
                    best_t = t;
                    best_promise = promise;
                }
                n_steps++;
                if (t == 1.0)
                    break;
            }
        }
        if (n_steps == 0) {  /* no direction lowers the cost */
            if (0 <= promised && promised <= STALLED * cost + exact)
                break;  /* converged */
            stalled = 1;
            continue;
        }
        double moved[2] = {fabs(best[0] - p[0]), fabs(best[1] - p[1])};
        int bound = (best[0] <= LO[0] && p[0] > LO[0]) || (best[1] <= LO[1] && p[1] > LO[1]);
        p[0] = best[0];
        p[1] = best[1];
        residuals(pb, p, r, f, work);
        cost = best_c;
        if (!bound && moved[0] <= 1e-10 * (1.0 + fabs(p[0]))
            && moved[1] <= 1e-10 * (1.0 + fabs(p[1]))) {
            if (best_t < 1.0 && best_promise > STALLED * cost + exact) {
                stalled = 1;
                continue;
            }
            break;
        }
    }
    *cost_out = cost;
}

static PyObject *huber_linear(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer bs, by, bw;
    Problem pb;
    double a0, b0;
    int max_iter;
    if (!PyArg_ParseTuple(args, "y*y*y*dddddi", &bs, &by, &bw, &pb.f_scale, &a0, &b0,
                          &pb.scale_a, &pb.scale_b, &max_iter))
        return NULL;
    PyObject *out = NULL;
    double *mem = NULL;
    if (bs.len % 8 != 0 || by.len != bs.len || bw.len != bs.len || bs.len == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "huber_linear: s, y and sw must be equally long float64 buffers");
        goto done;
    }
    pb.n = bs.len / 8;
    pb.s = bs.buf;
    pb.y = by.buf;
    pb.sw = bw.buf;
    mem = PyMem_Malloc(3 * (size_t)pb.n * sizeof(double));
    if (mem == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double p[2] = {a0, b0}, cost = NAN;
    Py_BEGIN_ALLOW_THREADS
    huber_linear_loop(&pb, p, max_iter, mem, mem + pb.n, mem + 2 * pb.n, &cost);
    Py_END_ALLOW_THREADS
    out = Py_BuildValue("(ddd)", p[0], p[1], cost);
done:
    PyMem_Free(mem);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&by);
    PyBuffer_Release(&bw);
    return out;
}

/* ---- between-size variance (segmentation.between_size_variance, robust_tau2) ---- */

#define CHI2_1_MEDIAN 0.454936 /* segmentation.CHI2_1_MEDIAN */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's median of x[0..n-1] (no NaN; n >= 1): the middle value, or the mean of the two
 * middle values as (a + b) / 2. x is reordered. */
static double median_of(double *x, Py_ssize_t n) {
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    Py_ssize_t k = n / 2;
    return n % 2 ? x[k] : (x[k - 1] + x[k]) / 2;
}

typedef struct {
    double r;
    Py_ssize_t i;
} Ranked;

static int cmp_ranked_desc(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->r != y->r)
        return (x->r < y->r) - (x->r > y->r);
    return (x->i < y->i) - (x->i > y->i);
}

/* robust_tau2 on finite d, v (n values); work: 3n doubles and n Ranked. */
static double tau2_of(const double *d, const double *v_in, Py_ssize_t n, double infl,
                      double *work, Ranked *rk) {
    if (n < 3)
        return 0.0;
    double *d2 = work, *v = work + n, *tmp = work + 2 * n;
    double cap = -INFINITY;
    for (Py_ssize_t i = 0; i < n; i++) {
        v[i] = v_in[i] > 1e-300 ? v_in[i] : 1e-300;
        d2[i] = d[i] * d[i] / infl;
        tmp[i] = d2[i] / v[i];
        if (d2[i] > cap)
            cap = d2[i];
    }
    if (median_of(tmp, n) - CHI2_1_MEDIAN <= 0)
        return 0.0;
    cap = cap + 1e-300;
    for (Py_ssize_t i = 0; i < n; i++)
        tmp[i] = d2[i] / CHI2_1_MEDIAN - v[i];
    if (n % 2) {
        double m = median_of(tmp, n);
        return cap < m ? cap : m;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        rk[i].r = tmp[i];
        rk[i].i = i;
    }
    qsort(rk, (size_t)n, sizeof(Ranked), cmp_ranked_desc);
    Py_ssize_t half = n / 2;  /* rk[0..half-1]: top, rk[half..]: rest */
    double lo = rk[half].r > 0.0 ? rk[half].r : 0.0, hi = rk[half - 1].r;
    for (int round = 0; round < 12; round++) {
        if (hi - lo <= 1e-15 * hi)
            break;
        double step = (hi - lo) / 32, grid[31];
        for (int j = 1; j < 32; j++)
            grid[j - 1] = (step == 0 ? (double)j / 32 * (hi - lo) : (double)j * step) + lo;
        int j_root = 0;  /* first grid point at or below the root */
        for (int j = 0; j < 31; j++) {
            double mn = INFINITY, mx = -INFINITY;
            for (Py_ssize_t t = 0; t < half; t++) {
                Py_ssize_t i = rk[t].i;
                double q = d2[i] / (grid[j] + v[i]);
                if (q < mn)
                    mn = q;
            }
            for (Py_ssize_t t = half; t < n; t++) {
                Py_ssize_t i = rk[t].i;
                double q = d2[i] / (grid[j] + v[i]);
                if (q > mx)
                    mx = q;
            }
            if (0.5 * (mn + mx) > CHI2_1_MEDIAN)
                j_root = j + 1;
        }
        double new_lo = j_root ? grid[j_root - 1] : lo;
        double new_hi = j_root < 31 ? grid[j_root] : hi;
        lo = new_lo;
        hi = new_hi;
    }
    double m = (lo + hi) / 2;
    return cap < m ? cap : m;
}

static int all_finite(const double *x, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static PyObject *robust_tau2(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer bd, bv;
    double infl;
    if (!PyArg_ParseTuple(args, "y*y*d", &bd, &bv, &infl))
        return NULL;
    PyObject *out = NULL;
    double *work = NULL;
    Ranked *rk = NULL;
    Py_ssize_t n = bd.len / 8;
    if (bd.len % 8 != 0 || bv.len != bd.len) {
        PyErr_SetString(PyExc_ValueError,
                        "robust_tau2: d and v must be equally long float64 buffers");
        goto done;
    }
    if (!all_finite(bd.buf, n) || !all_finite(bv.buf, n) || !isfinite(infl) || infl <= 0) {
        out = Py_NewRef(Py_None);  /* numpy's rules for NaN and infinities decide */
        goto done;
    }
    work = PyMem_Malloc((3 * (size_t)n + 1) * sizeof(double));
    rk = PyMem_Malloc(((size_t)n + 1) * sizeof(Ranked));
    if (work == NULL || rk == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    out = PyFloat_FromDouble(tau2_of(bd.buf, bv.buf, n, infl, work, rk));
done:
    PyMem_Free(work);
    PyMem_Free(rk);
    PyBuffer_Release(&bd);
    PyBuffer_Release(&bv);
    return out;
}

/* between_size_variance's differences and overall value: d_out[b] = y[b] less the median of
 * its +-half neighbours (itself and NaNs left out; NaN without any), less the median of the
 * finite differences; returns robust_tau2 of the finite ones, or None where numpy's rules
 * decide (no finite difference, or a v of the finite ones that is not finite). */
static PyObject *between_size(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer by, bv, bo;
    double infl;
    int half;
    if (!PyArg_ParseTuple(args, "y*y*diw*", &by, &bv, &infl, &half, &bo))
        return NULL;
    PyObject *out = NULL;
    double *work = NULL;
    Ranked *rk = NULL;
    Py_ssize_t n = by.len / 8;
    if (by.len % 8 != 0 || bv.len != by.len || bo.len != by.len || half < 1 || half > 64) {
        PyErr_SetString(PyExc_ValueError, "between_size: y, v and d_out must be equally long "
                                          "float64 buffers, half in 1..64");
        goto done;
    }
    const double *y = by.buf, *v = bv.buf;
    double *d = bo.buf;
    work = PyMem_Malloc((5 * (size_t)n + 128) * sizeof(double));
    rk = PyMem_Malloc(((size_t)n + 1) * sizeof(Ranked));
    if (work == NULL || rk == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double *win = work + 5 * (size_t)n, *dk = work + 3 * (size_t)n, *vk = work + 4 * (size_t)n;
    Py_ssize_t n_ok = 0;
    for (Py_ssize_t b = 0; b < n; b++) {
        int count = 0;
        for (Py_ssize_t k = b - half; k <= b + half; k++)
            if (k != b && k >= 0 && k < n && !isnan(y[k]))
                win[count++] = y[k];
        double ref = NAN;
        if (count > 0) {  /* nanmedian_rows: the two middle values' mean */
            qsort(win, (size_t)count, sizeof(double), cmp_double);
            double lo = win[(count - 1) / 2], hi = win[count / 2];
            ref = (lo + hi) / 2;
        }
        d[b] = y[b] - ref;
        if (isfinite(d[b]))
            dk[n_ok++] = d[b];
    }
    if (n_ok == 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    memcpy(work, dk, (size_t)n_ok * sizeof(double));
    double med = median_of(work, n_ok);
    n_ok = 0;
    for (Py_ssize_t b = 0; b < n; b++) {
        int ok = isfinite(d[b]);
        d[b] = d[b] - med;
        if (ok) {
            dk[n_ok] = d[b];
            vk[n_ok++] = v[b];
        }
    }
    if (!all_finite(vk, n_ok) || !isfinite(infl) || infl <= 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    out = PyFloat_FromDouble(tau2_of(dk, vk, n_ok, infl, work, rk));
done:
    PyMem_Free(work);
    PyMem_Free(rk);
    PyBuffer_Release(&by);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&bo);
    return out;
}

static PyMethodDef methods[] = {
    {"huber_linear", huber_linear, METH_VARARGS,
     "huber_linear(s, y, sw, f_scale, a0, b0, scale_a, scale_b, max_iter) -> "
     "(a, b, cost): the answer and its Huber cost."},
    {"robust_tau2", robust_tau2, METH_VARARGS,
     "robust_tau2(d, v, infl) -> segmentation.robust_tau2's value, or None (non-finite input)."},
    {"between_size", between_size, METH_VARARGS,
     "between_size(y, v, infl, half, d_out) -> overall value, or None; d_out: the centred "
     "differences."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_curve_kernels",
    "Compiled kernels of the curve fits (see families.py and segmentation.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__curve_kernels(void) { return PyModule_Create(&module); }
