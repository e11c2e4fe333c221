/*
 * The LLM APIs of the openai and anthropic personas (see ai.h). Request
 * bodies are read with jansson; answers are written with srv_buf (every
 * string from the request goes through its JSON escaper).
 *
 * Shapes, from the vendors' API references:
 *  - OpenAI Chat Completions (platform.openai.com/docs/api-reference/chat):
 *    {"id": "chatcmpl-...", "object": "chat.completion", "created", "model",
 *    "choices": [{"index", "message": {"role": "assistant", "content"},
 *    "finish_reason": "stop"|"length"}], "usage": {"prompt_tokens",
 *    "completion_tokens", "total_tokens"}}; streamed as "data: {chunk}"
 *    lines ("object": "chat.completion.chunk", "delta"), a last chunk with
 *    "choices": [] and "usage" when stream_options.include_usage is true,
 *    then "data: [DONE]". Errors: {"error": {"message", "type", "param",
 *    "code"}} (platform.openai.com/docs/guides/error-codes: 429
 *    insufficient_quota, 503 "The engine is currently overloaded").
 *  - OpenAI Responses (platform.openai.com/docs/api-reference/responses):
 *    {"id": "resp_...", "object": "response", "status": "completed"|
 *    "incomplete", "output": [{"type": "message", "content": [{"type":
 *    "output_text", "text"}]}], "usage": {"input_tokens", "output_tokens",
 *    "total_tokens"}}; streamed as typed events (response.created,
 *    response.output_item.added, response.content_part.added,
 *    response.output_text.delta per token, response.output_text.done,
 *    response.content_part.done, response.output_item.done,
 *    response.completed with the usage), an error as an "error" event.
 *    Completions (legacy): "object": "text_completion", choices[].text,
 *    the same usage and streaming as Chat Completions. Embeddings:
 *    {"object": "list", "data": [{"object": "embedding", "index",
 *    "embedding"}], "usage": {"prompt_tokens", "total_tokens"}}.
 *  - Anthropic Messages (docs.claude.com/en/api/messages, .../streaming):
 *    {"id": "msg_...", "type": "message", "role": "assistant", "model",
 *    "content": [{"type": "text", "text"}], "stop_reason": "end_turn"|
 *    "max_tokens", "stop_sequence": null, "usage": {"input_tokens",
 *    "output_tokens"}}; streamed as message_start, content_block_start,
 *    ping, content_block_delta (text_delta) per token, content_block_stop,
 *    message_delta (stop_reason, usage.output_tokens), message_stop; an
 *    overload after the stream began is "event: error" with
 *    overloaded_error. Errors: {"type": "error", "error": {"type",
 *    "message"}} (docs.claude.com/en/api/errors).
 *
 * Invariants: as ai.h; an answer's text holds exactly out / n words per
 * choice (one word a token, streamed one event each).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/ai.h"
#include "server/buf.h"
#include "util/utf8.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

srv_ai_api srv_ai_route(const char *persona, const char *method, const char *url)
{
    if (!persona || strcmp(method, "POST"))
        return SRV_AI_NONE;
    if (!strcmp(persona, "openai") && ends_with(url, "/chat/completions"))
        return SRV_AI_OPENAI;
    if (!strcmp(persona, "openai") && ends_with(url, "/responses"))
        return SRV_AI_OPENAI_RESPONSES;
    if (!strcmp(persona, "openai") && ends_with(url, "/completions"))
        return SRV_AI_OPENAI_COMPLETIONS;
    if (!strcmp(persona, "openai") && ends_with(url, "/embeddings"))
        return SRV_AI_OPENAI_EMBEDDINGS;
    if (!strcmp(persona, "anthropic") && ends_with(url, "/v1/messages"))
        return SRV_AI_ANTHROPIC;
    return SRV_AI_NONE;
}

/* Unicode code points of a UTF-8 string (jansson's strings are UTF-8). */
static int64_t code_points(json_t *s)
{
    return stg__utf8_chars(json_string_value(s), json_string_length(s));
}

/* Characters of a content: a string, or an array of parts whose "text" is
 * a string (OpenAI text parts, Anthropic text blocks). */
static int64_t content_chars(json_t *c)
{
    if (json_is_string(c))
        return code_points(c);
    int64_t n = 0;
    size_t i;
    json_t *part;
    if (json_is_array(c))
        json_array_foreach(c, i, part) {
            json_t *t = json_is_object(part) ? json_object_get(part, "text") : part;
            if (json_is_string(t))
                n += code_points(t);
        }
    return n;
}

/* Characters of a Responses input: a string, or items that are messages
 * (content a string or parts with "text"). */
static int64_t input_chars(json_t *in)
{
    if (!json_is_array(in))
        return content_chars(in);
    int64_t n = 0;
    size_t i;
    json_t *item;
    json_array_foreach(in, i, item)
        n += json_is_object(item) ? content_chars(json_object_get(item, "content"))
                                  : content_chars(item);
    return n;
}

static bool bad(srv_ai_req *r, const char *msg)
{
    snprintf(r->error, sizeof r->error, "%s", msg);
    r->valid = false;
    return false;
}

/* A positive integer member, or absent (*v unchanged). False when present
 * and not one. */
static bool pos_int(json_t *o, const char *name, int64_t max, int64_t *v)
{
    json_t *j = json_object_get(o, name);
    if (!j || json_is_null(j))
        return true;
    if (!json_is_integer(j) || json_integer_value(j) < 1 || json_integer_value(j) > max)
        return false;
    *v = json_integer_value(j);
    return true;
}

/* The input of the APIs without messages: Responses, Completions,
 * Embeddings. Their characters, or -1 when it is missing. */
static int64_t other_input(srv_ai_api api, json_t *root)
{
    const char *name = api == SRV_AI_OPENAI_COMPLETIONS ? "prompt" : "input";
    json_t *in = json_object_get(root, name);
    if (!json_is_string(in) && !(json_is_array(in) && json_array_size(in) > 0))
        return -1;
    int64_t n = api == SRV_AI_OPENAI_RESPONSES ? input_chars(in) : content_chars(in);
    if (api == SRV_AI_OPENAI_RESPONSES)
        n += content_chars(json_object_get(root, "instructions"));
    return n;
}

/* A request that parsed: per completion at most per tokens (max_tokens or
 * its default), n completions, and the tokens the server writes (its
 * --ai-output-tokens, at most per each). */
static bool valid(srv_ai_req *r, const stg_srv_config *cfg, int64_t per)
{
    int64_t each = cfg->ai_output_tokens < per ? cfg->ai_output_tokens : per;
    if (each < 0)
        each = 0;
    r->max_out = per * r->n;
    r->out = each * r->n;
    r->valid = true;
    return true;
}

static bool parse_other(srv_ai_api api, json_t *root, const stg_srv_config *cfg, srv_ai_req *r)
{
    int64_t chars = other_input(api, root);
    if (chars < 0)
        return bad(r, api == SRV_AI_OPENAI_COMPLETIONS ? "you must provide a prompt"
                                                       : "you must provide an input");
    r->in = (chars + 3) / 4;
    r->n = 1;
    if (api == SRV_AI_OPENAI_EMBEDDINGS) {
        json_t *in = json_object_get(root, "input");
        r->n = json_is_array(in) ? (int64_t)json_array_size(in) : 1; /* one vector each */
        r->valid = true;
        return true;
    }
    json_t *st = json_object_get(root, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st))
        return bad(r, "stream must be a boolean");
    r->stream = json_is_true(st);
    json_t *so = json_object_get(root, "stream_options");
    r->include_usage = json_is_object(so) && json_is_true(json_object_get(so, "include_usage"));
    int64_t per = -1;
    const char *field = api == SRV_AI_OPENAI_RESPONSES ? "max_output_tokens" : "max_tokens";
    if (!pos_int(root, field, INT64_C(100000000), &per))
        return bad(r, api == SRV_AI_OPENAI_RESPONSES ? "max_output_tokens must be a positive integer"
                                                     : "max_tokens must be a positive integer");
    if (per < 1)
        per = api == SRV_AI_OPENAI_COMPLETIONS ? 16
              : cfg->ai_default_max_tokens > 0 ? cfg->ai_default_max_tokens
                                               : 1;
    if (api == SRV_AI_OPENAI_COMPLETIONS && !pos_int(root, "n", 128, &r->n))
        return bad(r, "n must be an integer from 1 to 128");
    return valid(r, cfg, per);
}

static bool parse_root(srv_ai_api api, json_t *root, const stg_srv_config *cfg, srv_ai_req *r)
{
    if (!json_is_object(root))
        return bad(r, "the request body must be a JSON object");
    json_t *model = json_object_get(root, "model");
    if (!json_is_string(model) || json_string_length(model) == 0)
        return bad(r, api == SRV_AI_ANTHROPIC ? "model: Field required"
                                              : "you must provide a model parameter");
    snprintf(r->model, sizeof r->model, "%s", json_string_value(model));
    if (api >= SRV_AI_OPENAI_RESPONSES)
        return parse_other(api, root, cfg, r);
    json_t *msgs = json_object_get(root, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return bad(r, api == SRV_AI_ANTHROPIC ? "messages: Field required"
                                              : "'messages' must be a non-empty array");
    int64_t chars = 0;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")))
            return bad(r, "each message must be an object with a role");
        chars += content_chars(json_object_get(m, "content"));
    }
    if (api == SRV_AI_ANTHROPIC)
        chars += content_chars(json_object_get(root, "system"));
    r->in = (chars + 3) / 4;
    json_t *st = json_object_get(root, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st))
        return bad(r, "stream: Input should be a valid boolean");
    r->stream = json_is_true(st);
    const int64_t cap = INT64_C(100000000);
    int64_t per = -1;
    if (api == SRV_AI_ANTHROPIC) {
        if (!json_object_get(root, "max_tokens"))
            return bad(r, "max_tokens: Field required");
        if (!pos_int(root, "max_tokens", cap, &per) || per < 1)
            return bad(r, "max_tokens: Input should be a positive integer");
        r->n = 1;
    } else {
        if (!pos_int(root, "max_tokens", cap, &per) ||
            !pos_int(root, "max_completion_tokens", cap, &per))
            return bad(r, "max_tokens must be a positive integer");
        if (per < 1)
            per = cfg->ai_default_max_tokens > 0 ? cfg->ai_default_max_tokens : 1;
        r->n = 1;
        if (!pos_int(root, "n", 128, &r->n))
            return bad(r, "n must be an integer from 1 to 128");
        json_t *so = json_object_get(root, "stream_options");
        r->include_usage = json_is_object(so) && json_is_true(json_object_get(so, "include_usage"));
    }
    return valid(r, cfg, per);
}

void srv_ai_parse(srv_ai_api api, const char *body, size_t len, const stg_srv_config *cfg,
                  srv_ai_req *r)
{
    memset(r, 0, sizeof *r);
    r->api = api;
    r->n = 1;
    json_error_t e;
    json_t *root = body && len ? json_loadb(body, len, 0, &e) : NULL;
    if (!root)
        bad(r, "the request body is not valid JSON");
    else
        parse_root(api, root, cfg, r);
    json_decref(root);
    if (!r->valid)
        r->in = r->max_out = r->out = 0;
}

int64_t srv_ai_total(const srv_ai_req *r, const stg_srv_config *cfg)
{
    if (r->api != SRV_AI_ANTHROPIC && cfg->ai_count_max)
        return r->in > r->max_out ? r->in : r->max_out;
    return r->in + r->max_out;
}

/* ---- answers ------------------------------------------------------------ */

/* The text of one choice: k words ("tok", one a token). */
static void put_text(srv_buf *b, int64_t k)
{
    srv_buf_puts(b, "\"");
    for (int64_t i = 0; i < k; i++)
        srv_buf_puts(b, i ? " tok" : "tok");
    srv_buf_puts(b, "\"");
}

static void openai_json(const srv_ai_req *r, uint64_t id, int64_t wall_s, srv_buf *b)
{
    int64_t each = r->out / r->n, per = r->max_out / r->n;
    srv_buf_printf(b, "{\"id\":\"chatcmpl-stg%016" PRIx64 "\",\"object\":\"chat.completion\","
                      "\"created\":%" PRId64 ",\"model\":",
                   id, wall_s);
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_puts(b, ",\"choices\":[");
    for (int64_t i = 0; i < r->n; i++) {
        srv_buf_printf(b, "%s{\"index\":%" PRId64 ",\"message\":{\"role\":\"assistant\","
                          "\"content\":",
                       i ? "," : "", i);
        put_text(b, each);
        srv_buf_printf(b, ",\"refusal\":null},\"logprobs\":null,\"finish_reason\":\"%s\"}",
                       each < per ? "stop" : "length");
    }
    srv_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64
                      ",\"total_tokens\":%" PRId64 "},\"system_fingerprint\":\"fp_stagger\"}",
                   r->in, r->out, r->in + r->out);
}

static void openai_chunk_head(const srv_ai_req *r, uint64_t id, int64_t wall_s, srv_buf *b)
{
    srv_buf_printf(b, "data: {\"id\":\"chatcmpl-stg%016" PRIx64 "\",\"object\":"
                      "\"chat.completion.chunk\",\"created\":%" PRId64 ",\"model\":",
                   id, wall_s);
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_puts(b, ",\"system_fingerprint\":\"fp_stagger\",\"choices\":[");
}

static void openai_sse(const srv_ai_req *r, uint64_t id, int64_t wall_s, srv_buf *b)
{
    int64_t each = r->out / r->n, per = r->max_out / r->n;
    for (int64_t i = 0; i < r->n; i++) {
        openai_chunk_head(r, id, wall_s, b);
        srv_buf_printf(b, "{\"index\":%" PRId64 ",\"delta\":{\"role\":\"assistant\",\"content\":"
                          "\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
                       i);
        for (int64_t k = 0; k < each; k++) {
            openai_chunk_head(r, id, wall_s, b);
            srv_buf_printf(b, "{\"index\":%" PRId64 ",\"delta\":{\"content\":\"%s\"},"
                              "\"logprobs\":null,\"finish_reason\":null}]}\n\n",
                           i, k ? " tok" : "tok");
        }
        openai_chunk_head(r, id, wall_s, b);
        srv_buf_printf(b, "{\"index\":%" PRId64 ",\"delta\":{},\"logprobs\":null,"
                          "\"finish_reason\":\"%s\"}]}\n\n",
                       i, each < per ? "stop" : "length");
    }
    if (r->include_usage) {
        openai_chunk_head(r, id, wall_s, b);
        srv_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64
                          ",\"total_tokens\":%" PRId64 "}}\n\n",
                       r->in, r->out, r->in + r->out);
    }
    srv_buf_puts(b, "data: [DONE]\n\n");
}

static void anthropic_json(const srv_ai_req *r, uint64_t id, srv_buf *b)
{
    srv_buf_printf(b, "{\"id\":\"msg_stg%016" PRIx64 "\",\"type\":\"message\",\"role\":"
                      "\"assistant\",\"model\":",
                   id);
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_puts(b, ",\"content\":[{\"type\":\"text\",\"text\":");
    put_text(b, r->out);
    srv_buf_printf(b, "}],\"stop_reason\":\"%s\",\"stop_sequence\":null,\"usage\":{"
                      "\"input_tokens\":%" PRId64 ",\"output_tokens\":%" PRId64 "}}",
                   r->out < r->max_out ? "end_turn" : "max_tokens", r->in, r->out);
}

static void event(srv_buf *b, const char *name)
{
    srv_buf_printf(b, "event: %s\ndata: ", name);
}

static void anthropic_sse(const srv_ai_req *r, uint64_t id, srv_buf *b)
{
    event(b, "message_start");
    srv_buf_printf(b, "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_stg%016" PRIx64
                      "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":",
                   id);
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_printf(b, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{"
                      "\"input_tokens\":%" PRId64 ",\"output_tokens\":1}}}\n\n",
                   r->in);
    event(b, "content_block_start");
    srv_buf_puts(b, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
                    "\"text\",\"text\":\"\"}}\n\n");
    event(b, "ping");
    srv_buf_puts(b, "{\"type\":\"ping\"}\n\n");
    for (int64_t k = 0; k < r->out; k++) {
        event(b, "content_block_delta");
        srv_buf_printf(b, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                          "\"text_delta\",\"text\":\"%s\"}}\n\n",
                       k ? " tok" : "tok");
    }
    event(b, "content_block_stop");
    srv_buf_puts(b, "{\"type\":\"content_block_stop\",\"index\":0}\n\n");
    event(b, "message_delta");
    srv_buf_printf(b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\","
                      "\"stop_sequence\":null},\"usage\":{\"output_tokens\":%" PRId64 "}}\n\n",
                   r->out < r->max_out ? "end_turn" : "max_tokens", r->out);
    event(b, "message_stop");
    srv_buf_puts(b, "{\"type\":\"message_stop\"}\n\n");
}

/* Legacy Completions: choices[].text; streamed like Chat Completions. */
static void completions_head(const srv_ai_req *r, uint64_t id, int64_t wall_s, srv_buf *b,
                             bool sse)
{
    srv_buf_printf(b, "%s{\"id\":\"cmpl-stg%016" PRIx64 "\",\"object\":\"text_completion\","
                      "\"created\":%" PRId64 ",\"model\":",
                   sse ? "data: " : "", id, wall_s);
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_puts(b, ",\"choices\":[");
}

static void completions(const srv_ai_req *r, uint64_t id, int64_t wall_s, srv_buf *b)
{
    int64_t each = r->out / r->n, per = r->max_out / r->n;
    const char *fin = each < per ? "stop" : "length";
    if (!r->stream) {
        completions_head(r, id, wall_s, b, false);
        for (int64_t i = 0; i < r->n; i++) {
            srv_buf_printf(b, "%s{\"text\":", i ? "," : "");
            put_text(b, each);
            srv_buf_printf(b, ",\"index\":%" PRId64 ",\"logprobs\":null,\"finish_reason\":"
                              "\"%s\"}",
                           i, fin);
        }
        srv_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64
                          ",\"total_tokens\":%" PRId64 "}}",
                       r->in, r->out, r->in + r->out);
        return;
    }
    for (int64_t i = 0; i < r->n; i++) {
        for (int64_t k = 0; k <= each; k++) {
            completions_head(r, id, wall_s, b, true);
            srv_buf_printf(b, "{\"text\":\"%s\",\"index\":%" PRId64 ",\"logprobs\":null,"
                              "\"finish_reason\":",
                           k == each ? "" : k ? " tok" : "tok", i);
            if (k == each)
                srv_buf_printf(b, "\"%s\"}]}\n\n", fin);
            else
                srv_buf_puts(b, "null}]}\n\n");
        }
    }
    if (r->include_usage) {
        completions_head(r, id, wall_s, b, true);
        srv_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%" PRId64 ",\"completion_tokens\":%" PRId64
                          ",\"total_tokens\":%" PRId64 "}}\n\n",
                       r->in, r->out, r->in + r->out);
    }
    srv_buf_puts(b, "data: [DONE]\n\n");
}

static void embeddings(const srv_ai_req *r, srv_buf *b)
{
    srv_buf_puts(b, "{\"object\":\"list\",\"data\":[");
    for (int64_t i = 0; i < r->n; i++)
        srv_buf_printf(b, "%s{\"object\":\"embedding\",\"index\":%" PRId64
                          ",\"embedding\":[0.0,0.0,0.0,0.0]}",
                       i ? "," : "", i);
    srv_buf_puts(b, "],\"model\":");
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%" PRId64 ",\"total_tokens\":%" PRId64 "}}",
                   r->in, r->in);
}

/* The Responses object; done: completed (or incomplete) with its output and
 * usage, else in progress with no output. */
static void response_obj(const srv_ai_req *r, uint64_t id, int64_t wall_s, bool done, srv_buf *b)
{
    bool cut = r->out >= r->max_out;
    srv_buf_printf(b, "{\"id\":\"resp_stg%016" PRIx64 "\",\"object\":\"response\","
                      "\"created_at\":%" PRId64 ",\"status\":\"%s\",\"model\":",
                   id, wall_s, !done ? "in_progress" : cut ? "incomplete" : "completed");
    srv_buf_json_str(b, r->model, strlen(r->model));
    srv_buf_printf(b, ",\"incomplete_details\":%s,\"output\":[",
                   done && cut ? "{\"reason\":\"max_output_tokens\"}" : "null");
    if (done) {
        srv_buf_printf(b, "{\"type\":\"message\",\"id\":\"msg_stg%016" PRIx64 "\",\"status\":"
                          "\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
                          "\"output_text\",\"annotations\":[],\"text\":",
                       id);
        put_text(b, r->out);
        srv_buf_puts(b, "}]}");
    }
    srv_buf_puts(b, "],\"usage\":");
    if (done)
        srv_buf_printf(b, "{\"input_tokens\":%" PRId64 ",\"output_tokens\":%" PRId64
                          ",\"total_tokens\":%" PRId64 "}}",
                       r->in, r->out, r->in + r->out);
    else
        srv_buf_puts(b, "null}");
}

static void responses(const srv_ai_req *r, uint64_t id, int64_t wall_s, srv_buf *b)
{
    if (!r->stream) {
        response_obj(r, id, wall_s, true, b);
        return;
    }
    int seq = 0;
#define EV(name) srv_buf_printf(b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%d", name, name, seq++)
    EV("response.created");
    srv_buf_puts(b, ",\"response\":");
    response_obj(r, id, wall_s, false, b);
    srv_buf_puts(b, "}\n\n");
    EV("response.output_item.added");
    srv_buf_printf(b, ",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_stg%016" PRIx64
                      "\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n",
                   id);
    EV("response.content_part.added");
    srv_buf_puts(b, ",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\","
                    "\"annotations\":[],\"text\":\"\"}}\n\n");
    for (int64_t k = 0; k < r->out; k++) {
        EV("response.output_text.delta");
        srv_buf_printf(b, ",\"output_index\":0,\"content_index\":0,\"delta\":\"%s\"}\n\n",
                       k ? " tok" : "tok");
    }
    EV("response.output_text.done");
    srv_buf_puts(b, ",\"output_index\":0,\"content_index\":0,\"text\":");
    put_text(b, r->out);
    srv_buf_puts(b, "}\n\n");
    EV("response.content_part.done");
    srv_buf_puts(b, ",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\","
                    "\"annotations\":[],\"text\":");
    put_text(b, r->out);
    srv_buf_puts(b, "}}\n\n");
    EV("response.output_item.done");
    srv_buf_printf(b, ",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_stg%016" PRIx64
                      "\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":"
                      "\"output_text\",\"annotations\":[],\"text\":",
                   id);
    put_text(b, r->out);
    srv_buf_puts(b, "}]}}\n\n");
    EV(r->out >= r->max_out ? "response.incomplete" : "response.completed");
    srv_buf_puts(b, ",\"response\":");
    response_obj(r, id, wall_s, true, b);
    srv_buf_puts(b, "}\n\n");
#undef EV
}

#define OPENAI_OVERLOADED "The engine is currently overloaded, please try again later"

void srv_ai_answer(const srv_ai_req *r, bool stream_error, uint64_t id_seed, int64_t wall_s,
                   srv_answer *out, const char **ctype)
{
    srv_buf b = {0};
    memset(out, 0, sizeof *out);
    out->status = 200;
    *ctype = r->stream ? "text/event-stream" : "application/json";
    if (r->stream && stream_error && r->api == SRV_AI_ANTHROPIC) {
        event(&b, "error");
        srv_buf_puts(&b, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                         "\"message\":\"Overloaded\"}}\n\n");
    } else if (r->stream && stream_error && r->api == SRV_AI_OPENAI_RESPONSES) {
        srv_buf_puts(&b, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\","
                         "\"message\":\"" OPENAI_OVERLOADED "\",\"param\":null,"
                         "\"sequence_number\":0}\n\n");
    } else if (r->stream && stream_error) {
        srv_buf_puts(&b, "data: {\"error\":{\"message\":\"" OPENAI_OVERLOADED "\",\"type\":"
                         "\"server_error\",\"param\":null,\"code\":null}}\n\n");
    } else if (r->api == SRV_AI_OPENAI_RESPONSES) {
        responses(r, id_seed, wall_s, &b);
    } else if (r->api == SRV_AI_OPENAI_COMPLETIONS) {
        completions(r, id_seed, wall_s, &b);
    } else if (r->api == SRV_AI_OPENAI_EMBEDDINGS) {
        embeddings(r, &b);
    } else if (r->api == SRV_AI_ANTHROPIC) {
        if (r->stream)
            anthropic_sse(r, id_seed, &b);
        else
            anthropic_json(r, id_seed, &b);
    } else if (r->stream) {
        openai_sse(r, id_seed, wall_s, &b);
    } else {
        openai_json(r, id_seed, wall_s, &b);
    }
    out->body = srv_buf_take(&b, &out->len);
    if (!out->body) {
        out->status = 500;
        *ctype = "application/json";
    }
}

void srv_ai_refusal(srv_ai_api api, srv_ai_error kind, const char *msg, srv_answer *out)
{
    srv_buf b = {0};
    memset(out, 0, sizeof *out);
    const char *type = "invalid_request_error";
    if (api == SRV_AI_ANTHROPIC) {
        out->status = 400;
        if (kind == SRV_AI_OVERLOADED) {
            out->status = 529;
            type = "overloaded_error";
            msg = "Overloaded";
        } else if (kind == SRV_AI_BILLING) {
            msg = "Your credit balance is too low to access the Anthropic API. Please go to "
                  "Plans & Billing to upgrade or purchase credits.";
        }
        srv_buf_printf(&b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":", type);
        srv_buf_json_str(&b, msg, strlen(msg));
        srv_buf_puts(&b, "}}");
    } else {
        out->status = 400;
        const char *code = "null";
        if (kind == SRV_AI_OVERLOADED) {
            out->status = 503;
            type = "server_error";
            msg = OPENAI_OVERLOADED;
        } else if (kind == SRV_AI_BILLING) {
            out->status = 429;
            type = "insufficient_quota";
            code = "\"insufficient_quota\"";
            msg = "You exceeded your current quota, please check your plan and billing details. "
                  "For more information on this error, read the docs: "
                  "https://platform.openai.com/docs/guides/error-codes/api-errors.";
        }
        srv_buf_puts(&b, "{\"error\":{\"message\":");
        srv_buf_json_str(&b, msg, strlen(msg));
        srv_buf_printf(&b, ",\"type\":\"%s\",\"param\":null,\"code\":%s}}", type, code);
    }
    out->body = srv_buf_take(&b, &out->len);
}
