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
 * curl's flags keep curl's meaning (stagger-fetch(1), CURL COMPATIBILITY,
 * lists the deliberate differences); what they imply is settled once all
 * are read (curl_flags()), so flag order never matters; -w is writeout.c.
 *
 * Invariants: nothing this command prints to stderr (-v, errors) or to -w
 * carries a URL's userinfo or query values or a secret header's value: URLs
 * come redacted from the library's events, header lines go through
 * stg_redact_header_line(). -u's password and -b's cookies are set on the
 * handle only, never kept in a printed list; -u's argv string is blanked
 * once copied (ps(1)), as curl does. The final body (and with -i, -I or -D
 * the response headers) goes to stdout, -o or -D FILE unredacted: it is the
 * user's data, so those files and --log-json are created 0600. "-" is
 * standard output for -o, -D, --log-json and --metrics. Headers read from a file
 * (-H @FILE) or the environment (--secret-header-env) are secret: their
 * names join --secret-header. Every output (-o, -D, --log-json, --metrics) is
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

#include "cli/class_opts.h"
#include "cli/cli.h"
#include "cli/limiter.h"
#include "cli/metrics_live.h"
#include "cli/tls.h"
#include "cli/writeout.h"
#include "util/assert.h"
#include "util/clock.h"
#include "util/http_field.h"

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
    bool no_quotas; /* --no-quotas: no quota limiter (default: one per call) */
    bool no_cost_estimate; /* --no-cost-estimate: an AI request costs 1 per unit */
    const char *log_path, *metrics_path;
    cli_metrics_opts live; /* --metrics-interval, --metrics-listen (metrics_live.c) */
    const char *secret[MAX_SECRET_HEADERS + 1];
    int n_secret;
    unsigned long long seed;
    cli_limiter limiter; /* --limiter: a limit shared through Redis */
    cli_class cls;       /* --priority, --tenant, --weight */
    cli_tls tls;         /* --cacert, --capath, -k, --cert, --key */
    size_t max_body;     /* --max-body (the table's default unless given) */
    char **owned;        /* -H @FILE and --secret-header-env lines (ours) */
    size_t n_owned;
    /* curl's flags (stagger-fetch(1)). */
    bool head, fail, show_error, get, compressed, remote_name, json;
    const char *write_out;   /* -w: the format (@FILE already read) */
    const char *dump_path;   /* -D FILE ("-": stdout) */
    const char *user_agent, *referer, *proxy, *cookie;
    const char *userpwd;     /* -u: our copy; the argv string is blanked */
    long http_version;       /* CURL_HTTP_VERSION_*; 0: libcurl's default */
    struct form_part *forms; /* -F / --form-string, in order */
    size_t n_forms;
} fetch_opts;

/* One -F part, parsed at option time (its strings in fetch_opts.owned). */
typedef struct form_part {
    const char *name, *content; /* content: the text, or the file's path */
    const char *type, *filename; /* ;type= and ;filename= (NULL: libcurl's) */
    char kind;                   /* 0 text, '@' upload FILE, '<' FILE's content as text */
} form_part;

static stg_cancel *sigint_token;          /* for the signal handler only */
static volatile sig_atomic_t stop_signal; /* SIGINT or SIGTERM, once caught */

static void on_stop_signal(int sig)
{
    if (!stop_signal)
        stop_signal = sig;
    stg_cancel_fire(sigint_token);
}

/* ---- option helpers ------------------------------------------------------ */

/* How a data option reads its value, as curl's: -d (@FILE without CR/LF),
 * --data-binary (@FILE as is), --data-raw (no @), --data-urlencode
 * ([NAME]=CONTENT or [NAME]@FILE, CONTENT escaped), --json (as binary, the
 * pieces joined without '&'). */
enum data_kind { DATA_ASCII, DATA_BINARY, DATA_RAW, DATA_URLENCODE, DATA_JSON };

/* --data-urlencode: "content", "=content", "name=content", "@file",
 * "name@file" (curl's rules: the first '=', else the first '@'). The
 * result is malloc'ed. */
static char *urlencode_arg(const char *arg, size_t *len)
{
    const char *p = strchr(arg, '=');
    if (!p)
        p = strchr(arg, '@');
    size_t nlen = p ? (size_t)(p - arg) : 0;
    bool file = p && *p == '@';
    const char *content = p ? p + 1 : arg;
    char *raw = NULL;
    size_t rlen = strlen(content);
    if (file && !(raw = cli_read_file(content, &rlen))) {
        cli_usage_error(CMD, "cannot read %s: %s", content, strerror(errno));
        return NULL;
    }
    char *esc = curl_easy_escape(NULL, raw ? raw : content, (int)rlen);
    free(raw);
    if (!esc) {
        cli_usage_error(CMD, "out of memory");
        return NULL;
    }
    size_t elen = strlen(esc);
    char *out = malloc(nlen + 1 + elen + 1);
    if (out) {
        memcpy(out, arg, nlen);
        size_t w = nlen;
        if (nlen)
            out[w++] = '=';
        memcpy(out + w, esc, elen + 1);
        *len = w + elen;
    } else {
        cli_usage_error(CMD, "out of memory");
    }
    curl_free(esc);
    return out;
}

static int add_data(fetch_opts *o, const char *arg, enum data_kind kind)
{
    char *chunk;
    size_t len;
    bool owned = false;
    bool binary = kind != DATA_ASCII;
    if (kind == DATA_URLENCODE) {
        if (!(chunk = urlencode_arg(arg, &len)))
            return CLI_EXIT_USAGE;
        owned = true;
    } else if (arg[0] == '@' && kind != DATA_RAW) {
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
    bool sep = o->has_data && kind != DATA_JSON;
    size_t need = o->data_len + (sep ? 1 : 0) + len + 1;
    char *d = realloc(o->data, need);
    if (!d) {
        if (owned)
            free(chunk);
        return cli_usage_error(CMD, "out of memory");
    }
    o->data = d;
    if (sep)
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


static bool method_token_ok(const char *m)
{
    if (!m || !*m || strlen(m) > 32)
        return false;
    return stg__http_token(m, strlen(m));
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
    int rc = cli_header_arg(CMD, val, NULL, add_header_cb, field, &buf);
    if (buf && !keep(field, buf) && !rc)
        rc = cli_usage_error(CMD, "out of memory");
    return rc;
}

static int opt_header_env(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    char *line = NULL;
    int rc = cli_header_env(CMD, val, NULL, &line);
    if (rc)
        return rc;
    if (!keep(field, line))
        return cli_usage_error(CMD, "out of memory");
    return add_header_cb(field, line, true);
}

/* SIZE: bytes, or with k, M, G (KiB, MiB, GiB). */
static int opt_data(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p;
    fetch_opts *fo = field;
    enum data_kind k = !strcmp(o->name, "data-binary")      ? DATA_BINARY
                       : !strcmp(o->name, "data-raw")       ? DATA_RAW
                       : !strcmp(o->name, "data-urlencode") ? DATA_URLENCODE
                       : !strcmp(o->name, "json")           ? DATA_JSON
                                                            : DATA_ASCII;
    if ((k == DATA_JSON) != fo->json && fo->has_data)
        return cli_usage_error(CMD, "--json cannot be mixed with the other data options");
    fo->json = k == DATA_JSON;
    return add_data(fo, val, k);
}

/* -F NAME=CONTENT: CONTENT is text, @FILE (a file upload) or <FILE (the
 * file's content as a text part), followed by ;type=T and ;filename=N as
 * curl takes them; --form-string takes CONTENT as is. A file must be
 * readable now: nothing is sent when a part cannot be. */
static int opt_form(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    fetch_opts *fo = field;
    form_part *f = realloc(fo->forms, (fo->n_forms + 1) * sizeof *f);
    if (!f)
        return cli_usage_error(CMD, "out of memory");
    fo->forms = f;
    char *copy = keep(fo, strdup(val));
    if (!copy)
        return cli_usage_error(CMD, "out of memory");
    char *eq = strchr(copy, '=');
    if (!eq || eq == copy)
        return cli_usage_error(CMD, "bad value for %s: expected NAME=CONTENT", p->spelled);
    *eq = '\0';
    form_part part = {.name = copy, .content = eq + 1};
    if (strcmp(o->name, "form-string")) {
        char *c = eq + 1;
        if (*c == '@' || *c == '<')
            part.kind = *c++;
        part.content = c;
        for (char *semi = c; (semi = strchr(semi, ';')); semi++) {
            if (strncmp(semi + 1, "type=", 5) && strncmp(semi + 1, "filename=", 9))
                continue;
            *semi = '\0';
            for (char *save = NULL, *a = strtok_r(semi + 1, ";", &save); a;
                 a = strtok_r(NULL, ";", &save)) {
                if (!strncmp(a, "type=", 5))
                    part.type = a + 5;
                else if (!strncmp(a, "filename=", 9))
                    part.filename = a + 9;
                else
                    return cli_usage_error(CMD, "bad %s attribute '%.40s': expected type= or "
                                                "filename=", p->spelled, a);
            }
            break;
        }
        if (part.kind && access(part.content, R_OK) != 0)
            return cli_usage_error(CMD, "cannot read %s: %s", part.content, strerror(errno));
    }
    fo->forms[fo->n_forms++] = part;
    return 0;
}

/* -u USER:PASSWORD: copied, and the argv string overwritten (as curl does)
 * so that ps(1) no longer shows it. */
static int opt_user(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    fetch_opts *fo = field;
    if (!strchr(val, ':'))
        return cli_usage_error(CMD, "%s needs USER:PASSWORD (stagger does not prompt; "
                                    "USER: sends an empty password)",
                               p->spelled);
    char *copy = keep(fo, strdup(val));
    if (!copy)
        return cli_usage_error(CMD, "out of memory");
    memset((char *)val, ' ', strlen(val));
    fo->userpwd = copy;
    return 0;
}

static int opt_http_version(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)val;
    *(long *)field = !strcmp(o->name, "http1.1")                ? CURL_HTTP_VERSION_1_1
                     : !strcmp(o->name, "http2-prior-knowledge") ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
                                                                 : CURL_HTTP_VERSION_2_0;
    return 0;
}

/* -w FORMAT, or @FILE (@- stdin) holding it, as curl reads it. */
static int opt_write_out(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o;
    fetch_opts *fo = field;
    if (val[0] == '@') {
        size_t len;
        char *buf = keep(fo, cli_read_file(val + 1, &len));
        if (!buf)
            return cli_usage_error(CMD, "cannot read %s: %s", val + 1, strerror(errno));
        val = buf;
    }
    fo->write_out = val;
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
    if (!cli_parse_rate(val, false, &fo->rate))
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
     NULL, NULL, 0, NULL, .values = "GET POST PUT PATCH DELETE HEAD OPTIONS"},
    {CLI_STRING, "method", 0, "METHOD", "same as --request", F(method), NULL, NULL, 0, NULL,
     .values = "GET POST PUT PATCH DELETE HEAD OPTIONS"},
    {CLI_FLAG, "head", 'I', NULL, "HEAD request; print the response headers", F(head), NULL,
     NULL, 0, NULL},
    {CLI_FN, "header", 'H', "'Name: value'",
     "add a header; repeatable; @FILE reads headers from\n"
     "FILE, one a line (@- stdin), all treated as secret",
     0, opt_header, NULL, 0, NULL},
    {CLI_FN, "secret-header-env", 0, "NAME=VAR",
     "send header NAME with the value of environment\n"
     "variable VAR, treated as secret (keeps it out of argv)",
     0, opt_header_env, NULL, 0, NULL},
    {CLI_FN, "user", 'u', "USER:PASSWORD",
     "HTTP Basic authentication (never printed or logged;\n"
     "only sent to the URL's origin)",
     0, opt_user, NULL, 0, NULL},
    {CLI_STRING, "user-agent", 'A', "NAME", "User-Agent (default stagger/VERSION)",
     F(user_agent), NULL, NULL, 0, NULL},
    {CLI_STRING, "referer", 'e', "URL", "Referer header", F(referer), NULL, NULL, 0, NULL},
    {CLI_STRING, "cookie", 'b', "NAME=VALUE|FILE",
     "send cookies (a string with '='), or read them from\n"
     "a cookie FILE; secret like Cookie: headers",
     F(cookie), NULL, NULL, 0, NULL},
    {CLI_FN, "data", 'd', "DATA",
     "body (POST); @FILE reads FILE without CR/LF;\nrepeated data is joined with '&'", 0, opt_data,
     NULL, 0, NULL},
    {CLI_FN, "data-binary", 0, "DATA", "body as is; @FILE reads FILE byte for byte", 0, opt_data,
     NULL, 0, NULL},
    {CLI_FN, "data-raw", 0, "DATA", "body as is; a leading @ is not a file", 0, opt_data, NULL, 0,
     NULL},
    {CLI_FN, "data-urlencode", 0, "[NAME]=TEXT|[NAME]@FILE",
     "body part, TEXT (or FILE's content) URL-encoded", 0, opt_data, NULL, 0, NULL},
    {CLI_FN, "json", 0, "DATA",
     "JSON body (@FILE as is), with Content-Type and\n"
     "Accept: application/json unless -H gives them",
     0, opt_data, NULL, 0, NULL},
    {CLI_FLAG, "get", 'G', NULL, "put the data (-d, --data-urlencode) in the URL's\nquery, GET",
     F(get), NULL, NULL, 0, NULL},
    {CLI_FN, "form", 'F', "NAME=CONTENT",
     "multipart/form-data part (POST); @FILE uploads FILE,\n"
     "<FILE sends its content; ;type=T and ;filename=N",
     0, opt_form, NULL, 0, NULL},
    {CLI_FN, "form-string", 0, "NAME=STRING", "form part, STRING as is (no @, < or ;type=)", 0,
     opt_form, NULL, 0, NULL},
    {CLI_FLAG, "compressed", 0, NULL,
     "ask for a compressed answer (every encoding libcurl\ndecodes)", F(compressed), NULL, NULL, 0,
     NULL},
    {CLI_FN, "http1.1", 0, NULL, "use HTTP/1.1", F(http_version), opt_http_version, NULL, 0,
     NULL},
    {CLI_FN, "http2", 0, NULL, "use HTTP/2 (h2c upgrade on http://)", F(http_version),
     opt_http_version, NULL, 0, NULL},
    {CLI_FN, "http2-prior-knowledge", 0, NULL, "use HTTP/2 without an upgrade on http://",
     F(http_version), opt_http_version, NULL, 0, NULL},
    {CLI_STRING, "proxy", 'x', "[PROTOCOL://]HOST[:PORT]",
     "use this proxy (default: $http_proxy, $https_proxy\nand $no_proxy, read by libcurl)",
     F(proxy), NULL, NULL, 0, NULL},
    {CLI_FLAG, "location", 'L', NULL, "follow redirects (http and https only)", F(location), NULL,
     NULL, 0, NULL},
    {CLI_FN, "idempotency-key", 0, "KEY|auto",
     "send Idempotency-Key (auto: a random UUIDv4); lets\nPOST and PATCH be retried", F(idem_key),
     opt_idem_key, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_timeout_opts, .off = F(policy)},
    {CLI_FN, "retry", 0, "N", "same as --retries (curl's name)", F(policy), cli_opt_retries, NULL,
     0, NULL},
    {CLI_FN, "rate", 0, "R[/s|/m|/h]", "client-side limit on attempts (token bucket)", 0, opt_rate,
     NULL, 0, NULL},
    {CLI_FN, "burst", 0, "B", "bucket capacity (default max(1, ceil(R)))", 0, opt_burst, NULL, 0,
     NULL},
    {CLI_FLAG, "no-quotas", 0, NULL,
     "do not hold retries for the quotas the server announces\n"
     "(default: a retry waits for a spent quota's reset)",
     F(no_quotas), NULL, NULL, 0, NULL},
    {CLI_FLAG, "no-cost-estimate", 0, NULL,
     "do not hold an AI API request's retries for its tokens\n"
     "(default: the prompt's characters / 4 and max_tokens,\n"
     "from the -d body, are reserved against token quotas)",
     F(no_cost_estimate), NULL, NULL, 0, NULL},
    {.kind = CLI_HEADING, .help = "Output"},
    {CLI_STRING, "output", 'o', "FILE",
     "write the final body to FILE (also a final 429/503;\ncreated 0600; - is stdout)",
     F(out_path), NULL, NULL, 0, NULL},
    {CLI_FLAG, "remote-name", 'O', NULL, "write to the URL's last path segment, here",
     F(remote_name), NULL, NULL, 0, NULL},
    {CLI_STRING, "dump-header", 'D', "FILE",
     "write the final response headers to FILE (- stdout)", F(dump_path), NULL, NULL, 0, NULL},
    {CLI_FN, "write-out", 'w', "FORMAT",
     "print FORMAT at the end: %{http_code}, %{time_total},\n"
     "%{url_effective}, %{num_retries}, %{json}... (@FILE)",
     0, opt_write_out, NULL, 0, NULL},
    {CLI_FN, "max-body", 0, "SIZE",
     "keep at most SIZE bytes of the body (k, M, G\n"
     "suffixes); a longer body is an error (9)",
     F(max_body), cli_opt_size, NULL, 0, NULL, "64M"},
    {CLI_FLAG, "include", 'i', NULL, "include the final response headers in the output", F(include),
     NULL, NULL, 0, NULL},
    {CLI_FLAG, "fail", 'f', NULL, "no body output for a final HTTP error (400 and up)",
     F(fail), NULL, NULL, 0, NULL},
    {CLI_FLAG, "silent", 's', NULL, "no message when giving up", F(silent), NULL, NULL, 0, NULL},
    {CLI_FLAG, "quiet", 'q', NULL, "same as --silent", F(silent), NULL, NULL, 0, NULL},
    {CLI_FLAG, "show-error", 'S', NULL, "with -s, still say why it failed", F(show_error), NULL,
     NULL, 0, NULL},
    {CLI_FLAG, "verbose", 'v', NULL,
     "attempts and decisions on stderr (URLs and secret\nheader values redacted)", F(verbose), NULL,
     NULL, 0, NULL},
    {CLI_STRING, "log-json", 0, "FILE",
     "JSON lines: one per attempt, wait and outcome\n(created 0600; - is stdout)", F(log_path),
     NULL, NULL, 0, NULL},
    {CLI_STRING, "log", 0, "FILE", "same as --log-json", F(log_path), NULL, NULL, 0, NULL},
    {CLI_STRING, "metrics", 0, "FILE",
     "Prometheus text format, written atomically at start\n"
     "(a check) and at exit (- stdout, at exit)",
     F(metrics_path), NULL, NULL, 0, NULL},
    {.kind = CLI_GROUP, .group = cli_metrics_live_opts, .off = F(live)},
    {CLI_FN, "secret-header", 0, "NAME", "treat header NAME as secret too; repeatable", 0,
     opt_secret, NULL, 0, NULL},
    {CLI_FN, "seed", 0, "N", "seed of the jitter (default: random)", F(seed), opt_seed, NULL, 0,
     NULL},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    {.kind = CLI_HEADING, .help = "Shared limit (many processes or machines)"},
    {.kind = CLI_GROUP, .group = cli_limiter_opts, .off = F(limiter)},
    {.kind = CLI_GROUP, .group = cli_redis_tls_opts, .off = F(limiter.tls), .man = "stagger-batch(1)"},
    {CLI_FN, "share-breaker", 0, NULL, NULL, 0, opt_share_breaker, NULL, CLI_OPT_HIDDEN, NULL},
    {.kind = CLI_GROUP, .group = cli_class_opts, .off = F(cls)},
    {.kind = CLI_HEADING, .help = "TLS (https://)"},
    {.kind = CLI_GROUP, .group = cli_tls_opts, .off = F(tls)},
    {.kind = CLI_HEADING, .help = "Retry policy"},
    {.kind = CLI_GROUP, .group = cli_policy_all_opts, .off = F(policy)},
    {.kind = CLI_TEXT, .help = cli_durations_help},
    CLI_OPT_END,
};
#undef F

static const int fetch_exits[] = {CLI_EXIT_OK,        CLI_EXIT_FAILED,   CLI_EXIT_USAGE,
                                  CLI_EXIT_LEFT,      CLI_EXIT_INPUT,    CLI_EXIT_LIMITER,
                                  CLI_EXIT_TRANSPORT, CLI_EXIT_DEADLINE, CLI_EXIT_TRUNCATED,
                                  CLI_EXIT_TLS,       CLI_EXIT_SIGINT,   CLI_EXIT_SIGTERM,
                                  -1};

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

/* -G: the data joins the URL's query (libcurl's URL API, no parser
 * here) and the request has no body. */
static int data_to_query(fetch_opts *o)
{
    CURLU *u = curl_url();
    char *full = NULL;
    CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, o->url, CURLU_GUESS_SCHEME)
                     : CURLUE_OUT_OF_MEMORY;
    if (!uc)
        uc = curl_url_set(u, CURLUPART_QUERY, o->data, CURLU_APPENDQUERY);
    if (!uc)
        uc = curl_url_get(u, CURLUPART_URL, &full, 0);
    curl_url_cleanup(u);
    if (uc)
        return cli_usage_error(CMD, "-G: cannot put the data in the URL: %s",
                               curl_url_strerror(uc));
    o->url = keep(o, strdup(full));
    curl_free(full);
    if (!o->url)
        return cli_usage_error(CMD, "out of memory");
    o->has_data = false;
    o->data_len = 0;
    return 0;
}

/* -O: the last segment of the URL's path, as curl takes it (not decoded). */
static int remote_file_name(fetch_opts *o)
{
    CURLU *u = curl_url();
    char *path = NULL;
    CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, o->url, CURLU_GUESS_SCHEME)
                     : CURLUE_OUT_OF_MEMORY;
    if (!uc)
        uc = curl_url_get(u, CURLUPART_PATH, &path, 0);
    curl_url_cleanup(u);
    if (uc)
        return cli_usage_error(CMD, "bad URL: %s", curl_url_strerror(uc));
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
        curl_free(path);
        return cli_usage_error(CMD, "-O: the URL's path has no file name (use -o FILE)");
    }
    o->out_path = keep(o, strdup(name));
    curl_free(path);
    return o->out_path ? 0 : cli_usage_error(CMD, "out of memory");
}

static bool has_header(const fetch_opts *o, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < o->n_headers; i++) {
        const char *h = o->header_lines[i];
        if (!strncasecmp(h, name, n) && (h[n] == ':' || h[n] == ';'))
            return true;
    }
    return false;
}

/* What curl's flags imply once all are read: -o -, -O, -G, --json's
 * headers, -w's format; and the combinations curl refuses too. */
static int curl_flags(fetch_opts *o)
{
    if (o->out_path && !strcmp(o->out_path, "-"))
        o->out_path = NULL; /* standard output, as in every Unix tool */
    if (o->remote_name) {
        if (o->out_path)
            return cli_usage_error(CMD, "-O and -o name two outputs: give one");
        int rc = remote_file_name(o);
        if (rc)
            return rc;
    }
    if (o->n_forms && (o->has_data || o->get))
        return cli_usage_error(CMD, "-F cannot be combined with -d, --json or -G (one body)");
    if (o->head && !o->get && (o->has_data || o->n_forms))
        return cli_usage_error(CMD, "-I sends no body: it cannot be combined with -d or -F");
    if (o->get && o->has_data) {
        int rc = data_to_query(o);
        if (rc)
            return rc;
    }
    if (o->json && o->has_data) {
        if (!has_header(o, "Content-Type") && add_header(o, "Content-Type: application/json"))
            return CLI_EXIT_USAGE;
        if (!has_header(o, "Accept") && add_header(o, "Accept: application/json"))
            return CLI_EXIT_USAGE;
    }
    char bad[64];
    if (o->write_out && cli_writeout_check(o->write_out, bad, sizeof bad) != 0)
        return cli_usage_error(CMD, "unknown --write-out variable %%{%s}", bad);
    return 0;
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
    if ((rc = curl_flags(o)) != 0)
        return rc;
    const stg_tls_config *tls;
    if ((rc = cli_tls_config(&o->tls, CMD, &tls)) != 0)
        return rc;
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

/* The event sink of -v, which also counts the retries for -w. */
typedef struct verbose {
    int64_t t0;
    bool have_t0;
    bool print; /* -v */
    int waits;  /* retry waits: %{num_retries} */
} verbose;

static void ms_text(int64_t us, char *buf, size_t size)
{
    cli_format_duration(us, buf, size);
}

static void on_verbose(const stg_event *ev, void *data)
{
    verbose *v = data;
    if (ev->type == STG_EVENT_WAIT)
        v->waits++;
    if (!v->print)
        return;
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
        cli_tls_verbose(ev, stderr);
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
    case STG_EVENT_WAITED: /* the measure of a wait the lines above announced */
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
    if (o->n_forms)
        fprintf(stderr, "> (body: multipart form, %zu part%s)\n", o->n_forms,
                o->n_forms == 1 ? "" : "s");
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
    case STG_REASON_HARD_STOP: /* the body said no retry can cure it */
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
    if (ok && (o->include || o->head) && r->headers_len)
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

/* -D: the final response's header block, as received. */
static bool write_headers(const fetch_opts *o, const stg_result *r, FILE *f)
{
    bool ok = fwrite(r->headers, 1, r->headers_len, f) == r->headers_len && fflush(f) == 0;
    if (!ok)
        fprintf(stderr, "stagger %s: cannot write %s\n", CMD, o->dump_path);
    return ok;
}

/* -F: the parts, with libcurl's mime API (it rereads files on a retry). */
static curl_mime *build_mime(const fetch_opts *o, CURL *easy)
{
    curl_mime *mime = curl_mime_init(easy);
    for (size_t i = 0; mime && i < o->n_forms; i++) {
        const form_part *f = &o->forms[i];
        curl_mimepart *part = curl_mime_addpart(mime);
        CURLcode c = part ? curl_mime_name(part, f->name) : CURLE_OUT_OF_MEMORY;
        if (!c && f->kind)
            c = curl_mime_filedata(part, f->content);
        else if (!c)
            c = curl_mime_data(part, f->content, CURL_ZERO_TERMINATED);
        if (!c && f->kind == '<')
            c = curl_mime_filename(part, NULL); /* the content, not an upload */
        if (!c && f->filename)
            c = curl_mime_filename(part, f->filename);
        if (!c && f->type)
            c = curl_mime_type(part, f->type);
        if (c) {
            curl_mime_free(mime);
            return NULL;
        }
    }
    if (mime)
        curl_easy_setopt(easy, CURLOPT_MIMEPOST, mime);
    return mime;
}

static int run(fetch_opts *o)
{
    if (cli_defaults_probe()) { /* help --defaults: o is what the call is configured from */
        const cli_command *c = &cli_fetch_command;
        cli_defaults_row(c, "max-body", CLI_VAL_SIZE, (long long)o->max_body);
        cli_defaults_row(c, "metrics-interval", CLI_VAL_DURATION, (int64_t)o->live.interval_us);
        cli_limiter_defaults_rows(c, &o->limiter);
        cli_defaults_row(c, "priority", CLI_VAL_STRING, stg_priority_name(o->cls.priority));
        cli_defaults_row(c, "weight", CLI_VAL_DOUBLE, o->cls.weight);
        cli_policy_defaults_rows(c, &o->policy);
        return 0;
    }
    bool has_body = o->has_data || o->n_forms;
    const char *method = o->method ? o->method : o->head ? "HEAD" : has_body ? "POST" : "GET";
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

    FILE *logf = NULL, *outf = NULL, *dumpf = NULL;
    curl_mime *mime = NULL;
    bool log_stdout = o->log_path && !strcmp(o->log_path, "-");
    bool metrics_stdout = o->metrics_path && !strcmp(o->metrics_path, "-");
    bool dump_stdout = o->dump_path && !strcmp(o->dump_path, "-");
    bool out_created = false, wrote = false;
    out_stream stream = {.f = NULL};
    stg_logger *logger = NULL;
    stg_metrics *metrics = NULL;
    cli_metrics_live *live = NULL;
    stg_cancel *cancel = NULL;
    CURL *easy = NULL;
    stg_quota *quotas = NULL;
    stg_quota_cost ai_cost[3];
    stg_bucket bucket;
    int status = EXIT_LOCAL;
    bool ran = false; /* the call ran: -w has a result to print */
    stg_result res;
    memset(&res, 0, sizeof res);
    verbose vb = {.print = o->verbose};
    stg_event_fanout fan;
    memset(&fan, 0, sizeof fan);

    /* Every output is opened (or written) before the first request: a path
     * that cannot be written fails here, with nothing sent. */
    if (o->out_path && !(outf = cli_open_private(o->out_path, CLI_OPEN_KEEP, &out_created))) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path, strerror(errno));
        goto out;
    }
    if (o->dump_path && !dump_stdout &&
        !(dumpf = cli_open_private(o->dump_path, CLI_OPEN_TRUNCATE, NULL))) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->dump_path, strerror(errno));
        goto out;
    }
    if (o->log_path) {
        logf = log_stdout ? stdout : cli_open_private(o->log_path, CLI_OPEN_TRUNCATE, NULL);
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
        if (o->metrics_path && !metrics_stdout &&
            stg_metrics_write(metrics, o->metrics_path) != STG_OK) {
            fprintf(stderr, "stagger %s: cannot write metrics to %s\n", CMD, o->metrics_path);
            stg_metrics_free(metrics);
            metrics = NULL;
            goto out;
        }
        fan.fn[fan.n] = stg_metrics_event;
        fan.data[fan.n++] = metrics;
    }
    fan.fn[fan.n] = on_verbose; /* -v, and the count of retries for -w */
    fan.data[fan.n++] = &vb;
    cancel = stg_cancel_new();
    easy = curl_easy_init();
    if (!cancel || !easy)
        goto oom;

    curl_easy_setopt(easy, CURLOPT_URL, o->url);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_USERAGENT,
                     o->user_agent ? o->user_agent : "stagger/" STG_VERSION_STRING);
    if (o->referer)
        curl_easy_setopt(easy, CURLOPT_REFERER, o->referer);
    if (o->userpwd) /* the call drops it on a hop to another origin */
        curl_easy_setopt(easy, CURLOPT_USERPWD, o->userpwd);
    if (o->cookie) /* curl's rule: with '=' the cookies, else a cookie file */
        curl_easy_setopt(easy, strchr(o->cookie, '=') ? CURLOPT_COOKIE : CURLOPT_COOKIEFILE,
                         o->cookie);
    if (o->proxy)
        curl_easy_setopt(easy, CURLOPT_PROXY, o->proxy);
    if (o->compressed)
        curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    if (o->http_version)
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, o->http_version);
    if (o->n_forms && !(mime = build_mime(o, easy)))
        goto oom;
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
    else if (o->method && (o->head || strcmp(method, has_body ? "POST" : "GET")))
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
    if (o->head && m != STG_METHOD_HEAD) /* -I -X M: M, without reading a body */
        curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);

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
        .tls = &o->tls.cfg,
    };
    /* Only a regular file is replaced by rename: -o /dev/null, a FIFO or a
     * terminal is written in place from memory (a rename would put a
     * regular file where the device was). */
    struct stat out_st;
    if (outf && !o->include && !o->head && fstat(fileno(outf), &out_st) == 0 &&
        S_ISREG(out_st.st_mode)) {
        snprintf(stream.tmpl, sizeof stream.tmpl, "%s.XXXXXX", o->out_path);
        cfg.body_sink = out_sink;
        cfg.body_sink_data = &stream;
    }
    cfg.priority = o->cls.priority; /* the shared limiter orders by them */
    cfg.tenant = o->cls.tenant;
    cfg.weight = o->cls.weight;
    if (o->limiter.url) {
        int lrc = cli_limiter_open(&o->limiter, o->has_rate ? o->rate : 0,
                                   o->has_burst ? o->burst : 0, 0, 0, &cfg.shared);
        if (lrc != 0) {
            status = lrc; /* usage, or unreachable without a fallback: the limiter exit */
            goto out;
        }
    } else if (o->has_rate) {
        stg_bucket_config bc = {.rate = o->rate, .burst = o->has_burst ? o->burst : 0};
        if (stg_bucket_init(&bucket, &bc, stg__clock_mono_us()) != STG_OK) {
            status = cli_usage_error(CMD, "bad --rate/--burst combination");
            goto out;
        }
        cfg.bucket = &bucket;
    }

    if (!o->no_quotas) {
        /* The announced quotas hold every retry and hop, as batch's do. */
        int qerr = STG_OK;
        if (!(quotas = stg_quota_new(NULL, &qerr))) {
            fprintf(stderr, "stagger %s: %s\n", CMD, stg_strerror(qerr));
            goto out;
        }
        cfg.quotas = quotas;
        stg_metrics_set_quotas(metrics, quotas); /* NULL metrics: nothing */
        /* An AI API request costs its tokens (stg_ai_cost_estimate). */
        if (!o->no_cost_estimate && o->has_data)
            cfg.n_cost = stg_ai_cost_estimate(NULL, method, o->url, o->data, o->data_len, ai_cost,
                                              sizeof ai_cost / sizeof ai_cost[0]);
        cfg.cost = cfg.n_cost ? ai_cost : NULL;
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
    status = cli_tls_exit(&res, exit_status(&res));
    bool cancelled = res.reason == STG_REASON_CANCELLED;
    /* -f: a final HTTP error writes no body (curl's --fail); the exit
     * status is stagger's either way. */
    bool failed_http = o->fail && res.status >= 400;
    if (res.status > 0 && !cancelled && o->dump_path &&
        !write_headers(o, &res, dumpf ? dumpf : stdout))
        status = EXIT_LOCAL;
    size_t max_body = o->max_body;
    if (res.body_sink_failed) {
        fprintf(stderr, "stagger %s: cannot write %s: %s\n", CMD, o->out_path,
                strerror(stream.err ? stream.err : EIO));
        status = EXIT_LOCAL;
    } else if (res.status > 0 && !cancelled && !failed_http) {
        wrote = true;
        if (!(stream.exists ? out_commit(o, &stream)
                            : write_output(o, &res, outf ? outf : stdout)))
            status = EXIT_LOCAL;
    }
    bool say = !o->silent || o->show_error;
    if (res.body_truncated && say) /* body_len 0: the sink got max_body bytes */
        fprintf(stderr,
                "stagger %s: the body is larger than %zu bytes (--max-body): only the "
                "first %zu were kept%s\n",
                CMD, max_body, res.body_len ? res.body_len : max_body,
                wrote ? " and written" : "");
    if (status != EXIT_OK && status != EXIT_TRUNCATED && say) {
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
        cli_tls_hint(&res, CMD, stderr);
    }
    ran = true;
    goto out;

oom:
    fprintf(stderr, "stagger %s: out of memory\n", CMD);
    status = EXIT_LOCAL;
out:
    cli_metrics_live_stop(live);
    out_remove(&stream); /* a temp file not renamed into place: not the answer */
    if (metrics && o->metrics_path && !metrics_stdout &&
        stg_metrics_write(metrics, o->metrics_path) != STG_OK) {
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
    if (metrics && metrics_stdout && stg_metrics_print(metrics, stdout) != STG_OK &&
        status == EXIT_OK)
        status = EXIT_LOCAL;
    if (dumpf && fclose(dumpf) != 0 && status == EXIT_OK) {
        fprintf(stderr, "stagger %s: cannot write %s\n", CMD, o->dump_path);
        status = EXIT_LOCAL;
    }
    if (ran && o->write_out) {
        char url[2048];
        stg_redact_url(o->url, url, sizeof url);
        int redirects = res.attempts - 1 - vb.waits;
        cli_writeout_vars wv = {.easy = easy,
                                .res = &res,
                                .url = url,
                                .filename = o->out_path,
                                .exitcode = status,
                                .retries = vb.waits,
                                .redirects = redirects > 0 ? redirects : 0};
        cli_writeout(o->write_out, &wv, stdout, stderr);
    }
    stg_result_free(&res);
    cli_limiter_close(&o->limiter);
    stg_metrics_set_quotas(metrics, NULL);
    stg_quota_free(quotas);
    if (easy)
        curl_easy_cleanup(easy);
    curl_mime_free(mime); /* after the handle that used it */
    stg_cancel_free(cancel);
    stg_metrics_free(metrics);
    stg_logger_free(logger);
    if (logf && (log_stdout ? fflush(logf) : fclose(logf)) != 0 && status == EXIT_OK) {
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
    free(o.forms);
    for (size_t i = 0; i < o.n_owned; i++)
        free(o.owned[i]);
    free(o.owned);
    return rc;
}

#endif
