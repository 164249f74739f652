#include "output.h"

#include "timer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define ROW_MAX 128
#define CSV_HEADER "seq,op,size,count,time,call,warmup\n"
#define CSV_HEADER_EXT "seq,op,size,count,time,call,warmup,pair,round\n"

extern char **environ;

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int csv_open(struct csv_out *c, const char *prefix, uint64_t block_rows, double fsync_interval,
             char *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.samples.csv", prefix);
    c->rows = 0;
    c->fsync_interval = fsync_interval;
    c->last_sync = mono_now();
    c->buf = malloc(block_rows * ROW_MAX);
    if (!c->buf) {
        snprintf(err, ERRMSG_LEN, "--flush-every %llu: no memory for the block buffer; lower it",
                 (unsigned long long)block_rows);
        return -1;
    }
    /* Never overwrite or truncate a run: an existing samples or meta file under this
     * PREFIX is an earlier run (or one still being written). */
    char meta[4096];
    snprintf(meta, sizeof meta, "%s.meta.json", prefix);
    if (access(meta, F_OK) == 0) {
        snprintf(err, ERRMSG_LEN, "--output: '%s' already exists (an earlier run); the probe "
                 "never overwrites a run: choose another PREFIX or move the old files away",
                 meta);
        return -1;
    }
    c->fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (c->fd < 0 && errno == EEXIST) {
        snprintf(err, ERRMSG_LEN, "--output: '%s' already exists (an earlier run); the probe "
                 "never overwrites a run: choose another PREFIX or move the old files away",
                 path);
        return -1;
    }
    /* Held until the probe exits (even by SIGKILL): ingest and collect see a live writer and
     * do not commit a run that is still growing. Not every file system has locks: then the
     * meta file's pid and end time say the same. */
    if (c->fd >= 0)
        (void)flock(c->fd, LOCK_EX | LOCK_NB);
    const char *header = c->extended ? CSV_HEADER_EXT : CSV_HEADER;
    if (c->fd < 0 || write_all(c->fd, header, strlen(header)) || fsync(c->fd)) {
        snprintf(err, ERRMSG_LEN, "--output: cannot write '%s': %s; choose a writable PREFIX",
                 path, strerror(errno));
        if (c->fd >= 0)
            unlink(path);
        return -1;
    }
    return 0;
}

void csv_discard(struct csv_out *c, const char *prefix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.samples.csv", prefix);
    if (c->fd >= 0 && c->rows == 0) {
        unlink(path);
        close(c->fd);
        c->fd = -1;
    }
}

static const char DIGIT_PAIRS[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Decimal digits of v, two at a time from the end (a row has three of these). */
static char *format_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 20;
    while (v >= 100) {
        n -= 2;
        memcpy(tmp + n, DIGIT_PAIRS + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        n -= 2;
        memcpy(tmp + n, DIGIT_PAIRS + 2 * v, 2);
    } else {
        tmp[--n] = (char)('0' + v);
    }
    memcpy(p, tmp + n, (size_t)(20 - n));
    return p + (20 - n);
}

/* Exact powers of ten 10^0 .. 10^22 (every one is a double without rounding). */
static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
                                 1e22};

char *format_e9(char *p, double x)
{
    /* snprintf("%.9e") costs more than a vader round trip; timings are in [1e-13, 1e9) s,
     * where x * 10^(9-e) is a single correctly rounded multiplication. Else: snprintf. */
    if (!(x >= 1e-13 && x < 1e9))
        return p + snprintf(p, 32, "%.9e", x);
    int e = 0; /* decimal exponent, 10^e <= x < 10^(e+1) */
    if (x >= 1.0) {
        while (e < 8 && x >= POW10[e + 1])
            e++;
    } else {
        /* e = the largest e <= -1 with x * 10^-e >= 1. Start from the binary exponent
         * (x = f * 2^b, f in [0.5, 1): e is about (b - 1) * log10(2)) instead of counting
         * down from -1, then settle with the same test (monotone in e). */
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);
        int b = (int)((bits >> 52) & 0x7FF) - 1022;
        e = (b - 1) * 30103 / 100000;
        if (e > -1)
            e = -1;
        while (e < -1 && x * POW10[-(e + 1)] >= 1.0)
            e++;
        while (x * POW10[-e] < 1.0)
            e--;
    }
    double scaled = x * POW10[9 - e];
    if (scaled + 0.5 < 1e9) { /* x sat just below a power of ten */
        if (9 - (e - 1) > 22)
            return p + snprintf(p, 32, "%.9e", x);
        e--;
        scaled = x * POW10[9 - e];
    }
    uint64_t m = (uint64_t)(scaled + 0.5);
    if (m >= UINT64_C(10000000000)) { /* rounding carried into an eleventh digit */
        m /= 10;
        e++;
    }
    /* ten digits as two halves of five, two digits at a time */
    char digits[10];
    uint32_t half[2] = {(uint32_t)(m / 100000), (uint32_t)(m % 100000)};
    for (int h = 0; h < 2; h++) {
        uint32_t v = half[h], r = v % 10000;
        digits[5 * h] = (char)('0' + v / 10000);
        memcpy(digits + 5 * h + 1, DIGIT_PAIRS + 2 * (r / 100), 2);
        memcpy(digits + 5 * h + 3, DIGIT_PAIRS + 2 * (r % 100), 2);
    }
    *p++ = digits[0];
    *p++ = '.';
    memcpy(p, digits + 1, 9);
    p += 9;
    *p++ = 'e';
    *p++ = e < 0 ? '-' : '+';
    int a = e < 0 ? -e : e;
    *p++ = (char)('0' + a / 10);
    *p++ = (char)('0' + a % 10);
    return p;
}

int csv_flush(struct csv_out *c, const struct sample *s, uint64_t n, int force, char *err)
{
    char *p = c->buf;
    for (uint64_t i = 0; i < n; i++) {
        const char *op = op_name((enum op_kind)s[i].op);
        size_t len = strlen(op);
        p = format_u64(p, c->extended ? c->rows + i : s[i].seq);
        *p++ = ',';
        memcpy(p, op, len);
        p += len;
        *p++ = ',';
        p = format_u64(p, s[i].size);
        *p++ = ',';
        p = format_u64(p, s[i].count);
        *p++ = ',';
        p = format_e9(p, s[i].time);
        *p++ = ',';
        if (s[i].call >= 0)
            p = format_e9(p, s[i].call);
        *p++ = ',';
        *p++ = s[i].warmup ? '1' : '0';
        if (c->extended) {
            *p++ = ',';
            p = format_u64(p, s[i].pair);
            *p++ = ',';
            p = format_u64(p, s[i].seq);
        }
        *p++ = '\n';
    }
    if (write_all(c->fd, c->buf, (size_t)(p - c->buf))) {
        snprintf(err, ERRMSG_LEN, "writing samples failed: %s (disk full?)", strerror(errno));
        return -1;
    }
    c->rows += n;
    /* Once write() returns the rows are in the kernel's page cache and survive SIGKILL of this
     * process; fsync only adds safety against a crash of the node, and costs milliseconds. */
    double t = mono_now();
    if (force || t - c->last_sync >= c->fsync_interval) {
        if (fsync(c->fd)) {
            snprintf(err, ERRMSG_LEN, "fsync of the samples failed: %s", strerror(errno));
            return -1;
        }
        c->last_sync = t;
    }
    return 0;
}

void csv_close(struct csv_out *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
}

void iso_now(char *out, int len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, (size_t)len, "%s.%06ldZ", base, ts.tv_nsec / 1000);
}

/* A growable string for the JSON document. */
struct sb {
    char *p;
    size_t len, cap;
    int failed;
};

static void sb_printf(struct sb *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap : 4096) * 2 + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void sb_str(struct sb *b, const char *s)
{
    sb_printf(b, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            sb_printf(b, "\\%c", ch);
        else if (ch == '\n')
            sb_printf(b, "\\n");
        else if (ch == '\t')
            sb_printf(b, "\\t");
        else if (ch < 0x20)
            sb_printf(b, "\\u%04x", ch);
        else
            sb_printf(b, "%c", ch);
    }
    sb_printf(b, "\"");
}

/* Environment variables that select or tune the transport, and where Slurm placed us. */
static int env_relevant(const char *kv)
{
    static const char *const prefixes[] = {"OMPI_MCA_", "UCX_", "FI_", "I_MPI_", "MPIR_CVAR_",
                                           "PMIX_MCA_", "SLURM_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

static void sb_env(struct sb *b)
{
    sb_printf(b, "{");
    int first = 1;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !env_relevant(*e))
            continue;
        char name[256];
        size_t len = (size_t)(eq - *e) < sizeof name - 1 ? (size_t)(eq - *e) : sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        sb_printf(b, "%s\n    ", first ? "" : ",");
        sb_str(b, name);
        sb_printf(b, ": ");
        sb_str(b, eq + 1);
        first = 0;
    }
    sb_printf(b, "}");
}

static void sb_int_or_null(struct sb *b, int v)
{
    if (v >= 0)
        sb_printf(b, "%d", v);
    else
        sb_printf(b, "null");
}

static void sb_meta(struct sb *b, const struct meta *m)
{
    const struct options *o = m->opt;
    sb_printf(b, "{\n  \"probe_version\": \"%s\",\n  \"argv\": [", PROBE_VERSION);
    for (int i = 0; i < m->argc; i++) {
        sb_printf(b, i ? ", " : "");
        sb_str(b, m->argv[i]);
    }
    sb_printf(b, "],\n  \"mpi_version\": ");
    sb_str(b, m->mpi_version);
    sb_printf(b, ",\n  \"hosts\": [");
    for (int r = 0; r < m->nranks; r++) {
        sb_printf(b, r ? ", " : "");
        sb_str(b, m->hosts[r]);
    }
    /* cpus / sockets: flat lists in rank order, read by kit.data.placement (null: unknown) */
    for (int key = 0; key < 2; key++) {
        sb_printf(b, "],\n  \"%s\": [", key ? "sockets" : "cpus");
        for (int r = 0; r < m->nranks; r++) {
            sb_printf(b, r ? ", " : "");
            sb_int_or_null(b, m->places[4 * r + key]);
        }
    }
    sb_printf(b, "],\n  \"ranks\": [");
    for (int r = 0; r < m->nranks; r++) {
        const int *pl = m->places + 4 * r;
        sb_printf(b, "%s\n    {\"rank\": %d, \"host\": ", r ? "," : "", r);
        sb_str(b, m->hosts[r]);
        sb_printf(b, ", \"cpu\": ");
        sb_int_or_null(b, pl[0]);
        sb_printf(b, ", \"socket\": ");
        sb_int_or_null(b, pl[1]);
        sb_printf(b, ", \"core\": ");
        sb_int_or_null(b, pl[2]);
        sb_printf(b, ", \"cpu_end\": ");
        sb_int_or_null(b, pl[3]);
        sb_printf(b, "}");
    }
    sb_printf(b, "],\n  \"contention\": %s,\n  \"pairs\": %d,\n  \"pairing\": [",
              o->contention ? "true" : "false", o->n_pairs);
    for (int p = 0; p < o->n_pairs; p++)
        sb_printf(b, "%s[%d, %d]", p ? ", " : "", o->pair_a[p], o->pair_b[p]);
    sb_printf(b, "],\n  \"bidirectional\": %s", o->bidirectional ? "true" : "false");
    sb_printf(b, ",\n  \"timer\": {\"name\": \"%s\", \"resolution_s\": %.9e, "
              "\"overhead_s\": %.9e},\n", timer_name(o->timer), m->timer_resolution,
              m->timer_overhead);
    sb_printf(b, "  \"seed\": %llu,\n  \"sizes\": {\"spec\": ", (unsigned long long)o->seed);
    sb_str(b, o->sizes.text);
    sb_printf(b, ", \"samples\": %llu, \"min\": %llu, \"max\": %llu},\n  \"ops\": [",
              (unsigned long long)o->samples, (unsigned long long)o->sizes.min,
              (unsigned long long)o->sizes.max);
    for (int i = 0; i < o->n_ops; i++)
        sb_printf(b, "%s\"%s\"", i ? ", " : "", op_name(o->ops[i]));
    sb_printf(b, "],\n  \"warmup\": %llu,\n  \"window\": %d,\n  \"inject_delay_us\": %lu,\n"
              "  \"inject_delay_host\": ", (unsigned long long)o->warmup, o->window,
              o->inject_delay_us);
    if (o->inject_delay_host)
        sb_str(b, o->inject_delay_host);
    else
        sb_printf(b, "null");
    sb_printf(b, ",\n  \"inject_delay_sleep\": %s", o->inject_delay_sleep ? "true" : "false");
    sb_printf(b, ",\n  \"flush_every\": %llu,\n  \"fsync_interval_s\": %g,\n  \"max_seconds\": ",
              (unsigned long long)o->flush_every, o->fsync_interval);
    if (o->max_seconds > 0)
        sb_printf(b, "%g", o->max_seconds);
    else
        sb_printf(b, "null");
    sb_printf(b, ",\n  \"order\": \"%s\",\n  \"repeat_fraction\": %.17g,\n"
              "  \"repeat_count\": %llu,\n  \"samples_repeated\": %llu",
              order_name(o->order), o->repeat_fraction, (unsigned long long)o->repeat_count,
              (unsigned long long)m->plan->n_repeated);
    sb_printf(b, ",\n  \"plan_hash\": \"%016llx\",\n  \"samples_planned\": %llu,\n  \"env\": ",
              (unsigned long long)m->plan->hash, (unsigned long long)m->plan->n);
    sb_env(b);
    const char *job = getenv("SLURM_JOB_ID");
    sb_printf(b, ",\n  \"slurm_job_id\": ");
    if (job)
        sb_str(b, job);
    else
        sb_printf(b, "null");
    /* who writes the files (a live writer on this host is not ingested before it ends) */
    sb_printf(b, ",\n  \"writer_pid\": %ld", (long)getpid());
    sb_printf(b, ",\n  \"start\": \"%s\",\n  \"end\": ", m->start);
    if (m->end[0])
        sb_printf(b, "\"%s\"", m->end);
    else
        sb_printf(b, "null");
    sb_printf(b, ",\n  \"loop_seconds\": ");
    if (m->loop_seconds >= 0)
        sb_printf(b, "%.9e", m->loop_seconds);
    else
        sb_printf(b, "null");
    sb_printf(b, ",\n  \"samples_written\": %llu,\n  \"stop_reason\": ",
              (unsigned long long)m->samples_written);
    if (m->stop_reason)
        sb_str(b, m->stop_reason);
    else
        sb_printf(b, "null");
    sb_printf(b, ",\n  \"complete\": %s\n}\n", m->complete ? "true" : "false");
}

int meta_write(const char *prefix, const struct meta *m, char *err)
{
    char path[4096], tmp[4112];
    snprintf(path, sizeof path, "%s.meta.json", prefix);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct sb b = {NULL, 0, 0, 0};
    sb_meta(&b, m);
    if (b.failed) {
        free(b.p);
        snprintf(err, ERRMSG_LEN, "out of memory formatting %s", path);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int bad = fd < 0 || write_all(fd, b.p, b.len) || fsync(fd);
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        saved = errno;
    }
    free(b.p);
    if (bad) {
        snprintf(err, ERRMSG_LEN, "--output: cannot write '%s': %s; choose a writable PREFIX",
                 path, strerror(saved));
        return -1;
    }
    return 0;
}
