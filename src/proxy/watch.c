/*
 * Clients that hang up while they wait. A suspended MHD connection is not
 * polled by MHD, so a program that gives up (its own timeout, Ctrl-C)
 * while its request waits for a retry or the upstream would go unnoticed
 * until the wait ended. The watcher polls the sockets of the suspended
 * connections for POLLRDHUP (the peer closed) and then cancels the
 * request (its upstream attempt and every wait at once) and resumes the
 * connection so MHD closes it.
 *
 * A client that hangs up is noticed within WATCH_TICK_MS of its
 * suspension, and at once if it was already being watched.
 *
 * Invariants: a request is in the watch list exactly while `suspended`
 * is set (both change together under p->mu); a poll result is acted on
 * only if the request with that serial is still in the list, so a socket
 * resumed (or closed and its number reused) meanwhile is never touched.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/internal.h"
#include "util/assert.h"

#define WATCH_TICK_MS 20

void px_watch_remove_locked(px_req *r)
{
    stg_proxy *p = r->p;
    if (r->w_prev)
        r->w_prev->w_next = r->w_next;
    else if (p->watch_head == r)
        p->watch_head = r->w_next;
    if (r->w_next)
        r->w_next->w_prev = r->w_prev;
    r->w_next = r->w_prev = NULL;
    p->watch_gen++;
}

void px_suspend_locked(px_req *r)
{
    stg_proxy *p = r->p;
    if (r->suspended)
        return;
    STG_ASSERT(r->suspends == r->resumes); /* not suspended: every one resumed */
    r->suspended = true;
    r->suspends++;
    r->w_prev = NULL;
    r->w_next = p->watch_head;
    if (p->watch_head)
        p->watch_head->w_prev = r;
    p->watch_head = r;
    p->watch_gen++;
    MHD_suspend_connection(r->conn);
}

void px_resume_locked(px_req *r)
{
    if (!r->suspended)
        return;
    r->suspended = false;
    r->resumes++;
    STG_ASSERT(r->resumes == r->suspends); /* resumed once per suspension */
    px_watch_remove_locked(r);
    MHD_resume_connection(r->conn);
}

static px_req *find(stg_proxy *p, uint64_t serial)
{
    for (px_req *r = p->watch_head; r; r = r->w_next)
        if (r->serial == serial)
            return r;
    return NULL;
}

void *px_watch_main(void *arg)
{
    stg_proxy *p = arg;
    struct pollfd *fds = NULL;
    uint64_t *serials = NULL;
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (p->watch_stop) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        size_t n = 1;
        for (px_req *r = p->watch_head; r; r = r->w_next)
            n++;
        if (n > cap) {
            struct pollfd *f = realloc(fds, n * sizeof *f);
            uint64_t *s = f ? realloc(serials, n * sizeof *s) : NULL;
            if (f)
                fds = f;
            if (s)
                serials = s;
            if (!f || !s) {
                pthread_mutex_unlock(&p->mu);
                usleep(100000); /* out of memory: try again shortly */
                continue;
            }
            cap = n;
        }
        fds[0] = (struct pollfd){.fd = p->watch_fd, .events = POLLIN};
        size_t i = 1;
        for (px_req *r = p->watch_head; r; r = r->w_next, i++) {
            fds[i] = (struct pollfd){.fd = r->fd, .events = POLLRDHUP};
            serials[i] = r->serial;
        }
        pthread_mutex_unlock(&p->mu);

        /* The list is re-read every WATCH_TICK_MS (a suspension does not
         * wake us: most are over in microseconds, and waking on each one
         * cost as much CPU as the front itself); a hang-up is seen at once
         * once its socket is in the list. */
        int rc = poll(fds, n, WATCH_TICK_MS);
        if (rc <= 0)
            continue;
        if (fds[0].revents) {
            uint64_t v;
            ssize_t rd = read(p->watch_fd, &v, sizeof v);
            (void)rd;
        }
        bool wake = false;
        pthread_mutex_lock(&p->mu);
        for (i = 1; i < n; i++) {
            if (!(fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
                continue;
            px_req *r = find(p, serials[i]);
            if (!r)
                continue;
            r->client_gone = true;
            p->client_gone++;
            if (r->submitted && !r->engine_done)
                wake |= px_cmd_push(p, PX_CANCEL, r);
            px_resume_locked(r); /* MHD then sees the closed socket */
        }
        pthread_mutex_unlock(&p->mu);
        if (wake)
            px_wake(p);
    }
    free(fds);
    free(serials);
    return NULL;
}
