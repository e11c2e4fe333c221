/*
 * The AI APIs' bodies read for their cost (src/curl/ai_cost.c): each
 * request shape's prompt characters and output asked, on its own paths
 * (OpenAI, Azure OpenAI, Anthropic), what is not one of them, and the
 * usage of answers, JSON and SSE.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "curl/internal.h"

static bool parts(const char *url, const char *body, stg_cost_parts *p)
{
    return stg__ai_cost_parts("POST", url, body, strlen(body), p);
}

static void chat_completions(void **state)
{
    (void)state;
    stg_cost_parts p;
    /* content as a string; max_tokens; n */
    assert_true(parts("https://api.openai.com/v1/chat/completions",
                      "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":"
                      "\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hello there\"}],"
                      "\"max_tokens\":100,\"n\":2}",
                      &p));
    assert_int_equal(p.chars, 9 + 11);
    assert_int_equal(p.max_out, 200);
    assert_int_equal(p.tokens, 0);
    /* content as parts; an image's URL is not text; max_completion_tokens
     * wins over max_tokens; UTF-8 counts code points. */
    assert_true(parts("https://api.openai.com/v1/chat/completions?x=1",
                      "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                      "\"text\":\"caf\\u00e9 \xc3\xa9t\xc3\xa9\"},{\"type\":\"image_url\","
                      "\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}}]}],"
                      "\"max_completion_tokens\":50,\"max_tokens\":9}",
                      &p));
    assert_int_equal(p.chars, 8); /* "caf\u00e9 \u00e9t\u00e9" */
    assert_int_equal(p.max_out, 50);
    /* No max_tokens: no output asked. Tools count. */
    assert_true(parts("http://127.0.0.1:8080/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"abcd\"}],\"tools\":[{"
                      "\"type\":\"function\",\"function\":{\"name\":\"f\","
                      "\"description\":\"gh\"}}]}",
                      &p));
    assert_int_equal(p.chars, 4 + 1 + 2);
    assert_int_equal(p.max_out, 0);
    /* Azure OpenAI: a deployment's path, api-version in the query. */
    assert_true(parts("https://x.openai.azure.com/openai/deployments/gpt4/chat/completions"
                      "?api-version=2024-10-21",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"12345678\"}],"
                      "\"max_tokens\":7}",
                      &p));
    assert_int_equal(p.chars, 8);
    assert_int_equal(p.max_out, 7);
}

static void responses_completions_embeddings(void **state)
{
    (void)state;
    stg_cost_parts p;
    assert_true(parts("https://api.openai.com/v1/responses",
                      "{\"model\":\"o3\",\"input\":\"twelve chars\",\"instructions\":\"abc\","
                      "\"max_output_tokens\":300}",
                      &p));
    assert_int_equal(p.chars, 15);
    assert_int_equal(p.max_out, 300);
    assert_true(parts("https://api.openai.com/v1/responses",
                      "{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                      "\"text\":\"hi\"}]}]}",
                      &p));
    assert_int_equal(p.chars, 2);
    assert_int_equal(p.max_out, 0);
    /* Legacy completions: 16 tokens when max_tokens is not said; per
     * prompt, times the larger of n and best_of. */
    assert_true(parts("https://api.openai.com/v1/completions", "{\"prompt\":\"abcd\"}", &p));
    assert_int_equal(p.chars, 4);
    assert_int_equal(p.max_out, 16);
    assert_true(parts("https://api.openai.com/v1/completions",
                      "{\"prompt\":[\"ab\",\"cd\"],\"max_tokens\":10,\"n\":2,\"best_of\":3}", &p));
    assert_int_equal(p.chars, 4);
    assert_int_equal(p.max_out, 60);
    assert_true(parts("https://api.openai.com/v1/completions",
                      "{\"prompt\":[1,2,3],\"max_tokens\":5}", &p));
    assert_int_equal(p.tokens, 3);
    assert_int_equal(p.chars, 0);
    /* Embeddings: no output. */
    assert_true(parts("https://api.openai.com/v1/embeddings",
                      "{\"input\":[\"abc\",\"de\"],\"model\":\"e3\"}", &p));
    assert_int_equal(p.chars, 5);
    assert_int_equal(p.max_out, 0);
    assert_true(parts("https://api.openai.com/v1/embeddings", "{\"input\":[[1,2],[3]]}", &p));
    assert_int_equal(p.tokens, 3);
}

static void anthropic_messages(void **state)
{
    (void)state;
    stg_cost_parts p;
    assert_true(parts("https://api.anthropic.com/v1/messages",
                      "{\"model\":\"claude\",\"max_tokens\":1024,\"system\":\"abc\","
                      "\"messages\":[{\"role\":\"user\",\"content\":\"hello\"},{\"role\":"
                      "\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"yo\"},{\"type\":"
                      "\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{\"q\":\"xy\"}}]},"
                      "{\"role\":\"user\",\"content\":[{\"type\":\"image\",\"source\":{\"type\":"
                      "\"base64\",\"media_type\":\"image/png\",\"data\":\"AAAAAAAA\"}}]}]}",
                      &p));
    assert_int_equal(p.chars, 3 + 5 + 2 + 1 + 2);
    assert_int_equal(p.max_out, 1024);
    /* system as blocks */
    assert_true(parts("https://api.anthropic.com/v1/messages",
                      "{\"max_tokens\":10,\"system\":[{\"type\":\"text\",\"text\":\"abcd\","
                      "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[]}",
                      &p));
    assert_int_equal(p.chars, 4);
}

static void not_a_shape(void **state)
{
    (void)state;
    stg_cost_parts p;
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5}";
    assert_false(parts("https://api.openai.com/v1/models", chat, &p));
    assert_false(stg__ai_cost_parts("GET", "https://api.openai.com/v1/chat/completions", chat,
                                    strlen(chat), &p));
    assert_false(stg__ai_cost_parts("POST", "https://api.openai.com/v1/chat/completions", NULL, 0,
                                    &p));
    assert_false(parts("https://api.openai.com/v1/chat/completions", "not json", &p));
    assert_false(parts("https://api.openai.com/v1/chat/completions", "[1,2]", &p));
    assert_false(parts("https://api.openai.com/v1/chat/completions", "{\"prompt\":\"x\"}", &p));
    assert_false(parts("https://api.openai.com/v1/embeddings", "{\"input\":5}", &p));
    assert_false(parts("https://api.openai.com/v1/messages", "{\"messages\":\"x\"}", &p));
    assert_int_equal(p.chars, 0);
    /* Numbers out of range or of the wrong type are not said. */
    assert_true(parts("https://api.openai.com/v1/chat/completions",
                      "{\"messages\":[],\"max_tokens\":-5,\"n\":\"2\"}", &p));
    assert_int_equal(p.max_out, 0);
    assert_true(parts("https://api.openai.com/v1/chat/completions",
                      "{\"messages\":[],\"max_tokens\":1e9}", &p));
    assert_int_equal(p.max_out, 0);
}

static int64_t used_of(const stg_quota_cost *u, size_t n, const char *unit)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(u[i].unit, unit))
            return u[i].amount;
    return -1;
}

static void usage(void **state)
{
    (void)state;
    stg_quota_cost u[3];
    const char *oa = "{\"id\":\"x\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,"
                     "\"completion_tokens\":30,\"total_tokens\":42}}";
    size_t n = stg__ai_cost_usage(oa, strlen(oa), u, 3);
    assert_int_equal(n, 3);
    assert_int_equal(used_of(u, n, "tokens"), 42);
    assert_int_equal(used_of(u, n, "input-tokens"), 12);
    assert_int_equal(used_of(u, n, "output-tokens"), 30);
    const char *an = "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,"
                     "\"cache_creation_input_tokens\":5,\"output_tokens\":7}}";
    n = stg__ai_cost_usage(an, strlen(an), u, 3);
    assert_int_equal(used_of(u, n, "input-tokens"), 15);
    assert_int_equal(used_of(u, n, "tokens"), 22);
    /* OpenAI's stream with include_usage: the last chunk. */
    const char *sse = "data: {\"choices\":[{\"delta\":{\"content\":\"usage\"}}]}\n\n"
                      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                      "\"completion_tokens\":4,\"total_tokens\":7}}\n\ndata: [DONE]\n\n";
    n = stg__ai_cost_usage(sse, strlen(sse), u, 3);
    assert_int_equal(used_of(u, n, "tokens"), 7);
    /* Anthropic's stream: input in message_start, output cumulative in
     * message_delta. */
    const char *ant = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{"
                      "\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\r\n\r\n"
                      "event: message_delta\r\ndata: {\"type\":\"message_delta\",\"usage\":{"
                      "\"output_tokens\":15}}\r\n\r\n";
    n = stg__ai_cost_usage(ant, strlen(ant), u, 3);
    assert_int_equal(used_of(u, n, "input-tokens"), 25);
    assert_int_equal(used_of(u, n, "output-tokens"), 15);
    assert_int_equal(used_of(u, n, "tokens"), 40);
    /* Responses API: response.completed. */
    const char *rs = "event: response.completed\ndata: {\"type\":\"response.completed\","
                     "\"response\":{\"usage\":{\"input_tokens\":2,\"output_tokens\":3,"
                     "\"total_tokens\":5}}}\n\n";
    n = stg__ai_cost_usage(rs, strlen(rs), u, 3);
    assert_int_equal(used_of(u, n, "tokens"), 5);
    /* The tail of a JSON body that streamed on: its head is gone. */
    const char *tail = "ntent\":\"x\"}}],\"usage\" : {\"prompt_tokens\":5,\"completion_tokens\":6,"
                       "\"total_tokens\":11},\"system_fingerprint\":\"fp\"}";
    n = stg__ai_cost_usage(tail, strlen(tail), u, 3);
    assert_int_equal(used_of(u, n, "tokens"), 11);
    const char *cut = "xx\"usage\":{\"prompt_tokens\":5,";
    assert_int_equal(stg__ai_cost_usage(cut, strlen(cut), u, 3), 0);
    /* Nothing said. */
    assert_int_equal(stg__ai_cost_usage("{\"a\":1}", 7, u, 3), 0);
    assert_int_equal(stg__ai_cost_usage("data: {\"usage\":", 15, u, 3), 0);
    assert_int_equal(stg__ai_cost_usage("", 0, u, 3), 0);
}

/* An Anthropic stream longer than the tail kept (STG__XFER_TAIL): the
 * tail has message_delta's output only, message_start's input is read
 * from the start as it passes (in pieces of any size, a line at a time,
 * the caller keeping the line in progress), and the two are joined. */
static void usage_long_stream(void **state)
{
    (void)state;
    static char body[64 << 10];
    size_t len = (size_t)snprintf(body, sizeof body,
                                  "event: message_start\r\ndata: {\"type\":\"message_start\","
                                  "\"message\":{\"usage\":{\"input_tokens\":25,"
                                  "\"output_tokens\":1}}}\r\n\r\n");
    while (len < sizeof body - 512)
        len += (size_t)snprintf(body + len, sizeof body - len,
                                "event: content_block_delta\r\ndata: {\"type\":"
                                "\"content_block_delta\",\"delta\":{\"type\":\"text_delta\","
                                "\"text\":\" usage tok\"}}\r\n\r\n");
    len += (size_t)snprintf(body + len, sizeof body - len,
                            "event: message_delta\r\ndata: {\"type\":\"message_delta\","
                            "\"usage\":{\"output_tokens\":900}}\r\n\r\n");
    assert_true(len > 2 * STG__XFER_TAIL);
    const char *tail = body + len - STG__XFER_TAIL;
    stg_quota_cost u[3];
    /* The tail alone: the input is lost. */
    size_t n = stg__ai_cost_usage(tail, STG__XFER_TAIL, u, 3);
    assert_int_equal(used_of(u, n, "output-tokens"), 900);
    assert_int_equal(used_of(u, n, "input-tokens"), -1);
    assert_int_equal(used_of(u, n, "tokens"), -1);
    /* The start, read in pieces of 1, 7 and 1000 bytes. */
    static const size_t pieces[] = {1, 7, 1000};
    for (size_t k = 0; k < 3; k++) {
        char held[STG__XFER_LEAD + 1];
        size_t hl = 0, seen = 0;
        int64_t in = -1;
        while (seen < STG__XFER_LEAD && in < 0) {
            size_t take = pieces[k];
            memcpy(held + hl, body + seen, take);
            hl += take;
            seen += take;
            size_t done = stg__ai_cost_lead(held, hl, &in);
            assert_true(done <= hl);
            memmove(held, held + done, hl - done);
            hl -= done;
        }
        assert_int_equal(in, 25); /* the placeholder output (1) is not taken */
        n = stg__ai_cost_usage_streamed(tail, STG__XFER_TAIL, in, u, 3);
        assert_int_equal(used_of(u, n, "input-tokens"), 25);
        assert_int_equal(used_of(u, n, "output-tokens"), 900);
        assert_int_equal(used_of(u, n, "tokens"), 925);
    }
    /* No input told at the start: the tail's usage as before; a larger
     * input in the tail wins. */
    n = stg__ai_cost_usage_streamed(tail, STG__XFER_TAIL, -1, u, 3);
    assert_int_equal(used_of(u, n, "input-tokens"), -1);
    const char *both = "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":30,"
                       "\"output_tokens\":9}}\n\n";
    n = stg__ai_cost_usage_streamed(both, strlen(both), 25, u, 3);
    assert_int_equal(used_of(u, n, "input-tokens"), 30);
    assert_int_equal(used_of(u, n, "tokens"), 39);
    /* An OpenAI stream's start tells nothing ("usage": null until the
     * end); a line in progress is not read. */
    int64_t in = -1;
    const char *oai = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n"
                      "data: {\"usage\":{\"prompt_tokens\":3";
    size_t done = stg__ai_cost_lead(oai, strlen(oai), &in);
    assert_int_equal(in, -1);
    assert_int_equal(done, strlen(oai) - strlen("data: {\"usage\":{\"prompt_tokens\":3"));
    assert_int_equal(stg__ai_cost_lead(NULL, 0, &in), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chat_completions), cmocka_unit_test(responses_completions_embeddings),
        cmocka_unit_test(anthropic_messages), cmocka_unit_test(not_a_shape),
        cmocka_unit_test(usage), cmocka_unit_test(usage_long_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
