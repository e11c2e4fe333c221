/*
 * libFuzzer harness for the AI API body readers (src/curl/ai_cost.c, with
 * jansson) and the cost model they feed (include/stagger/cost.h).
 *
 * Input: the first byte picks the path (one of the shapes, Azure's, one
 * that is none) and the reader (request or answer), the rest is the body,
 * copied into a buffer of exactly its length (an over-read is an ASan
 * report). Checked: a request's parts are within 0..10^12 and all zero
 * when it is not read as a shape, and stg_ai_cost_estimate prices the
 * same parts; a GET is never read; usage amounts are
 * >= 0, at most three, each unit once; the answer read as a stream's
 * start in pieces (stg__ai_cost_lead) consumes whole lines only and
 * tells an input count within 0..10^12. The parts then price every unit
 * (an estimate >= 0, 1 for requests) and drive the model through a send
 * and an answer whose count comes from the body's bytes: k and w stay
 * within their bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"

#include "fuzz_common.h"

static const char *const urls[] = {
    "https://api.openai.com/v1/chat/completions",
    "https://api.openai.com/v1/responses",
    "https://api.openai.com/v1/completions",
    "https://api.openai.com/v1/embeddings",
    "https://api.anthropic.com/v1/messages",
    "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21",
    "https://api.openai.com/v1/models",
    "http://127.0.0.1/",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *url = urls[data[0] % 8];
    bool answer = data[0] & 0x80;
    size_t len = size - 1;
    char *body = malloc(len ? len : 1);
    if (!body)
        return 0;
    if (len)
        memcpy(body, data + 1, len);

    if (answer) {
        stg_quota_cost used[3];
        size_t n = stg__ai_cost_usage(body, len, used, 3);
        CHECK(n <= 3);
        for (size_t i = 0; i < n; i++) {
            CHECK(used[i].amount >= 0);
            for (size_t j = 0; j < i; j++)
                CHECK(strcmp(used[i].unit, used[j].unit) != 0);
        }
        /* The same bytes as a stream's start, read as they pass in
         * pieces cut by the first byte (a line at a time, the rest kept),
         * and joined to the body read as a tail. */
        size_t piece = 1 + (data[0] & 0x3f), off = 0, kept = 0;
        char *held = malloc(len ? len : 1);
        int64_t in = -1;
        while (held && off < len) {
            size_t take = len - off < piece ? len - off : piece;
            memcpy(held + kept, body + off, take);
            off += take;
            kept += take;
            size_t done = stg__ai_cost_lead(held, kept, &in);
            CHECK(done <= kept);
            CHECK(done == 0 || held[done - 1] == '\n');
            memmove(held, held + done, kept - done);
            kept -= done;
            CHECK(in >= -1 && in <= INT64_C(1000000000000));
        }
        free(held);
        n = stg__ai_cost_usage_streamed(body, len, in, used, 3);
        CHECK(n <= 3);
        for (size_t i = 0; i < n; i++)
            CHECK(used[i].amount >= 0);
        free(body);
        return 0;
    }

    stg_cost_parts p;
    CHECK(!stg__ai_cost_parts("GET", url, body, len, &p));
    CHECK(p.chars == 0 && p.tokens == 0 && p.max_out == 0);
    bool got = stg__ai_cost_parts("POST", url, body, len, &p);
    CHECK(p.chars >= 0 && p.chars <= INT64_C(1000000000000));
    CHECK(p.tokens >= 0 && p.tokens <= INT64_C(1000000000000));
    CHECK(p.max_out >= 0 && p.max_out <= INT64_C(1000000000000));
    if (!got)
        CHECK(p.chars == 0 && p.tokens == 0 && p.max_out == 0);
    /* The public face agrees: three units priced for a shape, none else. */
    stg_quota_cost priced[3];
    size_t n_est = stg_ai_cost_estimate(NULL, "POST", url, body, len, priced, 3);
    CHECK(n_est == (got ? 3u : 0u));
    for (size_t i = 0; i < n_est; i++)
        CHECK(priced[i].amount == stg_cost_estimate(NULL, priced[i].unit, &p));

    /* The model, fed what the body says and a count made of its bytes. */
    stg_cost_model *model = stg_cost_model_new(NULL);
    if (!model) {
        free(body);
        return 0;
    }
    static const char *const units[] = {"tokens", "input-tokens", "output-tokens", "requests"};
    for (int i = 0; i < 4; i++) {
        int64_t est = stg_cost_estimate(model, units[i], &p);
        CHECK(est >= 0);
        CHECK(i != 3 || est == 1);
    }
    stg_quota_obs o;
    memset(&o, 0, sizeof o);
    o.window_us = -1;
    o.dialect = STG_DIALECT_OPENAI;
    int64_t rem = INT64_C(1) << 40;
    for (size_t i = 0; i + 2 < len && i < 96; i += 3) {
        snprintf(o.unit, sizeof o.unit, "%s", units[(unsigned char)body[i] % 4]);
        o.limit = (unsigned char)body[i] & 1 ? -1 : rem + 1000;
        o.reset_us = (int64_t)(unsigned char)body[i + 1] * 1000;
        rem -= (int64_t)(unsigned char)body[i + 2] * 37;
        o.remaining = rem;
        int64_t seq = stg_cost_sent(model, (unsigned char)body[i + 1] & 1 ? NULL : &p,
                                     (int64_t)i * 1000);
        stg_cost_answer(model, seq, (unsigned char)body[i + 2] & 1, &o, 1, (int64_t)i * 1000);
    }
    for (int i = 0; i < 3; i++) {
        stg_cost_rule r;
        if (stg_cost_rule_get(model, units[i], &r) == STG_OK)
            CHECK(r.k >= 1.0 / 16 && r.k <= 1.0 && r.w >= 0 && r.w <= 1);
        CHECK(stg_cost_estimate(model, units[i], &p) >= 0);
    }
    stg_cost_model_free(model);
    free(body);
    return 0;
}
