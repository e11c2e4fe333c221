/*
 * Per-request control by request headers, stripped before the upstream
 * (headers.c drops every Stagger-* field):
 *   Stagger-Deadline: 20s   the request's overall deadline (from its first
 *                           admission), instead of --deadline;
 *   Stagger-Retries: 0      retries after the first attempt (0: one
 *                           attempt), instead of --max-attempts - 1;
 *   Stagger-Priority: low   waits behind every normal request for
 *                           admission (normal: the default);
 *   Stagger-Cost: tokens=1200, requests=1
 *                           what the request costs per quota unit
 *                           (stg_quota_cost_parse), as a batch job's
 *                           "cost"; a unit it states is not estimated.
 * A bad value is the program's mistake and gets a 400 naming the header,
 * never a silent default.
 *
 * Invariants: durations are > 0 and carry a unit or mean seconds (the
 * project's rule for bare numbers); retries are 0..100.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/internal.h"

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
    if (pr) {
        if (!strcasecmp(pr, "low"))
            r->priority = STG_PRIORITY_LOW;
        else if (!strcasecmp(pr, "normal"))
            r->priority = 0;
        else {
            snprintf(msg, msgsize, "bad Stagger-Priority: expected low or normal");
            return -1;
        }
    }
    return 0;
}
