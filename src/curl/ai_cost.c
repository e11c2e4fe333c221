/*
 * The AI APIs' request and answer bodies, read for what they cost: the
 * parts of a request (include/stagger/cost.h: its prompt's characters, its
 * input token ids, the most output it asks for) before it is sent, and the
 * usage an answer reports after. Core reads no JSON; this is its reader,
 * with jansson.
 *
 * Shapes, told by the path's end (with any prefix: /v1, Azure's
 * /openai/deployments/NAME, a gateway's own) and a JSON object body that
 * has the shape's prompt field:
 *   .../chat/completions  OpenAI chat: messages[] (content a string or
 *                         parts), tools; max_completion_tokens, else
 *                         max_tokens; times n
 *   .../responses         OpenAI responses: input (a string or items),
 *                         instructions, tools; max_output_tokens
 *   .../completions       OpenAI legacy: prompt (a string, strings, token
 *                         ids, lists of ids), suffix; max_tokens (16 when
 *                         not said, as OpenAI's reference has it) times
 *                         the larger of n and best_of, per prompt
 *   .../embeddings        input (a string, strings, token ids); no output
 *   .../messages          Anthropic: system (a string or blocks),
 *                         messages[], tools; max_tokens
 * The prompt's characters are the code points of its text: every string
 * value under the prompt fields except the values of keys that are no
 * text (type, role, ids, image and file data or URLs, cache_control,
 * signatures), which would count a base64 image as prose. Per-message
 * framing and images are not counted (the learned rule absorbs what is
 * proportional, not a constant).
 *
 * Usage, from an answer: a JSON body's "usage" (OpenAI: prompt_tokens,
 * completion_tokens, total_tokens; responses and Anthropic: input_tokens,
 * output_tokens, Anthropic's cache_creation_input_tokens counted as
 * input), or an SSE stream's events (each "data:" line's JSON: "usage",
 * "response.usage" of OpenAI's response.completed, "message.usage" of
 * Anthropic's message_start; the largest of each number, since
 * Anthropic's message_delta counts output cumulatively), or, in the tail
 * of a body that streamed on (its head gone), the last "usage" object.
 * A stream longer than the tail kept loses its start, where Anthropic
 * tells the input (message_start; message_delta tells only the output):
 * the start is read as it passes, a line at a time (stg__ai_cost_lead),
 * for the input count only (the start's output_tokens is a placeholder),
 * and joined to the tail's (stg__ai_cost_usage_streamed).
 *
 * stg_ai_cost_estimate (curl.h) is the public face of both: the parts
 * priced in each token unit, for a caller of stg_curl_perform (fetch).
 *
 * Invariants: untrusted bytes, read only within (body, len) and only up to
 * STG__AI_BODY_MAX; nothing of a body is kept, copied out or logged (a
 * prompt may hold anything); numbers out of 0..10^12 are taken as not
 * said; the walk is bounded in depth. Thread-safe.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "curl/internal.h"
#include "util/utf8.h"

#define DEPTH_MAX 64
#define NUM_MAX INT64_C(1000000000000)
#define LEGACY_MAX_TOKENS 16 /* /v1/completions' max_tokens when not given */

typedef enum shape { NONE, CHAT, RESPONSES, COMPLETIONS, EMBEDDINGS, MESSAGES } shape;

static bool ends_with(const char *p, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && !memcmp(p + len - n, suffix, n);
}

static shape shape_of(const char *url)
{
    const char *u = url ? url : "", *s = strstr(u, "://");
    const char *p = s ? s + 3 : u;
    p += strcspn(p, "/?#");
    size_t len = strcspn(p, "?#");
    while (len > 1 && p[len - 1] == '/')
        len--;
    if (ends_with(p, len, "/chat/completions"))
        return CHAT;
    if (ends_with(p, len, "/completions"))
        return COMPLETIONS;
    if (ends_with(p, len, "/responses"))
        return RESPONSES;
    if (ends_with(p, len, "/embeddings"))
        return EMBEDDINGS;
    if (ends_with(p, len, "/messages"))
        return MESSAGES;
    return NONE;
}

static int64_t code_points(const json_t *s)
{
    return stg__utf8_chars(json_string_value(s), json_string_length(s));
}

/* Keys whose string values are not text the model reads as prose. */
static bool no_text(const char *key)
{
    static const char *const skip[] = {
        "type",       "role",      "id",          "tool_call_id", "tool_use_id", "call_id",
        "image_url",  "url",       "data",        "source",       "file_id",     "file_data",
        "input_audio", "cache_control", "signature", "detail",    "media_type",  "status",
        "encrypted_content"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (!strcmp(key, skip[i]))
            return true;
    return false;
}

/* Characters of every text string under v. */
static int64_t text_chars(const json_t *v, int depth)
{
    if (depth > DEPTH_MAX)
        return 0;
    if (json_is_string(v))
        return code_points(v);
    int64_t n = 0;
    if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) n += text_chars(x, depth + 1);
    } else if (json_is_object(v)) {
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!no_text(k))
                n += text_chars(x, depth + 1);
        }
    }
    return n;
}

/* A whole number in 0..NUM_MAX, else -1. */
static int64_t count(const json_t *v)
{
    if (!json_is_integer(v))
        return -1;
    json_int_t n = json_integer_value(v);
    return n >= 0 && n <= NUM_MAX ? (int64_t)n : -1;
}

/* A prompt or embeddings input: a string, token ids, a list of either.
 * Adds to p and returns how many prompts it holds (0: not one). */
static int64_t prompt_of(const json_t *v, stg_cost_parts *p)
{
    if (json_is_string(v)) {
        p->chars += code_points(v);
        return 1;
    }
    if (!json_is_array(v))
        return 0;
    size_t i, n = json_array_size(v);
    const json_t *x;
    if (n > 0 && json_is_integer(json_array_get(v, 0))) { /* one prompt of token ids */
        p->tokens += (int64_t)n;
        return 1;
    }
    int64_t prompts = 0;
    json_array_foreach(v, i, x)
    {
        if (json_is_string(x)) {
            p->chars += code_points(x);
            prompts++;
        } else if (json_is_array(x)) {
            p->tokens += (int64_t)json_array_size(x);
            prompts++;
        }
    }
    return prompts;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    if (a <= 0 || b <= 0)
        return 0;
    return a > NUM_MAX / b ? NUM_MAX : a * b;
}

static bool parts_of(shape sh, const json_t *root, stg_cost_parts *p)
{
    const json_t *msgs = json_object_get(root, "messages");
    const json_t *n_v = json_object_get(root, "n");
    int64_t n = count(n_v) > 0 ? count(n_v) : 1, out = -1;
    switch (sh) {
    case CHAT:
        if (!json_is_array(msgs))
            return false;
        p->chars += text_chars(msgs, 0) + text_chars(json_object_get(root, "tools"), 0) +
                    text_chars(json_object_get(root, "functions"), 0);
        out = count(json_object_get(root, "max_completion_tokens"));
        if (out < 0)
            out = count(json_object_get(root, "max_tokens"));
        p->max_out = sat_mul(out, n);
        return true;
    case RESPONSES: {
        const json_t *in = json_object_get(root, "input");
        if (!json_is_string(in) && !json_is_array(in))
            return false;
        p->chars += text_chars(in, 0) + text_chars(json_object_get(root, "instructions"), 0) +
                    text_chars(json_object_get(root, "tools"), 0);
        out = count(json_object_get(root, "max_output_tokens"));
        p->max_out = out > 0 ? out : 0;
        return true;
    }
    case COMPLETIONS: {
        int64_t prompts = prompt_of(json_object_get(root, "prompt"), p);
        if (prompts <= 0)
            return false;
        p->chars += text_chars(json_object_get(root, "suffix"), 0);
        out = count(json_object_get(root, "max_tokens"));
        if (out < 0)
            out = LEGACY_MAX_TOKENS;
        int64_t best = count(json_object_get(root, "best_of"));
        p->max_out = sat_mul(sat_mul(out, best > n ? best : n), prompts);
        return true;
    }
    case EMBEDDINGS:
        if (prompt_of(json_object_get(root, "input"), p) <= 0)
            return false;
        p->max_out = 0;
        return true;
    case MESSAGES:
        if (!json_is_array(msgs))
            return false;
        p->chars += text_chars(msgs, 0) + text_chars(json_object_get(root, "system"), 0) +
                    text_chars(json_object_get(root, "tools"), 0);
        out = count(json_object_get(root, "max_tokens"));
        p->max_out = out > 0 ? out : 0;
        return true;
    default:
        return false;
    }
}

bool stg__ai_cost_parts(const char *method, const char *url, const void *body, size_t len,
                        stg_cost_parts *p)
{
    memset(p, 0, sizeof *p);
    shape sh = shape_of(url);
    if (sh == NONE || !method || strcmp(method, "POST") != 0 || !body || len == 0 ||
        len > STG__AI_BODY_MAX)
        return false;
    json_error_t err;
    json_t *root = json_loadb(body, len, 0, &err);
    if (!root)
        return false;
    bool ok = json_is_object(root) && parts_of(sh, root, p);
    json_decref(root);
    if (!ok)
        memset(p, 0, sizeof *p);
    if (p->chars > NUM_MAX)
        p->chars = NUM_MAX;
    if (p->tokens > NUM_MAX)
        p->tokens = NUM_MAX;
    return ok;
}

/* ---- usage ----------------------------------------------------------------- */

typedef struct usage {
    int64_t in, out, total;
} usage;

static void take(int64_t *dst, int64_t v)
{
    if (v > *dst)
        *dst = v;
}

static void usage_of(const json_t *u, usage *acc)
{
    if (!json_is_object(u))
        return;
    int64_t in = count(json_object_get(u, "prompt_tokens"));
    if (in < 0)
        in = count(json_object_get(u, "input_tokens"));
    int64_t cache = count(json_object_get(u, "cache_creation_input_tokens"));
    if (in >= 0 && cache > 0)
        in += cache;
    int64_t out = count(json_object_get(u, "completion_tokens"));
    if (out < 0)
        out = count(json_object_get(u, "output_tokens"));
    take(&acc->in, in);
    take(&acc->out, out);
    take(&acc->total, count(json_object_get(u, "total_tokens")));
}

/* The usage an answer object (or one SSE event) holds, wherever the APIs
 * put it. */
static void usage_in(const json_t *root, usage *acc)
{
    if (!json_is_object(root))
        return;
    usage_of(json_object_get(root, "usage"), acc);
    const json_t *r = json_object_get(root, "response");
    if (json_is_object(r))
        usage_of(json_object_get(r, "usage"), acc);
    const json_t *m = json_object_get(root, "message");
    if (json_is_object(m))
        usage_of(json_object_get(m, "usage"), acc);
}

/* One line of an event stream (without its end of line): the usage its
 * "data:" JSON holds, if any. */
static void usage_line(const char *p, size_t n, usage *acc)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n <= 5 || memcmp(p, "data:", 5))
        return;
    const char *d = p + 5;
    size_t dn = n - 5;
    if (dn > 0 && *d == ' ') {
        d++;
        dn--;
    }
    /* Only an event that may say it ("[DONE]" and the text deltas do
     * not): parse it. */
    if (dn > 0 && *d == '{' && memmem(d, dn, "usage", 5)) {
        json_error_t err;
        json_t *ev = json_loadb(d, dn, 0, &err);
        if (ev)
            usage_in(ev, acc);
        json_decref(ev);
    }
}

static void usage_sse(const char *body, size_t len, usage *acc)
{
    const char *p = body, *end = body + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        usage_line(p, (size_t)(stop - p), acc);
        p = nl ? nl + 1 : end;
    }
}

size_t stg__ai_cost_lead(const char *buf, size_t len, int64_t *in)
{
    if (!buf || !in)
        return 0;
    usage acc = {-1, -1, -1};
    const char *p = buf, *end = buf + len;
    for (const char *nl; p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1)
        usage_line(p, (size_t)(nl - p), &acc);
    take(in, acc.in); /* only the input: the start's output is a placeholder */
    return (size_t)(p - buf);
}

/* The last "usage": {...} object in a piece of a JSON document (the tail
 * of a body streamed on: its head is gone, so the document does not
 * parse whole). Only the object is parsed, with jansson. */
static void usage_last(const char *body, size_t len, usage *acc)
{
    static const char key[] = "\"usage\"";
    const char *hit = NULL;
    for (const char *p = body; (size_t)(body + len - p) >= sizeof key - 1;) {
        const char *q = memmem(p, (size_t)(body + len - p), key, sizeof key - 1);
        if (!q)
            break;
        hit = q;
        p = q + 1;
    }
    if (!hit)
        return;
    const char *p = hit + sizeof key - 1, *end = body + len;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    if (p >= end || *p != ':')
        return;
    for (p++; p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n');)
        p++;
    if (p >= end || *p != '{')
        return;
    json_error_t err;
    json_t *u = json_loadb(p, (size_t)(end - p), JSON_DISABLE_EOF_CHECK, &err);
    usage_of(u, acc);
    json_decref(u);
}

/* What body says, into acc. */
static void usage_read(const char *body, size_t len, usage *acc)
{
    if (!body || len == 0 || len > STG__AI_BODY_MAX)
        return;
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    bool whole = false;
    if (i < len && body[i] == '{') {
        json_error_t err;
        json_t *root = json_loadb(body, len, 0, &err);
        if (root) {
            usage_in(root, acc);
            whole = true;
        }
        json_decref(root);
    } else {
        usage_sse(body, len, acc);
    }
    if (!whole && acc->in < 0 && acc->out < 0 && acc->total < 0)
        usage_last(body, len, acc); /* a tail: the end of a JSON document */
}

/* acc into used[] (max >= 3), the total made of its parts when not said. */
static size_t usage_put(usage acc, stg_quota_cost *used, size_t max)
{
    if (!used || max < 3)
        return 0;
    if (acc.total < 0 && acc.in >= 0 && acc.out >= 0)
        acc.total = acc.in + acc.out > NUM_MAX ? NUM_MAX : acc.in + acc.out;
    size_t n = 0;
    const struct {
        const char *unit;
        int64_t v;
    } got[3] = {{"tokens", acc.total}, {"input-tokens", acc.in}, {"output-tokens", acc.out}};
    for (int k = 0; k < 3; k++) {
        if (got[k].v < 0)
            continue;
        memset(&used[n], 0, sizeof used[n]);
        snprintf(used[n].unit, sizeof used[n].unit, "%s", got[k].unit);
        used[n++].amount = got[k].v;
    }
    return n;
}

size_t stg__ai_cost_usage(const char *body, size_t len, stg_quota_cost *used, size_t max)
{
    usage acc = {-1, -1, -1};
    usage_read(body, len, &acc);
    return usage_put(acc, used, max);
}

size_t stg__ai_cost_usage_streamed(const char *tail, size_t tail_len, int64_t lead_in,
                                   stg_quota_cost *used, size_t max)
{
    usage acc = {-1, -1, -1};
    usage_read(tail, tail_len, &acc);
    if (lead_in >= 0 && lead_in <= NUM_MAX)
        take(&acc.in, lead_in);
    return usage_put(acc, used, max);
}

size_t stg_ai_cost_estimate(const stg_cost_model *m, const char *method, const char *url,
                            const void *body, size_t len, stg_quota_cost *costs, size_t max)
{
    static const char *const units[] = {"tokens", "input-tokens", "output-tokens"};
    stg_cost_parts p;
    if (!costs || max < 3 || !stg__ai_cost_parts(method, url, body, len, &p))
        return 0;
    for (size_t i = 0; i < 3; i++) {
        memset(&costs[i], 0, sizeof costs[i]);
        snprintf(costs[i].unit, sizeof costs[i].unit, "%s", units[i]);
        costs[i].amount = stg_cost_estimate(m, units[i], &p);
    }
    return 3;
}
