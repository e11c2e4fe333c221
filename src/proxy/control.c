/*
 * Per-request control by request headers, stripped before the upstream
 * (headers.c drops every Stagger-* field):
 *   Stagger-Deadline: 20s   the request's overall deadline (from its first
 *                           admission), instead of --deadline;
 *   Stagger-Retries: 0      retries after the first attempt (0: one
 *                           attempt), instead of --max-attempts - 1;
 *   Stagger-Priority: batch the request's class: interactive, normal
 *                           (the default) or batch (also high and low, as
 *                           before); a lower class waits for every higher
 *                           one at each limit, with a floor (docs/
 *                           priorities.md);
 *   Stagger-Tenant: acme;w=2
 *                           who the request is for, and its weight among
 *                           its class's tenants (1 when not given): a name
 *                           of 1..64 [A-Za-z0-9._:-], weight > 0, <= 1e6;
 *   Stagger-Cost: tokens=1200, requests=1
 *                           what the request costs per quota unit
 *                           (stg_quota_cost_parse), as a batch job's
 *                           "cost"; a unit it states is not estimated.
 *   Stagger-Timeout: 90s    this request's per-attempt times instead of
 *                           the proxy's (--first-byte-timeout ...): a
 *                           duration alone is the longest silence (the
 *                           wait for the first byte and between bytes);
 *                           or a list of first-byte=D, idle=D,
 *                           connect=D, total=D (the whole attempt, as
 *                           --max-time), e.g. "first-byte=2m, idle=30s".
 * A bad value is the program's mistake and gets a 400 naming the header,
 * never a silent default.
 *
 * Invariants: durations are > 0 and carry a unit or mean seconds (the
 * project's rule for bare numbers); retries are 0..100; a Stagger-Timeout
 * names each time at most once and nothing else.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/internal.h"
#include "util/class_field.h"

bool px_parse_duration(const char *s, int64_t *us)
{
    if (!s || !*s)
        return false;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || v > 1e9)
        return false;
    double mul;
    if (!*end || !strcmp(end, "s"))
        mul = 1e6;
    else if (!strcmp(end, "ms"))
        mul = 1e3;
    else if (!strcmp(end, "us"))
        mul = 1;
    else if (!strcmp(end, "m"))
        mul = 60e6;
    else if (!strcmp(end, "h"))
        mul = 3600e6;
    else
        return false;
    double t = v * mul;
    if (t < 1 || t > 9e15)
        return false;
    *us = (int64_t)t;
    return true;
}

/* One "name=duration" item of Stagger-Timeout in [p, end), spaces
 * around it and around '=' allowed. */
static bool timeout_item(const char *p, const char *end, px_timeouts *t)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (!eq)
        return false;
    const char *ne = eq;
    while (ne > p && (ne[-1] == ' ' || ne[-1] == '\t'))
        ne--;
    const char *v = eq + 1;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    char val[32];
    size_t vlen = (size_t)(end - v);
    if (vlen == 0 || vlen >= sizeof val)
        return false;
    memcpy(val, v, vlen);
    val[vlen] = '\0';
    static const char *const names[] = {"connect", "first-byte", "idle", "total"};
    int64_t *fields[] = {&t->connect_us, &t->first_byte_us, &t->idle_us, &t->total_us};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if ((size_t)(ne - p) == n && !strncasecmp(p, names[i], n)) {
            if (*fields[i]) /* named twice */
                return false;
            return px_parse_duration(val, fields[i]);
        }
    }
    return false;
}

bool px_parse_timeout(const char *s, px_timeouts *t)
{
    memset(t, 0, sizeof *t);
    if (!s)
        return false;
    if (!strchr(s, '=')) {
        /* A duration alone: the longest silence, before or within the answer. */
        while (*s == ' ' || *s == '\t')
            s++;
        char val[32];
        size_t n = strlen(s);
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (n == 0 || n >= sizeof val)
            return false;
        memcpy(val, s, n);
        val[n] = '\0';
        if (!px_parse_duration(val, &t->first_byte_us))
            return false;
        t->idle_us = t->first_byte_us;
        return true;
    }
    for (const char *p = s;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        if (!timeout_item(p, end, t)) {
            memset(t, 0, sizeof *t);
            return false;
        }
        if (!comma)
            return true;
        p = comma + 1;
    }
}

bool px_parse_tenant(const char *s, char *name, size_t size, double *weight)
{
    return stg__tenant_field_parse(s, name, size, weight);
}

int px_control(px_req *r, struct MHD_Connection *c, char *msg, size_t msgsize)
{
    const char *d = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Stagger-Deadline");
    const char *n = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Stagger-Retries");
    const char *pr = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Stagger-Priority");
    const char *co = MHD_lookup_connection_value(c, MHD_HEADER_KIND, STG_QUOTA_COST_HEADER);
    if (co) {
        stg_quota_cost cost[STG_QUOTA_COSTS_MAX];
        size_t n_co = 0;
        if (stg_quota_cost_parse(co, strlen(co), cost, STG_QUOTA_COSTS_MAX, &n_co) != STG_OK) {
            snprintf(msg, msgsize, "bad Stagger-Cost: expected unit=amount pairs such as "
                                   "tokens=1200, requests=1");
            return -1;
        }
        free(r->cost);
        r->cost = malloc(n_co * sizeof *cost); /* n_co >= 1: an empty value is bad */
        if (!r->cost) {
            snprintf(msg, msgsize, "out of memory");
            return -1;
        }
        memcpy(r->cost, cost, n_co * sizeof *cost);
        r->n_cost = n_co;
    }
    if (d && !px_parse_duration(d, &r->deadline_us)) {
        snprintf(msg, msgsize, "bad Stagger-Deadline: expected a duration such as 20s or 500ms");
        return -1;
    }
    if (n) {
        char *end = NULL;
        long v = strtol(n, &end, 10);
        if (end == n || *end || v < 0 || v > 100) {
            snprintf(msg, msgsize, "bad Stagger-Retries: expected a whole number from 0 to 100");
            return -1;
        }
        r->max_attempts = (int)v + 1;
    }
    const char *to = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Stagger-Timeout");
    if (to && !px_parse_timeout(to, &r->timeouts)) {
        snprintf(msg, msgsize,
                 "bad Stagger-Timeout: expected a duration such as 90s, or first-byte=D, "
                 "idle=D, connect=D, total=D separated by commas");
        return -1;
    }
    if (pr && stg_priority_parse(pr, &r->priority) != STG_OK) {
        snprintf(msg, msgsize, "bad Stagger-Priority: expected interactive, normal or batch");
        return -1;
    }
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Stagger-Tenant");
    if (te && !px_parse_tenant(te, r->tenant, sizeof r->tenant, &r->weight)) {
        snprintf(msg, msgsize, "bad Stagger-Tenant: expected a name of 1 to 64 letters, digits "
                               "and . _ : -, optionally ;w= and a weight > 0 such as acme;w=2");
        return -1;
    }
    return 0;
}
