/*
 * The Redis work queue (<stagger/redis/queue.h>) as a job source of the
 * batch runner (stg_batch_source in batch.h), and the shared-limiter
 * wrapper that makes every worker honour the server-mandated waits kept
 * in the queue ("not before T" per host).
 *
 * Internal to the tree (include as "batch/queue_source.h"); built only with
 * libstagger-redis (STG_BATCH_HAVE_QUEUE). One thread: the runner's.
 *
 * Invariants:
 *  - An outcome the queue could not take (Redis unreachable) is kept here
 *    and written when Redis is back; meanwhile nothing new is claimed.
 *    After outage_us without Redis the source gives up (the run stops with
 *    cause LIMITER, exit 6): what was kept is not written, so those jobs
 *    stay unacknowledged in Redis and another worker runs them after
 *    --claim-idle (review if not replay-safe and sent). Nothing is lost.
 *  - Jobs claimed ahead (prefetch) are never sent before the runner takes
 *    them; they are handed out only while Redis answers, and given back
 *    at the end (stg__batch_queue_release).
 *  - Claims are renewed while the worker lives (stg_queue_renew every
 *    claim_idle / 4, from tick), so another worker takes a job from this
 *    one only after it stopped renewing for claim_idle (dead, stopped, cut
 *    off). An attempt leaves only if its job was confirmed ours (claimed or
 *    renewed: the call's send time) less than claim_idle / 2 before
 *    (may_send renews first if not): since the entry cannot be taken
 *    before claim_idle after that confirmation, the attempt is ours. A job
 *    found taken over is never sent from here again (its started attempt
 *    is cancelled; it ends here as PENDING, which records nothing). What
 *    may reach the server twice is only a request that had passed that
 *    check before this worker stalled past claim_idle: one on the wire, or
 *    admitted and about to leave (connecting).
 *  - The wrapper never admits a send the inner limiter did not: while the
 *    limiter's Redis is away it answers "not yet" (the engine asks again),
 *    and a held host gets "not yet" until its instant.
 */
#ifndef STAGGER_BATCH_QUEUE_SOURCE_H
#define STAGGER_BATCH_QUEUE_SOURCE_H

#include <stagger/redis/queue.h>

#include "batch/batch.h"

typedef struct stg_batch_queue stg_batch_queue;

typedef struct stg_batch_queue_config {
    stg_queue *queue;      /* connected; not owned; must outlive the source */
    bool follow;           /* keep polling after every job ended */
    int64_t outage_us;     /* give up after Redis was away this long; 0: 30 s */
    int64_t poll_us;       /* fewest us between empty claims; 0: 200 ms */
    int64_t hold_refresh_us; /* re-read a host's "not before" this often; 0: 1 s */
    int prefetch;          /* jobs claimed ahead of the free slots, so that most
                              refills cost no round trip; 0: as many as the
                              slots; < 0: none. Given back by _release */
    const char *out_dir;   /* the runner's out_dir: a body's file is recorded as
                              "out_dir/NAME" (the path on this worker); not copied */
    int64_t claim_idle_us; /* the queue's stg_queue_config.claim_idle_us: the
                              jobs held are renewed every claim_idle / 4, and
                              an attempt leaves only within claim_idle / 2 of
                              its job's last confirmation; 0: 6 min */
} stg_batch_queue_config;

typedef struct stg_batch_queue_stats {
    int64_t claimed, finished, not_recorded, to_review, kept, holds_set;
    int64_t renewals; /* renewal round trips */
    int64_t lost;     /* jobs found taken over by another worker (renewal) */
} stg_batch_queue_stats;

/* NULL when out of memory. */
stg_batch_queue *stg__batch_queue_new(const stg_batch_queue_config *cfg);
void stg__batch_queue_free(stg_batch_queue *s); /* accepts NULL */

/* The source to put in stg_batch_config.source (owned by s). */
const stg_batch_source *stg__batch_queue_source(stg_batch_queue *s);

/* A limiter that asks the queue whether a host is held, then inner (NULL:
 * no limit of its own). Owned by s; inner must outlive it. */
const stg_shared_limiter *stg__batch_queue_limiter(stg_batch_queue *s,
                                                  const stg_shared_limiter *inner);

/* The shared quotas (stg_engine_config.shared_quotas) with the queue's
 * outage rule: Redis unreachable is a wait of 250 ms, up to the outage
 * time, as for the limiter. NULL when inner is NULL. Owned by s; inner
 * must outlive it. */
const stg_shared_quota *stg__batch_queue_quotas(stg_batch_queue *s, const stg_shared_quota *inner);

void stg__batch_queue_stats_get(const stg_batch_queue *s, stg_batch_queue_stats *st);
/* After the run: give the jobs claimed ahead back to the queue (others take
 * them at once). Returns how many; those left (Redis away) wait for
 * --claim-idle. */
int stg__batch_queue_release(stg_batch_queue *s);
/* Outcomes kept, not yet written (an outage). */
size_t stg__batch_queue_kept(const stg_batch_queue *s);

#endif
