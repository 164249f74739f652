/* Compiled kernel of the curve fits (kit/model/families.py): the bounded Huber fit of a
 * linear curve, t = a + b.s, in log time.
 *
 * Why C: the bootstrap intervals refit every linear regime of every resample (120
 * resamples, 60 sizes each in a probe-like series), and each fit is 3-4 Gauss-Newton steps
 * of a dozen numpy calls on 60 values, a few microseconds of work each behind several
 * microseconds of call overhead: the refits were about a quarter of the bootstrap's CPU.
 * This is the same algorithm, step for step, as families._huber_linear_numpy (the
 * reference the tests hold it to, and the fallback where this is not built): the same
 * active set, curvatures, halving line search and stopping rules. Sums run in index order
 * here, where numpy's matrix products use BLAS's order, so results agree to rounding.
 *
 * Arguments are contiguous buffers of C doubles (numpy float64 arrays); no numpy headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>

/* Lower bounds of the scaled parameters: latency > 0, bandwidth term >= 0. */
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

enum { DONE = 0, HAND_OVER = 1 };

/* families._huber_linear_numpy's loop. p: start (clipped here), on return the answer, or
 * with HAND_OVER the point scipy's trust region takes over from; *cost_out: the cost at p. */
static int huber_linear_loop(const Problem *pb, double p[2], int max_iter, double *r,
                             double *f, double *work, double *cost_out) {
    Py_ssize_t n = pb->n;
    double fs = pb->f_scale;
    const double zero[2] = {0.0, 0.0};
    clip(p, zero, 0.0, p);
    double cost = residuals(pb, p, r, f, work);
    double exact = EXACT * (double)n;
    int status = DONE;
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
                return DONE;
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
        if (n_steps == 0) {
            *cost_out = cost;
            return 0 <= promised && promised <= STALLED * cost + exact ? DONE : HAND_OVER;
        }
        double moved[2] = {fabs(best[0] - p[0]), fabs(best[1] - p[1])};
        int bound = (best[0] <= LO[0] && p[0] > LO[0]) || (best[1] <= LO[1] && p[1] > LO[1]);
        p[0] = best[0];
        p[1] = best[1];
        residuals(pb, p, r, f, work);
        cost = best_c;
        if (!bound && moved[0] <= 1e-10 * (1.0 + fabs(p[0]))
            && moved[1] <= 1e-10 * (1.0 + fabs(p[1]))) {
            if (best_t < 1.0 && best_promise > STALLED * cost + exact)
                status = HAND_OVER;
            break;
        }
    }
    *cost_out = cost;
    return status;
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
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = huber_linear_loop(&pb, p, max_iter, mem, mem + pb.n, mem + 2 * pb.n, &cost);
    Py_END_ALLOW_THREADS
    out = Py_BuildValue("(ddid)", p[0], p[1], status, cost);
done:
    PyMem_Free(mem);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&by);
    PyBuffer_Release(&bw);
    return out;
}

static PyMethodDef methods[] = {
    {"huber_linear", huber_linear, METH_VARARGS,
     "huber_linear(s, y, sw, f_scale, a0, b0, scale_a, scale_b, max_iter) -> "
     "(a, b, status, cost): status 0 done, 1 hand over to scipy from (a, b) at cost."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_curve_kernels",
    "Compiled kernel of the curve fits (see families.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__curve_kernels(void) { return PyModule_Create(&module); }
