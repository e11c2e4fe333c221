/*
 * Option parsing shared by every subcommand: durations, numbers, the retry
 * policy flags, the one-line usage error, and files created 0600. Centralised so a duration or a
 * policy flag means the same thing in plan, fetch and batch.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/http_field.h"
#include "util/read_all.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "stagger %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_USAGE;
}

bool cli_parse_double(const char *text, double min, double max, double *out)
{
    if (!text || !*text)
        return false;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno || *end || !isfinite(v) || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool cli_parse_int(const char *text, long long min, long long max, long long *out)
{
    if (!text || !*text)
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool cli_parse_duration(const char *text, int64_t *us)
{
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}, {"", 1e6}};
    if (!text || !*text || *text == '-' || *text == '+' || *text == ' ')
        return false;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno || end == text || !isfinite(v) || v < 0)
        return false;
    /* strtod accepts "inf", "nan", hex floats: allow digits and '.' only. */
    for (const char *p = text; p < end; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcmp(end, units[i].suffix)) {
            double r = v * units[i].scale;
            if (r >= 9.2e18)
                return false;
            *us = (int64_t)llround(r);
            return true;
        }
    }
    return false;
}

bool cli_parse_size(const char *text, long long min, long long max, long long *out)
{
    char num[32];
    size_t n = text ? strlen(text) : 0;
    long long scale = 1;
    if (n && strchr("kKmMgG", text[n - 1])) {
        char u = text[n - 1];
        scale = u == 'k' || u == 'K' ? 1ll << 10 : u == 'm' || u == 'M' ? 1ll << 20 : 1ll << 30;
        n--;
    }
    long long v;
    if (n == 0 || n >= sizeof num)
        return false;
    memcpy(num, text, n);
    num[n] = '\0';
    if (!cli_parse_int(num, 0, max / scale, &v) || v * scale < min)
        return false;
    *out = v * scale;
    return true;
}

int cli_opt_size(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long v;
    if (!cli_parse_size(val, 1, 1ll << 40, &v))
        return cli_opt_bad(p, val, "expected a size from 1 byte to 1 TiB, such as 512k or 10M");
    *(size_t *)field = (size_t)v;
    return 0;
}

bool cli_parse_rate(const char *s, bool zero_ok, double *rate)
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
    if (!cli_parse_double(buf, zero_ok ? 0 : 1e-6, 1e9, &v))
        return false;
    if (zero_ok && v == 0) {
        *rate = 0;
        return true;
    }
    *rate = v / per;
    return *rate > 0 && *rate <= STG_BUCKET_RATE_MAX;
}

void cli_format_duration(int64_t us, char *buf, size_t size)
{
    if (us < 0)
        snprintf(buf, size, "-");
    else if (us < 10 * 1000)
        snprintf(buf, size, "%.2f ms", (double)us / 1e3);
    else if (us < 10 * 1000 * 1000)
        snprintf(buf, size, "%lld ms", (long long)((us + 500) / 1000));
    else if (us < INT64_C(600) * 1000 * 1000)
        snprintf(buf, size, "%.2f s", (double)us / 1e6);
    else
        snprintf(buf, size, "%lld m %02lld s", (long long)(us / 60000000),
                 (long long)((us / 1000000) % 60));
}

/* ---- the retry-policy options (a group in plan's, fetch's, batch's and
 * sim's tables); field is the stg_policy -------------------------------- */

static const char preset_names[] = "expected default, full-jitter, bounded, batch or decorrelated";

static int opt_preset(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (stg_policy_preset(field, val) != STG_OK)
        return cli_opt_bad(p, val, preset_names);
    return 0;
}

static int opt_backoff(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    stg_policy *pol = field;
    if (stg_backoff_parse(val, &pol->backoff) != STG_OK)
        return cli_opt_bad(p, val,
                           "expected fixed, exponential, full, equal, decorrelated, "
                           "pct:LO:HI or additive");
    return 0;
}

static int opt_base(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(val, &d) || d <= 0)
        return cli_opt_bad(p, val, "expected a positive duration such as 200ms");
    ((stg_policy *)field)->backoff.base_us = d;
    return 0;
}

static int opt_throttle_base(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(val, &d) || d <= 0)
        return cli_opt_bad(p, val, "expected a positive duration such as 1s");
    ((stg_policy *)field)->throttle_base_us = d;
    return 0;
}

static int opt_cap(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(val, &d) || d <= 0)
        return cli_opt_bad(p, val, "expected a positive duration such as 30s");
    ((stg_policy *)field)->backoff.cap_us = d;
    return 0;
}

static int opt_mult(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    double x;
    if (!cli_parse_double(val, 1.0, 1000.0, &x))
        return cli_opt_bad(p, val, "expected a number from 1 to 1000");
    ((stg_policy *)field)->backoff.multiplier = x;
    return 0;
}

int cli_opt_positive_duration(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    int64_t d;
    if (cli_parse_duration(val, &d) && d > 0) {
        *(int64_t *)field = d;
        return 0;
    }
    char why[96];
    snprintf(why, sizeof why, "expected a positive duration such as %s",
             o->def && strcmp(o->def, "0") ? o->def : "30s");
    return cli_opt_bad(p, val, why);
}

int cli_opt_retries(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    long long n;
    if (!cli_parse_int(val, 0, 1000000, &n))
        return cli_opt_bad(p, val, "expected a whole number from 0");
    ((stg_policy *)field)->max_attempts = (int)n + 1;
    return 0;
}

static int opt_deadline(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(val, &d))
        return cli_opt_bad(p, val, "expected a duration such as 60s (0 = none)");
    ((stg_policy *)field)->deadline_us = d == 0 ? -1 : d;
    return 0;
}

static int opt_max_server_wait(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(val, &d) || d <= 0)
        return cli_opt_bad(p, val, "expected a positive duration such as 30s");
    ((stg_policy *)field)->max_server_wait_us = d;
    return 0;
}

static int opt_retry_after(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (stg_retry_after_mode_parse(val, &((stg_policy *)field)->retry_after_mode) != STG_OK)
        return cli_opt_bad(p, val, "expected honor, exact, cap or ignore");
    return 0;
}

static int opt_spread(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    double x;
    if (!cli_parse_double(val, 0.0, 100.0, &x) || x == 0)
        return cli_opt_bad(p, val, "expected a positive fraction such as 0.2");
    ((stg_policy *)field)->honor_spread = x;
    return 0;
}

static int opt_retry_on(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)o;
    if (stg_status_set_parse(&((stg_policy *)field)->retry_statuses, val) != STG_OK)
        return cli_opt_bad(p, val, "expected statuses such as 429,503 or 429,5xx");
    return 0;
}

static int opt_no_retry_refusals(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    (void)p, (void)o, (void)val;
    ((stg_policy *)field)->no_retry_refusals = true;
    return 0;
}

/* ---- the policy options' defaults: the command's policy, resolved ---------------- */

/* c's policy before its options (cli_command.policy_defaults), resolved. */
static stg_policy command_policy(const cli_command *c)
{
    stg_policy p, r;
    memset(&p, 0, sizeof p);
    if (c && c->policy_defaults)
        c->policy_defaults(&p);
    if (stg_policy_resolve(&p, &r) != STG_OK)
        memset(&r, 0, sizeof r);
    return r;
}

/* A duration as an option takes it: "50ms", "30s", "5m"; "0" for none. */
static void typed_duration(int64_t us, char *buf, size_t size)
{
    if (us <= 0)
        snprintf(buf, size, "none");
    else if (us % STG_SEC(60) == 0 && us >= STG_SEC(120))
        snprintf(buf, size, "%lldm", (long long)(us / STG_SEC(60)));
    else if (us % STG_SEC(1) == 0)
        snprintf(buf, size, "%llds", (long long)(us / STG_SEC(1)));
    else
        snprintf(buf, size, "%lldms", (long long)(us / 1000));
}

#define POLICY_DEFAULT(name, expr)                                                                 \
    static void def_##name(const cli_command *c, char *buf, size_t size)                           \
    {                                                                                              \
        stg_policy r = command_policy(c);                                                          \
        expr;                                                                                      \
    }
POLICY_DEFAULT(base, typed_duration(r.backoff.base_us, buf, size))
POLICY_DEFAULT(throttle_base, typed_duration(r.throttle_base_us, buf, size))
POLICY_DEFAULT(cap, typed_duration(r.backoff.cap_us, buf, size))
POLICY_DEFAULT(mult, snprintf(buf, size, "%g", r.backoff.multiplier))
POLICY_DEFAULT(retries, snprintf(buf, size, "%d", r.max_attempts - 1))
POLICY_DEFAULT(deadline, typed_duration(r.deadline_us, buf, size))
POLICY_DEFAULT(max_server_wait, typed_duration(r.max_server_wait_us, buf, size))
POLICY_DEFAULT(retry_after, snprintf(buf, size, "%s", stg_retry_after_mode_name(r.retry_after_mode)))
POLICY_DEFAULT(spread, snprintf(buf, size, "%g", r.honor_spread))
POLICY_DEFAULT(connect_timeout, typed_duration(r.connect_timeout_us, buf, size))
POLICY_DEFAULT(max_time, typed_duration(r.attempt_timeout_us, buf, size))
POLICY_DEFAULT(first_byte_timeout, typed_duration(r.first_byte_timeout_us, buf, size))
POLICY_DEFAULT(idle_timeout, typed_duration(r.idle_timeout_us, buf, size))
#undef POLICY_DEFAULT

static void format_retry_on(const stg_policy *pr, char *buf, size_t size)
{
    stg_policy r = *pr;
    size_t w = 0;
    buf[0] = '\0';
    for (int st = 100; st < 640 && w < size;) {
        bool all = st % 100 == 0 && st + 99 < 640;
        for (int k = st; all && k < st + 100; k++)
            all = stg_status_set_has(&r.retry_statuses, k);
        int n = 0;
        if (all) /* a whole class, as --retry-on takes it: 5xx */
            n = snprintf(buf + w, size - w, "%s%dxx", w ? "," : "", st / 100);
        else if (stg_status_set_has(&r.retry_statuses, st))
            n = snprintf(buf + w, size - w, "%s%d", w ? "," : "", st);
        if (n < 0)
            break;
        w += (size_t)n;
        st += all ? 100 : 1;
    }
}

static void def_retry_on(const cli_command *c, char *buf, size_t size)
{
    stg_policy r = command_policy(c);
    format_retry_on(&r, buf, size);
}

void cli_policy_defaults_rows(const cli_command *c, const stg_policy *policy)
{
    stg_policy r;
    if (stg_policy_resolve(policy, &r) != STG_OK) {
        fprintf(cli_defaults_out, "policy\t-\tinvalid\tDIFFERS\n");
        return;
    }
    char buf[256];
    cli_defaults_row(c, "base", CLI_VAL_DURATION, (int64_t)r.backoff.base_us);
    cli_defaults_row(c, "throttle-base", CLI_VAL_DURATION, (int64_t)r.throttle_base_us);
    cli_defaults_row(c, "cap", CLI_VAL_DURATION, (int64_t)r.backoff.cap_us);
    cli_defaults_row(c, "mult", CLI_VAL_DOUBLE, r.backoff.multiplier);
    cli_defaults_row(c, "retries", CLI_VAL_INT, (long long)r.max_attempts - 1);
    cli_defaults_row(c, "deadline", CLI_VAL_DURATION, (int64_t)r.deadline_us);
    cli_defaults_row(c, "max-server-wait", CLI_VAL_DURATION, (int64_t)r.max_server_wait_us);
    cli_defaults_row(c, "retry-after", CLI_VAL_STRING, stg_retry_after_mode_name(r.retry_after_mode));
    cli_defaults_row(c, "spread", CLI_VAL_DOUBLE, r.honor_spread);
    format_retry_on(&r, buf, sizeof buf);
    cli_defaults_row(c, "retry-on", CLI_VAL_STRING, buf);
    if (!cli_command_has_option(c, "connect-timeout"))
        return; /* plan and sim: no per-attempt times */
    cli_defaults_row(c, "connect-timeout", CLI_VAL_DURATION, (int64_t)r.connect_timeout_us);
    cli_defaults_row(c, "max-time", CLI_VAL_DURATION, (int64_t)r.attempt_timeout_us);
    cli_defaults_row(c, "first-byte-timeout", CLI_VAL_DURATION, (int64_t)r.first_byte_timeout_us);
    cli_defaults_row(c, "idle-timeout", CLI_VAL_DURATION, (int64_t)r.idle_timeout_us);
}

const cli_opt cli_policy_kind_opts[] = {
    {CLI_FN, "preset", 0, "NAME",
     "default | full-jitter | bounded | batch | decorrelated\n"
     "(applied first wherever it is: it resets the policy)",
     0, opt_preset, NULL, CLI_OPT_EARLY, NULL,
     .values = "default full-jitter bounded batch decorrelated"},
    {CLI_FN, "backoff", 0, "KIND",
     "fixed | exponential | full | equal | decorrelated |\n"
     "pct:LO:HI (percent, e.g. pct:-20:20) | additive",
     0, opt_backoff, NULL, 0, NULL, .values = "fixed exponential full equal decorrelated additive"},
    CLI_OPT_END,
};

const cli_opt cli_policy_opts[] = {
    {CLI_FN, "base", 0, "D", "first backoff step after a transient fault: 500, 502,\n"
     "504, 408, a reset", 0, opt_base, NULL, 0, NULL, NULL, def_base},
    {CLI_FN, "throttle-base", 0, "D", "first backoff step after a throttle: 429, 529, 503\n"
     "with a hint (--base alone sets both)", 0, opt_throttle_base, NULL, 0, NULL, NULL,
     def_throttle_base},
    {CLI_FN, "cap", 0, "D", "largest backoff step, before jitter", 0, opt_cap, NULL, 0, NULL, NULL,
     def_cap},
    {CLI_FN, "mult", 0, "X", "growth per retry", 0, opt_mult, NULL, 0, NULL, NULL, def_mult},
    {CLI_FN, "retries", 0, "N", "retries after the first attempt", 0, cli_opt_retries,
     NULL, 0, NULL, NULL, def_retries},
    {CLI_FN, "deadline", 0, "D", "overall time limit, 0 = none", 0, opt_deadline,
     NULL, 0, NULL, NULL, def_deadline},
    {CLI_FN, "max-server-wait", 0, "D",
     "give the response back when the server asks for more\nthan this", 0,
     opt_max_server_wait, NULL, 0, NULL, NULL, def_max_server_wait},
    {CLI_FN, "retry-after", 0, "MODE", "honor | exact | cap | ignore", 0, opt_retry_after,
     NULL, 0, NULL, NULL, def_retry_after, .values = "honor exact cap ignore"},
    {CLI_FN, "spread", 0, "X",
     "honor mode: spread after Retry-After, as a fraction of\nit (at least --base)", 0,
     opt_spread, NULL, 0, NULL, NULL, def_spread},
    {CLI_FN, "retry-on", 0, "LIST",
     "statuses to retry, e.g. 429,503 or 429,5xx", 0,
     opt_retry_on, NULL, 0, NULL, NULL, def_retry_on},
    {CLI_FN, "no-retry-refusals", 0, NULL,
     "retry a refusal (429, 529) only for a method that may\n"
     "repeat (default: for POST too, the server did no work)",
     0, opt_no_retry_refusals, NULL, 0, NULL},
    CLI_OPT_END,
};

static int opt_attempt_time(cli_parser *p, const cli_opt *o, void *field, const char *val)
{
    int64_t d;
    if (!cli_parse_duration(val, &d) || d <= 0)
        return cli_opt_bad(p, val,
                           !strcmp(o->name, "connect-timeout")
                               ? "expected a positive duration such as 5s"
                               : "expected a positive duration such as 10s");
    stg_policy *pol = field;
    if (!strcmp(o->name, "connect-timeout"))
        pol->connect_timeout_us = d;
    else if (!strcmp(o->name, "max-time"))
        pol->attempt_timeout_us = d;
    else if (!strcmp(o->name, "first-byte-timeout"))
        pol->first_byte_timeout_us = d;
    else
        pol->idle_timeout_us = d;
    return 0;
}

const cli_opt cli_timeout_opts[] = {
    {CLI_FN, "connect-timeout", 0, "D", "per attempt", 0, opt_attempt_time, NULL,
     0, NULL, NULL, def_connect_timeout},
    {CLI_FN, "max-time", 'm', "D",
     "whole attempt (none: a body that still flows is not\n"
     "cut); every time is cut to what the deadline leaves",
     0, opt_attempt_time, NULL, 0, NULL, NULL, def_max_time},
    {CLI_FN, "first-byte-timeout", 0, "D",
     "wait for the answer to begin, once the request is\nsent", 0,
     opt_attempt_time, NULL, 0, NULL, NULL, def_first_byte_timeout},
    {CLI_FN, "idle-timeout", 0, "D",
     "longest time without a byte once the answer has\nbegun", 0,
     opt_attempt_time, NULL, 0, NULL, NULL, def_idle_timeout},
    CLI_OPT_END,
};

const cli_opt cli_policy_all_opts[] = {
    {.kind = CLI_GROUP, .group = cli_policy_kind_opts},
    {.kind = CLI_GROUP, .group = cli_policy_opts},
    CLI_OPT_END,
};

const char cli_durations_help[] =
    "Durations take us, ms, s, m or h suffixes; a bare number is seconds (curl).\n";

int cli_missing_value(const char *cmd, const char *opt)
{
    return cli_usage_error(cmd, "option %s needs a value", opt);
}

/* "Name: value", "Name:" (remove) or "Name;" (send empty), as curl takes
 * them; the name must be a token, so no value can hide where -v would
 * print it unredacted, and the value holds no CTL but HTAB (the one rule:
 * util/http_field.h). */
bool cli_header_ok(const char *h)
{
    return stg__http_line_name(h) > 0;
}

/* A line cli_header_ok took, refused by the caller's rule: the usage error
 * names the field (a token, never a value) and says why. */
static int header_refused(const char *cmd, const char *h, const char *(*refused)(const char *,
                                                                                  size_t),
                          const char *where, int line_no)
{
    size_t n = stg__http_line_name(h);
    const char *why = refused ? refused(h, n) : NULL;
    if (!why)
        return 0;
    if (where)
        return cli_usage_error(cmd, "bad header in %s (line %d): %.*s %s; %s may not set it",
                               where, line_no, (int)(n > 64 ? 64 : n), h, why, cmd);
    return cli_usage_error(cmd, "bad header: %.*s %s; %s may not set it",
                           (int)(n > 64 ? 64 : n), h, why, cmd);
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return NULL;
    char *buf = stg__read_all(f, (size_t)1 << 32, len);
    if (f != stdin) {
        int e = errno;
        fclose(f);
        errno = e;
    }
    return buf;
}

int cli_header_arg(const char *cmd, const char *val, const char *(*refused)(const char *, size_t),
                   int (*add)(void *ctx, const char *line, bool secret), void *ctx, char **owned)
{
    *owned = NULL;
    if (val[0] != '@') {
        if (!cli_header_ok(val))
            return cli_usage_error(cmd, "bad header: expected 'Name: value' (Name a token, "
                                        "no control character in the value)");
        int rc = header_refused(cmd, val, refused, NULL, 0);
        return rc ? rc : add(ctx, val, false);
    }
    const char *path = val + 1;
    size_t len;
    char *buf = cli_read_file(path, &len);
    if (!buf)
        return cli_usage_error(cmd, "cannot read headers from %s: %s", path, strerror(errno));
    *owned = buf;
    if (memchr(buf, '\0', len))
        return cli_usage_error(cmd, "bad header file %s: it holds a NUL byte", path);
    int line_no = 0;
    for (char *line = buf, *next; *line; line = next) {
        line_no++;
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        if (nl)
            *nl = '\0';
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r')
            line[--n] = '\0';
        if (!n)
            continue;
        if (!cli_header_ok(line))
            return cli_usage_error(cmd, "bad header in %s (line %d): expected 'Name: value'", path,
                                   line_no);
        int rc = header_refused(cmd, line, refused, path, line_no);
        if (!rc)
            rc = add(ctx, line, true);
        if (rc)
            return rc;
    }
    return 0;
}

int cli_header_env(const char *cmd, const char *spec, const char *(*refused)(const char *, size_t),
                   char **line)
{
    *line = NULL;
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return cli_usage_error(cmd, "bad value for --secret-header-env: expected NAME=VARIABLE");
    const char *value = getenv(eq + 1);
    if (!value || !*value)
        return cli_usage_error(cmd, "--secret-header-env: environment variable %s is not set",
                               eq + 1);
    size_t n = (size_t)(eq - spec), size = n + 2 + strlen(value) + 1;
    char *l = malloc(size);
    if (!l)
        return cli_usage_error(cmd, "out of memory");
    snprintf(l, size, "%.*s: %s", (int)n, spec, value);
    if (!cli_header_ok(l)) {
        free(l);
        return cli_usage_error(cmd, "bad --secret-header-env: NAME must be a header name and "
                                    "the value one line");
    }
    int rc = header_refused(cmd, l, refused, NULL, 0);
    if (rc) {
        free(l);
        return rc;
    }
    *line = l;
    return 0;
}

FILE *cli_open_private(const char *path, enum cli_open how, bool *created)
{
    struct stat st;
    if (created)
        *created = stat(path, &st) != 0;
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
    if (how == CLI_OPEN_TRUNCATE)
        flags |= O_TRUNC;
    else if (how == CLI_OPEN_APPEND)
        flags |= O_APPEND;
    int fd = open(path, flags, 0600);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, how == CLI_OPEN_APPEND ? "ab" : "wb");
    if (!f)
        close(fd);
    return f;
}

int cli_tls_files_check(const char *cmd, const char *pfx, const char *cacert, const char *capath,
                        const char *cert, const char *key)
{
    if (key && !cert)
        return cli_usage_error(cmd, "--%skey goes with --%scert", pfx, pfx);
    const struct {
        const char *name, *path;
        int mode;
    } f[] = {{"cacert", cacert, R_OK}, {"capath", capath, R_OK | X_OK},
             {"cert", cert, R_OK},     {"key", key, R_OK}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].path && access(f[i].path, f[i].mode) != 0)
            return cli_usage_error(cmd, "cannot read --%s%s %s: %s", pfx, f[i].name, f[i].path,
                                   strerror(errno));
    return 0;
}
