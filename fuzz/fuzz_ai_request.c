/*
 * libFuzzer harness for the LLM API request bodies of `stagger serve`'s
 * openai and anthropic personas (src/server/ai.c) and the answers written
 * for them: the body is a client's, so untrusted.
 *
 * Input: the first byte picks the API (of five), the second the stream
 * error draw and the configuration's rule; the rest is the body, in a buffer of exactly its
 * length (an over-read is an ASan report). Checked: a body that is not a
 * request leaves every count 0 and says why; a request's counts are
 * consistent (0 <= out <= max_out, n in 1..128, the total of either rule
 * at least each part); every answer and refusal written for it is valid
 * JSON, or SSE whose every data line is (or OpenAI's [DONE]), whatever
 * bytes the model name held (cut to 64 bytes, mid-character perhaps).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/ai.h"

#include "fuzz_common.h"

static void check_json(const char *s, size_t n)
{
    json_error_t e;
    json_t *j = json_loadb(s, n, 0, &e);
    CHECK(j != NULL);
    json_decref(j);
}

static void check_body(const srv_answer *a, const char *ctype)
{
    CHECK(a->body && a->len > 0);
    if (strcmp(ctype, "text/event-stream")) {
        check_json(a->body, a->len);
        return;
    }
    /* Every "data: " line of every event. */
    const char *p = a->body, *end = a->body + a->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        CHECK(nl);
        if (nl - p >= 6 && !memcmp(p, "data: ", 6) &&
            !(nl - p == 12 && !memcmp(p + 6, "[DONE]", 6)))
            check_json(p + 6, (size_t)(nl - p - 6));
        p = nl + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    srv_ai_api api = (srv_ai_api)(1 + data[0] % 5);
    bool stream_error = (data[1] & 2) != 0;
    stg_srv_config cfg;
    stg__srv_config_init(&cfg);
    cfg.ai_count_max = (data[1] & 4) != 0;
    cfg.ai_output_tokens = (data[1] >> 3) & 7; /* small: the answers stay small */
    size_t len = size - 2;
    char *body = malloc(len ? len : 1);
    if (!body)
        return 0;
    if (len)
        memcpy(body, data + 2, len);

    srv_ai_req r;
    srv_ai_parse(api, body, len, &cfg, &r);
    CHECK(memchr(r.model, '\0', sizeof r.model) && memchr(r.error, '\0', sizeof r.error));
    if (!r.valid) {
        CHECK(r.error[0] && r.in == 0 && r.max_out == 0 && r.out == 0);
        srv_answer a;
        srv_ai_refusal(api, SRV_AI_INVALID, r.error, &a);
        CHECK(a.status == 400);
        check_body(&a, "application/json");
        free(a.body);
    } else {
        CHECK(r.n >= 1 && (r.n <= 128 || api == SRV_AI_OPENAI_EMBEDDINGS) && r.in >= 0);
        CHECK(r.out >= 0 && r.out <= r.max_out);
        CHECK(api == SRV_AI_OPENAI_EMBEDDINGS ? r.max_out == 0 : r.max_out >= r.n);
        int64_t t = srv_ai_total(&r, &cfg);
        CHECK(t >= r.in && t >= r.max_out);
        if (r.max_out <= 4096) { /* the answer's size grows with the output */
            srv_answer a;
            const char *ctype;
            srv_ai_answer(&r, stream_error && r.stream, 1, 1, &a, &ctype);
            CHECK(a.status == 200);
            check_body(&a, ctype);
            free(a.body);
        }
    }
    for (int k = SRV_AI_OVERLOADED; k <= SRV_AI_BILLING; k++) {
        srv_answer a;
        srv_ai_refusal(api, (srv_ai_error)k, r.error, &a);
        check_body(&a, "application/json");
        free(a.body);
    }
    free(body);
    return 0;
}
