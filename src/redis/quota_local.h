/*
 * Shared quotas, the pure part (quota_local.c): a replica's own view of
 * one shared quota's estimate (what Redis last said, projected by its
 * refill and lowered by the replica's own answers), the fallback rule that
 * view feeds while Redis is unreachable, and the quota ids the ledger is
 * keyed by. No I/O, no clock of its own (every call takes now_us), no
 * hiredis: tests/unit/test_quota_local.c runs it in virtual time.
 */
#ifndef STG_REDIS_QUOTA_LOCAL_H
#define STG_REDIS_QUOTA_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include <stagger/hints.h>

/* Longest quota id ("server key|unit|window ms"), NUL included. */
#define STG__SQ_ID_MAX 112

/* A replica's view of one quota's estimate. */
typedef struct stg__sq_est {
    double est;     /* units the server still holds, -1: unknown */
    double rate_ms; /* refill per ms (a refilling bucket), 0: none */
    int64_t at;     /* when est was true, us */
    int64_t limit;  /* -1: unknown */
    bool fill;      /* a refilling bucket (OpenAI, Anthropic): the reset is
                       the instant it is full again */
} stg__sq_est;

/* The estimate at now_us: est plus the refill since `at`, at most the
 * limit; -1 when unknown. */
double stg__sq_est_now(const stg__sq_est *e, int64_t now_us);

/* An answer of this replica: the server's count (-1: none; the lower of
 * it and the projection wins) and units spent without a count, at now. */
void stg__sq_est_learn(stg__sq_est *e, int64_t count, int64_t spent, int64_t now_us);

/* The fallback rule while Redis is unreachable: a request of cost goes
 * when flight (this replica's units in flight) + cost fits in share of
 * the estimate. Returns 0 (go) or the wait in us: until the refill covers
 * it, the reset (reset_ms, -1 unknown), or poll_us when nothing tells.
 * An unknown estimate lets one request probe (flight 0). */
int64_t stg__sq_fallback_wait(const stg__sq_est *e, double share, int64_t flight, int64_t cost,
                              int64_t reset_ms, int64_t poll_us, int64_t now_us);

/* A quota's id from an answer's observation: "key|unit|window_ms" ("-"
 * for an unknown window), control bytes replaced by '_' (the ledger's
 * fields and lines are separated by them). */
void stg__sq_id(const stg_quota_obs *o, char id[STG__SQ_ID_MAX]);

/* The server key of an id: what precedes its last two '|' (a key may hold
 * '|' itself); "" when there is none. */
void stg__sq_skey(const char *id, char key[STG__SQ_ID_MAX]);

/* Whether a dialect's reset is the instant its bucket is full again. */
bool stg__sq_fills(int dialect);

#endif
