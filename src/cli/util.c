/*
 * Option parsing shared by every subcommand: durations, numbers, the retry
 * policy flags and the one-line usage error. Centralised so a duration or a
 * policy flag means the same thing in plan, fetch and batch.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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
    } units[] = {{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}, {"", 1e3}};
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

const char cli_policy_help[] =
    "Retry policy:\n"
    "  --preset NAME          default | full-jitter | bounded | batch | decorrelated\n"
    "                         (give it first: it resets the policy)\n"
    "  --backoff KIND         fixed | exponential | full | equal | decorrelated |\n"
    "                         pct:LO:HI (percent, e.g. pct:-20:20) | additive\n"
    "  --base D               first backoff step (default 500ms)\n"
    "  --cap D                largest backoff step (default 30s)\n"
    "  --mult X               growth per retry (default 2)\n"
    "  --retries N            retries after the first attempt (default 5)\n"
    "  --deadline D           overall time limit, 0 = none (default 60s)\n"
    "  --max-server-wait D    give the response back when the server asks for more\n"
    "                         than this (default 30s)\n"
    "  --retry-after MODE     honor (default) | exact | cap | ignore\n"
    "  --spread X             honor mode: spread after Retry-After, as a fraction of\n"
    "                         it (default 0.2; at least --base)\n"
    "  --retry-on LIST        statuses to retry, e.g. 429,503 or 429,5xx\n"
    "                         (default 408,429,500,502,503,504)\n"
    "Durations take us, ms, s, m or h suffixes; a bare number is milliseconds.\n";

static int bad(const char *cmd, const char *opt, const char *arg, const char *what)
{
    cli_usage_error(cmd, "bad value '%s' for %s: %s", arg ? arg : "", opt, what);
    return -1;
}

int cli_policy_option(const char *cmd, stg_policy *p, const char *opt, const char *arg)
{
    int64_t d;
    long long n;
    double x;
    if (!strcmp(opt, "--preset")) {
        /* Applied by cli_policy_preset_first(); only check it here. */
        stg_policy scratch;
        if (!arg || stg_policy_preset(&scratch, arg) != STG_OK)
            return bad(cmd, opt, arg,
                       "expected default, full-jitter, bounded, batch or decorrelated");
    } else if (!strcmp(opt, "--backoff")) {
        if (stg_backoff_parse(arg, &p->backoff) != STG_OK)
            return bad(cmd, opt, arg,
                       "expected fixed, exponential, full, equal, decorrelated, pct:LO:HI "
                       "or additive");
    } else if (!strcmp(opt, "--base")) {
        if (!cli_parse_duration(arg, &d) || d <= 0)
            return bad(cmd, opt, arg, "expected a positive duration such as 200ms");
        p->backoff.base_us = d;
    } else if (!strcmp(opt, "--cap")) {
        if (!cli_parse_duration(arg, &d) || d <= 0)
            return bad(cmd, opt, arg, "expected a positive duration such as 30s");
        p->backoff.cap_us = d;
    } else if (!strcmp(opt, "--mult")) {
        if (!cli_parse_double(arg, 1.0, 1000.0, &x))
            return bad(cmd, opt, arg, "expected a number from 1 to 1000");
        p->backoff.multiplier = x;
    } else if (!strcmp(opt, "--retries")) {
        if (!cli_parse_int(arg, 0, 1000000, &n))
            return bad(cmd, opt, arg, "expected a whole number from 0");
        p->max_attempts = (int)n + 1;
    } else if (!strcmp(opt, "--deadline")) {
        if (!cli_parse_duration(arg, &d))
            return bad(cmd, opt, arg, "expected a duration such as 60s (0 = none)");
        p->deadline_us = d == 0 ? -1 : d;
    } else if (!strcmp(opt, "--max-server-wait")) {
        if (!cli_parse_duration(arg, &d) || d <= 0)
            return bad(cmd, opt, arg, "expected a positive duration such as 30s");
        p->max_server_wait_us = d;
    } else if (!strcmp(opt, "--retry-after")) {
        if (stg_retry_after_mode_parse(arg, &p->retry_after_mode) != STG_OK)
            return bad(cmd, opt, arg, "expected honor, exact, cap or ignore");
    } else if (!strcmp(opt, "--spread")) {
        if (!cli_parse_double(arg, 0.0, 100.0, &x) || x == 0)
            return bad(cmd, opt, arg, "expected a positive fraction such as 0.2");
        p->honor_spread = x;
    } else if (!strcmp(opt, "--retry-on")) {
        if (stg_status_set_parse(&p->retry_statuses, arg) != STG_OK)
            return bad(cmd, opt, arg, "expected statuses such as 429,503 or 429,5xx");
    } else {
        return 0;
    }
    return 1;
}

int cli_policy_preset_first(const char *cmd, int argc, char **argv, stg_policy *p)
{
    for (int i = 1; i < argc; i++) {
        const char *name = NULL;
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--preset") && i + 1 < argc)
            name = argv[i + 1];
        else if (!strncmp(argv[i], "--preset=", 9))
            name = argv[i] + 9;
        if (name && stg_policy_preset(p, name) != STG_OK)
            return bad(cmd, "--preset", name,
                       "expected default, full-jitter, bounded, batch or decorrelated");
    }
    return 0;
}

void cli_args_init(cli_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->argc = argc;
    a->argv = argv;
    a->i = 0;
}

bool cli_args_next(cli_args *a, const char **opt)
{
    a->inline_value = NULL;
    a->name[0] = '\0';
    if (++a->i >= a->argc)
        return false;
    const char *s = a->argv[a->i];
    if (!a->only_positional && !strcmp(s, "--")) {
        a->only_positional = true;
        return cli_args_next(a, opt);
    }
    if (a->only_positional || s[0] != '-' || s[1] == '\0') {
        *opt = s; /* positional ("-" alone means stdin) */
        return true;
    }
    const char *eq = s[1] == '-' ? strchr(s, '=') : NULL;
    size_t n = eq ? (size_t)(eq - s) : strlen(s);
    if (n >= sizeof a->name)
        n = sizeof a->name - 1;
    memcpy(a->name, s, n);
    a->name[n] = '\0';
    if (eq)
        a->inline_value = eq + 1;
    *opt = a->name;
    return true;
}

const char *cli_args_value(cli_args *a)
{
    if (a->inline_value)
        return a->inline_value;
    if (a->i + 1 < a->argc)
        return a->argv[++a->i];
    return NULL;
}

int cli_missing_value(const char *cmd, const char *opt)
{
    return cli_usage_error(cmd, "option %s needs a value", opt);
}
