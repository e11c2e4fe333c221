/*
 * Parking suspended connections and the ticker thread (see park.h).
 *
 * Invariants: the list is touched only under p->mu; MHD_suspend_connection
 * and MHD_resume_connection for parked connections are called only with
 * p->mu held, so a resume can never overtake its suspend.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "server/park.h"
#include "util/clock.h"

#define HANG_CHECK_US 100000 /* how often hung clients are checked for EOF */

struct srv_parked {
    srv_parked *next;
    struct MHD_Connection *conn;
    int fd;        /* for the EOF check of hangs; -1 if unknown */
    int64_t due_us; /* SRV_PARK_FOREVER for a hang */
};

int64_t srv_mono_us(void)
{
    return stg__clock_mono_us();
}

/* The client of a hung connection has closed or reset it. */
static bool peer_gone(int fd)
{
    if (fd < 0)
        return false;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return true;
    return false;
}

static void *ticker(void *arg)
{
    srv_park *p = arg;
    int64_t next_tick = srv_mono_us() + p->tick_every_us;
    int64_t next_check = srv_mono_us() + HANG_CHECK_US;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        int64_t now = srv_mono_us();
        bool check = now >= next_check;
        if (check)
            next_check = now + HANG_CHECK_US;
        int64_t wake = next_check < next_tick ? next_check : next_tick;
        for (srv_parked **pp = &p->head; *pp;) {
            srv_parked *e = *pp;
            bool wake_now = e->due_us <= now ||
                            (check && e->due_us == SRV_PARK_FOREVER && peer_gone(e->fd));
            if (wake_now) {
                *pp = e->next;
                MHD_resume_connection(e->conn);
                free(e);
                continue;
            }
            if (e->due_us < wake)
                wake = e->due_us;
            pp = &e->next;
        }
        if (now >= next_tick) {
            next_tick = now + p->tick_every_us;
            if (p->tick) {
                pthread_mutex_unlock(&p->mu);
                p->tick(p->tick_arg);
                pthread_mutex_lock(&p->mu);
            }
            continue;
        }
        if (wake > next_tick)
            wake = next_tick;
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000),
                              .tv_nsec = (long)(wake % 1000000) * 1000};
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int srv_park_start(srv_park *p, void (*tick)(void *), void *tick_arg, int64_t tick_every_us)
{
    p->head = NULL;
    p->closing = p->stop = p->started = false;
    p->tick = tick;
    p->tick_arg = tick_arg;
    p->tick_every_us = tick_every_us > 0 ? tick_every_us : 200000;
    pthread_mutex_init(&p->mu, NULL);
    stg__cond_init_mono(&p->cv);
    if (pthread_create(&p->thread, NULL, ticker, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        return -1;
    }
    p->started = true;
    return 0;
}

bool srv_park_conn(srv_park *p, struct MHD_Connection *c, int64_t due_us)
{
    srv_parked *e = malloc(sizeof *e);
    if (!e)
        return false;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    e->conn = c;
    e->fd = ci ? ci->connect_fd : -1;
    e->due_us = due_us;
    pthread_mutex_lock(&p->mu);
    if (p->closing) {
        pthread_mutex_unlock(&p->mu);
        free(e);
        return false;
    }
    MHD_suspend_connection(c);
    bool earliest = true;
    for (srv_parked *q = p->head; q; q = q->next)
        if (q->due_us <= due_us)
            earliest = false;
    e->next = p->head;
    p->head = e;
    if (earliest && due_us != SRV_PARK_FOREVER)
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return true;
}

void srv_park_shutdown(srv_park *p)
{
    if (!p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->closing = true;
    p->stop = true;
    while (p->head) {
        srv_parked *e = p->head;
        p->head = e->next;
        MHD_resume_connection(e->conn);
        free(e);
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    p->started = false;
}
