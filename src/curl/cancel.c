/*
 * Cancel tokens: an atomic flag plus an eventfd that becomes readable, and
 * stays readable, once the token fires. Waits poll the fd with the wait as
 * timeout, so a cancel interrupts them at once; the blocking call also adds
 * the fd to curl_multi_poll, so a cancel interrupts an attempt in flight.
 *
 * Invariants: fired only goes false -> true; the eventfd is never read, so
 * after the first fire every poll on it returns at once. stg_cancel_fire
 * uses only a lock-free atomic store and write(2), both async-signal-safe.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "curl/internal.h"

struct stg_cancel {
    atomic_bool fired;
    int fd;
};

stg_cancel *stg_cancel_new(void)
{
    stg_cancel *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    atomic_init(&c->fired, false);
    c->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->fd < 0) {
        free(c);
        return NULL;
    }
    return c;
}

void stg_cancel_free(stg_cancel *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c);
}

void stg_cancel_fire(stg_cancel *c)
{
    if (!c)
        return;
    int saved = errno; /* a signal handler must not clobber errno */
    atomic_store(&c->fired, true);
    uint64_t one = 1;
    ssize_t w = write(c->fd, &one, sizeof one);
    (void)w; /* EAGAIN only when the counter is saturated: still readable */
    errno = saved;
}

bool stg_cancel_fired(const stg_cancel *c)
{
    return c && atomic_load(&((stg_cancel *)c)->fired);
}

int stg_cancel_fd(const stg_cancel *c)
{
    return c ? c->fd : -1;
}
