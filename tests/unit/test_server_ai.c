/*
 * The LLM APIs of the openai and anthropic personas (src/server/ai.c) and
 * their token units in the persona engine (src/server/dialect.c), in
 * virtual time: what a request body costs (characters are code points,
 * Anthropic's system prompt counts, n multiplies, the defaults), what is
 * not a request of the API's shape, the sum and max rules, and the
 * Anthropic refund: unused output comes back to output-tokens and tokens,
 * never past their capacity, and input-tokens keeps its charge.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/ai.h"
#include "server/dialect.h"

#define S INT64_C(1000000)
#define WALL0 (INT64_C(1796126400) * S)
#define MONO0 (INT64_C(5000) * S + 123)

static srv_ai_req parse(srv_ai_api api, const char *body, const stg_srv_config *cfg)
{
    srv_ai_req r;
    srv_ai_parse(api, body, strlen(body), cfg, &r);
    return r;
}

static void test_counting(void **state)
{
    (void)state;
    stg_srv_config cfg;
    stg__srv_config_init(&cfg);
    /* "héllo wörld" is 11 code points (13 bytes), "abc" 3: 14 -> 4 tokens. */
    srv_ai_req r = parse(SRV_AI_OPENAI,
                         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                         "\"h\\u00e9llo w\\u00f6rld\"},{\"role\":\"user\",\"content\":[{\"type\":"
                         "\"text\",\"text\":\"abc\"},{\"type\":\"image_url\"}]}],"
                         "\"max_tokens\":10,\"n\":3}",
                         &cfg);
    assert_true(r.valid);
    assert_int_equal(r.in, 4);
    assert_int_equal(r.max_out, 30);
    assert_int_equal(r.out, 30); /* 16 output tokens a choice, at most 10 */
    assert_int_equal(srv_ai_total(&r, &cfg), 34);
    cfg.ai_count_max = true;
    assert_int_equal(srv_ai_total(&r, &cfg), 30);
    cfg.ai_count_max = false;
    /* No max_tokens: the default; max_completion_tokens wins over max_tokens. */
    r = parse(SRV_AI_OPENAI, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\"}]}",
              &cfg);
    assert_true(r.valid);
    assert_int_equal(r.in, 0);
    assert_int_equal(r.max_out, 1024);
    assert_int_equal(r.out, 16);
    r = parse(SRV_AI_OPENAI,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
              "\"max_tokens\":99,\"max_completion_tokens\":7,\"stream\":true,"
              "\"stream_options\":{\"include_usage\":true}}",
              &cfg);
    assert_int_equal(r.max_out, 7);
    assert_true(r.stream && r.include_usage);
    assert_int_equal(r.in, 1);
    /* Anthropic: the system prompt counts, as a string or blocks. */
    r = parse(SRV_AI_ANTHROPIC,
              "{\"model\":\"c\",\"system\":[{\"type\":\"text\",\"text\":\"12345678\"}],"
              "\"messages\":[{\"role\":\"user\",\"content\":\"1234\"}],\"max_tokens\":5}",
              &cfg);
    assert_true(r.valid);
    assert_int_equal(r.in, 3);
    assert_int_equal(r.max_out, 5);
    assert_int_equal(r.out, 5);
    assert_int_equal(srv_ai_total(&r, &cfg), 8);
    /* Responses: input items and instructions; max_output_tokens. */
    r = parse(SRV_AI_OPENAI_RESPONSES,
              "{\"model\":\"m\",\"instructions\":\"1234\",\"input\":[{\"role\":\"user\","
              "\"content\":[{\"type\":\"input_text\",\"text\":\"12345\"}]},{\"role\":"
              "\"user\",\"content\":\"123\"}],\"max_output_tokens\":4}",
              &cfg);
    assert_true(r.valid);
    assert_int_equal(r.in, 3);
    assert_int_equal(r.max_out, 4);
    assert_int_equal(r.out, 4);
    r = parse(SRV_AI_OPENAI_RESPONSES, "{\"model\":\"m\",\"input\":\"12345678\"}", &cfg);
    assert_int_equal(r.in, 2);
    assert_int_equal(r.max_out, 1024);
    /* Completions: a prompt string or strings; 16 by default; n. */
    r = parse(SRV_AI_OPENAI_COMPLETIONS,
              "{\"model\":\"m\",\"prompt\":[\"1234\",\"12345\"],\"n\":2}", &cfg);
    assert_true(r.valid);
    assert_int_equal(r.in, 3);
    assert_int_equal(r.max_out, 32);
    /* Embeddings: input only, no output, one vector per input. */
    r = parse(SRV_AI_OPENAI_EMBEDDINGS, "{\"model\":\"m\",\"input\":[\"1234\",\"5\"]}", &cfg);
    assert_true(r.valid);
    assert_int_equal(r.in, 2);
    assert_int_equal(r.max_out + r.out, 0);
    assert_int_equal(r.n, 2);
    cfg.ai_count_max = true;
    assert_int_equal(srv_ai_total(&r, &cfg), 2);
    r = parse(SRV_AI_OPENAI_EMBEDDINGS, "{\"model\":\"m\",\"input\":[]}", &cfg);
    assert_false(r.valid);
    r = parse(SRV_AI_OPENAI_COMPLETIONS, "{\"model\":\"m\",\"input\":\"x\"}", &cfg);
    assert_false(r.valid);
}

static void test_not_requests(void **state)
{
    (void)state;
    stg_srv_config cfg;
    stg__srv_config_init(&cfg);
    static const char *const openai_bad[] = {
        "", "{", "[]", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
        "{\"model\":\"\",\"messages\":[{\"role\":\"user\"}]}", "{\"model\":\"m\",\"messages\":[]}",
        "{\"model\":\"m\",\"messages\":[\"x\"]}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"max_tokens\":0}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"max_tokens\":\"5\"}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"n\":129}",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"stream\":\"yes\"}"};
    for (size_t i = 0; i < sizeof openai_bad / sizeof *openai_bad; i++) {
        srv_ai_req r = parse(SRV_AI_OPENAI, openai_bad[i], &cfg);
        assert_false(r.valid);
        assert_true(r.error[0]);
        assert_int_equal(r.in + r.max_out + r.out, 0);
        srv_answer a;
        srv_ai_refusal(SRV_AI_OPENAI, SRV_AI_INVALID, r.error, &a);
        assert_int_equal(a.status, 400);
        assert_non_null(strstr(a.body, "invalid_request_error"));
        free(a.body);
    }
    /* Anthropic requires max_tokens. */
    srv_ai_req r = parse(SRV_AI_ANTHROPIC,
                         "{\"model\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                         &cfg);
    assert_false(r.valid);
    assert_non_null(strstr(r.error, "max_tokens"));
    /* Routes: POST only, the persona's own. */
    assert_int_equal(srv_ai_route("openai", "POST", "/v1/chat/completions"), SRV_AI_OPENAI);
    assert_int_equal(srv_ai_route("openai", "POST", "/openai/deployments/d/chat/completions"),
                     SRV_AI_OPENAI);
    assert_int_equal(srv_ai_route("openai", "GET", "/v1/chat/completions"), SRV_AI_NONE);
    assert_int_equal(srv_ai_route("openai", "POST", "/v1/messages"), SRV_AI_NONE);
    assert_int_equal(srv_ai_route("openai", "POST", "/v1/responses"), SRV_AI_OPENAI_RESPONSES);
    assert_int_equal(srv_ai_route("openai", "POST", "/v1/completions"),
                     SRV_AI_OPENAI_COMPLETIONS);
    assert_int_equal(srv_ai_route("openai", "POST", "/v1/embeddings"), SRV_AI_OPENAI_EMBEDDINGS);
    assert_int_equal(srv_ai_route("anthropic", "POST", "/v1/responses"), SRV_AI_NONE);
    assert_int_equal(srv_ai_route("anthropic", "POST", "/v1/messages"), SRV_AI_ANTHROPIC);
    assert_int_equal(srv_ai_route("github", "POST", "/v1/messages"), SRV_AI_NONE);
    assert_int_equal(srv_ai_route(NULL, "POST", "/v1/messages"), SRV_AI_NONE);
}

static void init(srv_dialect *d, const char *name, const char *const *quotas)
{
    stg_srv_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.dialect = name;
    for (size_t i = 0; quotas && quotas[i]; i += 3) {
        stg_srv_quota *q = &cfg.quotas[cfg.n_quotas++];
        snprintf(q->name, sizeof q->name, "%s", quotas[i]);
        q->limit = atoll(quotas[i + 1]);
        q->window_us = atoll(quotas[i + 2]) * S;
    }
    char err[256] = "";
    assert_int_equal(srv_dialect_init(d, &cfg, err, sizeof err), 0);
}

/* Anthropic's units: each quota charged its own count; the refund returns
 * output to output-tokens and tokens only, capped at the capacity. */
static void test_units_and_refund(void **state)
{
    (void)state;
    srv_dialect d;
    /* a 3600 h window: no refill to speak of within the test */
    static const char *const q[] = {"requests", "100", "60",        "tokens",
                                    "1000",     "12960000", "input-tokens", "500",
                                    "12960000", "output-tokens", "100", "12960000", NULL};
    init(&d, "anthropic", q);
    srv_dctx c;
    srv_dout o;
    srv_dcost cost = {45, 5, 40};
    srv_dialect_decide(&d, &c, &o, "c1", "/v1/messages", "999", &cost, MONO0, WALL0);
    assert_int_equal(o.status, 0);
    assert_int_equal(c.v[1].remaining, 1000 - 45);
    assert_int_equal(c.v[2].remaining, 500 - 5);
    assert_int_equal(c.v[3].remaining, 100 - 40);
    srv_dialect_refund(&d, &c, 24);
    srv_dialect_decide(&d, &c, &o, "c1", "/v1/messages", NULL, &cost, MONO0, WALL0);
    assert_int_equal(o.status, 0);
    assert_int_equal(c.v[1].remaining, 1000 - 45 + 24 - 45);
    assert_int_equal(c.v[2].remaining, 500 - 10);
    assert_int_equal(c.v[3].remaining, 100 - 40 + 24 - 40);
    /* A refund larger than what is missing fills up to the capacity only. */
    srv_dialect_refund(&d, &c, 100000);
    cost = (srv_dcost){0, 0, 0};
    srv_dialect_decide(&d, &c, &o, "c1", "/v1/messages", NULL, &cost, MONO0, WALL0);
    assert_int_equal(c.v[1].remaining, 1000);
    assert_int_equal(c.v[2].remaining, 490);
    assert_int_equal(c.v[3].remaining, 100);
    /* Refused: nothing charged, whatever unit refused. */
    cost = (srv_dcost){1, 1, 101};
    srv_dialect_decide(&d, &c, &o, "c1", "/v1/messages", NULL, &cost, MONO0, WALL0);
    assert_int_equal(o.status, 429);
    assert_true(c.v[3].refused && !c.v[1].refused);
    assert_int_equal(c.v[1].remaining, 1000);
    free(o.body);
    srv_dialect_destroy(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counting),
        cmocka_unit_test(test_not_requests),
        cmocka_unit_test(test_units_and_refund),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
