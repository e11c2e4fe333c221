/*
 * The servers' quotas on the transport side, shared by the engine
 * (engine_admit.c, engine_done.c) and the blocking call (perform.c): the
 * route a request spends (what the quota limiter maps to the server's
 * keys) and the quota set an answer announced, read from its header block
 * through every dialect stg_hints_feed knows.
 *
 * Why here and not in core: the header block and the body are transport
 * bytes; core only sees the fields (stg_hints_feed) and the flags.
 *
 * Invariants: a route never holds the query (secrets live there, and a
 * route is a place in the API, not one call); a set holds at most
 * STG_QUOTAS_MAX quotas, the global pause among them.
 */
#include <stdio.h>
#include <string.h>

#include "curl/internal.h"
#include "util/assert.h"

void stg__quota_route(stg_method method, const char *url, char *buf, size_t size)
{
    const char *u = url ? url : "", *s = strstr(u, "://");
    const char *p = s ? s + 3 : u;
    p += strcspn(p, "/?#");
    size_t len = *p == '/' ? strcspn(p, "?#") : 0;
    if (len > 400)
        len = 400;
    snprintf(buf, size, "%s %.*s", stg_method_name(method), len ? (int)len : 1, len ? p : "/");
    STG_ASSERT(!memchr(buf, '?', strlen(buf)));
}

void stg__quota_answer(const stg__xfer *x, int status, int64_t wall_us, stg_quota_set *qs)
{
    stg_hints hh;
    stg_hints_init(&hh);
    stg_quota_set_init(qs);
    const char *p = x->headers.p, *end = p ? p + x->headers.len : NULL;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        stg_hints_feed_line(&hh, qs, p, (size_t)(stop - p), wall_us);
        p = nl ? nl + 1 : end;
    }
    /* What the body said (body_hints.c): a GitHub secondary limit, an
     * overload named on a 5xx (a throttle), and a wait (Google's
     * RetryInfo), which counts as a Retry-After would. */
    hh.flags |= x->hints.flags & (STG_HINTS_SECONDARY | STG_HINTS_THROTTLE);
    if ((x->hints.seen & STG_HINT_BODY) && x->hints.retry_after_us > hh.retry_after_us)
        hh.retry_after_us = x->hints.retry_after_us;
    /* A refusal's wait (Retry-After) is when a quota it shows spent, with
     * no reset of its own (Shopify's used/size), comes back. */
    int64_t wait = 0;
    if (stg__throttled(status, &hh) && stg_hints_server_wait(&hh, &wait))
        for (size_t i = 0; i < qs->n; i++)
            if (qs->q[i].remaining == 0 && qs->q[i].reset_us < 0)
                qs->q[i].reset_us = wait;
    /* A global wait (Discord X-RateLimit-Global, a GitHub secondary limit)
     * read as a flag rather than as a quota: it holds the whole host. */
    bool has_global = false;
    for (size_t i = 0; i < qs->n; i++)
        has_global |= qs->q[i].global;
    wait = 0;
    bool global = (hh.flags & STG_HINTS_GLOBAL) && stg_hints_server_wait(&hh, &wait);
    if (!global && (hh.flags & STG_HINTS_SECONDARY) && stg__throttled(status, &hh)) {
        /* GitHub's rule for the whole host, as stg_decide's for the
         * request: its Retry-After, else the reset of a spent quota, else
         * at least STG_SECONDARY_LIMIT_WAIT_US. */
        global = true;
        if (!stg_hints_server_wait(&hh, &wait))
            wait = STG_SECONDARY_LIMIT_WAIT_US;
    }
    if (global && !has_global && qs->n < STG_QUOTAS_MAX) {
        stg_quota_obs *o = &qs->q[qs->n++];
        memset(o, 0, sizeof *o);
        o->limit = o->remaining = o->window_us = STG_UNKNOWN;
        o->reset_us = wait;
        o->global = true;
    }
}
