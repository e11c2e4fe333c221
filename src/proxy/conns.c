/*
 * The client connections, and what bounds a slow one (slowloris: many
 * connections that each drip a request head a byte at a time, never idle
 * long enough for --client-timeout, would hold every connection slot).
 *
 * Each connection MHD accepts gets a px_conn (MHD_OPTION_NOTIFY_CONNECTION;
 * its socket context) in p->conns, oldest first. Its head is "open" from
 * the connection's start, or on a kept-alive connection from its next
 * request line, until the access handler's first call (the head is
 * whole). The loop (relay.c) calls px_conns_sweep after every MHD_run:
 *  - a head open for longer than head_timeout (--head-timeout) has its
 *    connection closed;
 *  - when the connections reach the limit minus a reserve (a sixteenth of
 *    it; one below 32, none below 4), those whose head has been open for
 *    HEAD_GRACE_US at least, idle kept-alive ones included, are closed
 *    oldest first until the reserve is free again,
 *    so a new client (the health endpoint's included) always finds a slot:
 *    MHD drops a connection accepted past its limit, whoever it is from.
 *    Connections with a request in progress are never closed here.
 * Per-address limits would not do: the clients are mostly on this
 * machine, all from 127.0.0.1.
 *
 * Closing is shutdown(2) of the socket: MHD sees the end of the stream at
 * its next run and closes the connection itself (and calls us back), so
 * MHD's own state stays consistent.
 *
 * Invariants: only the loop thread touches p->conns and its px_conns (MHD
 * calls every callback from MHD_run, on that thread); a px_conn lives from
 * MHD's STARTED to its CLOSED notification and is in the list exactly
 * then; a connection is shut down at most once (closing).
 */
#include <stdlib.h>
#include <sys/socket.h>

#include "proxy/internal.h"

/* How often the timeouts are checked (the pressure check runs always). */
#define SWEEP_EVERY_US STG_MS(100)
/* Under pressure a head is closed only once it has been open this long:
 * a client that just connected gets the time to send its head. */
#define HEAD_GRACE_US STG_MS(250)

void px_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                    enum MHD_ConnectionNotificationCode toe)
{
    stg_proxy *p = cls;
    px_conn *k = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        k = calloc(1, sizeof *k);
        if (!k)
            return; /* unbounded by us, served all the same */
        k->p = p;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        k->head_start_us = px_mono_us();
        stg__list_push_back(&p->conns, &k->link);
        p->n_conns++;
        *socket_context = k;
        return;
    }
    if (!k)
        return;
    stg__list_unlink(&p->conns, &k->link);
    if (!k->closing)
        p->n_conns--;
    free(k);
    *socket_context = NULL;
}

px_conn *px_conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        c ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    return ci ? ci->socket_context : NULL;
}

void px_conn_request_line(struct MHD_Connection *c)
{
    px_conn *k = px_conn_of(c);
    if (k && k->kept && !k->line) { /* the next request on a kept-alive one */
        k->line = true;
        k->head_start_us = px_mono_us();
    }
}

void px_conn_head_done(struct MHD_Connection *c)
{
    px_conn *k = px_conn_of(c);
    if (k)
        k->busy = true;
}

void px_conn_request_done(struct MHD_Connection *c)
{
    px_conn *k = px_conn_of(c);
    if (k) {
        k->busy = false;
        k->kept = true;
        k->line = false;
        k->head_start_us = px_mono_us();
    }
}

static void close_conn(stg_proxy *p, px_conn *k)
{
    k->closing = true;
    p->n_conns--;
    if (k->fd >= 0)
        shutdown(k->fd, SHUT_RDWR);
}

void px_conns_sweep(stg_proxy *p)
{
    /* The slots kept free: a sixteenth, one of a small limit, none of a
     * tiny one (then only a full table is pressure). */
    unsigned lim = p->conn_limit;
    unsigned reserve = lim >= 32 ? lim / 16 : lim >= 4 ? 1 : 0;
    unsigned high = lim - reserve;
    int64_t now = px_mono_us();
    bool pressed = p->n_conns >= high;
    if (!pressed && now < p->next_sweep_us)
        return;
    p->next_sweep_us = now + SWEEP_EVERY_US;
    for (stg__link *l = p->conns.head; l; l = l->next) {
        px_conn *k = STG__OWNER(l, px_conn, link);
        if (k->closing || k->busy)
            continue;
        int64_t open_us = now - k->head_start_us;
        bool timed = (!k->kept || k->line) && open_us >= p->head_timeout_us;
        if (timed || (p->n_conns >= high && open_us >= HEAD_GRACE_US))
            close_conn(p, k);
    }
}
