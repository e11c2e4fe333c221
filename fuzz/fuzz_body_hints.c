/*
 * libFuzzer harness for the body reader of a GitHub secondary rate limit
 * (src/curl/body_hints.c, with jansson) and the core's rule on the message
 * (stg_hints_message).
 *
 * Input: the first byte picks the status (403, 429 or another), the rest is
 * the body, copied into a buffer of exactly its length (an over-read is an
 * ASan report). Checked: the reader flags only a 403 or 429 body of at
 * most STG__BODY_HINTS_MAX bytes, and then sets STG_HINTS_SECONDARY and
 * nothing else but the GitHub dialect bit; otherwise the hints are left
 * as they were. The rule on the raw bytes (as a message) agrees with a
 * plain search for its phrases.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)         \
    do {                 \
        if (!(x))        \
            abort();     \
    } while (0)

/* The phrases, found the slow way: lower-case a copy and strstr it. */
static bool says_secondary(const char *s, size_t len)
{
    char *low = malloc(len + 1);
    if (!low)
        abort();
    for (size_t i = 0; i < len; i++) /* a NUL would end strstr's search: \x01 */
        low[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i] ? s[i] : '\x01';
    low[len] = '\0';
    bool yes = strstr(low, "secondary rate limit") || strstr(low, "abuse detection mechanism");
    free(low);
    return yes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const int statuses[] = {403, 429, 200, 401, 500, 503};
    int status = statuses[data[0] % 6];
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    if (!body)
        return 0;
    if (len)
        memcpy(body, data + 1, len);

    stg_hints h;
    stg_hints_init(&h);
    stg_hints before = h;
    bool got = stg__body_hints_read(status, body, len, &h);
    if (got) {
        CHECK(status == 403 || status == 429);
        CHECK(len <= STG__BODY_HINTS_MAX);
        CHECK(h.flags == STG_HINTS_SECONDARY);
        CHECK(h.dialects == (1u << STG_DIALECT_GITHUB));
        h.flags = before.flags;
        h.dialects = before.dialects;
    }
    CHECK(!memcmp(&h, &before, sizeof h));

    /* The rule on the raw bytes, as a message. */
    stg_hints_init(&h);
    bool msg = stg_hints_message(&h, status, body, len);
    CHECK(msg == ((status == 403 || status == 429) && says_secondary(body, len)));
    CHECK(msg == ((h.flags & STG_HINTS_SECONDARY) != 0));
    free(body);
    return 0;
}
