/*
 * libFuzzer harness for the first event of an event stream (src/curl/sse.c)
 * and the error reading of its data (jansson).
 *
 * Input: the bytes of a stream's start, copied into a buffer of exactly
 * their length (an over-read is an ASan report). Checked: an event is
 * found in the whole input whenever it is found in a prefix (more bytes
 * never undo a complete event), with the same type and data; the data is
 * no longer than the input and NUL-terminated; the error status is 0 or
 * one of the statuses the map gives; the error type is a word.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"

#include "fuzz_common.h"

static bool known_status(int st)
{
    static const int ok[] = {0, 400, 401, 403, 404, 413, 429, 500, 502, 504, 529};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (st == ok[i])
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    char name[32], name2[32], type[48];
    stg__buf d = {0}, d2 = {0};
    int got = stg__sse_first_event(buf, size, name, sizeof name, &d);
    CHECK(got == 0 || got == 1);
    if (got == 1) {
        CHECK(d.len <= size);
        CHECK(!d.p || d.p[d.len] == '\0');
        CHECK(strlen(name) < sizeof name);
        int st = stg__sse_error_status(name, d.p, d.len, type, sizeof type);
        CHECK(known_status(st));
        for (const char *t = type; *t; t++)
            CHECK((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') ||
                  (*t >= '0' && *t <= '9') || *t == '_' || *t == '.' || *t == '-');
        /* Found in the whole input, so in every longer one too: halve the
         * input, and if the half has an event it is the same one. */
        int got2 = stg__sse_first_event(buf, size / 2, name2, sizeof name2, &d2);
        if (got2 == 1) {
            CHECK(!strcmp(name, name2));
            CHECK(d.len == d2.len && (!d.len || !memcmp(d.p, d2.p, d.len)));
        }
    } else {
        /* No event in the whole: none in any prefix either. */
        CHECK(stg__sse_first_event(buf, size / 2, name2, sizeof name2, &d2) == 0);
    }
    stg__buf_free(&d);
    stg__buf_free(&d2);
    free(buf);
    return 0;
}
