/*
 * Parking suspended connections: the hang fault (never answer) and the
 * pauses of a slow body both suspend their connection with
 * MHD_suspend_connection, so no worker thread ever blocks; one ticker
 * thread resumes them:
 *   - a timed entry (slow body) when its due time comes;
 *   - a hang when its client has gone (a non-blocking MSG_PEEK sees EOF or
 *     an error, checked every 100 ms) or at shutdown.
 * The same thread runs a periodic callback (the request-log flush).
 *
 * Invariants: an entry is in the list exactly while its connection is
 * suspended by us; it is removed under the mutex before MHD_resume_connection,
 * so a connection is resumed once and its socket is never peeked after.
 * After srv_park_shutdown no connection is suspended and srv_park_conn refuses.
 * Lock order: park mutex, then MHD's internal locks (never the reverse).
 */
#ifndef STAGGER_SERVER_PARK_H
#define STAGGER_SERVER_PARK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#define SRV_PARK_FOREVER INT64_MAX

typedef struct srv_parked srv_parked;

typedef struct srv_park {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled on new entries and stop */
    srv_parked *head;
    bool closing;      /* shutdown began: refuse new entries */
    bool stop;         /* the thread should exit */
    bool started;
    pthread_t thread;
    void (*tick)(void *); /* periodic callback, run without the mutex */
    void *tick_arg;
    int64_t tick_every_us;
} srv_park;

/* Start the ticker thread. Returns 0 or -1. */
int srv_park_start(srv_park *p, void (*tick)(void *), void *tick_arg, int64_t tick_every_us);

/* Suspend c until due_us (CLOCK_MONOTONIC µs), or with SRV_PARK_FOREVER
 * until its client leaves or the server shuts down. Call only from the
 * access handler or the content reader of c. Returns false (and suspends
 * nothing) once shutdown has begun or when out of memory. */
bool srv_park_conn(srv_park *p, struct MHD_Connection *c, int64_t due_us);

/* Refuse new entries, resume every parked connection and stop the thread.
 * Call before MHD_stop_daemon. */
void srv_park_shutdown(srv_park *p);

/* CLOCK_MONOTONIC in µs. */
int64_t srv_mono_us(void);

#endif
