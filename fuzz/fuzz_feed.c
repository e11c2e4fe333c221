/*
 * libFuzzer harness for stg_hints_feed_line with a quota set: every row of
 * the dialect table (src/core/dialect.c) and the merging of quotas. The
 * input is a header block split on '\n', each line an exact-length copy.
 * After every line: the set holds at most STG_QUOTAS_MAX quotas, each key
 * and unit NUL-terminated inside its array, every number STG_UNKNOWN or in
 * range, no two quotas the same (key, unit, window); and h's summary is
 * what the quotas say: the least remaining count, and with remaining 0 the
 * server's wait is at least every spent quota's reset (the longest wins).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>

#include "fuzz_common.h"

static void check_set(const stg_hints *h, const stg_quota_set *qs)
{
    int64_t least = STG_UNKNOWN, w = -1;
    CHECK(qs->n <= STG_QUOTAS_MAX);
    for (size_t i = 0; i < qs->n; i++) {
        const stg_quota_obs *q = &qs->q[i];
        CHECK(memchr(q->key, '\0', sizeof q->key) != NULL);
        CHECK(memchr(q->unit, '\0', sizeof q->unit) != NULL && q->unit[0]);
        CHECK(q->limit == STG_UNKNOWN || q->limit >= 0);
        CHECK(q->remaining == STG_UNKNOWN || q->remaining >= 0);
        CHECK(q->reset_us == STG_UNKNOWN || (q->reset_us >= 0 && q->reset_us <= STG_WAIT_MAX_US));
        CHECK(q->window_us == STG_UNKNOWN || q->window_us > 0);
        CHECK(q->dialect > STG_DIALECT_NONE && q->dialect < STG_DIALECT_COUNT);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(qs->q[j].key, q->key) || strcmp(qs->q[j].unit, q->unit) ||
                  qs->q[j].window_us != q->window_us || !q->stg__unit_stated ||
                  !qs->q[j].stg__unit_stated);
        if (q->remaining != STG_UNKNOWN && (least == STG_UNKNOWN || q->remaining < least))
            least = q->remaining;
    }
    if (!qs->truncated)
        CHECK(h->remaining == least);
    if (h->retry_after_us < 0 && h->remaining == 0 && stg_hints_server_wait(h, &w)) {
        for (size_t i = 0; i < qs->n; i++)
            if (qs->q[i].remaining == 0 && qs->q[i].reset_us >= 0)
                CHECK(w >= qs->q[i].reset_us);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t now_us = INT64_C(1700000000) * 1000000;
    stg_hints h, plain;
    stg_quota_set qs;
    size_t start = 0;

    stg_hints_init(&h);
    stg_hints_init(&plain);
    stg_quota_set_init(&qs);
    while (start <= size) {
        size_t end = start;
        char *line;
        int rc, rc2;
        while (end < size && data[end] != '\n')
            end++;
        line = malloc(end - start ? end - start : 1);
        if (!line)
            return 0;
        if (end > start)
            memcpy(line, data + start, end - start);
        rc = stg_hints_feed_line(&h, &qs, line, end - start, now_us);
        rc2 = stg_hints_header_line(&plain, line, end - start, now_us);
        CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
        CHECK(rc == rc2); /* the set changes the summary, never the verdict on a field */
        check_set(&h, &qs);
        free(line);
        start = end + 1;
    }
    /* Without a set the wait is the same or longer, never shorter. */
    {
        int64_t a = -1, b = -1;
        bool ha = stg_hints_server_wait(&h, &a), hb = stg_hints_server_wait(&plain, &b);
        CHECK(!ha || (hb && b >= a));
    }
    return 0;
}
