#include "timer.h"

#include <errno.h>

#include <mpi.h>
#include <stdlib.h>
#include <time.h>

#define OVERHEAD_READINGS 1001

static double mpi_now(void)
{
    return MPI_Wtime();
}

double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

timer_fn timer_get(enum timer_kind kind)
{
    return kind == TIMER_MPI ? mpi_now : mono_now;
}

const char *timer_name(enum timer_kind kind)
{
    return kind == TIMER_MPI ? "mpi" : "monotonic";
}

double timer_resolution(enum timer_kind kind)
{
    if (kind == TIMER_MPI)
        return MPI_Wtick();
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    return (double)res.tv_sec + (double)res.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double timer_overhead(timer_fn now)
{
    static double t[OVERHEAD_READINGS];
    for (int i = 0; i < OVERHEAD_READINGS; i++)
        t[i] = now();
    for (int i = 0; i + 1 < OVERHEAD_READINGS; i++)
        t[i] = t[i + 1] - t[i];
    qsort(t, OVERHEAD_READINGS - 1, sizeof t[0], cmp_double);
    return t[(OVERHEAD_READINGS - 1) / 2];
}

void busy_wait_us(unsigned long us)
{
    double until = mono_now() + (double)us * 1e-6;
    while (mono_now() < until) {
    }
}

/* Sleep until `us` microseconds from now (absolute deadline, so a signal only resumes it):
 * a delay that costs no CPU, like a packet held on an interface. */
void sleep_us(unsigned long us)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(us / 1000000UL);
    until.tv_nsec += (long)(us % 1000000UL) * 1000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}
