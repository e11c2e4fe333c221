/*
 * `stagger fetch [options] URL`: one HTTP request with polite retries, in
 * the manner of curl. The request runs through stg_curl_perform(); this
 * file only parses options, prepares the easy handle, prints and maps the
 * result to an exit status.
 *
 * Exit status: the table of exit.h, documented in stagger(1) and
 * stagger-fetch(1): 0 a final 1xx-3xx; 1 an HTTP error not retried, or a
 * local failure; 2 bad usage (one line, nothing sent), including a URL
 * libcurl's own parser refuses; 3 a retryable status still the answer when
 * retries ran out; 6 the shared limiter became unavailable; 7 no HTTP
 * answer; 8 the deadline; 9 the body was larger than --max-body; 130
 * SIGINT, 143 SIGTERM.
 *
 * Invariants: nothing this command prints to stderr (-v, errors) carries a
 * URL's userinfo or query values or a secret header's value: URLs come
 * redacted from the library's events, header lines go through
 * stg_redact_header_line(). The final body (and with -i the response
 * headers) goes to stdout or -o FILE unredacted: it is the user's data,
 * so -o and --log-json files are created 0600. Headers read from a file
 * (-H @FILE) or the environment (--secret-header-env) are secret: their
 * names join --secret-header. Every output (-o, --log-json, --metrics) is
 * opened or written once before the first request, so an unwritable path
 * fails before anything is sent. The SIGINT/SIGTERM handler only stores the
 * signal and calls stg_cancel_fire() (async-signal-safe); the two static
 * variables of this file exist because a signal handler can reach nothing
 * else.
 */
#ifdef STG_HAVE_CURL

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <stagger/curl.h>

#include "cli/cli.h"
#include "cli/limiter.h"
#include "cli/metrics_live.h"
#include "util/assert.h"

#define CMD "fetch"

enum {
    EXIT_OK = CLI_EXIT_OK,
    EXIT_LOCAL = CLI_EXIT_FAILED,
    EXIT_HTTP_AFTER_RETRIES = CLI_EXIT_LEFT,
    EXIT_HTTP_NOT_RETRIED = CLI_EXIT_FAILED,
    EXIT_LIMITER = CLI_EXIT_LIMITER,
    EXIT_TRANSPORT = CLI_EXIT_TRANSPORT,
    EXIT_DEADLINE = CLI_EXIT_DEADLINE,
    EXIT_TRUNCATED = CLI_EXIT_TRUNCATED,
};

#define MAX_SECRET_HEADERS 32

typedef struct fetch_opts {
    const char *url;
    const char *method;
    struct curl_slist *headers;
    const char **header_lines; /* the -H values, for -v */
    size_t n_headers;
    char *data;
    size_t data_len;
    bool has_data;
    const char *out_path;
    bool include, silent, verbose, location;
    stg_policy policy;
    const char *idem_key;
    char uuid[37];
    double rate;
    int64_t burst;
    bool has_rate, has_burst;
    const char *log_path, *metrics_path;
    cli_metrics_opts live; /* --metrics-interval, --metrics-listen (metrics_live.c) */
    const char *secret[MAX_SECRET_HEADERS + 1];
    int n_secret;
    unsigned long long seed;
    cli_limiter limiter; /* --limiter: a limit shared through Redis */
    size_t max_body;     /* --max-body; 0: the library's 64 MiB */
    char **owned;        /* -H @FILE and --secret-header-env lines (ours) */
    size_t n_owned;
} fetch_opts;

/* curl's --max-time and --connect-timeout take seconds; a bare number keeps
 * that meaning here (elsewhere in stagger a bare number is milliseconds), so
 * a habit carried over from curl cannot turn 10 s into 10 ms. Suffixed
 * durations (250ms, 2s) work as everywhere else. */
static bool parse_curl_seconds(const char *val, int64_t *us)
{
    double s;
    if (cli_parse_double(val, 0.0, 1e9, &s)) {
        *us = (int64_t)(s * 1e6 + 0.5);
        return true;
    }
    return cli_parse_duration(val, us);
}

static stg_cancel *sigint_token;          /* for the signal handler only */
static volatile sig_atomic_t stop_signal; /* SIGINT or SIGTERM, once caught */

static void on_stop_signal(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
    stg_cancel_fire(sigint_token);
}

/* ---- option helpers ------------------------------------------------------ */

static int add_data(fetch_opts *o, const char *arg, bool binary)
{
    char *chunk;
    size_t len;
    bool owned = false;
    if (arg[0] == '@') {
        chunk = cli_read_file(arg + 1, &len);
        if (!chunk)
            return cli_usage_error(CMD, "cannot read %s: %s", arg + 1, strerror(errno));
        owned = true;
        if (!binary) { /* curl -d @file drops CR and LF */
            size_t w = 0;
            for (size_t i = 0; i < len; i++)
                if (chunk[i] != '\r' && chunk[i] != '\n')
                    chunk[w++] = chunk[i];
            len = w;
        }
    } else {
        chunk = (char *)arg;
        len = strlen(arg);
    }
    size_t need = o->data_len + (o->has_data ? 1 : 0) + len + 1;
    char *d = realloc(o->data, need);
    if (!d) {
        if (owned)
            free(chunk);
        return cli_usage_error(CMD, "out of memory");
    }
    o->data = d;
    if (o->has_data)
        o->data[o->data_len++] = '&';
    memcpy(o->data + o->data_len, chunk, len);
    o->data_len += len;
    o->data[o->data_len] = '\0';
    o->has_data = true;
    if (owned)
        free(chunk);
    return 0;
}

static int add_header(fetch_opts *o, const char *h)
{
    if (!cli_header_ok(h))
        return cli_usage_error(CMD, "bad header: expected 'Name: value'");
    struct curl_slist *s = curl_slist_append(o->headers, h);
    const char **lines = realloc(o->header_lines, (o->n_headers + 1) * sizeof *lines);
    if (!s || !lines) {
        if (s)
            o->headers = s;
        if (lines)
            o->header_lines = lines;
        return cli_usage_error(CMD, "out of memory");
    }
    o->headers = s;
    o->header_lines = lines;
    o->header_lines[o->n_headers++] = h;
    return 0;
}

/* Keep a string we allocated until the end (fetch_opts.owned). Returns it,
 * or NULL (and frees it) when out of memory. */
static char *keep(fetch_opts *o, char *str)
{
    char **list = str ? realloc(o->owned, (o->n_owned + 1) * sizeof *list) : NULL;
    if (!list) {
        free(str);
        return NULL;
    }
    o->owned = list;
    o->owned[o->n_owned++] = str;
    return str;
}

/* The header line's name joins the secret names: -v redacts its value. */
static int add_secret_name(fetch_opts *o, const char *line)
{
    if (o->n_secret >= MAX_SECRET_HEADERS)
        return cli_usage_error(CMD, "at most %d secret headers", MAX_SECRET_HEADERS);
    char *name = keep(o, strndup(line, strcspn(line, ":;")));
    if (!name)
        return cli_usage_error(CMD, "out of memory");
    o->secret[o->n_secret++] = name;
    return 0;
}

static int add_header_cb(void *ctx, const char *line, bool secret)
{
    int rc = add_header(ctx, line);
    return rc || !secret ? rc : add_secret_name(ctx, line);
}

static bool make_uuid(char out[37])
{
    unsigned char b[16];
    size_t got = 0;
    for (int tries = 0; got < sizeof b && tries < 100; tries++) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno != EINTR)
            return false;
    }
    if (got < sizeof b)
        return false;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return true;
}

static bool parse_rate(const char *s, double *rate)
{
    char buf[64];
    if (!s || strlen(s) >= sizeof buf)
        return false;
    snprintf(buf, sizeof buf, "%s", s);
    double per = 1.0;
    char *slash = strchr(buf, '/');
    if (slash) {
        *slash = '\0';
        const char *unit = slash + 1;
        if (!strcmp(unit, "s"))
            per = 1.0;
        else if (!strcmp(unit, "m"))
            per = 60.0;
        else if (!strcmp(unit, "h"))
            per = 3600.0;
        else
            return false;
    }
    double v;
    if (!cli_parse_double(buf, 1e-6, 1e9, &v))
        return false;
    *rate = v / per;
    return *rate > 0 && *rate <= STG_BUCKET_RATE_MAX;
}

static bool method_token_ok(const char *m)
{
    if (!m || !*m || strlen(m) > 32)
        return false;
    for (const char *p = m; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *p)))
            return false;
    return true;
}

static bool url_scheme_ok(const char *url)
{
    const char *sep = strstr(url, "://");
    if (!sep)
        return true; /* curl assumes http:// */
    size_t n = (size_t)(sep - url);
    return (n == 4 && !strncasecmp(url, "http", 4)) || (n == 5 && !strncasecmp(url, "https", 5));
}

/* ---- the option table ------------------------------------------------------ */

static int opt_header(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    char *buf = NULL;
    int rc = cli_header_arg(CMD, val, add_header_cb, field, &buf);
    if (buf && !keep(field, buf) && !rc)
        rc = cli_usage_error(CMD, "out of memory");
    return rc;
}

static int opt_header_env(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    char *line = NULL;
    int rc = cli_header_env(CMD, val, &line);
    if (rc)
        return rc;
    if (!keep(field, line))
        return cli_usage_error(CMD, "out of memory");
    return add_header_cb(field, line, true);
}

/* SIZE: bytes, or with k, M, G (KiB, MiB, GiB). */
static int opt_max_body(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    char num[32];
    size_t n = strlen(val);
    unsigned long long scale = 1;
    if (n && strchr("kKmMgG", val[n - 1])) {
        char u = val[n - 1];
        scale = u == 'k' || u == 'K' ? 1ull << 10 : u == 'm' || u == 'M' ? 1ull << 20 : 1ull << 30;
        n--;
    }
    long long v;
    if (n == 0 || n >= sizeof num)
        return cli_opt_bad(p, val, "expected a size such as 1048576, 512k or 10M");
    memcpy(num, val, n);
    num[n] = '\0';
    if (!cli_parse_int(num, 1, (1ll << 40) / (long long)scale, &v))
        return cli_opt_bad(p, val, "expected a size from 1 byte to 1 TiB, such as 512k or 10M");
    *(size_t *)field = (size_t)((unsigned long long)v * scale);
    return 0;
}

static int opt_data(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p;
    return add_data(field, val, !strcmp(o->name, "data-binary"));
}

static int opt_timeout(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    int64_t d;
    if (!parse_curl_seconds(val, &d) || d <= 0)
        return cli_opt_bad(p, val,
                           strcmp(o->name, "max-time")
                               ? "expected a positive duration such as 5s"
                               : "expected a positive duration such as 10s");
    *(int64_t *)field = d;
    return 0;
}

static int opt_idem_key(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (!*val || strpbrk(val, "\r\n") || strlen(val) > 255)
        return cli_usage_error(CMD, "bad value for %s: expected a key or 'auto'", p->spelled);
    *(const char **)field = val;
    return 0;
}

static int opt_rate(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    fetch_opts *fo = field;
    if (!parse_rate(val, &fo->rate))
        return cli_opt_bad(p, val, "expected a rate such as 10/s or 600/m");
    fo->has_rate = true;
    return 0;
}

static int opt_burst(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    fetch_opts *fo = field;
    long long n;
    if (!cli_parse_int(val, 1, 1000000000, &n))
        return cli_opt_bad(p, val, "expected a whole number from 1");
    fo->burst = n;
    fo->has_burst = true;
    return 0;
}

static int opt_secret(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    fetch_opts *fo = field;
    if (fo->n_secret >= MAX_SECRET_HEADERS)
        return cli_usage_error(CMD, "at most %d --secret-header", MAX_SECRET_HEADERS);
    fo->secret[fo->n_secret++] = val;
    return 0;
}

static int opt_seed(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    if (!cli_parse_int(val, 0, INT64_MAX, &n))
        return cli_opt_bad(p, val, "expected a whole number");
    *(unsigned long long *)field = (unsigned long long)n;
    return 0;
}

static int opt_share_breaker(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o, (void)field, (void)val;
    return cli_usage_error(CMD, "--share-breaker is for stagger batch (one request has no "
                                "breaker)");
}

static int opt_url(cli_parser *p, const char *arg)
{
    fetch_opts *o = p->ctx;
    if (o->url)
        return cli_usage_error(CMD, "only one URL allowed");
    o->url = arg;
    return 0;
}

#define F(x) offsetof(fetch_opts, x)
static const cli_opt fetch_table[] = {
    {.kind = CLI_HEADING, .help = "Request"},
    {CLI_STRING, "request", 'X', "METHOD", "method (default GET, or POST with data)", F(method),
     NULL, NULL, 0, NULL},
    {CLI_FN, "header", 'H', "'Name: value'",
     "add a header; repeatable; @FILE reads headers from\n"
     "FILE, one a line (@- stdin), all treated as secret",
     0, opt_header, NULL, 0, NULL},
    {CLI_FN, "secret-header-env", 0, "NAME=VAR",
     "send header NAME with the value of environment\n"
     "variable VAR, treated as secret (keeps it out of argv)",
     0, opt_header_env, NULL, 0, NULL},
    {CLI_FN, "data", 'd', "DATA",
     "body (POST); @FILE reads FILE without CR/LF;\nrepeated data is joined with '&'", 0, opt_data,
     NULL, 0, NULL},
    {CLI_FN, "data-binary", 0, "DATA", "body as is; @FILE reads FILE byte for byte", 0, opt_data,
     NULL, 0, NULL},
    {CLI_FLAG, "location", 'L', NULL, "follow redirects (http and https only)", F(location), NULL,
     NULL, 0, NULL},
    {CLI_FN, "idempotency-key", 0, "KEY|auto",
     "send Idempotency-Key (auto: a random UUIDv4); lets\nPOST and PATCH be retried", F(idem_key),
     opt_idem_key, NULL, 0, NULL},
    {CLI_FN, "connect-timeout", 0, "D", "per attempt (default 5s)", F(policy.connect_timeout_us),
     opt_timeout, NULL, 0, NULL},
    {CLI_FN, "max-time", 0, "D",
     "whole attempt (default 10s); both bounded by the\n"
     "deadline; as in curl, a bare number is seconds",
     F(policy.attempt_timeout_us), opt_timeout, NULL, 0, NULL},
    {CLI_FN, "rate", 0, "R[/s|/m|/h]", "client-side limit on attempts (token bucket)", 0, opt_rate,
     NULL, 0, NULL},
    {CLI_FN, "burst", 0, "B", "bucket capacity (default max(1, ceil(R)))", 0, opt_burst, NULL, 0,
     NULL},
    {.kind = CLI_HEADING, .help = "Output"},
    {CLI_STRING, "output", 'o', "FILE",
     "write the final body to FILE (also a final 429/503;\ncreated 0600)", F(out_path), NULL, NULL,
     0, NULL},
    {CLI_FN, "max-body", 0, "SIZE",
     "keep at most SIZE bytes of the body (k, M, G\n"
     "suffixes; default 64M); a longer body is an error (9)",
     F(max_body), opt_max_body, NULL, 0, NULL},
    {CLI_FLAG, "include", 'i', NULL, "include the final response headers in the output", F(include),
     NULL, NULL, 0, NULL},
    {CLI_FLAG, "silent", 's', NULL, "no message when giving up", F(silent), NULL, NULL, 0, NULL},
    {CLI_FLAG, "verbose", 'v', NULL,
     "attempts and decisions on stderr (URLs and secret\nheader values redacted)", F(verbose), NULL,
     NULL, 0, NULL},
    {CLI_STRING, "log-json", 0, "FILE",
     "JSON lines: one per attempt, wait and outcome\n(created 0600)", F(log_path), NULL, NULL, 0,
     NULL},
    {CLI_STRING, "metrics", 0, "FILE",
     "Prometheus text format, written atomically at start\n(a check) and at exit", F(metrics_path),
     NULL, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_metrics_live_opts, .off = F(live)},
    {CLI_FN, "secret-header", 0, "NAME", "treat header NAME as secret too; repeatable", 0,
     opt_secret, NULL, 0, NULL},
    {CLI_FN, "seed", 0, "N", "seed of the jitter (default: random)", F(seed), opt_seed, NULL, 0,
     NULL},
    CLI_OPT_HELP_ENTRY,
    {.kind = CLI_HEADING, .help = "Shared limit (many processes or machines)"},
    {.kind = CLI_GROUP, .group = cli_limiter_opts, .off = F(limiter)},
    {CLI_FN, "share-breaker", 0, NULL, NULL, 0, opt_share_breaker, NULL, CLI_OPT_HIDDEN, NULL},
    {.kind = CLI_HEADING, .help = "Retry policy"},
    {.kind = CLI_GROUP, .group = cli_policy_all_opts, .off = F(policy)},
    {.kind = CLI_TEXT, .help = cli_durations_help},
    CLI_OPT_END,
};
#undef F

static const int fetch_exits[] = {CLI_EXIT_OK,        CLI_EXIT_FAILED,   CLI_EXIT_USAGE,
                                  CLI_EXIT_LEFT,      CLI_EXIT_INPUT,    CLI_EXIT_LIMITER,
                                  CLI_EXIT_TRANSPORT, CLI_EXIT_DEADLINE, CLI_EXIT_TRUNCATED,
                                  CLI_EXIT_SIGINT,    CLI_EXIT_SIGTERM,  -1};

const cli_command cli_fetch_command = {
    .name = CMD,
    .usage = "usage: stagger fetch [options] URL\n"
             "\n"
             "One HTTP request with polite retries: Retry-After honoured with a spread,\n"
             "jittered backoff, a deadline, waits that Ctrl-C interrupts at once.\n",
    .opts = fetch_table,
    .epilogue = NULL,
    .exits = fetch_exits,
};

/* libcurl's own URL parser (no second one here): 0, or its CURLUcode. The
 * URL itself is never echoed: it may carry a password. */
static int url_parse_error(const char *url)
{
    CURLU *u = curl_url();
    if (!u)
        return CURLUE_OUT_OF_MEMORY;
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME);
    curl_url_cleanup(u);
    return (int)uc;
}

/* Parse argv into o. Returns -1 when parsed, or an exit status. */
static int parse(fetch_opts *o, int argc, char **argv)
{
    cli_parser parser = {.cmd = &cli_fetch_command, .ctx = o, .positional = opt_url};
    o->limiter.cmd = CMD;
    int rc = cli_parse(&parser, argc, argv);
    if (rc >= 0)
        return rc;
    if (!o->url)
        return cli_usage_error(CMD, "missing URL (see --help)");
    if (!*o->url || strpbrk(o->url, "\r\n \t"))
        return cli_usage_error(CMD, "bad URL");
    if (!url_scheme_ok(o->url))
        return cli_usage_error(CMD, "only http:// and https:// URLs are supported");
    int uc = url_parse_error(o->url);
    if (uc)
        return cli_usage_error(CMD, "bad URL: %s", curl_url_strerror((CURLUcode)uc));
    if (o->method && !method_token_ok(o->method))
        return cli_usage_error(CMD, "bad method '%.40s'", o->method);
    if (o->has_burst && !o->has_rate)
        return cli_usage_error(CMD, "--burst needs --rate");
    stg_policy check;
    if (stg_policy_resolve(&o->policy, &check) != STG_OK)
        return cli_usage_error(CMD, "inconsistent retry policy (is --cap below --base?)");
    if (o->idem_key && !strcmp(o->idem_key, "auto")) {
        if (!make_uuid(o->uuid)) {
            fprintf(stderr, "stagger %s: cannot read random bytes for the key\n", CMD);
            return EXIT_LOCAL;
        }
        o->idem_key = o->uuid;
    }
    return -1;
}

/* ---- -v: attempts and decisions ------------------------------------------- */

typedef struct verbose {
    int64_t t0;
    bool have_t0;
} verbose;

static void ms_text(int64_t us, char *buf, size_t size)
{
    cli_format_duration(us, buf, size);
}

static void on_verbose(const stg_event *ev, void *data)
{
    verbose *v = data;
    if (!v->have_t0) {
        v->t0 = ev->now_us;
        v->have_t0 = true;
    }
    double t = (double)(ev->now_us - v->t0) / 1e6;
    char a[32], b[32];
    switch (ev->type) {
    case STG_EVENT_ATTEMPT_START:
        fprintf(stderr, "* [%8.3fs] attempt %d: %s %s\n", t, ev->attempt,
                ev->method ? ev->method : "?", ev->url ? ev->url : "");
        break;
    case STG_EVENT_ATTEMPT_END:
        ms_text(ev->duration_us, a, sizeof a);
        if (ev->error == STG_NET_NONE)
            fprintf(stderr, "* [%8.3fs] attempt %d: HTTP %d in %s", t, ev->attempt, ev->status, a);
        else
            fprintf(stderr, "* [%8.3fs] attempt %d: %s (curl %d) after %s", t, ev->attempt,
                    stg_net_error_name(ev->error), ev->curl_code, a);
        if (ev->status == 429)
            fputs(" [quota]", stderr);
        else if (ev->status == 503)
            fputs(" [outage]", stderr);
        if (ev->retry_after_us >= 0) {
            ms_text(ev->retry_after_us, b, sizeof b);
            fprintf(stderr, ", server asks to wait %s", b);
        }
        fputc('\n', stderr);
        break;
    case STG_EVENT_WAIT:
        ms_text(ev->wait_us, a, sizeof a);
        fprintf(stderr, "* [%8.3fs] retry in %s (%s; wait_us=%lld)\n", t, a,
                stg_reason_message(ev->reason), (long long)ev->wait_us);
        break;
    case STG_EVENT_LIMITER_WAIT:
        ms_text(ev->wait_us, a, sizeof a);
        fprintf(stderr, "* [%8.3fs] client-side limit: waiting %s\n", t, a);
        break;
    case STG_EVENT_SUCCESS:
    case STG_EVENT_GIVE_UP:
        ms_text(ev->duration_us, a, sizeof a);
        fprintf(stderr, "* [%8.3fs] %s after %d attempt%s in %s: %s\n", t,
                ev->type == STG_EVENT_SUCCESS ? "success" : "gave up", ev->attempt,
                ev->attempt == 1 ? "" : "s", a, stg_reason_message(ev->reason));
        if (ev->final_url && ev->url && strcmp(ev->final_url, ev->url))
            fprintf(stderr, "* final URL %s\n", ev->final_url);
        break;
    case STG_EVENT_BREAKER:
        fprintf(stderr, "* [%8.3fs] breaker %s: %s -> %s\n", t, ev->host ? ev->host : "",
                stg_breaker_state_name(ev->breaker_from), stg_breaker_state_name(ev->breaker_to));
        break;
    }
}

static void print_request(const fetch_opts *o, const char *method)
{
    char red[2048];
    stg_redact_url(o->url, red, sizeof red);
    fprintf(stderr, "> %s %s\n", method, red);
    for (size_t i = 0; i < o->n_headers; i++) {
        char line[1024];
        stg_redact_header_line(o->header_lines[i], o->secret, line, sizeof line);
        fprintf(stderr, "> %s\n", line);
    }
    if (o->idem_key)
        fprintf(stderr, "> Idempotency-Key: %s\n", o->idem_key);
    if (o->has_data)
        fprintf(stderr, "> (body: %zu bytes)\n", o->data_len);
}

static void print_response_headers(const fetch_opts *o, const stg_result *r)
{
    const char *p = r->headers, *end = r->headers + r->headers_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char raw[1024], line[1024];
        snprintf(raw, sizeof raw, "%.*s", (int)(n < sizeof raw ? n : sizeof raw - 1), p);
        stg_redact_header_line(raw, o->secret, line, sizeof line);
        if (line[0])
            fprintf(stderr, "< %s\n", line);
        p = nl ? nl + 1 : end;
    }
}

/* ---- result ------------------------------------------------------------ */

static int exit_status(const stg_result *r)
{
    if (r->reason == STG_REASON_CANCELLED)
        return stop_signal == SIGTERM ? CLI_EXIT_SIGTERM : CLI_EXIT_SIGINT;
    if (r->body_truncated)
        return EXIT_TRUNCATED; /* whatever the status: the answer is not all there */
    if (r->action == STG_ACTION_SUCCESS)
        return EXIT_OK;
    if (r->status == 0 && r->curl_code == CURLE_URL_MALFORMAT)
        return CLI_EXIT_USAGE; /* a URL the parse-time check let through */
    switch (r->reason) {
    case STG_REASON_DEADLINE:
        return EXIT_DEADLINE;
    case STG_REASON_LIMITER_UNAVAILABLE: /* even after an HTTP answer */
        return EXIT_LIMITER;
    case STG_REASON_STATUS_NOT_RETRYABLE:
        return EXIT_HTTP_NOT_RETRIED;
    case STG_REASON_METHOD_NOT_IDEMPOTENT:
        return r->status > 0 ? EXIT_HTTP_NOT_RETRIED : EXIT_TRANSPORT;
    case STG_REASON_ERROR_NOT_RETRYABLE:
        return EXIT_TRANSPORT;
    default:
        return r->status > 0 ? EXIT_HTTP_AFTER_RETRIES : EXIT_TRANSPORT;
    }
}

/* The final response to f (stdout, or -o opened by cli_open_private). */
static bool write_output(const fetch_opts *o, const stg_result *r, FILE *f)
{
    bool ok = true;
    struct stat st;
    if (f != stdout && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode))
        ok = ftruncate(fileno(f), 0) == 0;
    if (ok && o->include && r->headers_len)
        ok = fwrite(r->headers, 1, r->headers_len, f) == r->headers_len;
    if (ok && r->body_len)
        ok = fwrite(r->body, 1, r->body_len, f) == r->body_len;
    if (fflush(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "stagger %s: cannot write %s\n", CMD, o->out_path ? o->out_path : "stdout");
    return ok;
}

/* -o FILE (without -i), FILE a regular file: a 2xx body streams into a temp file beside FILE
 * (the library's body sink), renamed over FILE at the end, so memory does
 * not grow with the body; a retry's RESTART empties it. Any other body
 * (at most 64 KiB kept) is written by write_output as before. */
typedef struct out_stream {
    char tmpl[4096], tmp[4096]; /* FILE.XXXXXX, and the temp file made from it */
    FILE *f;
    bool exists;
    int err; /* errno of a failed write */
} out_stream;

static int out_fail(out_stream *s)
{
    s->err = errno ? errno : EIO;
    return -1;
}

static void out_remove(out_stream *s)
{
    if (s->f)
        fclose(s->f);
    s->f = NULL;
    if (s->exists)
        unlink(s->tmp);
    s->exists = false;
}

static int out_sink(stg_body_op op, const void *buf, size_t len, void *data)
{
    out_stream *s = data;
    if (op == STG_BODY_RESTART) {
        out_remove(s); /* a retry: what came is not the body */
        return 0;
    }
    if (op == STG_BODY_END) {
        int rc = s->f && fclose(s->f) != 0 ? out_fail(s) : 0;
        s->f = NULL;
        return rc;
    }
    if (!s->f) {
        memcpy(s->tmp, s->tmpl, sizeof s->tmp);
        int fd = mkstemp(s->tmp);
        if (fd < 0)
            return out_fail(s);
        s->exists = true;
        if (!(s->f = fdopen(fd, "wb"))) {
            close(fd);
            return out_fail(s);
        }
    }
    return fwrite(buf, 1, len, s->f) == len ? 0 : out_fail(s);
}

/* Put the streamed body in place: the temp file, made 0600 by mkstemp
 * like every file fetch creates, is renamed over FILE. */
static bool out_commit(const fetch_opts *o, out_stream *s)
{
    if (rename(s->tmp, o->out_path) != 0) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path, strerror(errno));
        return false;
    }
    s->exists = false;
    return true;
}

static int64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int run(fetch_opts *o)
{
    const char *method = o->method ? o->method : (o->has_data ? "POST" : "GET");
    if (o->idem_key) {
        char line[300];
        snprintf(line, sizeof line, "Idempotency-Key: %s", o->idem_key);
        struct curl_slist *s = curl_slist_append(o->headers, line);
        if (!s) {
            fprintf(stderr, "stagger %s: out of memory\n", CMD);
            return EXIT_LOCAL;
        }
        o->headers = s;
    }

    FILE *logf = NULL, *outf = NULL;
    bool out_created = false, wrote = false;
    out_stream stream = {.f = NULL};
    stg_logger *logger = NULL;
    stg_metrics *metrics = NULL;
    cli_metrics_live *live = NULL;
    stg_cancel *cancel = NULL;
    CURL *easy = NULL;
    stg_bucket bucket;
    int status = EXIT_LOCAL;
    stg_result res;
    memset(&res, 0, sizeof res);
    verbose vb = {0, false};
    stg_event_fanout fan;
    memset(&fan, 0, sizeof fan);

    /* Every output is opened (or written) before the first request: a path
     * that cannot be written fails here, with nothing sent. */
    if (o->out_path && !(outf = cli_open_private(o->out_path, CLI_OPEN_KEEP, &out_created))) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path, strerror(errno));
        goto out;
    }
    if (o->log_path) {
        logf = cli_open_private(o->log_path, CLI_OPEN_TRUNCATE, NULL);
        if (!logf) {
            fprintf(stderr, "stagger %s: cannot open %s: %s\n", CMD, o->log_path, strerror(errno));
            goto out;
        }
        logger = stg_logger_new(logf);
        if (!logger)
            goto oom;
        fan.fn[fan.n] = stg_log_event;
        fan.data[fan.n++] = logger;
    }
    if (o->metrics_path || o->live.listen) {
        metrics = stg_metrics_new();
        if (!metrics)
            goto oom;
        if (o->metrics_path && stg_metrics_write(metrics, o->metrics_path) != STG_OK) {
            fprintf(stderr, "stagger %s: cannot write metrics to %s\n", CMD, o->metrics_path);
            stg_metrics_free(metrics);
            metrics = NULL;
            goto out;
        }
        fan.fn[fan.n] = stg_metrics_event;
        fan.data[fan.n++] = metrics;
    }
    if (o->verbose) {
        fan.fn[fan.n] = on_verbose;
        fan.data[fan.n++] = &vb;
    }
    cancel = stg_cancel_new();
    easy = curl_easy_init();
    if (!cancel || !easy)
        goto oom;

    curl_easy_setopt(easy, CURLOPT_URL, o->url);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "stagger/" STG_VERSION_STRING);
    /* -L: stg_curl_perform follows redirects itself (each hop through the
     * limiter; secret headers only to the URL's origin): cfg below. */
    if (o->has_data) {
        /* Kept by us for the whole call: every attempt resends all of it. */
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, o->data);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->data_len);
    }
    stg_method m = stg_method_parse(method);
    if (m == STG_METHOD_HEAD)
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    else if (o->method && strcmp(method, o->has_data ? "POST" : "GET"))
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);

    stg_call_config cfg = {
        .policy = o->policy,
        .method = m == STG_METHOD_UNKNOWN ? STG_METHOD_UNKNOWN : m,
        .has_idempotency_key = o->idem_key != NULL,
        .cancel = cancel,
        .seed = o->seed,
        .on_event = fan.n ? stg_event_fanout_cb : NULL,
        .event_data = &fan,
        .url = o->url,
        .request_id = 1,
        .follow_redirects = o->location,
        .max_redirects = 20,
        .headers = o->headers,
        .secret_headers = o->secret,
        .max_body = o->max_body,
    };
    /* Only a regular file is replaced by rename: -o /dev/null, a FIFO or a
     * terminal is written in place from memory (a rename would put a
     * regular file where the device was). */
    struct stat out_st;
    if (outf && !o->include && fstat(fileno(outf), &out_st) == 0 && S_ISREG(out_st.st_mode)) {
        snprintf(stream.tmpl, sizeof stream.tmpl, "%s.XXXXXX", o->out_path);
        cfg.body_sink = out_sink;
        cfg.body_sink_data = &stream;
    }
    if (o->limiter.url) {
        int lrc = cli_limiter_open(&o->limiter, o->has_rate ? o->rate : 0,
                                   o->has_burst ? o->burst : 0, 0, 0, &cfg.shared);
        if (lrc != 0) {
            status = lrc; /* usage, or unreachable without a fallback: the limiter exit */
            goto out;
        }
    } else if (o->has_rate) {
        stg_bucket_config bc = {.rate = o->rate, .burst = o->has_burst ? o->burst : 0};
        if (stg_bucket_init(&bucket, &bc, mono_now()) != STG_OK) {
            status = cli_usage_error(CMD, "bad --rate/--burst combination");
            goto out;
        }
        cfg.bucket = &bucket;
    }

    if (o->verbose)
        print_request(o, method);

    if (metrics && cli_metrics_live_start(CMD, &o->live, metrics, o->metrics_path, &live) != 0)
        goto out;
    /* SIGTERM is handled as SIGINT: the wait or attempt ends at once and the
     * log and metrics are still written (exit 143 instead of 130). */
    sigint_token = cancel;
    stop_signal = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    /* The file header's invariant: every output is open before a request. */
    STG_ASSERT(!o->out_path || outf);
    STG_ASSERT(!o->log_path || logf);
    STG_ASSERT(!o->metrics_path || metrics);
    int rc = stg_curl_perform(easy, &cfg, &res);
    cli_metrics_live_stop(live);
    live = NULL;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigint_token = NULL;
    if (rc != STG_OK) {
        fprintf(stderr, "stagger %s: %s\n", CMD, stg_strerror(rc));
        goto out;
    }

    if (o->verbose && res.status > 0)
        print_response_headers(o, &res);
    status = exit_status(&res);
    bool cancelled = res.reason == STG_REASON_CANCELLED;
    size_t max_body = o->max_body ? o->max_body : (size_t)64 << 20;
    if (res.body_sink_failed) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path,
                strerror(stream.err ? stream.err : EIO));
        status = EXIT_LOCAL;
    } else if (res.status > 0 && !cancelled) {
        wrote = true;
        if (!(stream.exists ? out_commit(o, &stream)
                            : write_output(o, &res, outf ? outf : stdout)))
            status = EXIT_LOCAL;
    }
    if (res.body_truncated && !o->silent) /* body_len 0: the sink got max_body bytes */
        fprintf(stderr,
                "stagger %s: the body is larger than %zu bytes (--max-body): only the "
                "first %zu were kept%s\n",
                CMD, max_body, res.body_len ? res.body_len : max_body,
                wrote ? " and written" : "");
    if (status != EXIT_OK && status != EXIT_TRUNCATED && !o->silent) {
        char took[32];
        cli_format_duration(res.elapsed_us, took, sizeof took);
        if (cancelled)
            fprintf(stderr, "stagger %s: %s after %d attempt%s in %s%s%.0d\n", CMD,
                    stop_signal == SIGTERM ? "terminated (SIGTERM)" : "interrupted (SIGINT)",
                    res.attempts, res.attempts == 1 ? "" : "s", took,
                    res.status > 0 ? "; last answer HTTP " : "", res.status);
        else if (res.status > 0)
            fprintf(stderr, "stagger %s: HTTP %d after %d attempt%s in %s: %s%s%s\n", CMD,
                    res.status, res.attempts, res.attempts == 1 ? "" : "s", took,
                    stg_reason_message(res.reason), res.error_text[0] ? ": " : "",
                    res.error_text);
        else
            fprintf(stderr, "stagger %s: no answer after %d attempt%s in %s: %s%s%s\n", CMD,
                    res.attempts, res.attempts == 1 ? "" : "s", took,
                    stg_reason_message(res.reason), res.error_text[0] ? ": " : "", res.error_text);
    }
    goto out;

oom:
    fprintf(stderr, "stagger %s: out of memory\n", CMD);
    status = EXIT_LOCAL;
out:
    cli_metrics_live_stop(live);
    out_remove(&stream); /* a temp file not renamed into place: not the answer */
    if (metrics && o->metrics_path && stg_metrics_write(metrics, o->metrics_path) != STG_OK) {
        fprintf(stderr, "stagger %s: cannot write metrics to %s\n", CMD, o->metrics_path);
        if (status == EXIT_OK)
            status = EXIT_LOCAL;
    }
    if (outf) {
        if (fclose(outf) != 0 && status == EXIT_OK) {
            fprintf(stderr, "stagger %s: cannot write %s\n", CMD, o->out_path);
            status = EXIT_LOCAL;
        }
        if (out_created && !wrote)
            unlink(o->out_path); /* no answer: no file, as before */
    }
    stg_result_free(&res);
    cli_limiter_close(&o->limiter);
    if (easy)
        curl_easy_cleanup(easy);
    stg_cancel_free(cancel);
    stg_metrics_free(metrics);
    stg_logger_free(logger);
    if (logf && fclose(logf) != 0 && status == EXIT_OK) {
        fprintf(stderr, "stagger %s: cannot write %s\n", CMD, o->log_path);
        status = EXIT_LOCAL;
    }
    return status;
}

int cli_fetch_main(int argc, char **argv)
{
    fetch_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(&o, argc, argv);
    if (rc < 0) {
        o.secret[o.n_secret] = NULL;
        rc = run(&o);
    }
    curl_slist_free_all(o.headers);
    free(o.header_lines);
    free(o.data);
    for (size_t i = 0; i < o.n_owned; i++)
        free(o.owned[i]);
    free(o.owned);
    return rc;
}

#endif
