/* Compiled kernels of the engine's two mixtures: the noise model's 1-D Gaussian mixture
 * (kit/model/noise.py: its EM step, its Newton polish with the loop around it, its
 * log-density) and the E- and M-step of a regime's two bands (kit/model/mixture.py).
 *
 * Why C: both EMs run on 1,000-30,000 samples, where each numpy call does a few
 * microseconds of work and the fit makes tens of them per EM step or Newton evaluation; a
 * 33 k fit spent about half its CPU there. One pass over the samples here does what those
 * calls do, with the same formulas (the modules keep the numpy versions as the reference
 * the tests check these against, and as the fallback where this is not built).
 *
 * Arguments are buffers of C doubles (numpy float64 arrays, contiguous) and, for indices,
 * of 64-bit integers; no numpy headers.
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
#define SQRT_2PI 2.50662827463100050242

/* The buffers a kernel reads and writes, released together on every way out. */
typedef struct {
    Py_buffer view[12];
    int n;
} Held;

/* The data of obj as n contiguous 8-byte values (float64, or int64 with ints; n < 0: any
 * number, stored in *len), or NULL with a Python error; the buffer joins held. */
static void *hold(Held *held, PyObject *obj, Py_ssize_t n, int writable, int ints,
                  const char *what, Py_ssize_t *len) {
    Py_buffer *view = &held->view[held->n];
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return NULL;
    const char *f = view->format;
    int fmt_ok = view->itemsize == 8 && f != NULL &&
                 (ints ? strcmp(f, "l") == 0 || strcmp(f, "q") == 0 : strcmp(f, "d") == 0);
    if (!fmt_ok || (n >= 0 && view->len != n * 8)) {
        if (n >= 0)
            PyErr_Format(PyExc_ValueError, "%s: expected %zd contiguous %s values", what, n,
                         ints ? "int64" : "float64");
        else
            PyErr_Format(PyExc_ValueError, "%s: expected contiguous %s values", what,
                         ints ? "int64" : "float64");
        PyBuffer_Release(view);
        return NULL;
    }
    held->n++;
    if (len != NULL)
        *len = view->len / 8;
    return view->buf;
}

static void release(Held *held) {
    for (int i = 0; i < held->n; i++)
        PyBuffer_Release(&held->view[i]);
    held->n = 0;
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

/* The log-likelihood at th of the 1-D Gaussian mixture (k components, th in the Newton
 * parametrisation of noise._gmm_newton_terms_numpy, which documents it and the Hessian);
 * fills g (3k-1) and h ((3k-1)^2). HL: (3k-1)^2 lanes of work space. No Python calls: the
 * callers hold or release the GIL around it. */
static double newton_terms(const double *x, Py_ssize_t n, const double *th, int k, double *g,
                           double *h, double (*HL)[BLOCK]) {
    const int P = 3 * k - 1;
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
    double GL[MAX_P][BLOCK] = {{0}};
    memset(HL, 0, sizeof(double[BLOCK]) * (size_t)P * (size_t)P);
    double ll = 0.0;
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
    return ll;
}

/* 1 when the mixture's k is one the kernels take, else 0 with a Python error. */
static int valid_k(int k) {
    if (k >= 1 && k <= MAX_K)
        return 1;
    PyErr_Format(PyExc_ValueError, "k must be 1..%d", MAX_K);
    return 0;
}

/* The samples x and the 3k-1 parameters th of a Newton kernel, held (th writable when the
 * kernel updates it); 0 with a Python error. */
static int hold_newton_args(Held *held, PyObject *ox, PyObject *oth, int k, int th_writable,
                            const double **x, Py_ssize_t *n, double **th) {
    if (!valid_k(k))
        return 0;
    *x = hold(held, ox, -1, 0, 0, "x", n);
    *th = *x ? hold(held, oth, 3 * k - 1, th_writable, 0, "th", NULL) : NULL;
    return *th != NULL;
}

/* gmm_newton_terms(x, th, k, g, h) -> log-likelihood; fills g (3k-1) and h ((3k-1)^2). */
static PyObject *gmm_newton_terms(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oth, *og, *oh;
    int k;
    if (!PyArg_ParseTuple(args, "OOiOO", &ox, &oth, &k, &og, &oh))
        return NULL;
    Held held = {.n = 0};
    Py_ssize_t n = 0;
    const double *x = NULL;
    double *th = NULL;
    const int P = 3 * k - 1, ok = hold_newton_args(&held, ox, oth, k, 0, &x, &n, &th);
    double *g = ok ? hold(&held, og, P, 1, 0, "g", NULL) : NULL;
    double *h = g ? hold(&held, oh, (Py_ssize_t)P * P, 1, 0, "h", NULL) : NULL;
    if (h == NULL) {
        release(&held);
        return NULL;
    }
    double (*HL)[BLOCK] = malloc(sizeof(double[BLOCK]) * (size_t)P * (size_t)P);
    if (HL == NULL) {
        release(&held);
        return PyErr_NoMemory();
    }
    double ll;
    Py_BEGIN_ALLOW_THREADS
    ll = newton_terms(x, n, th, k, g, h, HL);
    Py_END_ALLOW_THREADS
    release(&held);
    free(HL);
    return PyFloat_FromDouble(ll);
}

/* Eigenvalues lam and eigenvectors (columns of v, row-major P x P) of the symmetric a, which
 * is overwritten: cyclic Jacobi rotations until the off-diagonal part is below round-off of
 * the whole (at most 23 x 23 here, where Jacobi is as accurate as LAPACK and needs no
 * call out of C). 0 when a is not finite. */
static int sym_eig(int P, double *a, double *lam, double *v) {
    double fro = 0.0;
    for (int i = 0; i < P * P; i++) {
        if (!isfinite(a[i]))
            return 0;
        fro += a[i] * a[i];
        v[i] = 0.0;
    }
    for (int i = 0; i < P; i++)
        v[i * P + i] = 1.0;
    for (int sweep = 0; sweep < 64; sweep++) {
        double off = 0.0;
        for (int p = 0; p < P; p++)
            for (int q = p + 1; q < P; q++)
                off += a[p * P + q] * a[p * P + q];
        if (off <= 1e-32 * fro || off == 0.0)
            break;
        for (int p = 0; p < P; p++)
            for (int q = p + 1; q < P; q++) {
                const double apq = a[p * P + q];
                if (apq == 0.0)
                    continue;
                const double theta = (a[q * P + q] - a[p * P + p]) / (2.0 * apq);
                double t = 1.0 / (fabs(theta) + sqrt(theta * theta + 1.0));
                if (!isfinite(theta * theta))
                    t = 0.5 / fabs(theta);
                if (theta < 0.0)
                    t = -t;
                const double c = 1.0 / sqrt(t * t + 1.0), sn = t * c;
                for (int r = 0; r < P; r++) {  /* columns p and q */
                    const double arp = a[r * P + p], arq = a[r * P + q];
                    a[r * P + p] = c * arp - sn * arq;
                    a[r * P + q] = sn * arp + c * arq;
                }
                for (int r = 0; r < P; r++) {  /* rows p and q */
                    const double apr = a[p * P + r], aqr = a[q * P + r];
                    a[p * P + r] = c * apr - sn * aqr;
                    a[q * P + r] = sn * apr + c * aqr;
                }
                for (int r = 0; r < P; r++) {
                    const double vrp = v[r * P + p], vrq = v[r * P + q];
                    v[r * P + p] = c * vrp - sn * vrq;
                    v[r * P + q] = sn * vrp + c * vrq;
                }
            }
    }
    for (int i = 0; i < P; i++)
        lam[i] = a[i * P + i];
    return 1;
}

/* gmm_newton(x, th, k, max_evals, ln_sd_min) -> (ll, evals, ok); th (3k-1) is updated in
 * place. noise._gmm_newton (kernels=False) is the same damped Newton ascent in numpy and
 * documents it; this is its loop without a Python call per evaluation (the loop's eigh and
 * bookkeeping cost as much as the terms at n ~ 1,250). */
static PyObject *gmm_newton(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oth;
    int k, max_evals;
    double ln_sd_min;
    if (!PyArg_ParseTuple(args, "OOiid", &ox, &oth, &k, &max_evals, &ln_sd_min))
        return NULL;
    const int P = 3 * k - 1;
    Held held = {.n = 0};
    Py_ssize_t n = 0;
    const double *x = NULL;
    double *th = NULL;
    if (!hold_newton_args(&held, ox, oth, k, 1, &x, &n, &th)) {
        release(&held);
        return NULL;
    }
    /* work: HL lanes, then g, h, g2, h2, a, v */
    const size_t PP = (size_t)P * (size_t)P;
    double *work = malloc(sizeof(double) * (PP * BLOCK + 2 * (size_t)P + 4 * PP));
    if (work == NULL) {
        release(&held);
        return PyErr_NoMemory();
    }
    double (*HL)[BLOCK] = (double (*)[BLOCK])work;
    double *g = work + PP * BLOCK, *h = g + P, *g2 = h + PP, *h2 = g2 + P, *a = h2 + PP,
           *v = a + PP;
    double lam[MAX_P], vg[MAX_P], d[MAX_P], cand[MAX_P];
    int evals = 1, ok = 1;
    double ll;
    Py_BEGIN_ALLOW_THREADS
    ll = newton_terms(x, n, th, k, g, h, HL);
    while (evals < max_evals) {
        for (size_t i = 0; i < PP; i++)
            a[i] = -h[i];
        if (!sym_eig(P, a, lam, v)) {
            ok = 0;
            break;
        }
        double top = 0.0;
        for (int i = 0; i < P; i++)
            if (fabs(lam[i]) > top) top = fabs(lam[i]);
        const double floor_ = 1e-8 * (top > 1e-300 ? top : 1e-300);
        for (int i = 0; i < P; i++) {
            double s = 0.0;
            for (int r = 0; r < P; r++)
                s += v[r * P + i] * g[r];
            const double mag = fabs(lam[i]) > floor_ ? fabs(lam[i]) : floor_;
            vg[i] = s / mag;
        }
        double gain = 0.0, dmax = 0.0;
        for (int r = 0; r < P; r++) {
            double s = 0.0;
            for (int i = 0; i < P; i++)
                s += v[r * P + i] * vg[i];
            d[r] = s;
            gain += g[r] * s;
            if (fabs(s) > dmax) dmax = fabs(s);
        }
        if (gain < 1e-7)  /* twice the predicted gain: converged */
            break;
        const double cap = 1.0 / dmax < 1.0 ? 1.0 / dmax : 1.0;
        for (int r = 0; r < P; r++)
            d[r] *= cap;
        double t = 1.0, ll2 = -INFINITY;
        int took = 0;
        while (evals < max_evals && t > 1e-3) {
            double lsd_min = INFINITY;
            int nan_sd = 0;  /* numpy's min is NaN then, and the comparison false */
            for (int r = 0; r < P; r++)
                cand[r] = th[r] + t * d[r];
            for (int r = 2 * k - 1; r < P; r++) {
                if (isnan(cand[r]))
                    nan_sd = 1;
                else if (cand[r] < lsd_min)
                    lsd_min = cand[r];
            }
            if (!nan_sd && lsd_min >= ln_sd_min) {
                ll2 = newton_terms(x, n, cand, k, g2, h2, HL);
                evals++;
                if (isfinite(ll2) && ll2 >= ll) {
                    took = 1;
                    break;
                }
            } else if (t < 0.5) {  /* into the sd floor: EM's floor takes over */
                ok = 0;
                break;
            }
            t /= 2;
        }
        if (!took)  /* the sd floor, or no step gains: at the optimum to round-off */
            break;
        memcpy(th, cand, sizeof(double) * (size_t)P);
        memcpy(g, g2, sizeof(double) * (size_t)P);
        memcpy(h, h2, sizeof(double) * PP);
        ll = ll2;
    }
    Py_END_ALLOW_THREADS
    free(work);
    release(&held);
    return Py_BuildValue("(dii)", ll, evals, ok);
}

/* gmm_em_step(x, th, k, out) -> log-likelihood at th; out (3k) gets EM's update of th.
 * th = (ln weights up to a constant, means, ln sds); sds are floored at 1e-4. */
static PyObject *gmm_em_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oth, *oout;
    int k;
    if (!PyArg_ParseTuple(args, "OOiO", &ox, &oth, &k, &oout) || !valid_k(k))
        return NULL;
    Held held = {.n = 0};
    Py_ssize_t n = 0;
    const double *x = hold(&held, ox, -1, 0, 0, "x", &n);
    const double *th = x ? hold(&held, oth, 3 * k, 0, 0, "th", NULL) : NULL;
    double *out = th ? hold(&held, oout, 3 * k, 1, 0, "out", NULL) : NULL;
    if (out == NULL) {
        release(&held);
        return NULL;
    }
    double *resp = malloc((size_t)(n > 0 ? n : 1) * (size_t)k * sizeof(double));
    if (resp == NULL) {
        release(&held);
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
    release(&held);
    return PyFloat_FromDouble(ll);
}

/* The arguments (x, mu, sd, per-component values, out) of a kernel that evaluates a
 * 1-D Gaussian mixture of 1..MAX_K components at each of x's n values, held; 0 with a
 * Python error. */
typedef struct {
    const double *x, *mu, *sd, *per;
    double *out;
    Py_ssize_t n, k;
} MixtureArgs;

static int hold_mixture_args(Held *held, PyObject *args, const char *xname,
                             const char *per_name, MixtureArgs *a) {
    PyObject *ox, *omu, *osd, *oper, *oout;
    if (!PyArg_ParseTuple(args, "OOOOO", &ox, &omu, &osd, &oper, &oout))
        return 0;
    a->x = hold(held, ox, -1, 0, 0, xname, &a->n);
    a->mu = a->x ? hold(held, omu, -1, 0, 0, "mu", &a->k) : NULL;
    a->sd = a->mu ? hold(held, osd, a->k, 0, 0, "sd", NULL) : NULL;
    a->per = a->sd ? hold(held, oper, a->k, 0, 0, per_name, NULL) : NULL;
    a->out = a->per ? hold(held, oout, a->n, 1, 0, "out", NULL) : NULL;
    if (a->out == NULL)
        return 0;
    if (a->k < 1 || a->k > MAX_K) {
        PyErr_Format(PyExc_ValueError, "mu: 1..%d components expected", MAX_K);
        return 0;
    }
    return 1;
}

/* gmm_logpdf(lr, mu, sd, c, out): out[i] = ln of the mixture's density of r at
 * lr[i] = ln r[i] (its density in ln r, minus ln r), c[j] = ln w[j] - ln sd[j] - ln sqrt(2 pi).
 * The numpy version in noise.Noise.logpdf has the same edge values: where no component
 * has a finite log-density (r = 0 or inf) the largest one, minus ln r. */
static PyObject *gmm_logpdf(PyObject *self, PyObject *args) {
    (void)self;
    Held held = {.n = 0};
    MixtureArgs a;
    if (!hold_mixture_args(&held, args, "lr", "c", &a)) {
        release(&held);
        return NULL;
    }
    const double *lr = a.x, *mu = a.mu, *sd = a.sd, *c = a.per;
    double *out = a.out;
    const Py_ssize_t n = a.n, k = a.k;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const double x = lr[i];
        double comp[MAX_K], top = -INFINITY;
        int nan = isnan(x);
        for (Py_ssize_t j = 0; j < k; j++) {
            const double z = (x - mu[j]) / sd[j];
            comp[j] = -0.5 * (z * z) + c[j];
            if (isnan(comp[j]))
                nan = 1;
            else if (comp[j] > top)
                top = comp[j];
        }
        if (nan) {
            out[i] = NAN;
            continue;
        }
        if (isfinite(top)) {
            double s = 0.0;
            for (Py_ssize_t j = 0; j < k; j++)
                s += exp(comp[j] - top);
            out[i] = top + log(s) - x;
        } else {
            out[i] = top - x;
        }
    }
    Py_END_ALLOW_THREADS
    release(&held);
    Py_RETURN_NONE;
}

/* The standard normal CDF as scipy's ndtr computes it (Cephes: erf near 0, erfc beyond). */
static double ndtr(double a) {
    const double x = a * 0.70710678118654752440, z = fabs(x);
    if (z < 0.70710678118654752440)
        return 0.5 + 0.5 * erf(x);
    const double y = 0.5 * erfc(z);
    return x > 0 ? 1.0 - y : y;
}

/* ln ndtr(a): kit.model.special's light log_ndtr, step for step (log1p of the upper tail
 * above 0, the log of ndtr down to -30, the asymptotic series below). */
#define LOG_NDTR_TERMS 8
static double log_ndtr(double a) {
    if (isnan(a))
        return NAN;
    if (a > 0.0)
        return log1p(-ndtr(-a));
    if (a > -30.0)
        return log(ndtr(a));
    const double inv = 1.0 / (a * a);
    double term = 1.0, total = 1.0;
    for (int k = 1; k <= LOG_NDTR_TERMS; k++) {
        term *= -(2 * k - 1) * inv;
        total += term;
    }
    return -0.5 * a * a - log(-a) - HALF_LOG_2PI + log(total);
}

/* ndtr(x, out) / log_ndtr(x, out): element by element over n doubles. Why: a model read
 * without SciPy (pt2pt predict, sample, export) evaluates millions of normal CDFs for the
 * per-size quantile maps; one Python call per element cost ~0.4 us each. */
static PyObject *elementwise(PyObject *args, double (*fn)(double)) {
    Held held = {.n = 0};
    PyObject *ox, *oout;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OO", &ox, &oout))
        return NULL;
    const double *x = hold(&held, ox, -1, 0, 0, "x", &n);
    double *out = x == NULL ? NULL : hold(&held, oout, n, 1, 0, "out", NULL);
    if (out == NULL) {
        release(&held);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        out[i] = fn(x[i]);
    Py_END_ALLOW_THREADS
    release(&held);
    Py_RETURN_NONE;
}

static PyObject *ndtr_each(PyObject *self, PyObject *args) {
    (void)self;
    return elementwise(args, ndtr);
}

static PyObject *log_ndtr_each(PyObject *self, PyObject *args) {
    (void)self;
    return elementwise(args, log_ndtr);
}

/* gmm_cdf_density(lr, mu, sd, w, cdf, dens): at each lr[i] = ln r, the mixture's CDF
 * sum w[j] ndtr(z) and its density in ln r, sum (w[j] / sd[j]) exp(-z^2 / 2) / sqrt(2 pi),
 * z = (lr[i] - mu[j]) / sd[j]: Noise.cdf_and_log_density's formulas in one pass, for a
 * model read without SciPy (the per-size quantile maps' Newton steps ask for millions). */
static PyObject *gmm_cdf_density(PyObject *self, PyObject *args) {
    (void)self;
    Held held = {.n = 0};
    MixtureArgs a;
    if (PyTuple_GET_SIZE(args) != 6) {
        PyErr_SetString(PyExc_TypeError, "gmm_cdf_density takes 6 arguments");
        return NULL;
    }
    PyObject *first = PyTuple_GetSlice(args, 0, 5);  /* lr, mu, sd, w, cdf */
    int ok = first != NULL && hold_mixture_args(&held, first, "lr", "w", &a);
    Py_XDECREF(first);
    double *dens = ok ? hold(&held, PyTuple_GET_ITEM(args, 5), a.n, 1, 0, "dens", NULL) : NULL;
    if (dens == NULL) {
        release(&held);
        return NULL;
    }
    const double *x = a.x, *mu = a.mu, *sd = a.sd, *w = a.per;
    double *cdf = a.out;
    const Py_ssize_t n = a.n, k = a.k;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double c = 0.0, d = 0.0;
        for (Py_ssize_t j = 0; j < k; j++) {
            const double z = (x[i] - mu[j]) / sd[j];
            c += w[j] * ndtr(z);
            d += (w[j] / sd[j]) * exp(-0.5 * (z * z));
        }
        cdf[i] = c;
        dens[i] = d * (1.0 / SQRT_2PI);
    }
    Py_END_ALLOW_THREADS
    release(&held);
    Py_RETURN_NONE;
}

/* gmm_ppf(q, mu, sd, w, out): ln-space quantiles of the mixture sum w[j] N(mu[j], sd[j]) at
 * the levels q, exponentiated: Noise._ppf's bisection (16 halvings of the range of the
 * components +-12 sd) then 4 Newton steps kept inside the bracket, the same steps as its
 * numpy version, without a numpy call per step (each of a fit's noises asks for a few). */
static PyObject *gmm_ppf(PyObject *self, PyObject *args) {
    (void)self;
    Held held = {.n = 0};
    MixtureArgs a;
    if (!hold_mixture_args(&held, args, "q", "w", &a)) {
        release(&held);
        return NULL;
    }
    const double *q = a.x, *mu = a.mu, *sd = a.sd, *w = a.per;
    double *out = a.out;
    const Py_ssize_t n = a.n, k = a.k;
    double lo0 = INFINITY, hi0 = -INFINITY;
    for (Py_ssize_t j = 0; j < k; j++) {  /* np.min / np.max: NaN wins */
        const double a = mu[j] - 12 * sd[j], b = mu[j] + 12 * sd[j];
        lo0 = isnan(a) || isnan(lo0) ? NAN : (a < lo0 ? a : lo0);
        hi0 = isnan(b) || isnan(hi0) ? NAN : (b > hi0 ? b : hi0);
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double lo = lo0, hi = hi0;
        for (int it = 0; it < 16; it++) {
            const double mid = (lo + hi) / 2;
            double cdf = 0.0;
            for (Py_ssize_t j = 0; j < k; j++)
                cdf += w[j] * ndtr((mid - mu[j]) / sd[j]);
            if (cdf < q[i])
                lo = mid;
            else
                hi = mid;
        }
        double m = (lo + hi) / 2;
        for (int it = 0; it < 4; it++) {
            double cdf = 0.0, dens = 0.0;
            for (Py_ssize_t j = 0; j < k; j++) {
                const double z = (m - mu[j]) / sd[j];
                cdf += w[j] * ndtr(z);
                dens += w[j] * exp(-0.5 * z * z) / (sd[j] * SQRT_2PI);
            }
            const double f = cdf - q[i];
            const double step = dens > 0 ? f / dens : 0.0;
            m = m - step;
            /* np.clip(m, lo, hi): NaN stays NaN */
            if (m < lo) m = lo;
            if (m > hi) m = hi;
        }
        out[i] = exp(m);
    }
    Py_END_ALLOW_THREADS
    release(&held);
    Py_RETURN_NONE;
}

/* band_size_terms(th, xu, xu_c, cnt, sy, syy, beta, gam) -> (sum_l0, quad): what the band
 * E-step needs from each distinct size at th (both lines, both sigmas, the share's
 * logistic): beta and gam (one value per size) and quad, the log-odds' coefficients, and
 * the fast band's log-likelihood summed from the per-size sums cnt, sy, syy. The numpy lines
 * at the top of mixture.fit_bands' e_step are the reference. */
static PyObject *band_size_terms(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oth, *oxu, *oxc, *ocnt, *osy, *osyy, *obeta, *ogam;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &oth, &oxu, &oxc, &ocnt, &osy, &osyy, &obeta,
                          &ogam))
        return NULL;
    Held held = {.n = 0};
    Py_ssize_t g = 0;
    const double *th = hold(&held, oth, 8, 0, 0, "th", NULL);
    const double *xu = th ? hold(&held, oxu, -1, 0, 0, "xu", &g) : NULL;
    const double *xc = xu ? hold(&held, oxc, g, 0, 0, "xu_c", NULL) : NULL;
    const double *cnt = xc ? hold(&held, ocnt, g, 0, 0, "cnt", NULL) : NULL;
    const double *sy = cnt ? hold(&held, osy, g, 0, 0, "sy", NULL) : NULL;
    const double *syy = sy ? hold(&held, osyy, g, 0, 0, "syy", NULL) : NULL;
    double *beta = syy ? hold(&held, obeta, g, 1, 0, "beta", NULL) : NULL;
    double *gam = beta ? hold(&held, ogam, g, 1, 0, "gam", NULL) : NULL;
    if (gam == NULL) {
        release(&held);
        return NULL;
    }
    const double ls0 = th[4], ls1 = th[5];
    const double p0 = exp(-2.0 * ls0), p1 = exp(-2.0 * ls1);
    double dot_a0 = 0.0, quad_sum = 0.0;
    for (Py_ssize_t j = 0; j < g; j++) {
        double w1 = 1.0 / (1.0 + exp(-(th[6] + th[7] * xc[j])));  /* scipy's expit */
        if (w1 < 1e-12) w1 = 1e-12;  /* np.clip; NaN stays NaN */
        if (w1 > 1 - 1e-12) w1 = 1 - 1e-12;
        const double mu0 = th[0] + th[1] * xu[j], mu1 = th[2] + th[3] * xu[j];
        const double a0 = log1p(-w1) - ls0 - HALF_LOG_2PI, a1 = log(w1) - ls1 - HALF_LOG_2PI;
        beta[j] = mu1 * p1 - mu0 * p0;
        gam[j] = (a1 - a0) - 0.5 * (mu1 * mu1 * p1 - mu0 * mu0 * p0);
        dot_a0 += cnt[j] * a0;
        quad_sum += syy[j] - 2.0 * mu0 * sy[j] + mu0 * mu0 * cnt[j];
    }
    release(&held);
    return Py_BuildValue("(dd)", dot_a0 - 0.5 * p0 * quad_sum, -0.5 * (p1 - p0));
}

/* band_e_step(yc, inv, beta, gam, quad, r, rs, ry, ryy) -> sum over samples of softplus(d).
 * d = quad * yc^2 + beta[inv] * yc + gam[inv] (clipped below at -700) is the log-odds of the
 * slow band for each sample; r gets expit(d), and rs, ry, ryy (one value per size) the sums
 * of r, r * yc and r * yc^2 over each size's samples. mixture.fit_bands documents the rest. */
static PyObject *band_e_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oy, *oinv, *obeta, *ogam, *or, *ors, *ory, *oryy;
    double quad;
    if (!PyArg_ParseTuple(args, "OOOOdOOOO", &oy, &oinv, &obeta, &ogam, &quad, &or, &ors,
                          &ory, &oryy))
        return NULL;
    Held held = {.n = 0};
    PyObject *result = NULL;
    Py_ssize_t n = 0, g = 0;
    const double *y = hold(&held, oy, -1, 0, 0, "yc", &n);
    const long long *inv = y ? hold(&held, oinv, n, 0, 1, "inv", NULL) : NULL;
    const double *beta = inv ? hold(&held, obeta, -1, 0, 0, "beta", &g) : NULL;
    const double *gam = beta ? hold(&held, ogam, g, 0, 0, "gam", NULL) : NULL;
    double *r = gam ? hold(&held, or, n, 1, 0, "r", NULL) : NULL;
    double *rs = r ? hold(&held, ors, g, 1, 0, "rs", NULL) : NULL;
    double *ry = rs ? hold(&held, ory, g, 1, 0, "ry", NULL) : NULL;
    double *ryy = ry ? hold(&held, oryy, g, 1, 0, "ryy", NULL) : NULL;
    if (ryy == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++)
        if (inv[i] < 0 || inv[i] >= g) {
            PyErr_Format(PyExc_IndexError, "inv[%zd] = %lld is not a size index (0..%zd)", i,
                         inv[i], g - 1);
            goto done;
        }
    double sp = 0.0;
    Py_BEGIN_ALLOW_THREADS
    memset(rs, 0, (size_t)g * sizeof(double));
    memset(ry, 0, (size_t)g * sizeof(double));
    memset(ryy, 0, (size_t)g * sizeof(double));
    for (Py_ssize_t i = 0; i < n; i++) {
        const double yi = y[i], yy = yi * yi;
        const Py_ssize_t s = (Py_ssize_t)inv[i];
        double d = quad * yy + beta[s] * yi + gam[s];
        if (d < -700.0) /* NaN stays NaN, as with np.maximum */
            d = -700.0;
        const double ri = 1.0 / (1.0 + exp(-d));
        r[i] = ri;
        sp += d - log(ri); /* softplus(d), as the numpy version computes it */
        rs[s] += ri;
        ry[s] += ri * yi;
        ryy[s] += ri * yy;
    }
    Py_END_ALLOW_THREADS
    result = PyFloat_FromDouble(sp);
done:
    release(&held);
    return result;
}

/* Weighted line of y on x from per-size sums (w weights, wy weighted y): mixture._group_line. */
static void group_line(const double *xu, const double *w, const double *wy, Py_ssize_t g,
                       double *a, double *b) {
    double sw = 0.0, swy = 0.0, swx = 0.0;
    for (Py_ssize_t i = 0; i < g; i++) {
        sw += w[i];
        swy += wy[i];
        swx += w[i] * xu[i];
    }
    if (sw <= 0 || g < 2) {
        *a = swy / (sw > 1e-300 ? sw : 1e-300);
        *b = 0.0;
        return;
    }
    const double mx = swx / sw, my = swy / sw;
    double vxx = 0.0, vxy = 0.0;
    for (Py_ssize_t i = 0; i < g; i++) {
        const double dx = xu[i] - mx;
        vxx += w[i] * dx * dx;
        vxy += dx * (wy[i] - w[i] * my);
    }
    *b = vxx > 1e-12 ? vxy / vxx : 0.0;
    *a = my - *b * mx;
}

/* band_m_step(xu, xu_c, cnt, sy, syy, rs, ry, ryy, c0, c1, slope_precision, out) -> ok.
 * The band EM's M-step from per-size sums, as mixture.fit_bands' step: each band's weighted
 * line and ln sigma, then three Newton steps of the share's logistic regression from
 * (c0, c1). False (out unusable) where a Newton step's 2x2 system is not positive definite:
 * the numpy version then says what is wrong. */
static PyObject *band_m_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8], *oout;
    double c[2], prec;
    if (!PyArg_ParseTuple(args, "OOOOOOOOdddO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &c[0], &c[1], &prec, &oout))
        return NULL;
    static const char *names[8] = {"xu", "xu_c", "cnt", "sy", "syy", "rs", "ry", "ryy"};
    Held held = {.n = 0};
    PyObject *result = NULL;
    double *work = NULL;
    const double *v[8];
    Py_ssize_t g = 0;
    for (int i = 0; i < 8; i++)  /* xu sets the number of sizes the others must have */
        if ((v[i] = hold(&held, o[i], i ? g : -1, 0, 0, names[i], i ? NULL : &g)) == NULL)
            goto done;
    const double *xu = v[0], *xc = v[1], *cnt = v[2], *sy = v[3], *syy = v[4], *rs = v[5],
                 *ry = v[6], *ryy = v[7];
    double *out = hold(&held, oout, 8, 1, 0, "out", NULL);
    if (out == NULL)
        goto done;
    work = malloc((size_t)(g > 0 ? g : 1) * 3 * sizeof(double));
    if (work == NULL) {
        result = PyErr_NoMemory();
        goto done;
    }
    double *w = work, *wy = work + g, *wyy = work + 2 * g;
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        for (Py_ssize_t i = 0; i < g; i++) {
            w[i] = k ? rs[i] : cnt[i] - rs[i];
            wy[i] = k ? ry[i] : sy[i] - ry[i];
            wyy[i] = k ? ryy[i] : syy[i] - ryy[i];
        }
        double a, b, ss = 0.0, sw = 0.0;
        group_line(xu, w, wy, g, &a, &b);
        for (Py_ssize_t i = 0; i < g; i++) {
            const double mu = a + b * xu[i];
            ss += wyy[i] - 2.0 * mu * wy[i] + mu * mu * w[i];
            sw += w[i];
        }
        const double sd = sqrt((ss > 0.0 ? ss : 0.0) / (sw > 1e-12 ? sw : 1e-12));
        out[2 * k] = a;
        out[2 * k + 1] = b;
        out[4 + k] = log(sd > 1e-3 ? sd : 1e-3);
    }
    for (int step = 0; step < 3; step++) { /* mixture.logistic_step with n = cnt */
        double g0 = 0.0, g1 = 0.0, h00 = 0.0, h01 = 0.0, h11 = 0.0;
        for (Py_ssize_t i = 0; i < g; i++) {
            const double p = 1.0 / (1.0 + exp(-(c[0] + c[1] * xc[i])));
            const double e = cnt[i] * p - rs[i], v = cnt[i] * p * (1.0 - p);
            g0 += e;
            g1 += xc[i] * e;
            h00 += v;
            h01 += v * xc[i];
            h11 += v * xc[i] * xc[i];
        }
        g0 += 1e-6 * c[0];
        g1 += prec * c[1];
        h00 += 1e-6;
        h11 += prec;
        const double det = h00 * h11 - h01 * h01;
        if (!(isfinite(det) && det > 0)) {
            ok = 0;
            break;
        }
        c[0] -= (h11 * g0 - h01 * g1) / det;
        c[1] -= (h00 * g1 - h01 * g0) / det;
    }
    out[6] = c[0];
    out[7] = c[1];
    result = PyBool_FromLong(ok);
done:
    free(work);
    release(&held);
    return result;
}

static PyMethodDef methods[] = {
    {"gmm_newton_terms", gmm_newton_terms, METH_VARARGS,
     "gmm_newton_terms(x, th, k, g, h) -> log-likelihood; fills gradient g and Hessian h."},
    {"gmm_newton", gmm_newton, METH_VARARGS,
     "gmm_newton(x, th, k, max_evals, ln_sd_min) -> (ll, evals, ok); th updated in place."},
    {"gmm_em_step", gmm_em_step, METH_VARARGS,
     "gmm_em_step(x, th, k, out) -> log-likelihood at th; out gets EM's update."},
    {"gmm_logpdf", gmm_logpdf, METH_VARARGS,
     "gmm_logpdf(lr, mu, sd, c, out): the mixture's log-density of r at lr = ln r."},
    {"ndtr", ndtr_each, METH_VARARGS, "ndtr(x, out): the standard normal CDF of each x."},
    {"log_ndtr", log_ndtr_each, METH_VARARGS, "log_ndtr(x, out): its log, each x."},
    {"gmm_cdf_density", gmm_cdf_density, METH_VARARGS,
     "gmm_cdf_density(lr, mu, sd, w, cdf, dens): the mixture's CDF and ln-r density."},
    {"gmm_ppf", gmm_ppf, METH_VARARGS,
     "gmm_ppf(q, mu, sd, w, out): the mixture's quantiles (of r, with ln r mixed) at q."},
    {"band_size_terms", band_size_terms, METH_VARARGS,
     "band_size_terms(th, xu, xu_c, cnt, sy, syy, beta, gam) -> (sum_l0, quad)."},
    {"band_e_step", band_e_step, METH_VARARGS,
     "band_e_step(yc, inv, beta, gam, quad, r, rs, ry, ryy) -> sum of softplus(d)."},
    {"band_m_step", band_m_step, METH_VARARGS,
     "band_m_step(xu, xu_c, cnt, sy, syy, rs, ry, ryy, c0, c1, prec, out) -> ok."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mixture_kernels",
    "Compiled kernels of the engine's mixtures (see noise.py and mixture.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mixture_kernels(void) { return PyModule_Create(&module); }
