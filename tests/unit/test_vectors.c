/*
 * Runs every file of tests/vectors/ through the core: real header examples
 * from the providers' public documentation, each with its expected reading
 * (the format is described in tests/vectors/README.md). Each failed check
 * prints the file, the line, the case and both values; the summary names
 * every file and its count of cases.
 *
 * The directory is found from this file's own path (CMake compiles it by
 * its full path), or from $STG_VECTORS_DIR.
 *
 * Compiled with STG_VECTORS_BODIES (test_curl_body_vectors.c), the same
 * runner reads tests/vectors/bodies/: each case also has an answer's
 * status and body, read by libstagger-curl's body reader
 * (stg__body_hints_read, jansson) before the checks.
 */
#define _POSIX_C_SOURCE 200809L
#include "cmocka_all.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/hints.h>
#include <stagger/policy.h>
#include <stagger/rng.h>

#ifdef STG_VECTORS_BODIES
#include "curl/internal.h"
#define BODY_MAX (STG__BODY_HINTS_MAX + 1)
#endif

#define MAX_LINES 64
#define LINE_MAX_LEN 1024

typedef struct vcase {
    const char *file;
    int line;         /* of the current check */
    char name[128];
    int64_t now_s;
    char headers[MAX_LINES][LINE_MAX_LEN];
    int nheaders;
    bool fed;
    stg_hints h;
    stg_quota_set qs;
    int failures;
    int checks;
#ifdef STG_VECTORS_BODIES
    int status;          /* of the answer whose body is read (default 429) */
    char body[BODY_MAX]; /* the "b" lines, each with its newline */
    size_t blen;
#endif
} vcase;

static char vec_dir[4096];

static void find_dir(void)
{
    const char *env = getenv("STG_VECTORS_DIR");
    if (env && *env) {
        snprintf(vec_dir, sizeof vec_dir, "%s", env);
        return;
    }
    snprintf(vec_dir, sizeof vec_dir, "%s", __FILE__);
    char *slash = strrchr(vec_dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(vec_dir, sizeof vec_dir, ".");
    strncat(vec_dir, "/../vectors", sizeof vec_dir - strlen(vec_dir) - 1);
#ifdef STG_VECTORS_BODIES
    strncat(vec_dir, "/bodies", sizeof vec_dir - strlen(vec_dir) - 1);
#endif
}

#define VFAIL(c, ...)                                                  \
    do {                                                               \
        print_error("%s:%d [%s]: ", (c)->file, (c)->line, (c)->name);  \
        print_error(__VA_ARGS__);                                      \
        print_error("\n");                                             \
        (c)->failures++;                                               \
    } while (0)

/* "none" / "-" (STG_UNKNOWN), "max" (STG_WAIT_MAX_US), or a number with
 * us, ms, s, m or h. */
static bool parse_dur(const char *s, int64_t *out)
{
    char *end;
    if (!strcmp(s, "none") || !strcmp(s, "-")) {
        *out = STG_UNKNOWN;
        return true;
    }
    if (!strcmp(s, "max")) {
        *out = STG_WAIT_MAX_US;
        return true;
    }
    long long v = strtoll(s, &end, 10);
    if (end == s)
        return false;
    if (!strcmp(end, "us"))
        *out = v;
    else if (!strcmp(end, "ms"))
        *out = STG_MS(v);
    else if (!strcmp(end, "s"))
        *out = STG_SEC(v);
    else if (!strcmp(end, "m"))
        *out = STG_SEC(v * 60);
    else if (!strcmp(end, "h"))
        *out = STG_SEC(v * 3600);
    else
        return false;
    return true;
}

static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    if (!strcmp(s, "-") || !strcmp(s, "none")) {
        *out = STG_UNKNOWN;
        return true;
    }
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return false;
    *out = v;
    return true;
}

static void feed(vcase *c)
{
    if (c->fed)
        return;
    c->fed = true;
    stg_hints_init(&c->h);
    stg_quota_set_init(&c->qs);
    for (int i = 0; i < c->nheaders; i++)
        (void)stg_hints_feed_line(&c->h, &c->qs, c->headers[i], strlen(c->headers[i]),
                                  STG_SEC(c->now_s));
    /* The same headers without a set: the same wait, never a shorter one. */
    stg_hints plain;
    int64_t w1 = -2, w2 = -2;
    stg_hints_init(&plain);
    for (int i = 0; i < c->nheaders; i++)
        (void)stg_hints_header_line(&plain, c->headers[i], strlen(c->headers[i]),
                                    STG_SEC(c->now_s));
#ifdef STG_VECTORS_BODIES
    (void)stg__body_hints_read(c->status, c->body, c->blen, &c->h);
    (void)stg__body_hints_read(c->status, c->body, c->blen, &plain);
#endif
    bool a = stg_hints_server_wait(&c->h, &w1), b = stg_hints_server_wait(&plain, &w2);
    if (a && (!b || w2 < w1))
        VFAIL(c, "without a quota set the wait is %lld (%d), with one %lld (%d)", (long long)w2,
              b, (long long)w1, a);
}

static const char *fmt_dur(int64_t us, char *buf, size_t n)
{
    if (us == STG_UNKNOWN)
        snprintf(buf, n, "none");
    else if (us == STG_WAIT_MAX_US)
        snprintf(buf, n, "max");
    else
        snprintf(buf, n, "%lldus", (long long)us);
    return buf;
}

static void check_dur(vcase *c, const char *what, int64_t got, const char *want_s)
{
    int64_t want;
    char a[32], b[32];
    if (!parse_dur(want_s, &want)) {
        VFAIL(c, "bad duration '%s'", want_s);
        return;
    }
    if (got != want)
        VFAIL(c, "%s: got %s, want %s", what, fmt_dur(got, a, sizeof a), fmt_dur(want, b, sizeof b));
}

/* quota KEY UNIT field=value...; KEY "-" is the host (""). */
static void check_quota(vcase *c, char *args)
{
    char *save = NULL, *key = strtok_r(args, " \t", &save), *unit = strtok_r(NULL, " \t", &save);
    if (!key || !unit) {
        VFAIL(c, "quota needs KEY UNIT");
        return;
    }
    if (!strcmp(key, "-"))
        key = "";
    /* A window= field also picks the quota (Kong: one per window). */
    int64_t want_win = STG_UNKNOWN;
    const char *w = strstr(save ? save : "", "window=");
    if (w) {
        char buf[32];
        size_t k = 0;
        for (w += 7; *w && *w != ' ' && *w != '\t' && k + 1 < sizeof buf; w++)
            buf[k++] = *w;
        buf[k] = '\0';
        (void)parse_dur(buf, &want_win);
    }
    const stg_quota_obs *q = NULL;
    for (size_t i = 0; i < c->qs.n && !q; i++)
        if (!strcmp(c->qs.q[i].key, key) && !strcmp(c->qs.q[i].unit, unit) &&
            (want_win == STG_UNKNOWN || c->qs.q[i].window_us == want_win))
            q = &c->qs.q[i];
    if (!q) {
        VFAIL(c, "no quota key '%s' unit '%s' (%zu quotas)", key, unit, c->qs.n);
        for (size_t i = 0; i < c->qs.n; i++)
            print_error("    have '%s' '%s'\n", c->qs.q[i].key, c->qs.q[i].unit);
        return;
    }
    for (char *kv = strtok_r(NULL, " \t", &save); kv; kv = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(kv, '=');
        int64_t v;
        if (!eq) {
            VFAIL(c, "bad field '%s'", kv);
            continue;
        }
        *eq++ = '\0';
        c->checks++;
        if (!strcmp(kv, "limit") || !strcmp(kv, "remaining")) {
            int64_t got = !strcmp(kv, "limit") ? q->limit : q->remaining;
            if (!parse_int(eq, &v))
                VFAIL(c, "bad number '%s'", eq);
            else if (got != v)
                VFAIL(c, "quota '%s' %s %s: got %lld, want %lld", key, unit, kv, (long long)got,
                      (long long)v);
        } else if (!strcmp(kv, "reset")) {
            check_dur(c, "quota reset", q->reset_us, eq);
        } else if (!strcmp(kv, "window")) {
            check_dur(c, "quota window", q->window_us, eq);
        } else if (!strcmp(kv, "dialect")) {
            if (strcmp(stg_dialect_name(q->dialect), eq))
                VFAIL(c, "quota '%s' dialect: got %s, want %s", key, stg_dialect_name(q->dialect),
                      eq);
        } else if (!strcmp(kv, "global")) {
            if (q->global != !strcmp(eq, "yes"))
                VFAIL(c, "quota '%s' global: got %d, want %s", key, q->global, eq);
        } else {
            VFAIL(c, "unknown quota field '%s'", kv);
        }
    }
}

/* decide STATUS ACTION REASON [WAIT_MIN]: the default policy, GET. */
static void check_decide(vcase *c, char *args)
{
    char *save = NULL, *st = strtok_r(args, " \t", &save), *act = strtok_r(NULL, " \t", &save),
         *why = strtok_r(NULL, " \t", &save), *min = strtok_r(NULL, " \t", &save);
    stg_policy p = {0};
    stg_rng rng;
    stg_decision d;
    if (!st || !act || !why) {
        VFAIL(c, "decide needs STATUS ACTION REASON");
        return;
    }
    stg_rng_seed(&rng, 7);
    stg_retry_state rs = {.attempts = 1, .start_us = 0};
    stg_outcome o = {.status = atoi(st), .method = STG_METHOD_GET, .hints = &c->h};
    assert_int_equal(stg_decide(&p, &rs, &o, 0, &rng, &d), STG_OK);
    if (strcmp(stg_action_name(d.action), act) || strcmp(stg_reason_name(d.reason), why))
        VFAIL(c, "decide %s: got %s %s, want %s %s", st, stg_action_name(d.action),
              stg_reason_name(d.reason), act, why);
    if (min) {
        int64_t m;
        if (!parse_dur(min, &m))
            VFAIL(c, "bad duration '%s'", min);
        else if (d.wait_us < m)
            VFAIL(c, "decide %s: wait %lld us, want at least %s", st, (long long)d.wait_us, min);
    }
}

static void check_line(vcase *c, const char *kw, char *rest)
{
    feed(c);
    c->checks++;
    if (!strcmp(kw, "wait")) {
        int64_t w = STG_UNKNOWN;
        (void)stg_hints_server_wait(&c->h, &w);
        check_dur(c, "server wait", w, rest);
    } else if (!strcmp(kw, "retry_after")) {
        check_dur(c, "retry_after", c->h.retry_after_us, rest);
    } else if (!strcmp(kw, "quotas")) {
        int64_t n;
        if (!parse_int(rest, &n) || (int64_t)c->qs.n != n)
            VFAIL(c, "quotas: got %zu, want %s", c->qs.n, rest);
    } else if (!strcmp(kw, "quota")) {
        check_quota(c, rest);
    } else if (!strcmp(kw, "verdict")) {
        const char *names[] = {"none", "retry", "stop"};
        int v = c->h.verdict;
        if (v < 0 || v > 2 || strcmp(names[v], rest))
            VFAIL(c, "verdict: got %d, want %s", v, rest);
    } else if (!strcmp(kw, "global")) {
        bool g = (c->h.flags & STG_HINTS_GLOBAL) != 0;
        if (g != !strcmp(rest, "yes"))
            VFAIL(c, "global: got %d, want %s", g, rest);
    } else if (!strcmp(kw, "shared")) {
        bool g = (c->h.flags & STG_HINTS_SHARED) != 0;
        if (g != !strcmp(rest, "yes"))
            VFAIL(c, "shared: got %d, want %s", g, rest);
    } else if (!strcmp(kw, "hard_stop") || !strcmp(kw, "throttle") ||
               !strcmp(kw, "secondary")) {
        unsigned bit = !strcmp(kw, "hard_stop")  ? STG_HINTS_HARD_STOP
                       : !strcmp(kw, "throttle") ? STG_HINTS_THROTTLE
                                                 : STG_HINTS_SECONDARY;
        bool g = (c->h.flags & bit) != 0;
        if (g != !strcmp(rest, "yes"))
            VFAIL(c, "%s: got %d, want %s", kw, g, rest);
    } else if (!strcmp(kw, "malformed")) {
        if ((c->h.malformed != 0) != !strcmp(rest, "yes"))
            VFAIL(c, "malformed: got %#x, want %s", c->h.malformed, rest);
    } else if (!strcmp(kw, "oversized")) {
        if ((c->h.oversized != 0) != !strcmp(rest, "yes"))
            VFAIL(c, "oversized: got %#x, want %s", c->h.oversized, rest);
    } else if (!strcmp(kw, "dialect")) {
        bool found = false;
        for (int d = 0; d < STG_DIALECT_COUNT; d++)
            if ((c->h.dialects & (1u << d)) && !strcmp(stg_dialect_name(d), rest))
                found = true;
        if (!found)
            VFAIL(c, "dialect %s not seen (bits %#x)", rest, c->h.dialects);
    } else if (!strcmp(kw, "decide")) {
        check_decide(c, rest);
    } else {
        VFAIL(c, "unknown keyword '%s'", kw);
    }
}

static void run_file(const char *path, const char *file, int *cases, int *checks, int *failures)
{
    FILE *f = fopen(path, "r");
    char line[LINE_MAX_LEN];
    vcase *c = calloc(1, sizeof *c);
    int lineno = 0;
    bool in_case = false, has_source = false;
    assert_non_null(f);
    assert_non_null(c);
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!strncmp(line, "# source: http", 14))
            has_source = true;
        if (n == 0 || line[0] == '#')
            continue;
        if (line[0] == '[') {
            if (in_case && c->checks == 0)
                VFAIL(c, "case has no check");
            int fails = c->failures, chk = c->checks;
            memset(c, 0, sizeof *c);
            c->failures = fails;
            c->checks = chk;
            c->file = file;
            c->line = lineno;
            c->now_s = INT64_C(1700000000);
#ifdef STG_VECTORS_BODIES
            c->status = 429;
#endif
            snprintf(c->name, sizeof c->name, "%.*s", (int)(n > 2 ? n - 2 : 0), line + 1);
            c->checks = 0;
            *checks += chk;
            (*cases)++;
            in_case = true;
            continue;
        }
        c->line = lineno;
        if (!in_case) {
            VFAIL(c, "line outside a case");
            continue;
        }
        char *sp = strchr(line, ' ');
        char *rest = sp ? sp + 1 : line + n;
        if (sp)
            *sp = '\0';
        if (!strcmp(line, "h")) {
            if (c->fed)
                VFAIL(c, "header after a check");
            else if (c->nheaders == MAX_LINES)
                VFAIL(c, "too many headers");
            else
                snprintf(c->headers[c->nheaders++], LINE_MAX_LEN, "%s", rest);
#ifdef STG_VECTORS_BODIES
        } else if (!strcmp(line, "b")) {
            size_t rl = strlen(rest);
            if (c->fed)
                VFAIL(c, "body after a check");
            else if (c->blen + rl + 1 >= sizeof c->body)
                VFAIL(c, "body too long");
            else {
                memcpy(c->body + c->blen, rest, rl);
                c->blen += rl;
                c->body[c->blen++] = '\n';
            }
        } else if (!strcmp(line, "status")) {
            int64_t st;
            if (c->fed || !parse_int(rest, &st) || st < 100 || st > 599)
                VFAIL(c, "bad status '%s' (or after a check)", rest);
            else
                c->status = (int)st;
#endif
        } else if (!strcmp(line, "now")) {
            if (!parse_int(rest, &c->now_s))
                VFAIL(c, "bad now '%s'", rest);
        } else {
            check_line(c, line, rest);
        }
    }
    if (in_case && c->checks == 0)
        VFAIL(c, "case has no check");
    *checks += c->checks;
    if (!has_source) {
        c->line = 0;
        VFAIL(c, "no '# source: http...' line");
    }
    *failures += c->failures;
    free(c);
    fclose(f);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_all_vectors(void **state)
{
    (void)state;
    DIR *d;
    struct dirent *e;
    char *names[128];
    int n = 0, cases = 0, checks = 0, failures = 0;
    find_dir();
    d = opendir(vec_dir);
    if (!d)
        fail_msg("cannot open %s", vec_dir);
    while ((e = readdir(d)) && n < 128) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".txt"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    for (int i = 0; i < n; i++) {
        char path[8192];
        int before = failures, c0 = cases;
        snprintf(path, sizeof path, "%s/%s", vec_dir, names[i]);
        run_file(path, names[i], &cases, &checks, &failures);
        print_message("  %-20s %3d cases%s\n", names[i], cases - c0,
                      failures > before ? "  FAILED" : "");
        free(names[i]);
    }
    print_message("  %d files, %d cases, %d checks, %d failures\n", n, cases, checks, failures);
#ifdef STG_VECTORS_BODIES
    assert_true(n >= 3);
#else
    assert_true(n >= 10);
#endif
    assert_true(checks > cases);
    assert_int_equal(failures, 0);
}

/* Two quotas, the spent one without a reset: the summary pairs the least
 * count with its own reset (none), not another quota's, so the wait does
 * not depend on the order of the quotas, and with a set it is never
 * longer than without (fuzz_feed found the set's summary waiting for the
 * unspent "day" policy's reset). */
static void test_summary_own_reset(void **state)
{
    (void)state;
    static const char *const lines[] = {"RateLimit: \"day\";r=1", "RateLimit-Remaining: 0",
                                        "RateLimit: \"day\";r=1;t=3"};
    stg_hints h, plain;
    stg_quota_set qs;
    stg_hints_init(&h);
    stg_hints_init(&plain);
    stg_quota_set_init(&qs);
    for (size_t i = 0; i < 3; i++) {
        stg_hints_feed_line(&h, &qs, lines[i], strlen(lines[i]), 0);
        stg_hints_header_line(&plain, lines[i], strlen(lines[i]), 0);
    }
    assert_int_equal(qs.n, 2);
    assert_int_equal(h.remaining, 0);
    assert_int_equal(h.reset_us, STG_UNKNOWN);
    int64_t w = -1;
    assert_false(stg_hints_server_wait(&h, &w));
    assert_false(stg_hints_server_wait(&plain, &w));
}

/* GitHub's secondary rate limit is said only in the body's message (the
 * words of docs.github.com "Rate limits for the REST API", as captured in
 * KnpLabs/php-github-api#1070 and #1126; the pre-2022 "abuse detection"
 * form): stg_hints_message flags it for a 403 or 429, and stg_decide then
 * waits at least STG_SECONDARY_LIMIT_WAIT_US without a Retry-After. */
static void test_github_secondary_body(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        "You have exceeded a secondary rate limit and have been temporarily blocked from content "
        "creation. Please retry your request again later.",
        "You have triggered an abuse detection mechanism. Please wait a few minutes before you "
        "try again.",
        "YOU HAVE EXCEEDED A SECONDARY RATE LIMIT"};
    static const char *const no[] = {"Bad credentials", "Resource not accessible by integration",
                                     "API rate limit exceeded for 203.0.113.7.", "secondary rate",
                                     ""};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        for (int status = 403; status <= 429; status += 26) {
            stg_hints h;
            stg_hints_init(&h);
            assert_true(stg_hints_message(&h, status, yes[i], strlen(yes[i])));
            assert_true(h.flags & STG_HINTS_SECONDARY);
            assert_true(h.dialects & (1u << STG_DIALECT_GITHUB));
        }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        stg_hints h;
        stg_hints_init(&h);
        assert_false(stg_hints_message(&h, 403, no[i], strlen(no[i])));
        assert_int_equal(h.flags, 0);
    }
    /* Only a 403 or 429; only len bytes are read (cut before the words). */
    stg_hints h;
    stg_hints_init(&h);
    assert_false(stg_hints_message(&h, 401, yes[0], strlen(yes[0])));
    assert_false(stg_hints_message(&h, 500, yes[0], strlen(yes[0])));
    assert_false(stg_hints_message(&h, 403, yes[0], 30));
    assert_int_equal(h.flags, 0);
    assert_false(stg_hints_message(NULL, 403, yes[0], strlen(yes[0])));
    assert_false(stg_hints_message(&h, 403, NULL, 5));

    /* The rule: a plain 403 is an auth error; the flagged one a throttle
     * that waits 60 s (a Retry-After, when there is one, wins). */
    stg_policy longer = {.max_server_wait_us = STG_SEC(120)}, dflt = {0};
    stg_retry_state st = {.attempts = 1};
    stg_rng rng;
    stg_rng_seed(&rng, 1);
    stg_decision d;
    stg_hints_init(&h);
    stg_outcome o = {.status = 403, .method = STG_METHOD_GET, .hints = &h};
    assert_int_equal(stg_decide(&longer, &st, &o, 0, &rng, &d), STG_OK);
    assert_int_equal(d.reason, STG_REASON_STATUS_NOT_RETRYABLE);
    assert_true(stg_hints_message(&h, 403, yes[0], strlen(yes[0])));
    assert_int_equal(stg_decide(&longer, &st, &o, 0, &rng, &d), STG_OK);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_int_equal(d.server_wait_us, STG_SECONDARY_LIMIT_WAIT_US);
    assert_true(d.wait_us >= STG_SECONDARY_LIMIT_WAIT_US);
    assert_int_equal(stg_decide(&dflt, &st, &o, 0, &rng, &d), STG_OK);
    assert_int_equal(d.reason, STG_REASON_SERVER_WAIT_TOO_LONG); /* 60 s > the default 30 s */
    static const char ra[] = "Retry-After: 7";
    assert_int_equal(stg_hints_header_line(&h, ra, sizeof ra - 1, 0), STG_OK);
    assert_int_equal(stg_decide(&dflt, &st, &o, 0, &rng, &d), STG_OK);
    assert_int_equal(d.action, STG_ACTION_RETRY);
    assert_true(d.wait_us >= STG_SEC(7) && d.wait_us < STG_SECONDARY_LIMIT_WAIT_US);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_vectors),
        cmocka_unit_test(test_github_secondary_body),
        cmocka_unit_test(test_summary_own_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
