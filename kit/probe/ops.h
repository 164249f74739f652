/* One sample of each operation, as seen by rank 0 (the timing rank) and rank 1 (its peer). */
#ifndef PT2PT_OPS_H
#define PT2PT_OPS_H

#include <mpi.h>
#include <stdint.h>

#include "plan.h"
#include "timer.h"

struct sample {
    uint64_t seq;
    uint64_t size;
    uint32_t count;  /* messages the sample stands for: 1, or the stream window */
    uint32_t pair;   /* contention mode: index of the pair that took it */
    uint8_t op;
    uint8_t warmup;
    double time;     /* seconds */
    double call;     /* isend/irecv: the initiating call alone; negative when not applicable */
};

struct op_ctx {
    int role;                    /* 0: the initiator, which times; 1: its peer */
    int peer;                    /* rank of the other side of this rank's pair */
    MPI_Comm comm;
    char *sbuf, *rbuf;           /* allocated once, sized for the largest message, touched */
    MPI_Request *reqs;           /* window requests for stream (2 * window) */
    int window;
    int bidirectional;           /* stream: both sides send a window at once */
    unsigned long inject_delay_us; /* this rank waits so long before each pingpong send */
    int inject_sleep;            /* ... sleeping (no CPU) instead of busy-waiting */
    timer_fn now;
};

/* Run one plan entry on this rank; the initiator fills *out, its peer only serves. */
void op_run(const struct op_ctx *c, const struct plan_entry *e, struct sample *out);

#endif
