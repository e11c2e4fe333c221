/*
 * `stagger fetch [options] URL`: one HTTP request with polite retries, in
 * the manner of curl. The request runs through stg_curl_perform(); this
 * file only parses options, prepares the easy handle, prints and maps the
 * result to an exit status.
 *
 * Exit status (also in docs/stagger-fetch.1):
 *   0   the final answer is 1xx/2xx/3xx
 *   1   local failure: out of memory, cannot write the output file
 *   2   bad usage (one line on stderr)
 *   3   HTTP error after retries: a retryable status (429, 503, ...) was
 *       still the answer when attempts ran out or the server asked to wait
 *       longer than allowed
 *   4   HTTP error that is not retried: a status outside --retry-on (404,
 *       401, ...), or a retryable status on a request that may not be
 *       repeated (POST without an idempotency key)
 *   5   the deadline (--deadline) passed
 *   6   transport failure: no HTTP answer (refused, reset, timeout, DNS,
 *       TLS)
 *   130 cancelled by SIGINT
 *
 * Invariants: nothing this command prints to stderr (-v, errors) carries a
 * URL's userinfo or query values or a secret header's value: URLs come
 * redacted from the library's events, header lines go through
 * stg_redact_header_line(). The final body (and with -i the response
 * headers) goes to stdout or -o FILE unredacted: it is the user's data. The
 * SIGINT handler only calls stg_cancel_fire() (async-signal-safe); the one
 * static variable of this file exists because a signal handler can reach
 * nothing else.
 */
#ifdef STG_HAVE_CURL

#include <errno.h>
#include <signal.h>
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

#define CMD "fetch"

enum {
    EXIT_OK = 0,
    EXIT_LOCAL = 1,
    EXIT_HTTP_AFTER_RETRIES = 3,
    EXIT_HTTP_NOT_RETRIED = 4,
    EXIT_DEADLINE = 5,
    EXIT_TRANSPORT = 6,
    EXIT_CANCELLED = 130
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
    const char *secret[MAX_SECRET_HEADERS + 1];
    int n_secret;
    unsigned long long seed;
    cli_limiter limiter; /* --limiter: a limit shared through Redis */
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

static stg_cancel *sigint_token; /* for the SIGINT handler only */

static void on_sigint(int sig)
{
    (void)sig;
    stg_cancel_fire(sigint_token);
}

static void help(void)
{
    printf("usage: stagger fetch [options] URL\n"
           "\n"
           "One HTTP request with polite retries: Retry-After honoured with a spread,\n"
           "jittered backoff, a deadline, waits that Ctrl-C interrupts at once.\n"
           "\n"
           "Request:\n"
           "  -X, --request METHOD   method (default GET, or POST with data)\n"
           "  -H, --header 'N: V'    add a header; repeatable\n"
           "  -d, --data DATA        body (POST); @FILE reads FILE without CR/LF;\n"
           "                         repeated data is joined with '&'\n"
           "      --data-binary DATA body as is; @FILE reads FILE byte for byte\n"
           "  -L, --location         follow redirects (http and https only)\n"
           "      --idempotency-key KEY|auto\n"
           "                         send Idempotency-Key (auto: a random UUIDv4); lets\n"
           "                         POST and PATCH be retried\n"
           "      --connect-timeout D  per attempt (default 5s)\n"
           "      --max-time D       whole attempt (default 10s); both bounded by the\n"
           "                         deadline; as in curl, a bare number is seconds\n"
           "      --rate R[/s|/m]    client-side limit on attempts (token bucket)\n"
           "      --burst B          bucket capacity (default max(1, ceil(R)))\n"
           "\n"
           "Output:\n"
           "  -o, --output FILE      write the final body to FILE (also a final 429/503)\n"
           "  -i, --include          include the final response headers in the output\n"
           "  -s, --silent           no message when giving up\n"
           "  -v, --verbose          attempts and decisions on stderr (URLs and secret\n"
           "                         header values redacted)\n"
           "      --log-json FILE    JSON lines: one per attempt, wait and outcome\n"
           "      --metrics FILE     Prometheus text format, written atomically at exit\n"
           "      --secret-header N  treat header N as secret too; repeatable\n"
           "      --seed N           seed of the jitter (default: random)\n"
           "\n"
           "%s"
           "\n"
           "%s"
           "\n"
           "Exit status: 0 final 1xx-3xx; 1 local error (also: the shared limiter\n"
           "cannot be reached at start); 2 bad usage; 3 HTTP error after retries;\n"
           "4 HTTP error not retried; 5 deadline; 6 transport failure (also: the shared\n"
           "limiter became unavailable); 130 interrupted.\n",
           cli_limiter_help, cli_policy_help);
}

/* ---- option helpers ------------------------------------------------------ */

static bool is_policy_flag(const char *opt)
{
    static const char *const flags[] = {"--preset",    "--backoff",         "--base",
                                        "--cap",       "--mult",            "--retries",
                                        "--deadline",  "--max-server-wait", "--retry-after",
                                        "--spread",    "--retry-on",        NULL};
    for (size_t i = 0; flags[i]; i++)
        if (!strcmp(opt, flags[i]))
            return true;
    return false;
}

/* Read a whole file ("-": stdin). Returns NULL with errno set. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) {
            if (ferror(f)) {
                free(buf);
                buf = NULL;
                errno = EIO;
            }
            break;
        }
        char *nb = cap > ((size_t)1 << 31) ? NULL : realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

static int add_data(fetch_opts *o, const char *arg, bool binary)
{
    char *chunk;
    size_t len;
    bool owned = false;
    if (arg[0] == '@') {
        chunk = read_file(arg + 1, &len);
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

/* "Name: value", "Name:" (remove) or "Name;" (send empty), as curl takes
 * them; the name must be a token, so no value can hide where -v would
 * print it unredacted. */
static bool header_ok(const char *h)
{
    size_t n = strcspn(h, ":;");
    if (n == 0 || strpbrk(h, "\r\n"))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= 'a' && h[i] <= 'z') ||
              (h[i] >= '0' && h[i] <= '9') || strchr("!#$%&'*+-.^_`|~", h[i])))
            return false;
    return h[n] == ':' || (h[n] == ';' && h[n + 1] == '\0');
}

static int add_header(fetch_opts *o, const char *h)
{
    if (!header_ok(h))
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
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
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

/* Parse argv into o. Returns -1 when parsed, or an exit status. */
static int parse(fetch_opts *o, int argc, char **argv)
{
    if (cli_policy_preset_first(CMD, argc, argv, &o->policy) != 0)
        return CLI_EXIT_USAGE;
    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *opt;
    while (cli_args_next(&a, &opt)) {
        if (a.name[0] == '\0') {
            if (o->url)
                return cli_usage_error(CMD, "only one URL allowed");
            o->url = opt;
            continue;
        }
        const char *full = argv[a.i];
        /* Short options with the value attached (-XPOST, -H'N: v', -d@f) or
         * bundled flags (-sv, -iL). */
        if (full[0] == '-' && full[1] != '-' && full[1] && full[2]) {
            if (strchr("XHdo", full[1])) {
                char sopt[3] = {'-', full[1], '\0'};
                const char *val = full + 2;
                if (sopt[1] == 'X')
                    o->method = val;
                else if (sopt[1] == 'H') {
                    if (add_header(o, val))
                        return CLI_EXIT_USAGE;
                } else if (sopt[1] == 'd') {
                    if (add_data(o, val, false))
                        return CLI_EXIT_USAGE;
                } else {
                    o->out_path = val;
                }
                continue;
            }
            for (const char *p = full + 1; *p; p++) {
                if (*p == 'i')
                    o->include = true;
                else if (*p == 's')
                    o->silent = true;
                else if (*p == 'v')
                    o->verbose = true;
                else if (*p == 'L')
                    o->location = true;
                else
                    return cli_usage_error(CMD, "unknown option '-%c' (see --help)", *p);
            }
            continue;
        }
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            help();
            return 0;
        }
        if (!strcmp(opt, "-i") || !strcmp(opt, "--include")) {
            o->include = true;
            continue;
        }
        if (!strcmp(opt, "-s") || !strcmp(opt, "--silent")) {
            o->silent = true;
            continue;
        }
        if (!strcmp(opt, "-v") || !strcmp(opt, "--verbose")) {
            o->verbose = true;
            continue;
        }
        if (!strcmp(opt, "-L") || !strcmp(opt, "--location")) {
            o->location = true;
            continue;
        }
        if (!strcmp(opt, "--share-breaker")) {
            return cli_usage_error(CMD, "--share-breaker is for stagger batch (one request "
                                        "has no breaker)");
        }
        const char *val = cli_args_value(&a);
        if (!val)
            return cli_missing_value(CMD, opt);
        int64_t d;
        long long n;
        int lr = cli_limiter_option(CMD, &o->limiter, opt, val);
        if (lr < 0)
            return CLI_EXIT_USAGE;
        if (lr > 0) {
            continue;
        } else if (is_policy_flag(opt)) {
            if (cli_policy_option(CMD, &o->policy, opt, val) < 0)
                return CLI_EXIT_USAGE;
        } else if (!strcmp(opt, "-X") || !strcmp(opt, "--request")) {
            o->method = val;
        } else if (!strcmp(opt, "-H") || !strcmp(opt, "--header")) {
            if (add_header(o, val))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(opt, "-d") || !strcmp(opt, "--data")) {
            if (add_data(o, val, false))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(opt, "--data-binary")) {
            if (add_data(o, val, true))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(opt, "-o") || !strcmp(opt, "--output")) {
            o->out_path = val;
        } else if (!strcmp(opt, "--connect-timeout")) {
            if (!parse_curl_seconds(val, &d) || d <= 0)
                return cli_usage_error(CMD, "bad value '%s' for %s: expected a positive duration "
                                            "such as 5s", val, opt);
            o->policy.connect_timeout_us = d;
        } else if (!strcmp(opt, "--max-time")) {
            if (!parse_curl_seconds(val, &d) || d <= 0)
                return cli_usage_error(CMD, "bad value '%s' for %s: expected a positive duration "
                                            "such as 10s", val, opt);
            o->policy.attempt_timeout_us = d;
        } else if (!strcmp(opt, "--idempotency-key")) {
            if (!*val || strpbrk(val, "\r\n") || strlen(val) > 255)
                return cli_usage_error(CMD, "bad value for %s: expected a key or 'auto'", opt);
            o->idem_key = val;
        } else if (!strcmp(opt, "--rate")) {
            if (!parse_rate(val, &o->rate))
                return cli_usage_error(CMD, "bad value '%s' for %s: expected a rate such as "
                                            "10/s or 600/m", val, opt);
            o->has_rate = true;
        } else if (!strcmp(opt, "--burst")) {
            if (!cli_parse_int(val, 1, 1000000000, &n))
                return cli_usage_error(CMD, "bad value '%s' for %s: expected a whole number "
                                            "from 1", val, opt);
            o->burst = n;
            o->has_burst = true;
        } else if (!strcmp(opt, "--log-json")) {
            o->log_path = val;
        } else if (!strcmp(opt, "--metrics")) {
            o->metrics_path = val;
        } else if (!strcmp(opt, "--secret-header")) {
            if (o->n_secret >= MAX_SECRET_HEADERS)
                return cli_usage_error(CMD, "at most %d --secret-header", MAX_SECRET_HEADERS);
            o->secret[o->n_secret++] = val;
        } else if (!strcmp(opt, "--seed")) {
            if (!cli_parse_int(val, 0, INT64_MAX, &n))
                return cli_usage_error(CMD, "bad value '%s' for %s: expected a whole number",
                                       val, opt);
            o->seed = (unsigned long long)n;
        } else {
            return cli_usage_error(CMD, "unknown option '%s' (see --help)", opt);
        }
    }
    if (!o->url)
        return cli_usage_error(CMD, "missing URL (see --help)");
    if (!*o->url || strpbrk(o->url, "\r\n \t"))
        return cli_usage_error(CMD, "bad URL");
    if (!url_scheme_ok(o->url))
        return cli_usage_error(CMD, "only http:// and https:// URLs are supported");
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
        return EXIT_CANCELLED;
    if (r->action == STG_ACTION_SUCCESS)
        return EXIT_OK;
    switch (r->reason) {
    case STG_REASON_DEADLINE:
        return EXIT_DEADLINE;
    case STG_REASON_STATUS_NOT_RETRYABLE:
        return EXIT_HTTP_NOT_RETRIED;
    case STG_REASON_METHOD_NOT_IDEMPOTENT:
        return r->status > 0 ? EXIT_HTTP_NOT_RETRIED : EXIT_TRANSPORT;
    case STG_REASON_ERROR_NOT_RETRYABLE:
    case STG_REASON_LIMITER_UNAVAILABLE: /* even after an HTTP answer */
        return EXIT_TRANSPORT;
    default:
        return r->status > 0 ? EXIT_HTTP_AFTER_RETRIES : EXIT_TRANSPORT;
    }
}

static bool write_output(const fetch_opts *o, const stg_result *r)
{
    FILE *f = o->out_path ? fopen(o->out_path, "wb") : stdout;
    if (!f) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path, strerror(errno));
        return false;
    }
    bool ok = true;
    if (o->include && r->headers_len)
        ok = fwrite(r->headers, 1, r->headers_len, f) == r->headers_len;
    if (ok && r->body_len)
        ok = fwrite(r->body, 1, r->body_len, f) == r->body_len;
    if (fflush(f) != 0)
        ok = false;
    if (f != stdout && fclose(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "stagger %s: cannot write %s\n", CMD, o->out_path ? o->out_path : "stdout");
    return ok;
}

/* -o FILE (without -i): a 2xx body streams into a temp file beside FILE
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

/* Put the streamed body in place (with the mode fopen would have given). */
static bool out_commit(const fetch_opts *o, out_stream *s)
{
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(s->tmp, 0666 & ~mask) != 0 || rename(s->tmp, o->out_path) != 0) {
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

    FILE *logf = NULL;
    stg_logger *logger = NULL;
    stg_metrics *metrics = NULL;
    stg_cancel *cancel = NULL;
    CURL *easy = NULL;
    stg_bucket bucket;
    int status = EXIT_LOCAL;
    stg_result res;
    memset(&res, 0, sizeof res);
    verbose vb = {0, false};
    stg_event_fanout fan;
    memset(&fan, 0, sizeof fan);
    out_stream stream = {.f = NULL};

    if (o->log_path) {
        logf = fopen(o->log_path, "w");
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
    if (o->metrics_path) {
        metrics = stg_metrics_new();
        if (!metrics)
            goto oom;
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
    };
    if (o->out_path && !o->include) {
        snprintf(stream.tmpl, sizeof stream.tmpl, "%s.XXXXXX", o->out_path);
        cfg.body_sink = out_sink;
        cfg.body_sink_data = &stream;
    }
    if (o->limiter.url) {
        int lrc = cli_limiter_open(&o->limiter, o->has_rate ? o->rate : 0,
                                   o->has_burst ? o->burst : 0, 0, 0, &cfg.shared);
        if (lrc != 0) {
            status = lrc == CLI_EXIT_USAGE ? CLI_EXIT_USAGE : EXIT_LOCAL;
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

    sigint_token = cancel;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    int rc = stg_curl_perform(easy, &cfg, &res);
    sigaction(SIGINT, &old, NULL);
    sigint_token = NULL;
    if (rc != STG_OK) {
        fprintf(stderr, "stagger %s: %s\n", CMD, stg_strerror(rc));
        goto out;
    }

    if (o->verbose && res.status > 0)
        print_response_headers(o, &res);
    status = exit_status(&res);
    if (res.body_sink_failed) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path,
                strerror(stream.err ? stream.err : EIO));
        status = EXIT_LOCAL;
    } else if (res.status > 0 && status != EXIT_CANCELLED &&
               !(stream.exists ? out_commit(o, &stream) : write_output(o, &res))) {
        status = EXIT_LOCAL;
    }
    if (status != EXIT_OK && !o->silent) {
        char took[32];
        cli_format_duration(res.elapsed_us, took, sizeof took);
        if (res.status > 0)
            fprintf(stderr, "stagger %s: HTTP %d after %d attempt%s in %s: %s%s%s\n", CMD,
                    res.status, res.attempts, res.attempts == 1 ? "" : "s", took,
                    stg_reason_message(res.reason), res.error_text[0] ? ": " : "",
                    res.error_text);
        else
            fprintf(stderr, "stagger %s: %s after %d attempt%s in %s: %s%s%s\n", CMD,
                    res.reason == STG_REASON_CANCELLED ? "interrupted" : "no answer",
                    res.attempts, res.attempts == 1 ? "" : "s", took,
                    stg_reason_message(res.reason), res.error_text[0] ? ": " : "",
                    res.error_text);
    }
    goto out;

oom:
    fprintf(stderr, "stagger %s: out of memory\n", CMD);
    status = EXIT_LOCAL;
out:
    out_remove(&stream); /* a temp file not renamed into place: not the answer */
    if (metrics && o->metrics_path && stg_metrics_write(metrics, o->metrics_path) != STG_OK)
        fprintf(stderr, "stagger %s: cannot write metrics to %s\n", CMD, o->metrics_path);
    stg_result_free(&res);
    cli_limiter_close(&o->limiter);
    if (easy)
        curl_easy_cleanup(easy);
    stg_cancel_free(cancel);
    stg_metrics_free(metrics);
    stg_logger_free(logger);
    if (logf)
        fclose(logf);
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
    return rc;
}

#endif
