/*
 * Reading a batch's input: URL lists, key files filled into a URL template,
 * and JSONL requests.
 *
 * Every line is accounted for: it becomes a job, or it is a bad line
 * (recorded with its number and a message), or it is blank / a '#' comment
 * (skipped silently, documented in stagger-batch(1)). A bad line's message
 * never quotes the line: it may carry a secret.
 *
 * Formats:
 *   urls   one absolute http(s) URL a line; the job's id is its line number.
 *   keys   one key a line (trimmed); "{}" in the template is replaced by
 *          the key, percent-encoded (RFC 3986 unreserved characters kept,
 *          except that a key made only of dots is all "%2E": "." and ".."
 *          must never become dot segments that walk the path up); the id is
 *          the key; a repeated key is a bad line.
 *   jsonl  {"id", "method", "url", "headers", "body", "idempotency_key"}:
 *          url required; id a string or integer (default: the line number;
 *          a repeated id, or one with a control character, is a bad line);
 *          method a known HTTP method (default
 *          GET, or POST with a body); headers an object {"Name": "value"} or
 *          an array ["Name: value"]; body a string (sent as is) or any other
 *          JSON value (sent compact, with Content-Type: application/json
 *          unless a Content-Type is given); an Idempotency-Key header or the
 *          idempotency_key field marks the request safe to resend; a CR, LF,
 *          NUL or other control character in a header value or in
 *          idempotency_key is a bad line (it would split or cut the header
 *          it is sent in), and so is a name that is not an RFC 9110 token
 *          or a field batch input may not set (util/http_field.h: framing,
 *          connection-level, Host, Proxy-*: one job could otherwise smuggle
 *          a request onto the connection the next job uses); cost an object {"unit": amount} (at most
 *          STG_QUOTA_COSTS_MAX units, amounts integers 0..10^15), kept as
 *          the job's Stagger-Cost header (quota.h: stored with the headers,
 *          so a resumed batch still has it; the batch takes it out before
 *          sending), and giving both is a bad line; priority (a class
 *          name), tenant (a name) and weight (a number > 0, with a tenant)
 *          are kept as its Stagger-Priority / Stagger-Tenant headers the
 *          same way (stg__input_add_class). Other fields are ignored.
 *   csv    RFC 4180 records (csv.c: quoted fields, embedded commas, quotes
 *          and line breaks; a stray quote is a bad line) after a header
 *          row of unique, non-empty column names; tsv the same with tabs
 *          and no quoting. {name} in the URL template and the body
 *          template is the row's value of that column, percent-encoded in
 *          the URL (as a key is) and as is in the body; an identifier-like
 *          {name} that is not a column refuses the options (STG_EINVAL at
 *          open: a typo must not send a literal "{naem}"), other braces
 *          are text. The id is the "id" column, else the line number;
 *          "priority", "tenant" and "weight" columns are the job's class
 *          and tenant, as in JSONL (an empty value: none); a
 *          record's line is its first line. A row with another field
 *          count than the header's, or whose URL is not a valid URL once
 *          filled, is a bad line. Header templates (-H values) name
 *          columns too, filled as is per row; a JSON body template
 *          (json_body) is filled JSON-escaped and must parse once filled.
 *   any    idempotency_key "auto" derives each job's key from its id,
 *          method, URL and body (stable over runs); a template names
 *          columns (CSV/TSV).
 *
 * Reading: stg__input_read parses a whole file into a set (tests, tools);
 * the reader parses one line at a time and holds one line (the import);
 * the cursor reads a file again to find a job by id and key (a run's
 * needs_input jobs), holding one line and the last job found.
 *
 * Secret detection (what the store must not keep) is the core's
 * (stagger/redact.h), so the store, the engine's logs and the CLI agree: a
 * URL is secret by stg_redact_url_has_secret(), a header by the same list of
 * words as a query parameter (stg_redact_name_is_secret()).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/policy.h>

#include "store/store.h"
#include "util/assert.h"
#include "util/http_field.h"
#include "store/input_internal.h"

const char *stg__input_format_name(stg_input_format f)
{
    switch (f) {
    case STG_INPUT_URLS:
        return "urls";
    case STG_INPUT_KEYS:
        return "keys";
    case STG_INPUT_JSONL:
        return "jsonl";
    case STG_INPUT_CSV:
        return "csv";
    case STG_INPUT_TSV:
        return "tsv";
    default:
        return "auto";
    }
}

stg_input_format stg__input_format_for_path(const char *path, stg_input_format f)
{
    size_t n = path ? strlen(path) : 0;
    if (f != STG_INPUT_AUTO || n < 4)
        return f;
    if (!strcasecmp(path + n - 4, ".csv"))
        return STG_INPUT_CSV;
    if (!strcasecmp(path + n - 4, ".tsv"))
        return STG_INPUT_TSV;
    return f;
}

/* Check the options; STG_OK or STG_EINVAL with the message in err. */
static int check_options(stg_input_options *o, char *err, size_t errlen)
{
#define FAIL(code, ...)                                                                        \
    do {                                                                                       \
        if (err)                                                                               \
            snprintf(err, errlen, __VA_ARGS__);                                                \
        return code;                                                                           \
    } while (0)
    if (o->method && (stg_method_parse(o->method) == STG_METHOD_UNKNOWN ||
                      stg_method_parse(o->method) == STG_METHOD_CONNECT))
        FAIL(STG_EINVAL, "unknown method '%s' (methods are case-sensitive: GET, POST, ...)",
             o->method);
    bool auto_key = o->idempotency_key && !strcmp(o->idempotency_key, "auto");
    if (o->idempotency_key && !auto_key && !stg__input_tabular(o->format))
        FAIL(STG_EINVAL, "--idempotency-key TEMPLATE names columns of CSV or TSV input; "
                         "--idempotency-key auto works with every input");
    if (o->idempotency_key && !o->idempotency_key[0])
        FAIL(STG_EINVAL, "--idempotency-key needs auto or a template such as order-{id}");
    if (o->json_body && !o->body_template)
        FAIL(STG_EINVAL, "json_body needs a body template");
    for (size_t h = 0; h < o->n_header_templates; h++) {
        const char *t = o->header_templates[h], *colon = strchr(t, ':');
        if (!stg__input_tabular(o->format))
            FAIL(STG_EINVAL, "-H values name columns ({name}) only with CSV or TSV input");
        if (!colon || !stg__http_token(t, (size_t)(colon - t)))
            FAIL(STG_EINVAL, "-H '%s': expected 'Name: value' with {column}s in the value", t);
        if (stg__http_batch_refused(t, (size_t)(colon - t)))
            FAIL(STG_EINVAL, "-H %.*s: batch input may not set it", (int)(colon - t), t);
    }
    if (stg__input_tabular(o->format)) {
        if (!o->url_template)
            FAIL(STG_EINVAL, "CSV and TSV input need a URL template (--url) naming columns, "
                             "such as https://api.example/items/{id}");
        if (strstr(o->url_template, "{}") ||
            (o->body_template && strstr(o->body_template, "{}")))
            FAIL(STG_EINVAL, "{} is for a file of keys: name a column of the header, {id}");
        return STG_OK; /* the placeholders are checked against the header */
    }
    if (o->body_template)
        FAIL(STG_EINVAL, "a body template (-d) goes with CSV or TSV input");
    if (o->url_template)
        o->format = STG_INPUT_KEYS;
    if (o->format == STG_INPUT_KEYS) {
        if (!o->url_template || !strstr(o->url_template, "{}"))
            FAIL(STG_EINVAL, "the URL template needs a {} where the key goes");
        char *probe = stg__input_fill_key(o->url_template, "key");
        bool ok = probe && stg__store_url_valid(probe);
        free(probe);
        if (!ok)
            FAIL(STG_EINVAL, "the URL template is not an absolute http:// or https:// URL");
    }
#undef FAIL
    return STG_OK;
}

/* --idempotency-key auto: the key of a job that has none. */
static int auto_key(const stg_input_reader *r, stg_job_spec *j)
{
    if (!r->o.idempotency_key || strcmp(r->o.idempotency_key, "auto") || j->idempotency_key)
        return STG_OK;
    return stg__input_auto_key(j);
}

/* Read and parse one line into set (a job, a bad line, or nothing for a
 * blank line or a comment). Returns 1 after a line, 0 at the end, -1 on an
 * error (r->rc and r->err say which). */
static int reader_line(stg_input_reader *r, stg_job_set *set)
{
    if (r->rc != STG_OK || r->eof)
        return r->rc != STG_OK ? -1 : 0;
    ssize_t got = getline(&r->line, &r->cap, r->f);
    if (got < 0) {
        r->eof = true;
        if (ferror(r->f)) {
            r->rc = STG_EIO;
            snprintf(r->err, sizeof r->err, "read error after line %ld: %s", r->n,
                     strerror(errno ? errno : EIO));
            return -1;
        }
        return 0;
    }
    long n = ++r->n;
    size_t len = (size_t)got;
    char *line = r->line;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    char *p = line;
    if (n == 1 && len >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3))
        p += 3, len -= 3;
    int rc;
    size_t before = set->n;
    if (strlen(p) != len) {
        rc = stg__input_bad(set, n, "NUL byte in the line");
    } else if (stg__input_tabular(r->o.format)) {
        int got_rec = stg__input_csv_record(r, set, p, len, n);
        if (got_rec > 0 && set->n > before && auto_key(r, &set->jobs[set->n - 1]) != STG_OK) {
            r->rc = STG_ENOMEM;
            snprintf(r->err, sizeof r->err, "out of memory reading line %ld", n);
            return -1;
        }
        return got_rec;
    } else {
        while (*p == ' ' || *p == '\t')
            p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            p[--len] = '\0';
        if (len == 0 || *p == '#')
            return 1;
        if (r->o.format == STG_INPUT_AUTO)
            r->o.format = *p == '{' ? STG_INPUT_JSONL : STG_INPUT_URLS;
        if (r->o.format == STG_INPUT_URLS)
            rc = stg__input_url_line(set, &r->o, p, n);
        else if (r->o.format == STG_INPUT_KEYS)
            rc = stg__input_key_line(set, r->t, &r->o, p, n);
        else
            rc = stg__input_json_line(set, r->t, p, len, n);
    }
    if (rc == STG_OK && set->n > before)
        rc = auto_key(r, &set->jobs[set->n - 1]);
    if (rc != STG_OK) {
        r->rc = rc;
        snprintf(r->err, sizeof r->err, "out of memory reading line %ld", n);
        return -1;
    }
    return 1;
}

static stg_input_format reader_format(const stg_input_reader *r)
{
    return r->o.format == STG_INPUT_AUTO ? STG_INPUT_URLS : r->o.format;
}

int stg__input_read(FILE *f, const stg_input_options *opt, stg_job_set *set, char *err,
                   size_t errlen)
{
    stg_input_reader r = {.f = f};
    if (opt)
        r.o = *opt;
    memset(set, 0, sizeof *set);
    if (err && errlen)
        err[0] = '\0';
    int rc = check_options(&r.o, err, errlen);
    if (rc != STG_OK)
        return rc;
    stg__input_keytab t = {0};
    r.t = &t;
    while (reader_line(&r, set) > 0)
        ;
    free(r.line);
    free(r.rec);
    stg__input_csv_free_header(&r);
    stg__input_keytab_free(&t);
    set->lines = r.n;
    set->format = reader_format(&r);
    if (r.rc != STG_OK) {
        if (err)
            snprintf(err, errlen, "%s", r.err);
        stg__job_set_free(set);
        return r.rc;
    }
    stg__job_set_fingerprint(set);
    return STG_OK;
}

/* ---- streaming ------------------------------------------------------------------ */

int stg__input_reader_new(FILE *f, const stg_input_options *opt, stg_input_reader **out,
                         char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    stg_input_options o = {0};
    if (opt)
        o = *opt;
    int rc = check_options(&o, err, errlen);
    if (rc != STG_OK)
        return rc;
    stg_input_reader *r = calloc(1, sizeof *r);
    if (!r) {
        if (err)
            snprintf(err, errlen, "out of memory");
        return STG_ENOMEM;
    }
    r->f = f;
    r->o = o;
    r->id_col = -1;
    /* CSV/TSV: the header now, so a template that names no column is a
     * usage error before anything is imported. A bad line before it is
     * kept for the first _next. */
    while (stg__input_tabular(o.format) && !r->header_done && r->item.n_bad == 0 &&
           reader_line(r, &r->item) > 0)
        ;
    r->keep_item = r->item.n_bad > 0;
    if (r->rc != STG_OK) {
        if (err)
            snprintf(err, errlen, "%s", r->err);
        rc = r->rc;
        r->f = NULL;
        stg__input_reader_free(r);
        return rc;
    }
    *out = r;
    return STG_OK;
}

int stg__input_reader_next(stg_input_reader *r, stg_job_spec **job, stg_bad_line **bad)
{
    *job = NULL;
    *bad = NULL;
    stg_job_set *it = &r->item;
    if (r->keep_item) { /* a bad line found while reading the header at open */
        r->keep_item = false;
        if (it->n_bad) {
            *bad = &it->bad[0];
            return STG_OK;
        }
    }
    for (size_t i = 0; i < it->n; i++)
        stg__input_spec_free(&it->jobs[i]);
    for (size_t i = 0; i < it->n_bad; i++)
        free(it->bad[i].message);
    it->n = it->n_bad = 0;
    int got;
    while ((got = reader_line(r, it)) > 0 && it->n + it->n_bad == 0)
        ;
    if (got < 0)
        return r->rc;
    /* One line makes one job or one bad line, never both. */
    STG_ASSERT(it->n + it->n_bad <= 1);
    if (it->n)
        *job = &it->jobs[0];
    else if (it->n_bad)
        *bad = &it->bad[0];
    return STG_OK;
}

long stg__input_reader_lines(const stg_input_reader *r)
{
    return r->n;
}

stg_input_format stg__input_reader_format(const stg_input_reader *r)
{
    return reader_format(r);
}

const char *stg__input_reader_error(const stg_input_reader *r)
{
    return r->err;
}

void stg__input_reader_free(stg_input_reader *r)
{
    if (!r)
        return;
    stg__job_set_free(&r->item);
    free(r->line);
    stg__input_csv_free_header(r);
    free(r->rec);
    if (r->owns_file)
        fclose(r->f);
    free(r);
}

int stg__input_reader_open(const char *path, const stg_input_options *opt,
                          stg_input_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!strcmp(path, "-"))
        return stg__input_reader_new(stdin, opt, out, err, errlen);
    stg_input_options o = {0};
    if (opt)
        o = *opt;
    o.format = stg__input_format_for_path(path, o.format);
    int rc = check_options(&o, err, errlen); /* a usage error before any file error */
    if (rc != STG_OK)
        return rc;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (err)
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return STG_EIO;
    }
    o.format = opt ? opt->format : STG_INPUT_AUTO;
    o.format = stg__input_format_for_path(path, o.format);
    if ((rc = stg__input_reader_new(f, &o, out, err, errlen)) != STG_OK) {
        fclose(f);
        return rc;
    }
    (*out)->owns_file = true;
    return STG_OK;
}

int stg__input_read_path(const char *path, const stg_input_options *opt, stg_job_set *set,
                        char *err, size_t errlen)
{
    if (!strcmp(path, "-"))
        return stg__input_read(stdin, opt, set, err, errlen);
    FILE *f = fopen(path, "r");
    if (!f) {
        memset(set, 0, sizeof *set);
        if (err)
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return STG_EIO;
    }
    int rc = stg__input_read(f, opt, set, err, errlen);
    fclose(f);
    return rc;
}

