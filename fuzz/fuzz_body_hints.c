/*
 * libFuzzer harness for the reader of a refusal's body (src/curl/body_hints.c,
 * with jansson: GitHub's secondary limit, Google's RetryInfo and
 * QuotaFailure, OpenAI's and Anthropic's error objects) and the core's
 * rules on what it finds (stg_hints_message, stg_hints_body).
 *
 * Input: the first byte picks the status (403, 429 or another), the rest is
 * the body, copied into a buffer of exactly its length (an over-read is an
 * ASan report). Checked: the reader reads only a 403, 429 or 5xx body of at
 * most STG__BODY_HINTS_MAX bytes; it only adds the body's facts (the flags
 * SECONDARY, HARD_STOP and THROTTLE, a wait in [0, STG_WAIT_MAX_US], the
 * BODY bits, the four dialects' bits) and never touches a header's fields;
 * it says true exactly when it changed something but a malformed bit. The
 * rule on the raw bytes as a message agrees with a plain search for its
 * phrases, and stg_hints_body on the raw bytes as each field of each
 * dialect keeps the same bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"

#include "fuzz_common.h"

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

static const unsigned body_flags = STG_HINTS_SECONDARY | STG_HINTS_HARD_STOP | STG_HINTS_THROTTLE;
static const unsigned body_dialects = (1u << STG_DIALECT_GITHUB) | (1u << STG_DIALECT_GOOGLE) |
                                      (1u << STG_DIALECT_OPENAI) | (1u << STG_DIALECT_ANTHROPIC);

/* h is before plus only what a body may add. */
static void check_added(const stg_hints *h, const stg_hints *before)
{
    CHECK(h->limit == before->limit && h->remaining == before->remaining);
    CHECK(h->reset_us == before->reset_us && h->window_us == before->window_us);
    CHECK(h->verdict == before->verdict);
    CHECK((h->flags & ~body_flags) == before->flags);
    CHECK((h->seen & ~(unsigned)STG_HINT_BODY) == before->seen);
    CHECK((h->malformed & ~(unsigned)STG_HINT_BODY) == before->malformed);
    CHECK((h->oversized & ~(unsigned)STG_HINT_BODY) == before->oversized);
    CHECK((h->dialects & ~body_dialects) == before->dialects);
    CHECK(h->retry_after_us == before->retry_after_us ||
          (h->retry_after_us > before->retry_after_us && h->retry_after_us >= 0 &&
           h->retry_after_us <= STG_WAIT_MAX_US));
    CHECK(!(h->oversized & STG_HINT_BODY) || h->retry_after_us == STG_WAIT_MAX_US);
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
    check_added(&h, &before);
    if (got) {
        CHECK(status == 403 || status == 429 || status >= 500);
        CHECK(len <= STG__BODY_HINTS_MAX);
        CHECK(h.flags || (h.seen & STG_HINT_BODY));
        CHECK(!(h.flags & STG_HINTS_SECONDARY) || status == 403 || status == 429);
    } else {
        h.malformed = before.malformed; /* a malformed wait is no change */
        CHECK(!memcmp(&h, &before, sizeof h));
    }

    /* The rule on the raw bytes, as a message. */
    stg_hints_init(&h);
    bool msg = stg_hints_message(&h, status, body, len);
    CHECK(msg == ((status == 403 || status == 429) && says_secondary(body, len)));
    CHECK(msg == ((h.flags & STG_HINTS_SECONDARY) != 0));

    /* The raw bytes as every field of every dialect. */
    static const int dialects[] = {STG_DIALECT_GOOGLE, STG_DIALECT_OPENAI,
                                   STG_DIALECT_ANTHROPIC, STG_DIALECT_GITHUB};
    for (size_t d = 0; d < 4; d++)
        for (int f = STG_BODY_ERROR_TYPE; f <= STG_BODY_QUOTA_ID; f++) {
            stg_hints_init(&h);
            before = h;
            int rc = stg_hints_body(&h, status, dialects[d], (stg_body_field)f, body, len);
            CHECK(rc == STG_OK || rc == STG_EPARSE || rc == STG_ERANGE);
            CHECK(rc == STG_OK || f == STG_BODY_RETRY_DELAY);
            check_added(&h, &before);
            CHECK(!(h.flags & STG_HINTS_SECONDARY));
            CHECK(dialects[d] != STG_DIALECT_GITHUB || !memcmp(&h, &before, sizeof h));
        }
    free(body);
    return 0;
}
