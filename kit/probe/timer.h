/* The two clocks the probe can time with, and their resolution and call overhead. */
#ifndef PT2PT_TIMER_H
#define PT2PT_TIMER_H

typedef double (*timer_fn)(void);

enum timer_kind { TIMER_MPI, TIMER_MONOTONIC };

timer_fn timer_get(enum timer_kind kind);
const char *timer_name(enum timer_kind kind);
/* MPI_Wtick() or clock_getres(CLOCK_MONOTONIC), in seconds. */
double timer_resolution(enum timer_kind kind);
/* Median gap between back-to-back readings: what one timed region costs beyond the call. */
double timer_overhead(timer_fn now);
/* Seconds on CLOCK_MONOTONIC, for deadlines and busy-waits (independent of --timer). */
double mono_now(void);
/* Spin (no sleep: sleeping would add scheduler wake-up noise) for the given microseconds. */
void busy_wait_us(unsigned long us);
void sleep_us(unsigned long us);

#endif
