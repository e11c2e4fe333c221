/*
 * A SIGPIPE guard for a write to a socket the peer may have closed, in a
 * library that must not change the process's signal handlers (hiredis
 * writes with write(2), and so does OpenSSL on a rediss:// socket:
 * redis/rconn.c wraps every write in it): SIGPIPE is blocked in this thread for the
 * write, and one the write raised is consumed before unblocking (the
 * technique libpq uses). A SIGPIPE already pending before the guard is
 * left pending. Header-only, like the other util/ helpers; the one place
 * of the tree's signal masks (the CLI's handlers set flags only).
 *
 * Invariant: block and restore pair up on one thread; restore leaves the
 * thread's mask as block found it.
 */
#ifndef STG_UTIL_SIGPIPE_H
#define STG_UTIL_SIGPIPE_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

typedef struct stg__sigpipe_guard {
    sigset_t old;
    bool was_pending;
} stg__sigpipe_guard;

static inline void stg__sigpipe_block(stg__sigpipe_guard *g)
{
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
}

static inline void stg__sigpipe_restore(stg__sigpipe_guard *g)
{
    if (!g->was_pending) {
        sigset_t pipe_set, pending;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigemptyset(&pending);
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
                ;
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

#endif /* STG_UTIL_SIGPIPE_H */
