/*
 * The personas of `stagger serve --dialect NAME`: one row each, with the
 * header fields the provider documents (sources below, and the vectors in
 * /work/shared/dialects-reference.md, section 4), its quotas and defaults.
 *
 *   ietf      draft-ietf-httpapi-ratelimit-headers-10: RateLimit-Policy and
 *             RateLimit lists of named policies with q, qu, w, pk; 429 with
 *             Retry-After and an RFC 9457 quota-exceeded problem.
 *   openai    platform.openai.com/docs/guides/rate-limits:
 *             x-ratelimit-{limit,remaining,reset}-{requests,tokens}, resets
 *             as Go durations; 429 with retry-after and retry-after-ms.
 *   anthropic docs.anthropic.com/en/api/rate-limits: anthropic-ratelimit-
 *             {requests,tokens,input-tokens,output-tokens}-{limit,remaining,
 *             reset}, RFC 3339 resets; 429 + retry-after; 529 overloaded.
 *   github    docs.github.com rate-limits-for-the-rest-api: x-ratelimit-
 *             {limit,remaining,used,reset,resource}, reset in epoch seconds,
 *             a resource per path (/search: search, else core); primary limit
 *             403 with remaining 0; secondary limit 403 without retry-after.
 *   discord   discord-api-docs topics/rate-limits: X-RateLimit-{Limit,
 *             Remaining,Reset,Reset-After,Bucket}, Reset-After and Reset in
 *             float seconds, a bucket per route; 429 + Retry-After +
 *             X-RateLimit-Scope, and X-RateLimit-Global for the global limit.
 *   shopify   shopify.dev/docs/api/usage/rate-limits: X-Shopify-Shop-Api-
 *             Call-Limit: used/size of a leaky bucket; 429 + decimal
 *             Retry-After ("2.0").
 *   x         docs.x.com/fundamentals/rate-limits: x-rate-limit-{limit,
 *             remaining,reset}, reset in epoch seconds; 429, no Retry-After.
 *   azure     Azure OpenAI / Azure REST: 429 with x-ms-retry-after-ms and
 *             retry-after-ms (milliseconds) and no Retry-After;
 *             x-ratelimit-remaining-requests on answers.
 *   kong      Kong rate-limiting plugin: X-RateLimit-{Limit,Remaining}-
 *             {Second,Minute,Hour} per window, RateLimit-{Limit,Remaining,
 *             Reset} for the tightest one; 429 + Retry-After.
 *   stripe    docs.stripe.com/rate-limits: 429 with Stripe-Should-Retry:
 *             true and no Retry-After; Stripe-Should-Retry on error answers.
 *
 * Invariants: a writer reads only its context (no clock, no state), so one
 * decision always gives the same fields; every told instant is the earliest
 * that any of the refusal's hints allows (when a refusal carries two hints,
 * the shorter one), and never earlier than the refusing quota's own wait.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "server/dialect.h"
#include "server/map.h"
#include "util/assert.h"

#define S_US INT64_C(1000000)
#define MIN_US (60 * S_US)
#define HOUR_US (3600 * S_US)

/* The largest wait among the refusing quotas, and its index. */
static int64_t max_wait(const srv_dctx *c, int *which)
{
    int64_t w = 0;
    *which = -1;
    for (size_t i = 0; i < c->p->nq; i++)
        if (c->v[i].refused && (*which < 0 || c->v[i].wait_us > w)) {
            w = c->v[i].wait_us;
            *which = (int)i;
        }
    return w;
}

/* Epoch seconds of the end of a window quota's current window. */
static int64_t reset_epoch(const srv_dctx *c, const srv_dq_view *v)
{
    return srv_ceil_div(c->wall_us + v->reset_us, S_US);
}

/* The first quota of scope that applies to the request (refused: that
 * refused it), or -1. */
static int quota_of_scope(const srv_dctx *c, srv_dq_scope scope, bool refused)
{
    for (size_t i = 0; i < c->p->nq; i++)
        if (c->q[i].scope == scope && (refused ? c->v[i].refused : c->v[i].applies))
            return (int)i;
    return -1;
}

/* PREFIX-limit, PREFIX-remaining and PREFIX-reset in epoch seconds: the
 * fields GitHub (x-ratelimit) and X (x-rate-limit) both send. */
static void epoch_fields(const srv_dctx *c, srv_dout *o, const char *prefix,
                         const srv_dq_view *v)
{
    char n[64];
    snprintf(n, sizeof n, "%s-limit", prefix);
    srv_dout_add(o, n, "%" PRId64, v->limit);
    snprintf(n, sizeof n, "%s-remaining", prefix);
    srv_dout_add(o, n, "%" PRId64, v->remaining);
    snprintf(n, sizeof n, "%s-reset", prefix);
    srv_dout_add(o, n, "%" PRId64, reset_epoch(c, v));
}

/* ------------------------------------------------------------------ ietf */

static void ietf_fields(const srv_dctx *c, srv_dout *o)
{
    char pk[200], pol[400] = "", lim[400] = "";
    srv_fmt_base64(c->client, pk, sizeof pk);
    size_t pl = 0, ll = 0;
    for (size_t i = 0; i < c->p->nq; i++) {
        const srv_dq_view *v = &c->v[i];
        if (!v->applies)
            continue;
        int a = snprintf(pol + pl, sizeof pol - pl, "%s\"%s\";q=%" PRId64 ";qu=\"requests\";w=%" PRId64
                         ";pk=:%s:", pl ? ", " : "", c->q[i].name, v->limit,
                         srv_ceil_div(v->window_us, S_US), pk);
        int b = snprintf(lim + ll, sizeof lim - ll, "%s\"%s\";r=%" PRId64 ";t=%" PRId64 ";pk=:%s:",
                         ll ? ", " : "", c->q[i].name, v->remaining,
                         srv_ceil_div(v->reset_us, S_US), pk);
        if (a < 0 || b < 0 || (size_t)a >= sizeof pol - pl || (size_t)b >= sizeof lim - ll)
            break;
        pl += (size_t)a;
        ll += (size_t)b;
    }
    if (pl) {
        srv_dout_add(o, "RateLimit-Policy", "%s", pol);
        srv_dout_add(o, "RateLimit", "%s", lim);
    }
}

static void ietf_refuse(const srv_dctx *c, srv_dout *o)
{
    ietf_fields(c, o);
    int which;
    int64_t ra = srv_ceil_div(max_wait(c, &which), S_US);
    o->status = 429;
    o->why = c->q[which].name;
    srv_dout_add(o, "Retry-After", "%" PRId64, ra);
    char names[200] = "";
    size_t n = 0;
    for (size_t i = 0; i < c->p->nq; i++)
        if (c->v[i].refused) {
            int a = snprintf(names + n, sizeof names - n, "%s\"%s\"", n ? "," : "", c->q[i].name);
            if (a < 0 || (size_t)a >= sizeof names - n)
                break;
            n += (size_t)a;
        }
    srv_dout_body(o, "application/problem+json",
                  "{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\","
                  "\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\","
                  "\"violated-policies\":[%s]}",
                  names);
    o->told_wall_us = c->wall_us + ra * S_US;
}

/* ---------------------------------------------------------------- openai */

static void openai_fields(const srv_dctx *c, srv_dout *o)
{
    for (size_t i = 0; i < 2; i++) {
        const srv_dq_view *v = &c->v[i];
        if (!v->applies)
            continue;
        char d[64];
        srv_fmt_go_duration(v->reset_us, d, sizeof d);
        srv_dout_add(o, i ? "x-ratelimit-limit-tokens" : "x-ratelimit-limit-requests",
                     "%" PRId64, v->limit);
        srv_dout_add(o, i ? "x-ratelimit-remaining-tokens" : "x-ratelimit-remaining-requests",
                     "%" PRId64, v->remaining);
        srv_dout_add(o, i ? "x-ratelimit-reset-tokens" : "x-ratelimit-reset-requests", "%s", d);
    }
}

static void openai_refuse(const srv_dctx *c, srv_dout *o)
{
    openai_fields(c, o);
    int which;
    int64_t w = max_wait(c, &which);
    int64_t ms = srv_ceil_div(w, 1000), s = srv_ceil_div(w, S_US);
    o->status = 429;
    o->why = c->q[which].name;
    srv_dout_add(o, "retry-after", "%" PRId64, s);
    srv_dout_add(o, "retry-after-ms", "%" PRId64, ms);
    const srv_dq_view *v = &c->v[which];
    char d[64];
    srv_fmt_go_duration(w, d, sizeof d);
    srv_dout_body(o, "application/json",
                  "{\"error\":{\"message\":\"Rate limit reached in organization org-stagger "
                  "on %s per min (%s): Limit %" PRId64 ", Used %" PRId64 ", Requested %" PRId64
                  ". Please try again in %s.\",\"type\":\"%s\",\"param\":null,"
                  "\"code\":\"rate_limit_exceeded\"}}",
                  c->q[which].name, c->q[which].unit == SRV_DQ_REQUESTS ? "RPM" : "TPM", v->limit,
                  v->limit - v->remaining, c->q[which].unit == SRV_DQ_REQUESTS ? 1 : c->cost, d,
                  c->q[which].name);
    o->told_wall_us = c->wall_us + ms * 1000; /* the shorter of the two */
}

/* ------------------------------------------------------------- anthropic */

static void anthropic_fields(const srv_dctx *c, srv_dout *o)
{
    for (size_t i = 0; i < c->p->nq; i++) {
        const srv_dq_view *v = &c->v[i];
        if (!v->applies || c->q[i].scope == SRV_DQ_SERVER)
            continue;
        char n[80], t[40];
        srv_fmt_rfc3339(srv_ceil_div(c->wall_us + v->reset_us, S_US), t, sizeof t);
        snprintf(n, sizeof n, "anthropic-ratelimit-%s-limit", c->q[i].name);
        srv_dout_add(o, n, "%" PRId64, v->limit);
        snprintf(n, sizeof n, "anthropic-ratelimit-%s-remaining", c->q[i].name);
        srv_dout_add(o, n, "%" PRId64, v->remaining);
        snprintf(n, sizeof n, "anthropic-ratelimit-%s-reset", c->q[i].name);
        srv_dout_add(o, n, "%s", t);
    }
}

static void anthropic_refuse(const srv_dctx *c, srv_dout *o)
{
    int which;
    int64_t w = max_wait(c, &which);
    int over = quota_of_scope(c, SRV_DQ_SERVER, true);
    if (over >= 0) {
        /* Overloaded: the whole API, not this client's quota; no hint. */
        o->status = 529;
        o->why = c->q[over].name;
        srv_dout_body(o, "application/json",
                      "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                      "\"message\":\"Overloaded\"}}");
        return;
    }
    anthropic_fields(c, o);
    int64_t s = srv_ceil_div(w, S_US);
    o->status = 429;
    o->why = c->q[which].name;
    srv_dout_add(o, "retry-after", "%" PRId64, s);
    srv_dout_body(o, "application/json",
                  "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
                  "\"This request would exceed your organization's rate limit of %" PRId64
                  " %s per minute. Please reduce the prompt length or the maximum tokens "
                  "requested, or try again later.\"}}",
                  c->v[which].limit, c->q[which].name);
    o->told_wall_us = c->wall_us + s * S_US;
}

/* ---------------------------------------------------------------- github */

/* s needs no JSON escaping (an address, or a tame X-Client-Id). */
static bool plain(const char *s)
{
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:_-", *s))
            return false;
    return true;
}

static void github_route(const char *url, char *out, size_t n)
{
    bool search = !strncmp(url, "/search", 7) && (url[7] == '/' || url[7] == '\0' || url[7] == '?');
    snprintf(out, n, "%s", search ? "search" : "core");
}

/* The resource's quota (core or search): the route's quota that applies
 * (each has only_route, so one at most). */
static int github_resource(const srv_dctx *c)
{
    return quota_of_scope(c, SRV_DQ_ROUTE, false);
}

static void github_fields(const srv_dctx *c, srv_dout *o)
{
    int r = github_resource(c);
    if (r < 0)
        return;
    const srv_dq_view *v = &c->v[r];
    epoch_fields(c, o, "x-ratelimit", v);
    srv_dout_add(o, "x-ratelimit-used", "%" PRId64, v->limit - v->remaining);
    srv_dout_add(o, "x-ratelimit-resource", "%s", c->route);
}

static void github_refuse(const srv_dctx *c, srv_dout *o)
{
    github_fields(c, o);
    int r = github_resource(c);
    o->status = 403;
    if (r >= 0 && c->v[r].refused) {
        /* Primary: remaining 0, wait for the reset (an epoch second). */
        o->why = c->q[r].name;
        srv_dout_body(o, "application/json; charset=utf-8",
                      "{\"message\":\"API rate limit exceeded for %s.\",\"documentation_url\":"
                      "\"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api\"}",
                      plain(c->client) ? c->client : "this client");
        o->told_wall_us = reset_epoch(c, &c->v[r]) * S_US;
        return;
    }
    /* Secondary: no retry-after, remaining > 0; GitHub's documentation asks
     * for at least one minute. */
    o->why = "secondary";
    srv_dout_body(o, "application/json; charset=utf-8",
                  "{\"message\":\"You have exceeded a secondary rate limit. Please wait a few "
                  "minutes before you try again.\",\"documentation_url\":\"https://docs.github.com"
                  "/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits\"}");
    o->told_wall_us = c->wall_us + MIN_US;
}

/* --------------------------------------------------------------- discord */

/* The bucket: the first path segment ("/channels/1/messages" -> channels). */
static void discord_route(const char *url, char *out, size_t n)
{
    const char *p = url[0] == '/' ? url + 1 : url;
    size_t len = strcspn(p, "/?");
    if (len >= n)
        len = n - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

static void discord_fields(const srv_dctx *c, srv_dout *o)
{
    int b = quota_of_scope(c, SRV_DQ_ROUTE, false);
    if (b < 0)
        return;
    const srv_dq_view *v = &c->v[b];
    char at[40], after[40];
    srv_fmt_dec_seconds(c->wall_us + v->reset_us, 3, at, sizeof at);
    srv_fmt_dec_seconds(v->reset_us, 3, after, sizeof after);
    srv_dout_add(o, "X-RateLimit-Limit", "%" PRId64, v->limit);
    srv_dout_add(o, "X-RateLimit-Remaining", "%" PRId64, v->remaining);
    srv_dout_add(o, "X-RateLimit-Reset", "%s", at);
    srv_dout_add(o, "X-RateLimit-Reset-After", "%s", after);
    uint64_t h = srv_hash64(SRV_HASH_INIT, c->route, strlen(c->route));
    srv_dout_add(o, "X-RateLimit-Bucket", "%016" PRIx64, h);
}

static void discord_refuse(const srv_dctx *c, srv_dout *o)
{
    /* The bucket, or the global limit (one quota of client scope). */
    int b = quota_of_scope(c, SRV_DQ_ROUTE, false), g = quota_of_scope(c, SRV_DQ_CLIENT, true);
    o->status = 429;
    const srv_dq_view *v = g >= 0 ? &c->v[g] : &c->v[b];
    o->why = c->q[g >= 0 ? g : b].name;
    int64_t ms = srv_ceil_div(v->wait_us, 1000);
    char f[40];
    srv_fmt_dec_seconds(ms * 1000, 3, f, sizeof f);
    srv_dout_add(o, "Retry-After", "%" PRId64, srv_ceil_div(ms * 1000, S_US));
    if (g >= 0) {
        /* Global: pause every route; the bucket fields do not apply. */
        srv_dout_add(o, "X-RateLimit-Global", "true");
        srv_dout_add(o, "X-RateLimit-Scope", "global");
    } else {
        discord_fields(c, o);
        srv_dout_add(o, "X-RateLimit-Scope", "user");
    }
    srv_dout_body(o, "application/json",
                  "{\"message\":\"You are being rate limited.\",\"retry_after\":%s,"
                  "\"global\":%s}",
                  f, g >= 0 ? "true" : "false");
    o->told_wall_us = c->wall_us + ms * 1000; /* Reset-After / retry_after */
}

/* --------------------------------------------------------------- shopify */

static void shopify_fields(const srv_dctx *c, srv_dout *o)
{
    const srv_dq_view *v = &c->v[0];
    if (v->applies)
        srv_dout_add(o, "X-Shopify-Shop-Api-Call-Limit", "%" PRId64 "/%" PRId64,
                     v->limit - v->remaining, v->limit);
}

static void shopify_refuse(const srv_dctx *c, srv_dout *o)
{
    shopify_fields(c, o);
    int which;
    int64_t w = srv_ceil_div(max_wait(c, &which), 100000) * 100000; /* tenths, up */
    char f[40];
    srv_fmt_dec_seconds(w, 1, f, sizeof f);
    o->status = 429;
    o->why = c->q[which].name;
    srv_dout_add(o, "Retry-After", "%s", f);
    srv_dout_body(o, "application/json",
                  "{\"errors\":\"Exceeded %g calls per second for api client. Reduce "
                  "request rates to resume uninterrupted service.\"}",
                  (double)c->v[which].limit * 1e6 / (double)c->v[which].window_us);
    o->told_wall_us = c->wall_us + w;
}

/* --------------------------------------------------------------------- x */

static void x_fields(const srv_dctx *c, srv_dout *o)
{
    if (c->v[0].applies)
        epoch_fields(c, o, "x-rate-limit", &c->v[0]);
}

static void x_refuse(const srv_dctx *c, srv_dout *o)
{
    x_fields(c, o);
    o->status = 429;
    o->why = c->q[0].name;
    srv_dout_body(o, "application/problem+json",
                  "{\"title\":\"Too Many Requests\",\"detail\":\"Too Many Requests\","
                  "\"type\":\"about:blank\",\"status\":429}");
    o->told_wall_us = reset_epoch(c, &c->v[0]) * S_US;
}

/* ----------------------------------------------------------------- azure */

static void azure_fields(const srv_dctx *c, srv_dout *o)
{
    if (c->v[0].applies)
        srv_dout_add(o, "x-ratelimit-remaining-requests", "%" PRId64, c->v[0].remaining);
    if (c->v[1].applies)
        srv_dout_add(o, "x-ratelimit-remaining-tokens", "%" PRId64, c->v[1].remaining);
}

static void azure_refuse(const srv_dctx *c, srv_dout *o)
{
    azure_fields(c, o);
    int which;
    int64_t ms = srv_ceil_div(max_wait(c, &which), 1000);
    o->status = 429;
    o->why = c->q[which].name;
    srv_dout_add(o, "x-ms-retry-after-ms", "%" PRId64, ms);
    srv_dout_add(o, "retry-after-ms", "%" PRId64, ms);
    srv_dout_body(o, "application/json",
                  "{\"error\":{\"code\":\"429\",\"message\":\"Requests to the ChatCompletions_Create "
                  "Operation have exceeded call rate limit of your current pricing tier. Please "
                  "retry after %" PRId64 " milliseconds.\"}}",
                  ms);
    o->told_wall_us = c->wall_us + ms * 1000;
}

/* ------------------------------------------------------------------ kong */

static void kong_fields(const srv_dctx *c, srv_dout *o)
{
    int tight = -1;
    for (size_t i = 0; i < c->p->nq; i++) {
        const srv_dq_view *v = &c->v[i];
        if (!v->applies)
            continue;
        char n[64];
        const char *w = c->q[i].name;
        char cap[16];
        snprintf(cap, sizeof cap, "%s", w);
        cap[0] = (char)(cap[0] - 'a' + 'A');
        snprintf(n, sizeof n, "X-RateLimit-Limit-%s", cap);
        srv_dout_add(o, n, "%" PRId64, v->limit);
        snprintf(n, sizeof n, "X-RateLimit-Remaining-%s", cap);
        srv_dout_add(o, n, "%" PRId64, v->remaining);
        if (tight < 0 || v->remaining < c->v[tight].remaining)
            tight = (int)i;
    }
    if (tight < 0)
        return;
    srv_dout_add(o, "RateLimit-Limit", "%" PRId64, c->v[tight].limit);
    srv_dout_add(o, "RateLimit-Remaining", "%" PRId64, c->v[tight].remaining);
    srv_dout_add(o, "RateLimit-Reset", "%" PRId64, srv_ceil_div(c->v[tight].reset_us, S_US));
}

static void kong_refuse(const srv_dctx *c, srv_dout *o)
{
    kong_fields(c, o);
    int which;
    int64_t s = srv_ceil_div(max_wait(c, &which), S_US);
    o->status = 429;
    o->why = c->q[which].name;
    srv_dout_add(o, "Retry-After", "%" PRId64, s);
    srv_dout_body(o, "application/json; charset=utf-8", "{\"message\":\"API rate limit exceeded\"}");
    o->told_wall_us = c->wall_us + s * S_US;
}

/* ---------------------------------------------------------------- stripe */

static void stripe_fields(const srv_dctx *c, srv_dout *o)
{
    (void)c;
    (void)o;
}

static void stripe_refuse(const srv_dctx *c, srv_dout *o)
{
    o->status = 429;
    o->why = c->q[0].name;
    srv_dout_add(o, "Stripe-Should-Retry", "true");
    srv_dout_body(o, "application/json",
                  "{\"error\":{\"code\":\"rate_limit\",\"message\":\"Too many requests hit the API "
                  "too quickly. We recommend an exponential backoff of your requests.\","
                  "\"type\":\"invalid_request_error\"}}");
    o->told_wall_us = 0; /* no hint: the client's own backoff */
}

/* ----------------------------------------------------------------- table */

#define W SRV_DQ_WINDOW
#define B SRV_DQ_BUCKET
#define RQ SRV_DQ_REQUESTS
#define TK SRV_DQ_TOKENS

static const srv_persona ietf = {
    "ietf", "IETF RateLimit draft-10: named policies with q, qu, w, pk",
    {{"short", W, RQ, SRV_DQ_CLIENT, 10, S_US, NULL},
     {"long", W, RQ, SRV_DQ_CLIENT, 100, MIN_US, NULL}},
    2, NULL, ietf_fields, ietf_refuse};

static const srv_persona openai = {
    "openai", "OpenAI: requests and tokens, Go-duration resets",
    {{"requests", B, RQ, SRV_DQ_CLIENT, 500, MIN_US, NULL},
     {"tokens", B, TK, SRV_DQ_CLIENT, 30000, MIN_US, NULL}},
    2, NULL, openai_fields, openai_refuse};

static const srv_persona anthropic = {
    "anthropic", "Anthropic: requests/tokens/input/output tokens, RFC 3339 resets, 529",
    {{"requests", B, RQ, SRV_DQ_CLIENT, 50, MIN_US, NULL},
     {"tokens", B, TK, SRV_DQ_CLIENT, 50000, MIN_US, NULL},
     {"input-tokens", B, SRV_DQ_INPUT, SRV_DQ_CLIENT, 40000, MIN_US, NULL},
     {"output-tokens", B, SRV_DQ_OUTPUT, SRV_DQ_CLIENT, 10000, MIN_US, NULL},
     {"overload", W, RQ, SRV_DQ_SERVER, 0, S_US, NULL}},
    5, NULL, anthropic_fields, anthropic_refuse};

static const srv_persona github = {
    "github", "GitHub: epoch resets, a resource per path, secondary limits",
    {{"core", W, RQ, SRV_DQ_ROUTE, 5000, HOUR_US, "core"},
     {"search", W, RQ, SRV_DQ_ROUTE, 30, MIN_US, "search"},
     {"secondary", W, RQ, SRV_DQ_CLIENT, 0, MIN_US, NULL}},
    3, github_route, github_fields, github_refuse};

static const srv_persona discord = {
    "discord", "Discord: a bucket per route, float Reset-After, global limit",
    {{"bucket", W, RQ, SRV_DQ_ROUTE, 5, 5 * S_US, NULL},
     {"global", W, RQ, SRV_DQ_CLIENT, 50, S_US, NULL}},
    2, discord_route, discord_fields, discord_refuse};

static const srv_persona shopify = {
    "shopify", "Shopify REST: leaky bucket used/size, decimal Retry-After",
    {{"calls", B, RQ, SRV_DQ_CLIENT, 40, 20 * S_US, NULL}}, 1, NULL, shopify_fields,
    shopify_refuse};

static const srv_persona x_twitter = {
    "x", "X (Twitter) v2: x-rate-limit-*, epoch reset, no Retry-After",
    {{"requests", W, RQ, SRV_DQ_CLIENT, 900, 15 * MIN_US, NULL}}, 1, NULL, x_fields, x_refuse};

static const srv_persona azure = {
    "azure", "Azure: x-ms-retry-after-ms and retry-after-ms",
    {{"requests", B, RQ, SRV_DQ_CLIENT, 60, MIN_US, NULL},
     {"tokens", B, TK, SRV_DQ_CLIENT, 0, MIN_US, NULL}},
    2, NULL, azure_fields, azure_refuse};

static const srv_persona kong = {
    "kong", "Kong: X-RateLimit-*-Second/-Minute/-Hour windows",
    {{"second", W, RQ, SRV_DQ_CLIENT, 0, S_US, NULL},
     {"minute", W, RQ, SRV_DQ_CLIENT, 60, MIN_US, NULL},
     {"hour", W, RQ, SRV_DQ_CLIENT, 1000, HOUR_US, NULL}},
    3, NULL, kong_fields, kong_refuse};

static const srv_persona stripe = {
    "stripe", "Stripe: Stripe-Should-Retry, no Retry-After",
    {{"requests", B, RQ, SRV_DQ_CLIENT, 100, S_US, NULL}}, 1, NULL, stripe_fields, stripe_refuse};

const srv_persona *const srv_personas[] = {&ietf, &openai, &anthropic, &github, &discord, &shopify,
                                           &x_twitter, &azure, &kong, &stripe, NULL};
