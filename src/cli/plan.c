/*
 * `stagger plan`: see what a retry policy does before using it.
 *
 * Schedule mode samples many schedules through stg_decide() itself (not a
 * second implementation), each as if every attempt failed and took no time,
 * once for each class of failure (a transient 503, a throttling 429: they
 * back off from different bases), and prints per retry the min / median /
 * max wait and cumulative time. Decision mode runs stg_decide() once on a
 * response given on the command line and says what follows and why, with
 * every quota the headers announced (stg_hints_feed with a quota set: the
 * same reading the engine does) and the dialect row each came from.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/cli.h"

#define CMD "plan"
#define MAX_HEADERS 64

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double ms(int64_t us)
{
    return (double)us / 1000.0;
}

/* "429,500-599": the status set as ranges. */
static void format_statuses(const stg_status_set *set, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int c = 100; c <= 599 && len + 16 < size; c++) {
        if (!stg_status_set_has(set, c))
            continue;
        int end = c;
        while (end < 599 && stg_status_set_has(set, end + 1))
            end++;
        if (end > c)
            len += (size_t)snprintf(buf + len, size - len, "%s%d-%d", len ? "," : "", c, end);
        else
            len += (size_t)snprintf(buf + len, size - len, "%s%d", len ? "," : "", c);
        c = end;
    }
}

static json_t *policy_json(const stg_policy *p)
{
    char statuses[512];
    format_statuses(&p->retry_statuses, statuses, sizeof statuses);
    json_t *o = json_pack("{s:s,s:f,s:f,s:f,s:i,s:f,s:f,s:s,s:f,s:s}", "backoff",
                          stg_backoff_kind_name(p->backoff.kind), "base_ms", ms(p->backoff.base_us),
                          "cap_ms", ms(p->backoff.cap_us), "multiplier", p->backoff.multiplier,
                          "max_attempts", p->max_attempts, "deadline_ms",
                          p->deadline_us < 0 ? -1.0 : ms(p->deadline_us), "max_server_wait_ms",
                          p->max_server_wait_us < 0 ? -1.0 : ms(p->max_server_wait_us),
                          "retry_after_mode", stg_retry_after_mode_name(p->retry_after_mode),
                          "honor_spread", p->honor_spread, "retry_on", statuses);
    json_object_set_new(o, "throttle_base_ms", json_real(ms(p->throttle_base_us)));
    json_object_set_new(o, "retry_refusals_any_method", json_boolean(!p->no_retry_refusals));
    if (p->backoff.kind == STG_BACKOFF_PROPORTIONAL) {
        json_object_set_new(o, "jitter_lo", json_real(p->backoff.jitter_lo));
        json_object_set_new(o, "jitter_hi", json_real(p->backoff.jitter_hi));
    }
    return o;
}

static void print_policy(const stg_policy *p)
{
    char base[32], tbase[32], cap[32], dl[32];
    cli_format_duration(p->backoff.base_us, base, sizeof base);
    cli_format_duration(p->throttle_base_us, tbase, sizeof tbase);
    cli_format_duration(p->backoff.cap_us, cap, sizeof cap);
    if (p->deadline_us < 0)
        snprintf(dl, sizeof dl, "none");
    else
        cli_format_duration(p->deadline_us, dl, sizeof dl);
    printf("policy: %s backoff, base %s (transient) / %s (throttle), x%g, cap %s",
           stg_backoff_kind_name(p->backoff.kind), base, tbase, p->backoff.multiplier, cap);
    if (p->backoff.kind == STG_BACKOFF_PROPORTIONAL) {
        /* the jitter applies after the cap: say where a wait can reach
         * (issue #37: "cap 30.00 s" beside a row that reaches 36.00 s) */
        char top[32];
        cli_format_duration((int64_t)((double)p->backoff.cap_us * (1 + p->backoff.jitter_hi)), top,
                            sizeof top);
        printf(" before jitter (%+g%%..%+g%%: a wait reaches %s)", p->backoff.jitter_lo * 100,
               p->backoff.jitter_hi * 100, top);
    }
    printf("; %d attempts; deadline %s; Retry-After %s\n", p->max_attempts, dl,
           stg_retry_after_mode_name(p->retry_after_mode));
    printf("refusals (429, 529, a rate-limit 403): %s\n",
           p->no_retry_refusals ? "retried by method, as other statuses"
                                : "retried for any method (the server did no work)");
}

/* One class's schedules: samples runs of stg_decide() where every attempt
 * answers o and takes no time. Prints the table, or returns its JSON array
 * when json. */
static json_t *schedule_table(const stg_policy *p, const stg_outcome *o, long long samples,
                              uint64_t seed, bool json, bool *oom)
{
    int retries = p->max_attempts - 1;
    if (retries > 64)
        retries = 64; /* beyond this the table says nothing new */
    size_t rows = (size_t)(retries > 0 ? retries : 1);
    int64_t *waits = calloc((size_t)samples * rows, sizeof *waits);
    int64_t *cums = calloc((size_t)samples * rows, sizeof *cums);
    long long *reached = calloc(rows, sizeof *reached);
    if (!waits || !cums || !reached) {
        free(waits), free(cums), free(reached);
        *oom = true;
        return NULL;
    }
    stg_rng rng;
    stg_rng_seed(&rng, seed);
    for (long long s = 0; s < samples; s++) {
        stg_retry_state st = {.attempts = 1, .start_us = 0};
        int64_t now = 0;
        for (int r = 0; r < retries; r++) {
            stg_decision d;
            stg_decide(p, &st, o, now, &rng, &d);
            if (d.action != STG_ACTION_RETRY)
                break;
            now += d.wait_us;
            /* Store compactly: reached[r] counts the schedules that got here. */
            waits[(size_t)r * (size_t)samples + (size_t)reached[r]] = d.wait_us;
            cums[(size_t)r * (size_t)samples + (size_t)reached[r]] = now;
            reached[r]++;
            stg_retry_state_note(&st, &d);
            st.attempts++;
        }
    }

    json_t *arr = json ? json_array() : NULL;
    if (!json)
        printf("%-6s %12s %12s %12s   %12s %12s %12s %8s\n", "retry", "wait min", "median", "max",
               "total min", "median", "max", "reached");
    for (int r = 0; r < retries && reached[r] > 0; r++) {
        int64_t *w = waits + (size_t)r * (size_t)samples, *c = cums + (size_t)r * (size_t)samples;
        size_t n = (size_t)reached[r];
        qsort(w, n, sizeof *w, cmp_i64);
        qsort(c, n, sizeof *c, cmp_i64);
        double share = (double)reached[r] / (double)samples;
        if (json) {
            json_array_append_new(
                arr, json_pack("{s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "retry", r + 1, "reached",
                               share, "wait_min_ms", ms(w[0]), "wait_median_ms", ms(w[n / 2]),
                               "wait_max_ms", ms(w[n - 1]), "cum_min_ms", ms(c[0]), "cum_median_ms",
                               ms(c[n / 2]), "cum_max_ms", ms(c[n - 1])));
        } else {
            char b[6][32];
            int64_t v[6] = {w[0], w[n / 2], w[n - 1], c[0], c[n / 2], c[n - 1]};
            for (int k = 0; k < 6; k++)
                cli_format_duration(v[k], b[k], sizeof b[k]);
            printf("%-6d %12s %12s %12s   %12s %12s %12s %7.1f%%\n", r + 1, b[0], b[1], b[2], b[3],
                   b[4], b[5], share * 100);
        }
    }
    if (!json && retries == 0)
        printf("(no retries: the policy allows 1 attempt)\n");
    free(waits), free(cums), free(reached);
    return arr;
}

/* Schedule mode: both classes of failure (policy.h rule 6), transient
 * first (a 503 without a hint), then throttle (a 429 without a hint). */
static int run_schedule(const stg_policy *p, long long samples, uint64_t seed, bool json)
{
    stg_outcome transient = {.status = 503, .method = STG_METHOD_GET};
    stg_outcome throttle = {.status = 429, .method = STG_METHOD_GET};
    bool oom = false;
    if (!json) {
        print_policy(p);
        printf("%lld schedules, seed %llu; each attempt fails and takes no time\n\n", samples,
               (unsigned long long)seed);
        printf("transient faults (every attempt a retryable 503 without a hint):\n");
    }
    json_t *a = schedule_table(p, &transient, samples, seed, json, &oom);
    if (!json && !oom)
        printf("\nthrottles (every attempt a 429 without a hint):\n");
    json_t *b = oom ? NULL : schedule_table(p, &throttle, samples, seed, json, &oom);
    if (oom) {
        json_decref(a), json_decref(b);
        fprintf(stderr, "stagger plan: out of memory\n");
        return 1;
    }
    if (json) {
        json_t *root = json_pack("{s:o,s:I,s:I,s:o,s:o}", "policy", policy_json(p), "samples",
                                 (json_int_t)samples, "seed", (json_int_t)seed, "retries", a,
                                 "throttle_retries", b);
        char *txt = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(12));
        puts(txt);
        free(txt);
        json_decref(root);
    }
    return 0;
}

static bool parse_respond(const char *text, stg_outcome *o)
{
    static const struct {
        const char *name;
        stg_net_error e;
    } errs[] = {{"refused", STG_NET_CONNECT_REFUSED},
                {"reset", STG_NET_RESET},
                {"timeout", STG_NET_TIMEOUT},
                {"connect-timeout", STG_NET_CONNECT_TIMEOUT},
                {"dns", STG_NET_DNS},
                {"tls", STG_NET_TLS},
                {"other", STG_NET_OTHER}};
    long long n;
    if (cli_parse_int(text, 100, 599, &n)) {
        o->status = (int)n;
        o->error = STG_NET_NONE;
        return true;
    }
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (!strcmp(text, errs[i].name)) {
            o->status = 0;
            o->error = errs[i].e;
            return true;
        }
    return false;
}

static json_t *ms_or_null(int64_t us)
{
    return us == STG_UNKNOWN ? json_null() : json_real(ms(us));
}

static json_t *int_or_null(int64_t v)
{
    return v == STG_UNKNOWN ? json_null() : json_integer(v);
}

static const char *verdict_name(int v)
{
    return v == STG_VERDICT_RETRY ? "retry" : v == STG_VERDICT_STOP ? "stop" : NULL;
}

/* Every quota the response announced, as JSON objects. */
static json_t *quotas_json(const stg_quota_set *qs)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < qs->n; i++) {
        const stg_quota_obs *q = &qs->q[i];
        json_array_append_new(
            arr, json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:s,s:b}", "key", q->key, "unit", q->unit,
                           "limit", int_or_null(q->limit), "remaining", int_or_null(q->remaining),
                           "reset_ms", ms_or_null(q->reset_us), "window_ms",
                           ms_or_null(q->window_us), "dialect", stg_dialect_name(q->dialect),
                           "global", q->global));
    }
    return arr;
}

static json_t *dialects_json(unsigned bits)
{
    json_t *arr = json_array();
    for (int d = 1; d < STG_DIALECT_COUNT; d++)
        if (bits & (1u << d))
            json_array_append_new(arr, json_string(stg_dialect_name(d)));
    return arr;
}

/* "core (requests, github): 4999 of 5000 left, reset in 6 m, window 1 m" */
static void print_quotas(const stg_quota_set *qs, const stg_hints *h)
{
    char b[32];
    if (qs->n)
        printf("quotas the server announced:\n");
    for (size_t i = 0; i < qs->n; i++) {
        const stg_quota_obs *q = &qs->q[i];
        printf("  %s (%s, %s):", q->key[0] ? q->key : "host", q->unit,
               stg_dialect_name(q->dialect));
        if (q->remaining != STG_UNKNOWN)
            printf(" %lld", (long long)q->remaining);
        else
            printf(" ?");
        if (q->limit != STG_UNKNOWN)
            printf(" of %lld", (long long)q->limit);
        printf(" left");
        if (q->reset_us == STG_WAIT_MAX_US) {
            printf(", reset too far to say");
        } else if (q->reset_us != STG_UNKNOWN) {
            cli_format_duration(q->reset_us, b, sizeof b);
            printf(", reset in %s", b);
        }
        if (q->window_us != STG_UNKNOWN) {
            cli_format_duration(q->window_us, b, sizeof b);
            printf(", window %s", b);
        }
        printf("%s\n", q->global ? ", global" : "");
    }
    if (qs->truncated)
        printf("  (more than %d quotas: the rest still count)\n", STG_QUOTAS_MAX);
    if (h->verdict != STG_VERDICT_NONE)
        printf("server verdict: %s\n", verdict_name(h->verdict));
    if (h->flags & STG_HINTS_GLOBAL)
        printf("global: the wait holds every request to the host\n");
}

/* Decision mode. */
static int run_decision(const stg_policy *p, stg_outcome *o, const stg_hints *h,
                        const stg_quota_set *qs, int attempt, int64_t elapsed_us,
                        int64_t prev_wait_us, uint64_t seed, bool json)
{
    stg_rng rng;
    stg_rng_seed(&rng, seed);
    stg_retry_state st = {.attempts = attempt, .start_us = 0, .prev_wait_us = prev_wait_us};
    o->hints = h;
    stg_decision d;
    if (stg_decide(p, &st, o, elapsed_us, &rng, &d) != STG_OK)
        return cli_usage_error(CMD, "invalid policy");
    /* A refusal (policy.h rule 4) is retried whatever the method, unless
     * --no-retry-refusals: say which rule let a POST through, or not. */
    bool refusal = o->error == STG_NET_NONE && stg_status_refused(o->status, h);
    stg_policy rp;
    unsigned bit = STG_METHOD_BIT(o->method);
    bool by_method = stg_policy_resolve(p, &rp) == STG_OK &&
                     ((rp.retry_methods & bit) || (o->has_idempotency_key && (rp.key_methods & bit)));

    if (json) {
        const char *vn = verdict_name(h->verdict);
        json_t *hints = json_pack(
            "{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:b}", "retry_after_ms",
            ms_or_null(h->retry_after_us), "limit", int_or_null(h->limit), "remaining",
            int_or_null(h->remaining), "reset_ms", ms_or_null(h->reset_us), "window_ms",
            ms_or_null(h->window_us), "verdict", vn ? json_string(vn) : json_null(), "dialects",
            dialects_json(h->dialects), "global", (h->flags & STG_HINTS_GLOBAL) != 0,
            "oversized", h->oversized != 0);
        json_object_set_new(hints, "quotas", quotas_json(qs));
        json_object_set_new(hints, "quotas_truncated", json_boolean(qs->truncated));
        json_t *root = json_pack(
            "{s:s,s:s,s:s,s:f,s:f,s:f,s:o,s:i,s:o,s:o,s:s,s:s,s:o}", "decision",
            stg_action_name(d.action), "reason", stg_reason_name(d.reason), "message",
            stg_reason_message(d.reason), "wait_min_ms", ms(d.wait_min_us), "wait_max_ms",
            ms(d.wait_max_us), "wait_ms", ms(d.wait_us), "server_wait_ms",
            ms_or_null(d.server_wait_us), "attempt", attempt, "status",
            o->error == STG_NET_NONE ? json_integer(o->status) : json_null(), "error",
            o->error == STG_NET_NONE ? json_null() : json_string(stg_net_error_name(o->error)),
            "method", stg_method_name(o->method), "retry_after_mode",
            stg_retry_after_mode_name(p->retry_after_mode), "hints", hints);
        json_object_set_new(root, "refusal", json_boolean(refusal));
        json_object_set_new(root, "retry_refusals_any_method",
                            json_boolean(!p->no_retry_refusals));
        char *txt = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(12));
        puts(txt);
        free(txt);
        json_decref(root);
        return 0;
    }

    print_quotas(qs, h);
    char what[64];
    if (o->error == STG_NET_NONE)
        snprintf(what, sizeof what, "status %d", o->status);
    else
        snprintf(what, sizeof what, "%s", stg_net_error_name(o->error));
    switch (d.action) {
    case STG_ACTION_SUCCESS:
        printf("success: %s\n", what);
        break;
    case STG_ACTION_RETRY: {
        char lo[32], hi[32], w[32], sw[32];
        snprintf(lo, sizeof lo, "%.0f", ms(d.wait_min_us));
        snprintf(hi, sizeof hi, "%.0f", ms(d.wait_max_us));
        cli_format_duration(d.wait_us, w, sizeof w);
        printf("retry in %s..%s ms (%s", lo, hi, what);
        if (d.server_wait_us != STG_UNKNOWN) {
            cli_format_duration(d.server_wait_us, sw, sizeof sw);
            printf(", server asks %s, %s mode", sw, stg_retry_after_mode_name(p->retry_after_mode));
        } else {
            printf(", %s backoff, retry %d", stg_backoff_kind_name(p->backoff.kind), attempt);
        }
        printf(")\ndrawn for seed %llu: %s\n", (unsigned long long)seed, w);
        if (refusal && !by_method)
            printf("a refusal: the server did no work, so it is retried whatever the method "
                   "(--no-retry-refusals: by method)\n");
        break;
    }
    case STG_ACTION_GIVE_UP:
        if (d.reason == STG_REASON_STATUS_NOT_RETRYABLE)
            printf("give up: %s not retryable\n", what);
        else if (d.reason == STG_REASON_SERVER_WAIT_TOO_LONG) {
            char sw[32];
            if (d.server_wait_us >= STG_WAIT_MAX_US)
                snprintf(sw, sizeof sw, "longer than can be said");
            else
                cli_format_duration(d.server_wait_us, sw, sizeof sw);
            printf("give up: server asks to wait %s, more than allowed (%s); the response is "
                   "handed back\n",
                   sw, what);
        } else
            printf("give up: %s (%s, %s)\n", stg_reason_message(d.reason), what,
                   stg_method_name(o->method));
        if (d.reason == STG_REASON_METHOD_NOT_IDEMPOTENT && refusal)
            printf("a refusal, retried by method only (--no-retry-refusals)\n");
        break;
    }
    return 0;
}

typedef struct plan_opts {
    stg_policy policy;
    bool json, respond;
    long long samples, attempt, seed;
    int64_t elapsed, prev_wait;
    double now_s;
    stg_outcome o;
    const char *headers[MAX_HEADERS];
    int nheaders;
} plan_opts;

static int opt_samples(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!cli_parse_int(val, 1, 1000000, field))
        return cli_opt_bad(p, val, "expected 1..1000000");
    return 0;
}

static int opt_seed(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!cli_parse_int(val, 0, INT64_MAX, field))
        return cli_opt_bad(p, val, "expected a number >= 0");
    return 0;
}

static int opt_respond(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    plan_opts *po = field;
    if (!parse_respond(val, &po->o))
        return cli_opt_bad(p, val,
                           "expected a status 100..599 or refused, reset, timeout, "
                           "connect-timeout, dns, tls, other");
    po->respond = true;
    return 0;
}

static int opt_header(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    plan_opts *po = field;
    if (po->nheaders == MAX_HEADERS)
        return cli_usage_error(CMD, "too many -H (at most %d)", MAX_HEADERS);
    if (!strchr(val, ':'))
        return cli_usage_error(CMD, "bad header '%s': expected 'Name: value'", val);
    po->headers[po->nheaders++] = val;
    return 0;
}

static int opt_method(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    stg_outcome *out = field;
    out->method = stg_method_parse(val);
    if (out->method == STG_METHOD_UNKNOWN)
        return cli_usage_error(CMD, "unknown method '%s' (methods are upper case)", val);
    return 0;
}

static int opt_attempt(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!cli_parse_int(val, 1, 1000000, field))
        return cli_opt_bad(p, val, "expected 1 or more");
    return 0;
}

static int opt_duration(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!cli_parse_duration(val, field))
        return cli_opt_bad(p, val, "expected a duration");
    return 0;
}

static int opt_now(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!cli_parse_double(val, 0, 253402300799.0, field))
        return cli_opt_bad(p, val, "expected Unix seconds");
    return 0;
}

#define F(x) offsetof(plan_opts, x)
static const cli_opt plan_opts_table[] = {
    {.kind = CLI_HEADING, .help = "Schedule mode"},
    {CLI_FN, "samples", 0, "N", "schedules to sample", F(samples), opt_samples,
     NULL, 0, NULL, "10000"},
    {.kind = CLI_HEADING, .help = "Decision mode"},
    {CLI_FN, "respond", 0, "STATUS|ERROR",
     "decide on this answer: an HTTP status, or refused,\n"
     "reset, timeout, connect-timeout, dns, tls, other",
     0, opt_respond, NULL, 0, NULL},
    {CLI_FN, "header", 'H', "'Name: value'",
     "a response header (Retry-After, X-RateLimit-*, RateLimit,\nany dialect of stagger-plan(1)); repeatable", 0,
     opt_header, NULL, 0, NULL},
    {CLI_FN, "request", 'X', "METHOD", "the request method", F(o), opt_method, NULL,
     0, NULL, .def = "GET", .values = "GET POST PUT PATCH DELETE HEAD OPTIONS"},
    {CLI_FN, "method", 0, "METHOD", "same as --request", F(o), opt_method, NULL, 0, NULL,
     .values = "GET POST PUT PATCH DELETE HEAD OPTIONS"},
    {CLI_FN, "attempt", 0, "N", "the attempt that got the answer", F(attempt),
     opt_attempt, NULL, 0, NULL, "1"},
    {CLI_FN, "elapsed", 0, "D", "time since the first attempt started (deadline)", F(elapsed),
     opt_duration, NULL, 0, NULL},
    {CLI_FN, "prev-wait", 0, "D", "the previous wait (decorrelated jitter)", F(prev_wait),
     opt_duration, NULL, 0, NULL},
    {CLI_FLAG, "idempotency-key", 0, NULL, "the request carries an Idempotency-Key",
     F(o.has_idempotency_key), NULL, NULL, 0, NULL},
    {CLI_FN, "now", 0, "UNIX_SECONDS", "wall clock for HTTP-dates (default: now)", F(now_s),
     opt_now, NULL, 0, NULL},
    {.kind = CLI_HEADING, .help = "Both modes"},
    {CLI_FN, "seed", 0, "S", "seed of the jitter", F(seed), opt_seed, NULL, 0, NULL, "1"},
    {CLI_FLAG, "json", 0, NULL, "print JSON (below) instead of text", F(json), NULL, NULL, 0, NULL},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    {.kind = CLI_HEADING, .help = "Retry policy"},
    {.kind = CLI_GROUP, .group = cli_policy_all_opts, .off = F(policy)},
    {.kind = CLI_TEXT, .help = cli_durations_help},
    CLI_OPT_END,
};
#undef F

static const int plan_exits[] = {CLI_EXIT_OK, CLI_EXIT_FAILED, CLI_EXIT_USAGE, -1};

const cli_command cli_plan_command = {
    .name = CMD,
    .usage = "usage: stagger plan [policy options] [--samples N] [--seed S] [--json]\n"
             "       stagger plan [policy options] --respond STATUS|ERROR [-H 'Name: value']...\n"
             "                    [-X METHOD] [--attempt N] [--elapsed D] [--prev-wait D]\n"
             "                    [--idempotency-key] [--now UNIX_SECONDS] [--seed S] [--json]\n"
             "\n"
             "Without --respond: sample --samples schedules of the policy, each as if\n"
             "every attempt failed and took no time, for a transient fault (a 503) and\n"
             "for a throttle (a 429), and print per retry the min / median / max wait,\n"
             "the cumulative time, and the share of schedules that get that far (the\n"
             "deadline can cut them short).\n"
             "\n"
             "With --respond: the decision for that response to attempt --attempt and\n"
             "why.\n",
    .opts = plan_opts_table,
    .epilogue = "JSON (--json), schedule mode: one object with \"policy\" (the resolved\n"
                "policy), \"samples\", \"seed\", \"retries\" (transient faults) and\n"
                "\"throttle_retries\" (throttles), arrays of objects with retry, reached\n"
                "(share), wait_min_ms, wait_median_ms, wait_max_ms, cum_min_ms,\n"
                "cum_median_ms, cum_max_ms.\n"
                "JSON, decision mode: decision (success|retry|give_up), reason (e.g.\n"
                "retry_status, status_not_retryable, server_wait_too_long), message,\n"
                "wait_min_ms, wait_max_ms (range the wait is drawn from), wait_ms (the wait\n"
                "drawn for --seed), server_wait_ms (parsed hint or null), attempt, status,\n"
                "error, method, retry_after_mode, and hints {retry_after_ms, limit,\n"
                "remaining, reset_ms, window_ms (null when absent), verdict (retry|stop|\n"
                "null), dialects, global, oversized, quotas (each key, unit, limit,\n"
                "remaining, reset_ms, window_ms, dialect, global), quotas_truncated}.\n",
    .exits = plan_exits,
};

int cli_plan_main(int argc, char **argv)
{
    plan_opts po;
    memset(&po, 0, sizeof po);
    po.now_s = (double)time(NULL);
    /* --samples, --request, --attempt and --seed: the table's defaults,
     * applied by cli_parse. */
    cli_parser parser = {.cmd = &cli_plan_command, .ctx = &po};
    int prc = cli_parse(&parser, argc, argv);
    if (prc >= 0)
        return prc;
    stg_policy policy = po.policy;
    stg_outcome o = po.o;
    const char **headers = po.headers;
    int nheaders = po.nheaders;
    bool json = po.json, respond = po.respond;
    long long samples = po.samples, attempt = po.attempt, seed = po.seed;
    int64_t elapsed = po.elapsed, prev_wait = po.prev_wait;
    double now_s = po.now_s;
    if (cli_defaults_probe()) { /* help --defaults: what plan would run with */
        const cli_command *c = &cli_plan_command;
        cli_defaults_row(c, "samples", CLI_VAL_INT, samples);
        cli_defaults_row(c, "request", CLI_VAL_STRING, stg_method_name(o.method));
        cli_defaults_row(c, "attempt", CLI_VAL_INT, attempt);
        cli_defaults_row(c, "seed", CLI_VAL_INT, seed);
        cli_policy_defaults_rows(c, &policy);
        return CLI_EXIT_OK;
    }

    stg_policy p;
    if (stg_policy_resolve(&policy, &p) != STG_OK)
        return cli_usage_error(CMD, "inconsistent policy (is --cap below --base?)");
    if (!respond) {
        if (nheaders || o.has_idempotency_key)
            return cli_usage_error(CMD, "-H and --idempotency-key need --respond");
        return run_schedule(&p, samples, (uint64_t)seed, json);
    }

    stg_hints h;
    stg_quota_set qs;
    stg_hints_init(&h);
    stg_quota_set_init(&qs);
    int64_t wall_us = (int64_t)(now_s * 1e6);
    for (int i = 0; i < nheaders; i++) {
        unsigned before = h.oversized;
        int rc = stg_hints_feed_line(&h, &qs, headers[i], strlen(headers[i]), wall_us);
        if (rc == STG_ERANGE && h.oversized != before && !json)
            fprintf(stderr, "stagger plan: note: header '%s' too large: read as the longest "
                            "wait\n", headers[i]);
        else if (rc != STG_OK && !json)
            fprintf(stderr, "stagger plan: note: header '%s' ignored: %s\n", headers[i],
                    stg_strerror(rc));
    }
    return run_decision(&p, &o, &h, &qs, (int)attempt, elapsed, prev_wait, (uint64_t)seed,
                        json);
}
