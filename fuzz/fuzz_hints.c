/*
 * libFuzzer harness for stg_hints_header_line: the input is a response
 * header block, split on '\n'; each line is copied into a buffer of exactly
 * its length (so an over-read is an ASan report, not a read of the next
 * line) and fed to one stg_hints. After every line: the return code is a
 * documented one, every numeric field is STG_UNKNOWN or >= 0 (a window is
 * > 0, a wait at most STG_WAIT_MAX_US), only known bits are set, and
 * stg_hints_server_wait agrees with the fields. (fuzz_feed does the same
 * with a quota set.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>

#include "fuzz_common.h"

#define ALL_BITS                                                                            \
    (STG_HINT_RETRY_AFTER | STG_HINT_X_RATELIMIT | STG_HINT_RATELIMIT | STG_HINT_RATELIMIT_POLICY | \
     STG_HINT_VERDICT | STG_HINT_SCOPE)

static void check(const stg_hints *h)
{
    int64_t w = -42;
    bool has;
    CHECK(h->retry_after_us == STG_UNKNOWN ||
          (h->retry_after_us >= 0 && h->retry_after_us <= STG_WAIT_MAX_US));
    CHECK(h->limit == STG_UNKNOWN || h->limit >= 0);
    CHECK(h->remaining == STG_UNKNOWN || h->remaining >= 0);
    CHECK(h->reset_us == STG_UNKNOWN || (h->reset_us >= 0 && h->reset_us <= STG_WAIT_MAX_US));
    CHECK((h->oversized & ~ALL_BITS) == 0);
    CHECK(h->verdict >= STG_VERDICT_NONE && h->verdict <= STG_VERDICT_STOP);
    CHECK((h->dialects >> STG_DIALECT_COUNT) == 0 && (h->dialects & 1u) == 0);
    CHECK((h->flags & ~(STG_HINTS_GLOBAL | STG_HINTS_SHARED)) == 0);
    CHECK(h->window_us == STG_UNKNOWN || h->window_us > 0);
    CHECK(h->window_us == STG_UNKNOWN || h->limit != STG_UNKNOWN);
    CHECK((h->seen & ~ALL_BITS) == 0 && (h->malformed & ~ALL_BITS) == 0);
    has = stg_hints_server_wait(h, &w);
    if (h->retry_after_us >= 0)
        CHECK(has && w == h->retry_after_us);
    else if (h->remaining == 0 && h->reset_us >= 0)
        CHECK(has && w == h->reset_us);
    else
        CHECK(!has && w == -42);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int64_t now_us = INT64_C(1700000000) * 1000000;
    stg_hints h;
    size_t start = 0;

    stg_hints_init(&h);
    while (start <= size) {
        size_t end = start;
        char *line;
        int rc;
        while (end < size && data[end] != '\n')
            end++;
        line = malloc(end - start ? end - start : 1);
        if (!line)
            return 0;
        if (end > start)
            memcpy(line, data + start, end - start);
        rc = stg_hints_header_line(&h, line, end - start, now_us);
        CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
        if (rc != STG_OK)
            CHECK((h.malformed | h.oversized) != 0);
        check(&h);
        free(line);
        start = end + 1;
    }
    return 0;
}
