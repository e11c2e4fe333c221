/*
 * Token leases, the stateful part: per key, the tokens of the last lease
 * still unspent and the window they may be used in, handed out one per
 * acquire without a round trip; and the give-back when the limiter is
 * freed. The sizing rule and the meter are in lease_size.c (pure); the
 * script that grants and takes back leases is gcra.c's. Why a lease keeps
 * the shared bound: stagger/redis.h, "Token leases".
 *
 * Invariants (all under the limiter's mutex):
 *  - a token is handed out only if it can be used inside its lease's
 *    window: the send instant promised (now + wait) lies in [start_us,
 *    end_us]. The window was narrowed by the round trip that brought it,
 *    so it holds on Redis's clock whatever the reply's delay was;
 *  - tokens whose window has closed are dropped, never used: they lapse
 *    (counted in lease_expired) and the key's bucket refills past them;
 *  - tokens are given back only by the script, and only when the key's
 *    TAT is still where this lease left it (nobody took since): then the
 *    lease simply becomes a smaller one, whose window contains the old.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/assert.h"

stg__lease *stg__lease_get(stg_redis_limiter *l, const char *name)
{
    for (stg__lease *p = l->leases; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    size_t n = strlen(name);
    stg__lease *p = calloc(1, sizeof *p + n + 1);
    if (!p)
        return NULL;
    memcpy(p->name, name, n + 1);
    stg__lease_meter_init(&p->meter, stg__redis_now(l));
    p->next = l->leases;
    l->leases = p;
    return p;
}

bool stg__lease_draw(stg_redis_limiter *l, stg__lease *ls, int64_t now_us, int64_t timeout_us,
                     int *rc, int64_t *wait_us)
{
    if (ls->left <= 0)
        return false;
    int64_t wait = ls->start_us > now_us ? ls->start_us - now_us : 0;
    if (now_us + wait > ls->end_us) {
        l->stats.lease_expired += ls->left;
        ls->left = 0;
        return false;
    }
    *wait_us = wait;
    if (wait > (timeout_us < 0 ? 0 : timeout_us)) {
        /* A new lease would start later still: the key's TAT is past this
         * lease's end. */
        *rc = timeout_us < 0 ? STG_EAGAIN : STG_ETIMEDOUT;
        return true;
    }
    ls->left--;
    *rc = STG_OK;
    l->stats.lease_admissions++;
    stg__lease_meter_add(&ls->meter, now_us, 1);
    STG_ASSERT(now_us + wait >= ls->start_us && now_us + wait <= ls->end_us);
    return true;
}

void stg__lease_grant(stg_redis_limiter *l, stg__lease *ls, int64_t k, int64_t t0_us,
                      int64_t t1_us, int64_t wait_us, int64_t end_us, long long base,
                      long long tat)
{
    STG_ASSERT(k >= 1 && ls->left == 0);
    ls->left = k - 1;
    ls->start_us = t1_us + wait_us;
    ls->end_us = t0_us + end_us;
    ls->interval_ns = l->interval_ns;
    ls->base = base;
    ls->tat = tat;
    if (k > 1) {
        l->stats.leases++;
        l->stats.leased += k;
    }
}

/* Give ls's unspent tokens back: one script call, which does it only when
 * nobody has taken tokens of the key since (see gcra.c). */
static void give_back(stg_redis_limiter *l, stg__lease *ls)
{
    char rkey[STG__KEYBUF], kname[STG_REDIS_KEY_MAX + 1];
    size_t kl = ls->key_len ? ls->key_len : strlen(ls->name);
    if (kl > STG_REDIS_KEY_MAX)
        return;
    memcpy(kname, ls->name, kl);
    kname[kl] = '\0';
    if (stg__redis_key(l, "rl:", kname, rkey) != STG_OK)
        return;
    char a[8][24];
    snprintf(a[0], sizeof a[0], "%" PRId64, ls->interval_ns);
    snprintf(a[1], sizeof a[1], "%" PRId64, l->burst);
    snprintf(a[2], sizeof a[2], "%" PRId64, -ls->left);
    snprintf(a[3], sizeof a[3], "0");
    snprintf(a[4], sizeof a[4], "0");
    snprintf(a[5], sizeof a[5], "0");
    snprintf(a[6], sizeof a[6], "%lld", ls->base);
    snprintf(a[7], sizeof a[7], "%lld", ls->tat);
    const char *argv[8];
    for (int i = 0; i < 8; i++)
        argv[i] = a[i];
    stg__note note = {0};
    redisReply *r = NULL;
    if (stg__redis_eval(l, STG__SCRIPT_GCRA, rkey, 8, argv, 1, &r, &note) != STG_OK)
        return;
    long long done;
    if (stg__reply_int(r, 0, &done) && done == 1)
        l->stats.lease_returned += ls->left;
    freeReplyObject(r);
}

void stg__lease_close(stg_redis_limiter *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t now = stg__redis_now(l);
    for (stg__lease *p = l->leases; p; p = p->next) {
        if (p->left > 0 && now <= p->end_us && l->ctx)
            give_back(l, p);
        p->left = 0;
    }
    stg__lease *p = l->leases;
    while (p) {
        stg__lease *next = p->next;
        free(p);
        p = next;
    }
    l->leases = NULL;
    pthread_mutex_unlock(&l->mu);
}
