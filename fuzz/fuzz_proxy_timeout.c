/*
 * libFuzzer harness for the proxy's Stagger-Timeout value
 * (src/proxy/control.c px_parse_timeout), a request header any program
 * behind the proxy sends.
 *
 * Input: the value, copied into a buffer of exactly its length plus the
 * NUL (an over-read is an ASan report). Checked: a refusal leaves every
 * time zero; an acceptance sets at least one time, each 0 (not named) or
 * within px_parse_duration's range (1 µs .. 9e15 µs); a value without '='
 * sets first-byte and idle to the same time and nothing else.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/internal.h"

#include "fuzz_common.h"

static bool in_range(int64_t us)
{
    return us == 0 || (us >= 1 && us <= (int64_t)9e15);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *v = fuzz_cstr(data, size);
    if (!v)
        return 0;
    px_timeouts t;
    bool ok = px_parse_timeout(v, &t);
    if (!ok) {
        CHECK(!t.connect_us && !t.first_byte_us && !t.idle_us && !t.total_us);
    } else {
        CHECK(t.connect_us || t.first_byte_us || t.idle_us || t.total_us);
        CHECK(in_range(t.connect_us) && in_range(t.first_byte_us) && in_range(t.idle_us) &&
              in_range(t.total_us));
        if (!memchr(v, '=', strlen(v)))
            CHECK(t.first_byte_us > 0 && t.idle_us == t.first_byte_us && !t.connect_us &&
                  !t.total_us);
    }
    free(v);
    return 0;
}
