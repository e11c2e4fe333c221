/*
 * libFuzzer harness for the quota part of the core: the Stagger-Cost
 * parser, and the limiter driven by arbitrary answers and admissions.
 *
 * Input: the first byte picks the part. Cost: the rest is the value,
 * copied into a buffer of exactly its length (an over-read is an ASan
 * report); checked: only the documented codes; on success 1..max items,
 * each unit NUL-terminated, 1..23 characters, amounts 0..10^15, and the
 * value formatted back parses to the same items. Limiter: the rest is a
 * program of 4-byte steps (acquire with a demand, settle with a synthetic answer
 * or at a usage, learn an answer's head before its settle, settle without one,
 * cancel, move the clock) over 3 hosts, 4 routes and
 * a few tickets; checked: only documented codes, a wait is > 0 exactly
 * when not admitted, and the core's own invariants (STG_ASSERT, on in
 * this build) hold.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/quota.h>

#include "fuzz_common.h"

static void fuzz_cost(const uint8_t *data, size_t size)
{
    char *v = malloc(size ? size : 1);
    if (!v)
        return;
    if (size)
        memcpy(v, data, size);
    stg_quota_cost c[STG_QUOTA_COSTS_MAX];
    size_t n = 99;
    int rc = stg_quota_cost_parse(v, size, c, STG_QUOTA_COSTS_MAX, &n);
    CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
    if (rc == STG_OK) {
        CHECK(n >= 1 && n <= STG_QUOTA_COSTS_MAX);
        char buf[STG_QUOTA_COSTS_MAX * 48];
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
            size_t ul = strnlen(c[i].unit, sizeof c[i].unit);
            CHECK(ul >= 1 && ul < sizeof c[i].unit);
            CHECK(c[i].amount >= 0 && c[i].amount <= INT64_C(1000000000000000));
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s=%lld", i ? "," : "",
                                    c[i].unit, (long long)c[i].amount);
        }
        stg_quota_cost back[STG_QUOTA_COSTS_MAX];
        size_t m = 0;
        CHECK(stg_quota_cost_parse(buf, len, back, STG_QUOTA_COSTS_MAX, &m) == STG_OK);
        CHECK(m == n);
        for (size_t i = 0; i < n; i++)
            CHECK(!strcmp(back[i].unit, c[i].unit) && back[i].amount == c[i].amount);
    } else {
        CHECK(n == 0);
    }
    free(v);
}

static void fuzz_limiter(const uint8_t *data, size_t size)
{
    static const char *const hosts[] = {"a", "b", "c"};
    static const char *const routes[] = {"GET /", "GET /x", "POST /y", NULL};
    static const char *const keys[] = {"", "core", "search", "bucket"};
    static const char *const units[] = {"requests", "tokens", "", "input-tokens"};
    stg_quota_config cfg = {.max_hosts = 2, .max_keys = 3, .max_routes = 2};
    stg_quota *q = stg_quota_new(&cfg, NULL);
    if (!q)
        return;
    stg_quota_ticket t[4];
    const char *owner[4] = {NULL, NULL, NULL, NULL};
    memset(t, 0, sizeof t);
    int64_t now = 0;
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint8_t op = data[i], a = data[i + 1], b = data[i + 2], c = data[i + 3];
        const char *h = hosts[a % 3];
        const char *r = routes[(a >> 2) % 4];
        int k = (a >> 4) & 3;
        switch (op % 5) {
        case 0: { /* acquire */
            stg_quota_cost cost = {.amount = b};
            snprintf(cost.unit, sizeof cost.unit, "%s", units[c & 3]);
            int64_t w = -1;
            if (owner[k]) {
                stg_quota_settle(q, owner[k], NULL, &t[k], NULL, now);
                owner[k] = NULL;
            }
            /* The demand (0: unknown, always paced; else what waits). */
            int64_t demand = op >> 3;
            int rc = stg_quota_acquire_demand(q, h, r, &cost, c & 4 ? 1 : 0, demand, now, &t[k],
                                              &w);
            CHECK(rc == STG_OK || rc == STG_EAGAIN || rc == STG_ETOOBIG);
            if (rc == STG_OK) {
                CHECK(w == 0);
                owner[k] = h;
            } else if (rc == STG_EAGAIN) {
                CHECK(w > 0);
            }
            break;
        }
        case 1: { /* an answer, or (a & 0x40) its head only */
            stg_quota_set qs;
            stg_quota_set_init(&qs);
            qs.n = 1 + (b & 1);
            for (size_t j = 0; j < qs.n; j++) {
                stg_quota_obs *o = &qs.q[j];
                snprintf(o->key, sizeof o->key, "%s", keys[(b >> 1) & 3]);
                snprintf(o->unit, sizeof o->unit, "%s", units[(b >> 3) & 3]);
                o->limit = c & 1 ? (int64_t)(c >> 1) : STG_UNKNOWN;
                o->remaining = c & 2 ? (int64_t)(c >> 3) : STG_UNKNOWN;
                o->reset_us = b & 0x20 ? (int64_t)c * 100000 : STG_UNKNOWN;
                o->window_us = b & 0x40 ? INT64_C(1000000) : STG_UNKNOWN;
                o->global = (b & 0x80) && j == 0;
            }
            const char *oh = owner[k] ? owner[k] : h;
            if ((a & 0x40) && owner[k]) {
                /* The head: learned now, the ticket still to settle. */
                int rc = stg_quota_head(q, oh, r, &t[k], &qs, now);
                CHECK(rc == STG_OK || rc == STG_ENOMEM);
                break;
            }
            if (a & 0x80) { /* settled at a usage */
                stg_quota_cost used = {.amount = c};
                snprintf(used.unit, sizeof used.unit, "%s", units[b & 3]);
                CHECK(stg_quota_settle_used(q, oh, r, owner[k] ? &t[k] : NULL, &qs, &used, 1,
                                            now) == STG_OK);
            } else {
                CHECK(stg_quota_settle(q, oh, r, owner[k] ? &t[k] : NULL, &qs, now) == STG_OK);
            }
            owner[k] = NULL;
            break;
        }
        case 2: /* no answer */
            if (owner[k])
                CHECK(stg_quota_settle(q, owner[k], r, &t[k], NULL, now) == STG_OK);
            owner[k] = NULL;
            break;
        case 3: /* never sent */
            if (owner[k])
                CHECK(stg_quota_cancel(q, owner[k], &t[k]) == STG_OK);
            owner[k] = NULL;
            break;
        default: { /* time passes */
            now += (int64_t)b * 10000 + c;
            stg_quota_host_info info;
            CHECK(stg_quota_host_get(q, h, now, &info) == STG_OK);
            CHECK(info.quotas >= 0 && info.quotas <= 3 && info.routes <= 2);
            CHECK(info.paused_for_us >= 0);
            break;
        }
        }
    }
    stg_quota_free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        fuzz_cost(data + 1, size - 1);
    else
        fuzz_limiter(data + 1, size - 1);
    return 0;
}
