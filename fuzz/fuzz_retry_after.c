/*
 * libFuzzer harness for the Retry-After, HTTP-date and reset parsers.
 *
 * Input: the first 8 bytes, when there are more than 8, seed the wall clock
 * (folded into 1970..2514, with microseconds); the rest is the value. The
 * value is copied into a buffer of exactly its length so an over-read is an
 * ASan report. Checked invariants:
 *   - return codes are only the documented ones, and an error leaves the
 *     output untouched;
 *   - a wait or reset is never negative nor above STG_DELTA_SECONDS_MAX s;
 *   - a date that parses lies in years 0..9999, formats as IMF-fixdate and
 *     parses back to the same second, and Retry-After agrees with it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>

#include "fuzz_common.h"

#define SENTINEL INT64_C(-424242)
#define MAX_WAIT_US (STG_DELTA_SECONDS_MAX * INT64_C(1000000))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t now_us = INT64_C(1700000000) * 1000000;
    int64_t t = SENTINEL, w = SENTINEL, r = SENTINEL;
    char *v;
    int rc;

    if (size > 8) {
        uint64_t seed = 0;
        for (int i = 0; i < 8; i++)
            seed |= (uint64_t)data[i] << (8 * i);
        now_us = (int64_t)(seed % (UINT64_C(17179869184) * 1000000)); /* 2^34 s */
        data += 8;
        size -= 8;
    }
    v = malloc(size ? size : 1);
    if (!v)
        return 0;
    if (size)
        memcpy(v, data, size);

    rc = stg_retry_after_parse(v, size, now_us, &w);
    CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
    if (rc == STG_OK)
        CHECK(w >= 0 && w <= MAX_WAIT_US);
    else
        CHECK(w == SENTINEL);

    rc = stg_http_date_parse(v, size, now_us, &t);
    CHECK(rc == STG_OK || rc == STG_EPARSE);
    if (rc == STG_OK) {
        char buf[30], again[29];
        int64_t back = SENTINEL, w2 = SENTINEL;
        CHECK(t >= INT64_C(-62167219200) && t <= INT64_C(253402300799));
        CHECK(stg_http_date_format(t, buf, sizeof buf) == 29);
        CHECK(buf[29] == '\0');
        memcpy(again, buf, 29); /* exact-size, no NUL */
        CHECK(stg_http_date_parse(again, 29, now_us, &back) == STG_OK);
        CHECK(back == t);
        /* a date is a valid Retry-After, giving max(0, date - now) */
        rc = stg_retry_after_parse(v, size, now_us, &w2);
        if (rc == STG_OK) {
            int64_t d = t * 1000000 - now_us;
            CHECK(w2 == (d < 0 ? 0 : d));
        } else {
            CHECK(rc == STG_ERANGE && t * 1000000 - now_us > MAX_WAIT_US);
        }
    } else {
        CHECK(t == SENTINEL);
    }

    rc = stg_ratelimit_reset_parse(v, size, now_us, &r);
    CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
    if (rc == STG_OK)
        CHECK(r >= 0 && r <= MAX_WAIT_US);
    else
        CHECK(r == SENTINEL);

    free(v);
    return 0;
}
