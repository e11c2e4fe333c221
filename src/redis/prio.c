/*
 * The shared limiter by class and tenant (issue #32): the C side of the
 * script's class part (prio_lua.h, run by gcra.c's script on the key's one
 * hash), with the token leases of lease.c kept per class and tenant.
 *
 * The decision is the pure model's (src/core/prio_gcra.h); this file only
 * sizes leases, passes the class, tenant, weight, hold and floor, and hands
 * out leased tokens locally. Why the bound holds: every token the script
 * grants is a take of the key's GCRA (plain and class callers share its
 * TAT), and a lease's tokens are used only inside the window the script
 * gave (lease.c's invariants).
 *
 * Invariants (under the limiter's mutex):
 *  - a lease belongs to one (key, class, tenant): a batch's tokens are never
 *    spent by an interactive request of the same process nor the reverse,
 *    so what the script granted to a class is what that class sends;
 *  - a reply whose lease window closed before it arrived is not used (its
 *    tokens lapse, the side of sending less), as in gcra.c;
 *  - with Redis away and a fallback, the local bucket answers, without
 *    classes (the fallback's share of the rate is the bound there).
 *
 * A shared adaptive rate (adaptive.c) decides by class too, with the same
 * decision on its own hash once it paces, and without leases:
 * stg_redis_adaptive_acquire_class only passes the class part.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/prio_gcra.h"
#include "internal.h"

/* What the class part of the script answered (prio_lua.h). */
typedef struct prio_reply {
    bool ok;
    long long granted, k, end_us, base, tat, lease, floor;
} prio_reply;

static void parse_prio(const redisReply *r, void *data)
{
    prio_reply *pr = data;
    long long tracked;
    pr->ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 10 &&
             stg__reply_int(r, 0, &pr->granted) && stg__reply_int(r, 3, &pr->k) &&
             stg__reply_int(r, 4, &pr->end_us) && stg__reply_int(r, 5, &pr->base) &&
             stg__reply_int(r, 6, &pr->tat) && stg__reply_int(r, 7, &pr->lease) &&
             stg__reply_int(r, 8, &pr->floor) && stg__reply_int(r, 9, &tracked);
}

/* How long a call's demand mark lasts: two lease windows or 8 intervals,
 * whichever is longer, within 20 ms .. 1 s. Long enough that a class or
 * tenant asking steadily (once per lease, or once per share interval when
 * a few tenants share) stays marked between its calls; short enough that a
 * share left unused flows to the others soon. */
static int64_t hold_ns(const stg_redis_limiter *l)
{
    int64_t h = 2 * l->lease_us * 1000;
    if (h < 8 * l->interval_ns)
        h = 8 * l->interval_ns;
    if (h < 20 * INT64_C(1000000))
        h = 20 * INT64_C(1000000);
    if (h > INT64_C(1000000000))
        h = INT64_C(1000000000);
    return h;
}

static bool class_valid(const stg_class *cls)
{
    if (!cls || cls->priority < STG_PRIORITY_MIN || cls->priority > STG_PRIORITY_MAX)
        return false;
    if (!(cls->weight >= 0.0) || cls->weight > 1e6)
        return false;
    if (cls->tenant && cls->tenant[0] && stg_tenant_check(cls->tenant, NULL) != STG_OK)
        return false;
    return true;
}

/* Under mu: one class acquire, from the (key, class, tenant)'s lease or by
 * the script (leases sized as gcra.c's, the window checked the same way). */
static int class_decide(stg_redis_limiter *l, const char *name, const char *lname,
                        size_t key_len, const char *rkey, const stg_class *cls,
                        int64_t timeout_us, int *rc_out, int64_t *wait_out, stg__note *note)
{
    stg__lease *ls = stg__lease_get(l, lname);
    if (!ls)
        return STG_ENOMEM;
    ls->key_len = key_len;
    if (stg__lease_draw(l, ls, stg__redis_now(l), timeout_us, rc_out, wait_out))
        return STG_OK;
    if (!stg__redis_ready(l, note))
        return STG_EUNAVAIL;
    char a_int[24], a_burst[24], a_k[24], a_timeout[24], a_lead[24], a_prio[96];
    snprintf(a_int, sizeof a_int, "%" PRId64, l->interval_ns);
    snprintf(a_burst, sizeof a_burst, "%" PRId64, l->burst);
    snprintf(a_timeout, sizeof a_timeout, "%" PRId64, stg__gcra_timeout_ns(timeout_us));
    snprintf(a_prio, sizeof a_prio, "%d %" PRId64 " %" PRId64 " %d",
             STG_PRIORITY_INDEX(cls->priority), stg__prio_weight_m(cls->weight), hold_ns(l),
             l->class_floor_pm);
    const char *tenant = cls->tenant ? cls->tenant : "";
    redisReply *reply = NULL;
    for (int attempt = 0; attempt < 3; attempt++) {
        int64_t t0 = stg__redis_now(l);
        stg__lease_plan p = stg__lease_size(stg__lease_meter_rate(&ls->meter, t0), l->interval_ns,
                                            l->burst, l->lease_us, l->rtt_us);
        snprintf(a_k, sizeof a_k, "%" PRId64, p.k);
        snprintf(a_lead, sizeof a_lead, "%" PRId64, p.lead_ns);
        const char *args[] = {a_int, a_burst, a_k, a_timeout, a_lead, "0",
                              "0",   a_prio,  tenant, "0"};
        prio_reply pr = {0};
        int rc = stg__gcra_takes(l, name, rkey, args, 10, 1, 1, timeout_us, false, rc_out,
                                 wait_out, &reply, note, parse_prio, &pr);
        int64_t t1 = stg__redis_now(l);
        if (rc != STG_OK)
            return rc;
        if (!pr.ok)
            return STG_EIO;
        l->rtt_us = t1 - t0;
        if (*rc_out != STG_OK)
            return STG_OK; /* not now: nothing taken, *wait_out is the hint */
        if (!pr.lease) {
            stg__lease_meter_add(&ls->meter, t1, 1); /* a plain take, used at once */
            return STG_OK;
        }
        if (t1 + *wait_out <= t0 + pr.end_us) {
            stg__lease_grant(l, ls, pr.k, t0, t1, *wait_out, pr.end_us, pr.base, pr.tat);
            stg__lease_meter_add(&ls->meter, t1, 1);
            return STG_OK;
        }
        l->stats.lease_expired += pr.k;
    }
    *rc_out = STG_ETIMEDOUT;
    *wait_out = l->rtt_us;
    return STG_OK;
}

int stg_redis_adaptive_acquire_class(stg_redis_limiter *l, const char *key, const stg_class *cls,
                                     int64_t timeout_us, int64_t *wait_us, int64_t *ticket)
{
    if (!l || !l->adaptive || !class_valid(cls))
        return STG_EINVAL;
    /* Hold 0: the script takes 8 intervals of the rate it paces at, within
     * 20 ms..1 s (hold_ns's rule without leases; the interval is known
     * only there). */
    char a_prio[96];
    pthread_mutex_lock(&l->mu);
    int floor_pm = l->class_floor_pm;
    pthread_mutex_unlock(&l->mu);
    snprintf(a_prio, sizeof a_prio, "%d %" PRId64 " 0 %d", STG_PRIORITY_INDEX(cls->priority),
             stg__prio_weight_m(cls->weight), floor_pm);
    return stg__redis_adaptive_acquire_spec(l, key, a_prio, cls->tenant ? cls->tenant : "",
                                            timeout_us, wait_us, ticket);
}

int stg_redis_limiter_acquire_class(stg_redis_limiter *l, const char *key, const stg_class *cls,
                                    int64_t timeout_us, int64_t *wait_us)
{
    if (l && l->adaptive)
        return stg_redis_adaptive_acquire_class(l, key, cls, timeout_us, wait_us, NULL);
    if (!l || !class_valid(cls))
        return STG_EINVAL;
    const char *name = key ? key : l->url.key;
    char rkey[STG__KEYBUF];
    if (!name || stg__redis_key(l, "rl:", name, rkey) != STG_OK)
        return STG_EINVAL;
    /* The lease's name: "key \x1f class \x1f tenant" (neither a key nor a
     * tenant has a \x1f: keys are checked by stg__redis_key's length only,
     * so one with \x1f would share a lease with another class's, which
     * only mixes this process's own classes). */
    const char *tenant = cls->tenant ? cls->tenant : "";
    size_t kl = strlen(name);
    char lname[STG_REDIS_KEY_MAX + STG_TENANT_MAX + 8];
    snprintf(lname, sizeof lname, "%s\x1f%d\x1f%s", name, STG_PRIORITY_INDEX(cls->priority),
             tenant);

    stg__note note = {0};
    int r = STG_OK;
    int64_t w = 0;
    pthread_mutex_lock(&l->mu);
    int rc = class_decide(l, name, lname, kl, rkey, cls, timeout_us, &r, &w, &note);
    if (rc == STG_EUNAVAIL && l->share > 0)
        rc = stg__gcra_local_takes(l, name, 1, 1, timeout_us, false, &r, &w);
    else if (rc == STG_EUNAVAIL)
        l->stats.unavailable++;
    pthread_mutex_unlock(&l->mu);
    stg__redis_emit(l, &note);
    if (rc != STG_OK)
        return rc;
    if (wait_us)
        *wait_us = w;
    return r;
}

int stg_redis_limiter_set_class_floor(stg_redis_limiter *l, double floor)
{
    if (!l || !(floor > 0.0) || floor > 1.0)
        return STG_EINVAL;
    int pm = (int)(floor * 1000.0 + 0.5);
    if (pm < 1)
        pm = 1;
    pthread_mutex_lock(&l->mu);
    l->class_floor_pm = pm;
    pthread_mutex_unlock(&l->mu);
    return STG_OK;
}
