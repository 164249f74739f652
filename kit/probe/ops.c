/* Each op is self-synchronising: when both ranks return, every message of the sample has been
 * delivered, so any op may follow any other in the shuffled plan. Only the measured MPI calls sit
 * between the two timer readings; handshakes happen before t0 or after t1. */
#include "ops.h"

#define TAG_DATA 1
#define TAG_CTRL 2

static void inject(const struct op_ctx *c)
{
    if (c->inject_sleep)
        sleep_us(c->inject_delay_us);
    else
        busy_wait_us(c->inject_delay_us);
}

/* pingpong: Send then Recv of the same size; time = full round trip. */
static void pingpong(const struct op_ctx *c, int n, struct sample *s)
{
    if (c->role == 0) {
        double t0 = c->now();
        if (c->inject_delay_us) /* only with --inject-delay-host naming this rank's host */
            inject(c);
        MPI_Send(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm);
        MPI_Recv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
        s->time = c->now() - t0;
    } else {
        MPI_Recv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
        if (c->inject_delay_us)
            inject(c);
        MPI_Send(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm);
    }
}

/* send/isend: rank 1 pre-posts the receive and says so; rank 0 times its send. The send
 * completes locally while its bytes may still be queued (socket, shaped link): after t1 rank 0
 * waits for rank 1 to confirm delivery, so the next sample does not queue behind them. */
static void send_side(const struct op_ctx *c, int n, int nonblocking, struct sample *s)
{
    if (c->role == 0) {
        MPI_Request req;
        MPI_Recv(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm, MPI_STATUS_IGNORE);
        double t0 = c->now();
        if (nonblocking) {
            MPI_Isend(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &req);
            s->call = c->now() - t0;
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Send(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm);
        }
        s->time = c->now() - t0;
        MPI_Recv(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Request req;
        MPI_Irecv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &req);
        MPI_Send(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm);
    }
}

/* recv/irecv: rank 1 sends; rank 0 waits in MPI_Probe until the message is there, then times
 * its receive; an ack keeps rank 1 from sending the next message during the timed receive. */
static void recv_side(const struct op_ctx *c, int n, int nonblocking, struct sample *s)
{
    if (c->role == 0) {
        MPI_Request req;
        MPI_Probe(c->peer, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
        double t0 = c->now();
        if (nonblocking) {
            MPI_Irecv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &req);
            s->call = c->now() - t0;
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, MPI_STATUS_IGNORE);
        }
        s->time = c->now() - t0;
        MPI_Send(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm);
    } else {
        MPI_Send(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm);
        MPI_Recv(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm, MPI_STATUS_IGNORE);
    }
}

/* stream: a window of back-to-back Isends, complete when rank 1's zero-byte ack arrives.
 * Rank 1 receives the whole window into one buffer, as osu_bw does: contents do not matter. */
static void stream(const struct op_ctx *c, int n, struct sample *s)
{
    if (c->role == 0) {
        double t0 = c->now();
        for (int k = 0; k < c->window; k++)
            MPI_Isend(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &c->reqs[k]);
        MPI_Waitall(c->window, c->reqs, MPI_STATUSES_IGNORE);
        MPI_Recv(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm, MPI_STATUS_IGNORE);
        s->time = c->now() - t0;
    } else {
        for (int k = 0; k < c->window; k++)
            MPI_Irecv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &c->reqs[k]);
        MPI_Waitall(c->window, c->reqs, MPI_STATUSES_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, c->comm);
    }
}

/* bidirectional stream (osu_bibw's pattern): both ranks post a window of receives and a window
 * of sends at once, then exchange a zero-byte ack; the initiator times the whole exchange.
 * reqs holds 2 * window requests. */
static void stream_bidir(const struct op_ctx *c, int n, struct sample *s)
{
    double t0 = c->now();
    for (int k = 0; k < c->window; k++)
        MPI_Irecv(c->rbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &c->reqs[k]);
    for (int k = 0; k < c->window; k++)
        MPI_Isend(c->sbuf, n, MPI_BYTE, c->peer, TAG_DATA, c->comm, &c->reqs[c->window + k]);
    MPI_Waitall(2 * c->window, c->reqs, MPI_STATUSES_IGNORE);
    MPI_Sendrecv(NULL, 0, MPI_BYTE, c->peer, TAG_CTRL, NULL, 0, MPI_BYTE, c->peer, TAG_CTRL,
                 c->comm, MPI_STATUS_IGNORE);
    if (c->role == 0)
        s->time = c->now() - t0;
}

void op_run(const struct op_ctx *c, const struct plan_entry *e, struct sample *out)
{
    int n = (int)e->size; /* options.c caps sizes at INT_MAX */
    out->size = e->size;
    out->op = e->op;
    out->warmup = e->warmup;
    out->count = 1;
    out->call = -1.0;
    switch ((enum op_kind)e->op) {
    case OP_PINGPONG: pingpong(c, n, out); break;
    case OP_SEND: send_side(c, n, 0, out); break;
    case OP_ISEND: send_side(c, n, 1, out); break;
    case OP_RECV: recv_side(c, n, 0, out); break;
    case OP_IRECV: recv_side(c, n, 1, out); break;
    case OP_STREAM:
        out->count = (uint32_t)c->window;
        if (c->bidirectional)
            stream_bidir(c, n, out);
        else
            stream(c, n, out);
        break;
    }
}
