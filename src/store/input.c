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
 *          same way (add_class). Other fields are ignored.
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
 * Reading: stg_input_read parses a whole file into a set (tests, tools);
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

#include <jansson.h>
#include <stagger/policy.h>
#include <stagger/quota.h>
#include <stagger/redact.h>

#include "store/csv.h"
#include "store/store.h"
#include "util/assert.h"
#include "util/class_field.h"
#include "util/http_field.h"

const char *stg_input_format_name(stg_input_format f)
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

stg_input_format stg_input_format_for_path(const char *path, stg_input_format f)
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

/* ---- small helpers ------------------------------------------------------ */

bool stg__store_header_is_secret(const char *name, size_t len)
{
    return stg_redact_header_is_secret(name, len, NULL);
}

bool stg_store_url_valid(const char *url)
{
    if (!url)
        return false;
    size_t skip;
    if (!strncasecmp(url, "http://", 7))
        skip = 7;
    else if (!strncasecmp(url, "https://", 8))
        skip = 8;
    else
        return false;
    for (const char *p = url; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return false;
    const char *auth = url + skip;
    size_t alen = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', alen);
    const char *host = at ? at + 1 : auth;
    size_t hlen = alen - (size_t)(host - auth);
    return hlen > 0 && host[0] != ':';
}

size_t stg_store_url_shown(const char *url, char *buf, size_t size)
{
    /* The core's rule, the one every log and -v uses: secret-named query
     * values hidden, the rest shown (redact.h). */
    if (!url)
        url = "";
    size_t cap = strlen(url) * 3 + 64; /* every byte percent-encoded, and REDACTED */
    char *all = malloc(cap);
    if (!all) {
        if (size)
            buf[0] = '\0';
        return 0;
    }
    size_t n = stg_redact_url(url, all, cap);
    if (size)
        snprintf(buf, size, "%s", all);
    free(all);
    return n;
}

bool stg_store_url_is_secret(const char *url)
{
    return stg_redact_url_has_secret(url);
}

bool stg_store_method_idempotent(const char *method)
{
    stg_method m = stg_method_parse(method);
    return m != STG_METHOD_UNKNOWN && (STG_METHODS_IDEMPOTENT & STG_METHOD_BIT(m));
}

/* ---- the job set ---------------------------------------------------------- */

static void spec_free(stg_job_spec *j)
{
    free(j->key);
    free(j->method);
    free(j->url);
    free(j->url_redacted);
    free(j->url_shown);
    for (size_t i = 0; i < j->n_headers; i++)
        free(j->headers[i]);
    free(j->headers);
    free(j->body);
    free(j->idempotency_key);
    memset(j, 0, sizeof *j);
}

void stg_job_set_free(stg_job_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++)
        spec_free(&set->jobs[i]);
    free(set->jobs);
    for (size_t i = 0; i < set->n_bad; i++)
        free(set->bad[i].message);
    free(set->bad);
    memset(set, 0, sizeof *set);
}

static int add_bad(stg_job_set *set, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int add_bad(stg_job_set *set, long line, const char *fmt, ...)
{
    if (set->n_bad == set->cap_bad) {
        size_t cap = set->cap_bad ? set->cap_bad * 2 : 16;
        stg_bad_line *b = realloc(set->bad, cap * sizeof *b);
        if (!b)
            return STG_ENOMEM;
        set->bad = b;
        set->cap_bad = cap;
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *m = strdup(msg);
    if (!m)
        return STG_ENOMEM;
    set->bad[set->n_bad].line = line;
    set->bad[set->n_bad].message = m;
    set->n_bad++;
    return STG_OK;
}

/* ---- a string -> line table for repeated ids ------------------------------ */

typedef struct keytab {
    char **keys; /* borrowed from the specs */
    long *lines;
    size_t cap, n;
} keytab;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int keytab_grow(keytab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    char **keys = calloc(cap, sizeof *keys);
    long *lines = calloc(cap, sizeof *lines);
    if (!keys || !lines) {
        free(keys), free(lines);
        return STG_ENOMEM;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->keys[i])
            continue;
        size_t h = (size_t)hash_str(t->keys[i]) & (cap - 1);
        while (keys[h])
            h = (h + 1) & (cap - 1);
        keys[h] = t->keys[i];
        lines[h] = t->lines[i];
    }
    free(t->keys), free(t->lines);
    t->keys = keys, t->lines = lines, t->cap = cap;
    return STG_OK;
}

/* Insert key; *prev_line = the line of an earlier equal key, or 0. */
static int keytab_put(keytab *t, char *key, long line, long *prev_line)
{
    *prev_line = 0;
    if ((t->n + 1) * 2 > t->cap && keytab_grow(t) != STG_OK)
        return STG_ENOMEM;
    size_t h = (size_t)hash_str(key) & (t->cap - 1);
    while (t->keys[h]) {
        if (!strcmp(t->keys[h], key)) {
            *prev_line = t->lines[h];
            return STG_OK;
        }
        h = (h + 1) & (t->cap - 1);
    }
    t->keys[h] = key;
    t->lines[h] = line;
    t->n++;
    return STG_OK;
}

static void keytab_free(keytab *t)
{
    free(t->keys);
    free(t->lines);
}

/* ---- building a spec ---------------------------------------------------------- */

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *redact(const char *url)
{
    size_t cap = strlen(url) * 9 + 64; /* "REDACTED" per value at worst */
    char *buf = malloc(cap);
    if (buf)
        stg_redact_url(url, buf, cap);
    return buf;
}

static bool ascii_alnum(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A header value, an id, a key: tabs but no other control character (CR or
 * LF would split the header or the report line in two, NUL would cut it
 * short). The one rule, util/http_field.h. */
static bool value_ok(const char *v, size_t len)
{
    return stg__http_value_ok(v, len);
}

/* A JSONL header, name[0..n) and its value: NULL when it may be a job's
 * header, else the bad line's message in buf. */
static const char *header_bad(const char *name, size_t n, const char *val, size_t vlen,
                              char *buf, size_t size)
{
    if (!stg__http_token(name, n))
        return "bad header: invalid name (an RFC 9110 token, nothing before the colon)";
    if (!stg__http_value_ok(val, vlen))
        return "bad header: CR, LF, NUL or another control character in a value";
    const char *why = stg__http_batch_refused(name, n);
    if (!why)
        return NULL;
    snprintf(buf, size, "bad header: %.*s %s; batch input may not set it", (int)n, name, why);
    return buf;
}

static int add_header(stg_job_spec *j, const char *name, size_t name_len, const char *value)
{
    while (*value == ' ' || *value == '\t')
        value++;
    size_t vlen = strlen(value);
    while (vlen && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
        vlen--;
    char *h = malloc(name_len + vlen + 3);
    if (!h)
        return STG_ENOMEM;
    memcpy(h, name, name_len);
    memcpy(h + name_len, ": ", 2);
    memcpy(h + name_len + 2, value, vlen);
    h[name_len + 2 + vlen] = '\0';
    char **hs = realloc(j->headers, (j->n_headers + 2) * sizeof *hs);
    if (!hs) {
        free(h);
        return STG_ENOMEM;
    }
    j->headers = hs;
    j->headers[j->n_headers++] = h;
    j->headers[j->n_headers] = NULL;
    if (stg__store_header_is_secret(name, name_len))
        j->headers_secret = true;
    return STG_OK;
}

static bool has_header(const stg_job_spec *j, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < j->n_headers; i++)
        if (!strncasecmp(j->headers[i], name, n) && j->headers[i][n] == ':')
            return true;
    return false;
}

/* Remove j's headers named name (a row's own header replaces one set
 * for every row). */
static void spec_drop_header(stg_job_spec *j, const char *name)
{
    size_t n = strlen(name), k = 0;
    for (size_t i = 0; i < j->n_headers; i++) {
        if (!strncasecmp(j->headers[i], name, n) && j->headers[i][n] == ':')
            free(j->headers[i]);
        else
            j->headers[k++] = j->headers[i];
    }
    j->n_headers = k;
    if (j->headers)
        j->headers[k] = NULL;
}

/* --idempotency-key auto: "stg-" and two 64-bit FNV-1a hashes (different
 * offsets) of the id, method, URL and body, in hex. The same job gets the
 * same key on every run and resume; a job that differs in any of these
 * another one. */
static void fnv(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 0x100000001b3ULL;
    *h = (*h ^ 0xff) * 0x100000001b3ULL; /* a separator: "a"+"bc" != "ab"+"c" */
}

static int auto_idempotency_key(stg_job_spec *j)
{
    uint64_t h[2] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};
    for (int k = 0; k < 2; k++) {
        fnv(&h[k], j->key, strlen(j->key));
        fnv(&h[k], j->method, strlen(j->method));
        fnv(&h[k], j->url, strlen(j->url));
        fnv(&h[k], j->body ? j->body : "", j->body ? j->body_len : 0);
    }
    char buf[40];
    snprintf(buf, sizeof buf, "stg-%016llx%016llx", (unsigned long long)h[0],
             (unsigned long long)h[1]);
    return (j->idempotency_key = strdup(buf)) ? STG_OK : STG_ENOMEM;
}

/* A job's priority, tenant and weight (JSONL fields, CSV columns; NULL or
 * "" each: none) as its Stagger-Priority and Stagger-Tenant headers
 * (util/class_field.h), stored with its headers so a resumed run keeps
 * them (batch/submit.c takes them out). NULL, CLASS_NOMEM, or why the
 * line is bad. */
static const char CLASS_NOMEM[] = "out of memory";
static const char *add_class(stg_job_spec *j, const char *pr, const char *tenant,
                             const char *weight)
{
    if (pr && *pr) {
        int p;
        if (stg_priority_parse(pr, &p) != STG_OK)
            return "\"priority\" must be interactive, normal or batch";
        if (has_header(j, STG__PRIORITY_FIELD))
            return "both \"priority\" and a " STG__PRIORITY_FIELD " header";
        const char *name = stg_priority_name(p);
        if (add_header(j, STG__PRIORITY_FIELD, strlen(STG__PRIORITY_FIELD), name) != STG_OK)
            return CLASS_NOMEM;
    }
    bool has_w = weight && *weight;
    if (!(tenant && *tenant))
        return has_w ? "\"weight\" needs a \"tenant\"" : NULL;
    char v[2 * STG_TENANT_MAX + 8], name[STG_TENANT_MAX + 1];
    double w;
    snprintf(v, sizeof v, "%s%s%s", tenant, has_w ? ";w=" : "", has_w ? weight : "");
    if (strlen(tenant) > STG_TENANT_MAX || !stg__tenant_field_parse(v, name, sizeof name, &w))
        return "\"tenant\" must be 1 to 64 letters, digits and . _ : - (and \"weight\" a "
               "number > 0 and <= 1000000)";
    if (has_header(j, STG__TENANT_FIELD))
        return "both \"tenant\" and a " STG__TENANT_FIELD " header";
    if (add_header(j, STG__TENANT_FIELD, strlen(STG__TENANT_FIELD), v) != STG_OK)
        return CLASS_NOMEM;
    return NULL;
}

/* A JSONL "cost" object as a Stagger-Cost value ("tokens=1200, requests=1"),
 * checked by the core's parser. STG_EPARSE or STG_ERANGE when it is not
 * one. */
static int cost_value(json_t *cost, char *buf, size_t size)
{
    if (!json_is_object(cost) || json_object_size(cost) == 0)
        return STG_EPARSE;
    if (json_object_size(cost) > STG_QUOTA_COSTS_MAX)
        return STG_ERANGE;
    size_t len = 0;
    const char *unit;
    json_t *v;
    json_object_foreach(cost, unit, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return STG_EPARSE;
        int w = snprintf(buf + len, size - len, "%s%s=%" JSON_INTEGER_FORMAT, len ? ", " : "",
                         unit, json_integer_value(v));
        if (w < 0 || (size_t)w >= size - len)
            return STG_ERANGE;
        len += (size_t)w;
    }
    stg_quota_cost c[STG_QUOTA_COSTS_MAX];
    size_t n = 0;
    return stg_quota_cost_parse(buf, len, c, STG_QUOTA_COSTS_MAX, &n);
}

/* Fill url, url_redacted, url_secret. */
static int set_url(stg_job_spec *j, const char *url)
{
    if (!(j->url = strdup(url)) || !(j->url_redacted = redact(url)))
        return STG_ENOMEM;
    j->url_secret = stg_store_url_is_secret(url);
    if (j->url_secret) {
        size_t n = stg_store_url_shown(url, NULL, 0) + 1;
        if (!(j->url_shown = malloc(n)))
            return STG_ENOMEM;
        stg_store_url_shown(url, j->url_shown, n);
    }
    return STG_OK;
}

static int push_spec(stg_job_set *set, stg_job_spec *j)
{
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 256;
        stg_job_spec *js = realloc(set->jobs, cap * sizeof *js);
        if (!js)
            return STG_ENOMEM;
        set->jobs = js;
        set->cap = cap;
    }
    set->jobs[set->n++] = *j;
    memset(j, 0, sizeof *j);
    return STG_OK;
}

/* Check the key is new; on a repeat records a bad line and returns 1. */
static int check_repeat(stg_job_set *set, keytab *t, stg_job_spec *j, const char *what)
{
    long prev;
    if (!t)
        return 0; /* streaming: the store's UNIQUE index finds repeats */
    if (keytab_put(t, j->key, j->line, &prev) != STG_OK)
        return -1;
    if (prev) {
        if (add_bad(set, j->line, "repeated %s (first on line %ld); skipped", what, prev))
            return -1;
        return 1;
    }
    return 0;
}

/* ---- the formats ------------------------------------------------------------ */

static int parse_url_line(stg_job_set *set, const stg_input_options *o, char *line, long n)
{
    if (!stg_store_url_valid(line))
        return add_bad(set, n, "no URL: expected an absolute http:// or https:// URL");
    stg_job_spec j = {0};
    char key[32];
    snprintf(key, sizeof key, "%ld", n);
    j.line = n;
    if (!(j.key = strdup(key)) || !(j.method = strdup(o->method ? o->method : "GET")) ||
        set_url(&j, line) != STG_OK) {
        spec_free(&j);
        return STG_ENOMEM;
    }
    if (push_spec(set, &j) != STG_OK) {
        spec_free(&j);
        return STG_ENOMEM;
    }
    return STG_OK;
}

/* RFC 3986 unreserved: kept as is in a filled key. */
static bool unreserved(unsigned char c)
{
    return ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* "." and "..", or any key made only of dots, would be a dot segment that
 * curl and servers resolve (/ok/.. is /): such a key is encoded whole. */
static bool all_dots(const char *key)
{
    if (!*key)
        return false;
    for (; *key; key++)
        if (*key != '.')
            return false;
    return true;
}

/* tpl with every "{}" replaced by key, percent-encoded. NULL when out of
 * memory; the caller frees. */
static char *fill_template(const char *tpl, const char *key)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t klen = strlen(key), n = 0;
    bool dots = all_dots(key);
    for (const char *p = tpl; (p = strstr(p, "{}")); p += 2)
        n++;
    char *out = malloc(strlen(tpl) + n * klen * 3 + 1);
    if (!out)
        return NULL;
    char *w = out;
    for (const char *p = tpl; *p;) {
        if (p[0] == '{' && p[1] == '}') {
            for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
                if (unreserved(*k) && !dots) {
                    *w++ = (char)*k;
                } else {
                    *w++ = '%';
                    *w++ = hex[*k >> 4];
                    *w++ = hex[*k & 15];
                }
            }
            p += 2;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return out;
}

static int parse_key_line(stg_job_set *set, keytab *t, const stg_input_options *o, char *line,
                          long n)
{
    if (!value_ok(line, strlen(line)))
        return add_bad(set, n, "control character in key");
    stg_job_spec j = {0};
    j.line = n;
    char *url = NULL;
    if (!(j.key = strdup(line)) || !(j.method = strdup(o->method ? o->method : "GET")) ||
        !(url = fill_template(o->url_template, line)) || set_url(&j, url) != STG_OK) {
        free(url);
        spec_free(&j);
        return STG_ENOMEM;
    }
    free(url);
    int r = check_repeat(set, t, &j, "key");
    if (r == 0 && push_spec(set, &j) == STG_OK)
        return STG_OK;
    spec_free(&j);
    return r == 1 ? STG_OK : STG_ENOMEM;
}

static const char *json_error_text(const json_error_t *e)
{
    switch (json_error_code(e)) {
    case json_error_premature_end_of_input:
        return "bad JSON: the line ends inside a value";
    case json_error_end_of_input_expected:
        return "bad JSON: text after the object";
    case json_error_invalid_utf8:
        return "bad JSON: invalid UTF-8";
    case json_error_duplicate_key:
        return "bad JSON: a key appears twice";
    case json_error_null_character:
    case json_error_null_byte_in_key:
        return "bad JSON: NUL character";
    case json_error_numeric_overflow:
        return "bad JSON: number out of range";
    default:
        return "bad JSON: invalid syntax";
    }
}

/* JSONL: returns STG_OK (a job or a bad line recorded) or STG_ENOMEM. */
static int parse_json_line(stg_job_set *set, keytab *t, char *line, size_t len, long n)
{
    json_error_t jerr;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return add_bad(set, n, "%s (column %d)", json_error_text(&jerr), jerr.column);
    int rc = STG_OK;
    stg_job_spec j = {0};
    j.line = n;
    char numkey[32], why[200];
#define BAD(...)                                                                               \
    do {                                                                                       \
        rc = add_bad(set, n, __VA_ARGS__);                                                     \
        goto out;                                                                              \
    } while (0)
#define NOMEM()                                                                                \
    do {                                                                                       \
        rc = STG_ENOMEM;                                                                       \
        goto out;                                                                              \
    } while (0)
    if (!json_is_object(o))
        BAD("not a JSON object");
    json_t *url = json_object_get(o, "url");
    if (!url)
        BAD("no URL: \"url\" is missing");
    if (!json_is_string(url) || !stg_store_url_valid(json_string_value(url)))
        BAD("no URL: \"url\" is not an absolute http:// or https:// URL");
    json_t *id = json_object_get(o, "id");
    if (!id || json_is_null(id)) {
        snprintf(numkey, sizeof numkey, "%ld", n);
        if (!(j.key = strdup(numkey)))
            NOMEM();
    } else if (json_is_string(id) && json_string_length(id) > 0) {
        /* As in a key file: the id is printed in reports and logs, where a
         * line break would forge a line. */
        if (!value_ok(json_string_value(id), json_string_length(id)))
            BAD("\"id\" has a CR, LF, NUL or another control character");
        if (!(j.key = strdup(json_string_value(id))))
            NOMEM();
    } else if (json_is_integer(id)) {
        snprintf(numkey, sizeof numkey, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        if (!(j.key = strdup(numkey)))
            NOMEM();
    } else {
        BAD("\"id\" must be a non-empty string or an integer");
    }
    json_t *body = json_object_get(o, "body");
    bool json_body = false;
    if (body && !json_is_null(body)) {
        if (json_is_string(body)) {
            j.body_len = json_string_length(body);
            if (!(j.body = dupn(json_string_value(body), j.body_len)))
                NOMEM();
        } else {
            if (!(j.body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)))
                NOMEM();
            j.body_len = strlen(j.body);
            json_body = true;
        }
    }
    json_t *method = json_object_get(o, "method");
    if (method && !json_is_null(method)) {
        const char *m = json_is_string(method) ? json_string_value(method) : NULL;
        if (m && stg_method_parse(m) == STG_METHOD_CONNECT)
            BAD("method CONNECT is not supported");
        if (!m || stg_method_parse(m) == STG_METHOD_UNKNOWN) {
            bool printable = m && strlen(m) <= 16;
            printable = printable && stg__http_token(m, strlen(m));
            if (printable)
                BAD("unknown method '%s' (methods are case-sensitive: GET, POST, ...)", m);
            BAD("unknown method");
        }
        if (!(j.method = strdup(m)))
            NOMEM();
    } else if (!(j.method = strdup(j.body ? "POST" : "GET"))) {
        NOMEM();
    }
    json_t *hdrs = json_object_get(o, "headers");
    if (hdrs && json_is_object(hdrs)) {
        const char *name;
        json_t *v;
        json_object_foreach(hdrs, name, v)
        {
            if (!json_is_string(v))
                BAD("header values must be strings");
            size_t nlen = strlen(name);
            const char *val = json_string_value(v);
            const char *bad = header_bad(name, nlen, val, json_string_length(v), why,
                                         sizeof why);
            if (bad)
                BAD("%s", bad);
            if (nlen == 15 && !strncasecmp(name, "Idempotency-Key", 15)) {
                free(j.idempotency_key);
                if (!(j.idempotency_key = strdup(val)))
                    NOMEM();
                continue;
            }
            if (add_header(&j, name, nlen, val) != STG_OK)
                NOMEM();
        }
    } else if (hdrs && json_is_array(hdrs)) {
        size_t i;
        json_t *v;
        json_array_foreach(hdrs, i, v)
        {
            const char *h = json_is_string(v) ? json_string_value(v) : NULL;
            const char *colon = h ? strchr(h, ':') : NULL;
            if (!colon || colon == h)
                BAD("bad header: expected \"Name: value\" strings");
            size_t nlen = (size_t)(colon - h);
            const char *bad = header_bad(h, nlen, colon + 1,
                                         json_string_length(v) - nlen - 1, why, sizeof why);
            if (bad)
                BAD("%s", bad);
            if (nlen == 15 && !strncasecmp(h, "Idempotency-Key", 15)) {
                const char *val = colon + 1;
                while (*val == ' ' || *val == '\t')
                    val++;
                free(j.idempotency_key);
                if (!(j.idempotency_key = strdup(val)))
                    NOMEM();
                continue;
            }
            if (add_header(&j, h, nlen, colon + 1) != STG_OK)
                NOMEM();
        }
    } else if (hdrs && !json_is_null(hdrs)) {
        BAD("\"headers\" must be an object or an array of \"Name: value\" strings");
    }
    json_t *ik = json_object_get(o, "idempotency_key");
    if (ik && !json_is_null(ik)) {
        if (!json_is_string(ik) || json_string_length(ik) == 0)
            BAD("\"idempotency_key\" must be a non-empty string");
        if (!value_ok(json_string_value(ik), json_string_length(ik)))
            BAD("\"idempotency_key\" has a CR, LF, NUL or another control character");
        free(j.idempotency_key);
        if (!(j.idempotency_key = strdup(json_string_value(ik))))
            NOMEM();
    }
    json_t *cost = json_object_get(o, "cost");
    if (cost && !json_is_null(cost)) {
        char cv[STG_QUOTA_COSTS_MAX * 48];
        int crc = cost_value(cost, cv, sizeof cv);
        if (crc != STG_OK)
            BAD("%s", crc == STG_ERANGE ? "\"cost\" has too many units or too large an amount"
                                       : "\"cost\" must be an object {\"unit\": amount}, "
                                         "amounts non-negative integers");
        if (has_header(&j, STG_QUOTA_COST_HEADER))
            BAD("both \"cost\" and a " STG_QUOTA_COST_HEADER " header");
        if (add_header(&j, STG_QUOTA_COST_HEADER, strlen(STG_QUOTA_COST_HEADER), cv) != STG_OK)
            NOMEM();
    }
    json_t *jp = json_object_get(o, "priority"), *jt = json_object_get(o, "tenant");
    json_t *jw = json_object_get(o, "weight");
    if ((jp && !json_is_null(jp) && !json_is_string(jp)) ||
        (jt && !json_is_null(jt) && !json_is_string(jt)) ||
        (jw && !json_is_null(jw) && !json_is_number(jw)))
        BAD("\"priority\" and \"tenant\" must be strings, \"weight\" a number");
    char wv[40] = "";
    if (jw && json_is_number(jw))
        snprintf(wv, sizeof wv, "%.17g", json_number_value(jw));
    const char *cwhy = add_class(&j, json_string_value(jp), json_string_value(jt), wv);
    if (cwhy == CLASS_NOMEM)
        NOMEM();
    if (cwhy)
        BAD("%s", cwhy);
    if (json_body && !has_header(&j, "Content-Type") &&
        add_header(&j, "Content-Type", 12, "application/json") != STG_OK)
        NOMEM();
    if (set_url(&j, json_string_value(url)) != STG_OK)
        NOMEM();
    int r = check_repeat(set, t, &j, "id");
    if (r < 0)
        NOMEM();
    if (r == 0) {
        if (push_spec(set, &j) != STG_OK)
            NOMEM();
    }
out:
#undef BAD
#undef NOMEM
    spec_free(&j);
    json_decref(o);
    return rc;
}

/* ---- the reader ------------------------------------------------------------- */

struct stg_input_reader {
    FILE *f;
    stg_input_options o; /* format becomes the detected one at the first line */
    keytab *t;           /* stg_input_read's repeat table; NULL when streaming */
    char *line;
    size_t cap;
    long n;
    int rc;              /* first error: STG_ENOMEM or STG_EIO; sticky */
    bool eof;
    stg_job_set item;    /* streaming: the last line's job or bad line */
    bool owns_file;      /* opened by stg_input_reader_open: closed by _free */
    /* CSV/TSV: the header row (read at the first record), the id column
     * (-1: none, the line number is the id) and the record being joined. */
    char **cols;
    int ncols, id_col;
    int class_col[3]; /* the priority, tenant and weight columns; -1: none */
    bool header_done;
    char *rec;
    size_t rec_cap;
    bool keep_item;      /* item holds a line read before the header at open */
    char err[400];
};

static bool tabular(stg_input_format f)
{
    return f == STG_INPUT_CSV || f == STG_INPUT_TSV;
}

/* ---- CSV and TSV: templates that name columns ------------------------------- */

static bool name_char(int c)
{
    return ascii_alnum(c) || c == '_' || c == '-' || c == '.';
}

/* At p (a '{'): the length of an identifier-like placeholder's name, 0 if
 * p does not start one (other braces, JSON's included, are text). */
static size_t placeholder(const char *p)
{
    size_t n = 0;
    while (name_char((unsigned char)p[1 + n]))
        n++;
    return n > 0 && p[1 + n] == '}' ? n : 0;
}

static int column_of(char *const *cols, int ncols, const char *name, size_t n)
{
    for (int i = 0; i < ncols; i++)
        if (strlen(cols[i]) == n && !memcmp(cols[i], name, n))
            return i;
    return -1;
}

enum fill_mode { FILL_AS_IS, FILL_URL, FILL_JSON };

/* tpl with every {column} replaced by that column's value: percent-encoded
 * (FILL_URL), JSON-string-escaped (FILL_JSON) or as is. NULL when out of
 * memory; *len the length. */
static char *fill_columns(const char *tpl, char *const *cols, int ncols, char *const *vals,
                          enum fill_mode mode, size_t *len)
{
    static const char hex[] = "0123456789ABCDEF";
    bool encode = mode == FILL_URL;
    size_t cap = strlen(tpl) + 1;
    for (const char *p = tpl; (p = strchr(p, '{')); p++) {
        size_t n = placeholder(p);
        int c = n ? column_of(cols, ncols, p + 1, n) : -1;
        if (c >= 0)
            cap += strlen(vals[c]) * (mode == FILL_AS_IS ? 1 : mode == FILL_URL ? 3 : 6);
    }
    char *out = malloc(cap);
    if (!out)
        return NULL;
    char *w = out;
    for (const char *p = tpl; *p;) {
        size_t n = *p == '{' ? placeholder(p) : 0;
        int c = n ? column_of(cols, ncols, p + 1, n) : -1;
        if (c < 0) {
            *w++ = *p++;
            continue;
        }
        const char *v = vals[c];
        bool dots = encode && all_dots(v);
        for (const unsigned char *k = (const unsigned char *)v; *k; k++) {
            if (mode == FILL_JSON && (*k == '"' || *k == '\\')) {
                *w++ = '\\';
                *w++ = (char)*k;
            } else if (mode == FILL_JSON && *k < 0x20) {
                w += sprintf(w, "\\u%04x", *k);
            } else if (!encode || (unreserved(*k) && !dots)) {
                *w++ = (char)*k;
            } else {
                *w++ = '%';
                *w++ = hex[*k >> 4];
                *w++ = hex[*k & 15];
            }
        }
        p += n + 2;
    }
    *w = '\0';
    *len = (size_t)(w - out);
    return out;
}

/* Every placeholder of tpl names a column; else the message in err. */
static bool placeholders_known(const char *what, const char *tpl, char *const *cols,
                               int ncols, char *err, size_t errlen)
{
    for (const char *p = tpl; p && (p = strchr(p, '{')); p++) {
        size_t n = placeholder(p);
        if (!n || column_of(cols, ncols, p + 1, n) >= 0)
            continue;
        int off = snprintf(err, errlen, "%s names {%.*s}, which is not a column of the header (",
                           what, (int)n, p + 1);
        for (int i = 0; i < ncols && off >= 0 && (size_t)off < errlen; i++)
            off += snprintf(err + off, errlen - (size_t)off, "%s%s", i ? ", " : "", cols[i]);
        if (off >= 0 && (size_t)off < errlen)
            snprintf(err + off, errlen - (size_t)off, ")");
        return false;
    }
    return true;
}

static void free_header(stg_input_reader *r)
{
    stg__csv_free(r->cols, r->ncols);
    r->cols = NULL;
    r->ncols = 0;
    r->id_col = -1;
    r->header_done = false;
}

/* The header row: unique non-empty names, and every placeholder one of
 * them. STG_OK, or STG_EINVAL (sticky, r->err) / STG_ENOMEM. */
static int take_header(stg_input_reader *r, char **f, int nf, long n)
{
    r->cols = f, r->ncols = nf, r->header_done = true, r->id_col = -1;
    r->class_col[0] = r->class_col[1] = r->class_col[2] = -1;
    for (int i = 0; i < nf; i++) {
        if (!f[i][0] || !value_ok(f[i], strlen(f[i]))) {
            snprintf(r->err, sizeof r->err,
                     "line %ld: the header row needs a name for every column (column %d)", n,
                     i + 1);
            return STG_EINVAL;
        }
        if (column_of(f, i, f[i], strlen(f[i])) >= 0) {
            snprintf(r->err, sizeof r->err, "line %ld: column '%s' appears twice in the header",
                     n, f[i]);
            return STG_EINVAL;
        }
        if (!strcmp(f[i], "id"))
            r->id_col = i;
        for (int k = 0; k < 3; k++) /* a job's class (add_class) */
            if (!strcmp(f[i], (const char *[]){"priority", "tenant", "weight"}[k]))
                r->class_col[k] = i;
    }
    if (!placeholders_known("the URL template", r->o.url_template, f, nf, r->err,
                            sizeof r->err) ||
        !placeholders_known("the body template", r->o.body_template, f, nf, r->err,
                            sizeof r->err))
        return STG_EINVAL;
    for (size_t h = 0; h < r->o.n_header_templates; h++)
        if (!placeholders_known("a -H header", r->o.header_templates[h], f, nf, r->err,
                                sizeof r->err))
            return STG_EINVAL;
    if (r->o.idempotency_key && strcmp(r->o.idempotency_key, "auto") &&
        !placeholders_known("--idempotency-key", r->o.idempotency_key, f, nf, r->err,
                            sizeof r->err))
        return STG_EINVAL;
    return STG_OK;
}

/* One data record into a job or a bad line. STG_OK or STG_ENOMEM. */
static int parse_row(stg_job_set *set, stg_input_reader *r, char **f, int nf, long n)
{
    if (nf != r->ncols)
        return add_bad(set, n, "%d fields, the header has %d", nf, r->ncols);
    char numkey[32];
    snprintf(numkey, sizeof numkey, "%ld", n);
    const char *key = r->id_col >= 0 ? f[r->id_col] : numkey;
    if (!key[0])
        return add_bad(set, n, "empty id");
    if (!value_ok(key, strlen(key)))
        return add_bad(set, n, "control character in the id");
    stg_job_spec j = {0};
    j.line = n;
    size_t ulen;
    char *url = fill_columns(r->o.url_template, r->cols, r->ncols, f, FILL_URL, &ulen);
    const char *method = r->o.method ? r->o.method : r->o.body_template ? "POST" : "GET";
    int rc = STG_ENOMEM;
    if (!url || !(j.key = strdup(key)) || !(j.method = strdup(method)))
        goto out;
    if (!stg_store_url_valid(url)) {
        rc = add_bad(set, n, "the filled URL is not an absolute http:// or https:// URL");
        goto out;
    }
    if (set_url(&j, url) != STG_OK)
        goto out;
    if (r->o.body_template &&
        !(j.body = fill_columns(r->o.body_template, r->cols, r->ncols, f,
                                r->o.json_body ? FILL_JSON : FILL_AS_IS, &j.body_len)))
        goto out;
    if (r->o.json_body) {
        json_error_t je;
        json_t *parsed = json_loadb(j.body, j.body_len, JSON_DECODE_ANY, &je);
        json_decref(parsed);
        if (!parsed) {
            rc = add_bad(set, n, "the filled --json-body is not valid JSON (%s)",
                         json_error_text(&je));
            goto out;
        }
        if (add_header(&j, "Content-Type", 12, "application/json") != STG_OK)
            goto out;
    }
    for (size_t h = 0; h < r->o.n_header_templates; h++) {
        const char *tpl = r->o.header_templates[h];
        const char *colon = strchr(tpl, ':');
        size_t hl;
        char *line = fill_columns(tpl, r->cols, r->ncols, f, FILL_AS_IS, &hl);
        if (!line)
            goto out;
        size_t nlen = (size_t)(colon - tpl); /* the name has no placeholder: checked at open */
        const char *val = line + nlen + 1;
        if (!value_ok(val, strlen(val))) {
            free(line);
            rc = add_bad(set, n, "header %.*s: a control character in the filled value",
                         (int)nlen, tpl);
            goto out;
        }
        int hrc = STG_OK;
        if (nlen == 15 && !strncasecmp(tpl, "Idempotency-Key", 15)) {
            while (*val == ' ' || *val == '\t')
                val++;
            free(j.idempotency_key);
            if (!(j.idempotency_key = strdup(val)))
                hrc = STG_ENOMEM;
        } else {
            if (has_header(&j, "Content-Type") && nlen == 12 &&
                !strncasecmp(tpl, "Content-Type", 12))
                spec_drop_header(&j, "Content-Type"); /* the row's own wins */
            hrc = add_header(&j, tpl, nlen, val);
        }
        free(line);
        if (hrc != STG_OK)
            goto out;
    }
    if (r->o.idempotency_key && strcmp(r->o.idempotency_key, "auto")) {
        size_t kl;
        char *ik = fill_columns(r->o.idempotency_key, r->cols, r->ncols, f, FILL_AS_IS, &kl);
        if (!ik)
            goto out;
        if (!kl || !value_ok(ik, kl)) {
            free(ik);
            rc = add_bad(set, n, "--idempotency-key: the filled key is empty or has a "
                                 "control character");
            goto out;
        }
        free(j.idempotency_key);
        j.idempotency_key = ik;
    }
    const char *cv[3];
    for (int k = 0; k < 3; k++)
        cv[k] = r->class_col[k] >= 0 ? f[r->class_col[k]] : NULL;
    const char *cwhy = add_class(&j, cv[0], cv[1], cv[2]);
    if (cwhy) {
        rc = cwhy == CLASS_NOMEM ? STG_ENOMEM : add_bad(set, n, "%s", cwhy);
        goto out;
    }
    int rep = check_repeat(set, r->t, &j, "id");
    if (rep < 0)
        goto out;
    rc = rep == 1 || push_spec(set, &j) == STG_OK ? STG_OK : STG_ENOMEM;
out:
    free(url);
    spec_free(&j);
    return rc;
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
    if (o->idempotency_key && !auto_key && !tabular(o->format))
        FAIL(STG_EINVAL, "--idempotency-key TEMPLATE names columns of CSV or TSV input; "
                         "--idempotency-key auto works with every input");
    if (o->idempotency_key && !o->idempotency_key[0])
        FAIL(STG_EINVAL, "--idempotency-key needs auto or a template such as order-{id}");
    if (o->json_body && !o->body_template)
        FAIL(STG_EINVAL, "json_body needs a body template");
    for (size_t h = 0; h < o->n_header_templates; h++) {
        const char *t = o->header_templates[h], *colon = strchr(t, ':');
        if (!tabular(o->format))
            FAIL(STG_EINVAL, "-H values name columns ({name}) only with CSV or TSV input");
        if (!colon || !stg__http_token(t, (size_t)(colon - t)))
            FAIL(STG_EINVAL, "-H '%s': expected 'Name: value' with {column}s in the value", t);
        if (stg__http_batch_refused(t, (size_t)(colon - t)))
            FAIL(STG_EINVAL, "-H %.*s: batch input may not set it", (int)(colon - t), t);
    }
    if (tabular(o->format)) {
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
        char *probe = fill_template(o->url_template, "key");
        bool ok = probe && stg_store_url_valid(probe);
        free(probe);
        if (!ok)
            FAIL(STG_EINVAL, "the URL template is not an absolute http:// or https:// URL");
    }
#undef FAIL
    return STG_OK;
}

#define MAX_RECORD ((size_t)1 << 20) /* a CSV record's bytes (an unclosed quote stops here) */

static bool rec_append(stg_input_reader *r, size_t *rl, const char *p, size_t n, bool nl)
{
    size_t need = *rl + n + 2;
    if (need > r->rec_cap) {
        size_t cap = r->rec_cap ? r->rec_cap : 256;
        while (cap < need)
            cap *= 2;
        char *b = realloc(r->rec, cap);
        if (!b)
            return false;
        r->rec = b, r->rec_cap = cap;
    }
    if (nl)
        r->rec[(*rl)++] = '\n';
    memcpy(r->rec + *rl, p, n);
    *rl += n;
    r->rec[*rl] = '\0';
    return true;
}

/* A CSV/TSV record that starts with line n (p, len: that line without its
 * line break): joined with the next lines while a quoted field is open,
 * split, then the header or a row. Returns as reader_line does. */
static int tabular_record(stg_input_reader *r, stg_job_set *set, const char *p, size_t len,
                          long n)
{
    char sep = r->o.format == STG_INPUT_CSV ? ',' : '\t';
    size_t i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i == len || p[i] == '#')
        return 1; /* blank, or a comment */
    size_t rl = 0;
    int rc = STG_ENOMEM;
    if (!rec_append(r, &rl, p, len, false))
        goto nomem;
    while (stg__csv_open_quote(r->rec, rl, sep) && rl <= MAX_RECORD) {
        ssize_t got = getline(&r->line, &r->cap, r->f);
        if (got < 0)
            break; /* the split reports the open quote; reader_line the end */
        r->n++;
        size_t gl = (size_t)got;
        while (gl && (r->line[gl - 1] == '\n' || r->line[gl - 1] == '\r'))
            gl--;
        if (!rec_append(r, &rl, r->line, gl, true))
            goto nomem;
    }
    if (rl > MAX_RECORD)
        rc = add_bad(set, n, "record longer than 1 MiB (a quote that is never closed?)");
    else if (memchr(r->rec, '\0', rl))
        rc = add_bad(set, n, "NUL byte in the record");
    else {
        char **f;
        const char *why;
        int nf = stg__csv_split(r->rec, rl, sep, &f, &why);
        if (nf == -2)
            goto nomem;
        if (nf == -1) {
            rc = add_bad(set, n, "bad %s: %s", sep == ',' ? "CSV" : "TSV", why);
        } else if (!r->header_done) {
            if ((rc = take_header(r, f, nf, n)) == STG_EINVAL) {
                r->rc = rc; /* r->err says why */
                return -1;
            }
        } else {
            rc = parse_row(set, r, f, nf, n);
            stg__csv_free(f, nf);
        }
    }
    if (rc == STG_OK)
        return 1;
nomem:
    r->rc = STG_ENOMEM;
    snprintf(r->err, sizeof r->err, "out of memory reading line %ld", n);
    return -1;
}

/* --idempotency-key auto: the key of a job that has none. */
static int auto_key(const stg_input_reader *r, stg_job_spec *j)
{
    if (!r->o.idempotency_key || strcmp(r->o.idempotency_key, "auto") || j->idempotency_key)
        return STG_OK;
    return auto_idempotency_key(j);
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
        rc = add_bad(set, n, "NUL byte in the line");
    } else if (tabular(r->o.format)) {
        int got_rec = tabular_record(r, set, p, len, n);
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
            rc = parse_url_line(set, &r->o, p, n);
        else if (r->o.format == STG_INPUT_KEYS)
            rc = parse_key_line(set, r->t, &r->o, p, n);
        else
            rc = parse_json_line(set, r->t, p, len, n);
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

int stg_input_read(FILE *f, const stg_input_options *opt, stg_job_set *set, char *err,
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
    keytab t = {0};
    r.t = &t;
    while (reader_line(&r, set) > 0)
        ;
    free(r.line);
    free(r.rec);
    free_header(&r);
    keytab_free(&t);
    set->lines = r.n;
    set->format = reader_format(&r);
    if (r.rc != STG_OK) {
        if (err)
            snprintf(err, errlen, "%s", r.err);
        stg_job_set_free(set);
        return r.rc;
    }
    stg_job_set_fingerprint(set);
    return STG_OK;
}

/* ---- streaming ------------------------------------------------------------------ */

int stg_input_reader_new(FILE *f, const stg_input_options *opt, stg_input_reader **out,
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
    while (tabular(o.format) && !r->header_done && r->item.n_bad == 0 &&
           reader_line(r, &r->item) > 0)
        ;
    r->keep_item = r->item.n_bad > 0;
    if (r->rc != STG_OK) {
        if (err)
            snprintf(err, errlen, "%s", r->err);
        rc = r->rc;
        r->f = NULL;
        stg_input_reader_free(r);
        return rc;
    }
    *out = r;
    return STG_OK;
}

int stg_input_reader_next(stg_input_reader *r, stg_job_spec **job, stg_bad_line **bad)
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
        spec_free(&it->jobs[i]);
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

long stg_input_reader_lines(const stg_input_reader *r)
{
    return r->n;
}

stg_input_format stg_input_reader_format(const stg_input_reader *r)
{
    return reader_format(r);
}

const char *stg_input_reader_error(const stg_input_reader *r)
{
    return r->err;
}

void stg_input_reader_free(stg_input_reader *r)
{
    if (!r)
        return;
    stg_job_set_free(&r->item);
    free(r->line);
    free_header(r);
    free(r->rec);
    if (r->owns_file)
        fclose(r->f);
    free(r);
}

int stg_input_reader_open(const char *path, const stg_input_options *opt,
                          stg_input_reader **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!strcmp(path, "-"))
        return stg_input_reader_new(stdin, opt, out, err, errlen);
    stg_input_options o = {0};
    if (opt)
        o = *opt;
    o.format = stg_input_format_for_path(path, o.format);
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
    o.format = stg_input_format_for_path(path, o.format);
    if ((rc = stg_input_reader_new(f, &o, out, err, errlen)) != STG_OK) {
        fclose(f);
        return rc;
    }
    (*out)->owns_file = true;
    return STG_OK;
}

int stg_input_read_path(const char *path, const stg_input_options *opt, stg_job_set *set,
                        char *err, size_t errlen)
{
    if (!strcmp(path, "-"))
        return stg_input_read(stdin, opt, set, err, errlen);
    FILE *f = fopen(path, "r");
    if (!f) {
        memset(set, 0, sizeof *set);
        if (err)
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return STG_EIO;
    }
    int rc = stg_input_read(f, opt, set, err, errlen);
    fclose(f);
    return rc;
}

/* ---- the secrets of needs_input jobs ---------------------------------------------- */

int stg_input_secrets_add(stg_input_secrets *s, int64_t id, stg_job_spec *j)
{
    STG_ASSERT(s->n == 0 || id > s->ids[s->n - 1]); /* find() searches by halves */
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        int64_t *ids = realloc(s->ids, cap * sizeof *ids);
        if (!ids)
            return STG_ENOMEM;
        s->ids = ids;
        stg_job_spec *js = realloc(s->jobs, cap * sizeof *js);
        if (!js)
            return STG_ENOMEM;
        s->jobs = js;
        s->cap = cap;
    }
    stg_job_spec *k = &s->jobs[s->n];
    memset(k, 0, sizeof *k);
    k->key = j->key, j->key = NULL;
    if (j->url_secret) /* else the stored URL is the whole one */
        k->url = j->url, j->url = NULL;
    if (j->headers_secret) { /* all of them: the request keeps their order */
        k->headers = j->headers, j->headers = NULL;
        k->n_headers = j->n_headers, j->n_headers = 0;
    }
    k->line = j->line;
    k->url_secret = j->url_secret;
    k->headers_secret = j->headers_secret;
    spec_free(j); /* method, body, ...: in the database already */
    s->ids[s->n++] = id;
    return STG_OK;
}

const stg_job_spec *stg_input_secrets_find(const stg_input_secrets *s, int64_t id,
                                           const char *key)
{
    size_t lo = 0, hi = s ? s->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < (s ? s->n : 0) && s->ids[lo] == id && !strcmp(s->jobs[lo].key, key))
        return &s->jobs[lo];
    return NULL;
}

void stg_input_secrets_free(stg_input_secrets *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        spec_free(&s->jobs[i]);
    free(s->jobs);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* ---- re-reading the input: the cursor ------------------------------------------------ */

struct stg_input_cursor {
    stg_input_reader *r;
    stg_input_format format; /* the options' format, for a rewind's detection */
    int64_t last_id;         /* id of cur; 0: none yet */
    stg_job_spec cur;        /* the last job found (owned) */
};

int stg_input_cursor_open(const char *path, const stg_input_options *opt,
                          stg_input_cursor **out, char *err, size_t errlen)
{
    *out = NULL;
    stg_input_cursor *c = calloc(1, sizeof *c);
    if (!c) {
        if (err)
            snprintf(err, errlen, "out of memory");
        return STG_ENOMEM;
    }
    int rc = stg_input_reader_open(path, opt, &c->r, err, errlen);
    if (rc != STG_OK) {
        free(c);
        return rc;
    }
    c->format = c->r->o.format;
    *out = c;
    return STG_OK;
}

static bool cursor_rewind(stg_input_cursor *c)
{
    stg_input_reader *r = c->r;
    if (fseek(r->f, 0, SEEK_SET) != 0)
        return false;
    clearerr(r->f);
    r->n = 0;
    r->eof = false;
    r->rc = STG_OK;
    r->o.format = c->format;
    free_header(r); /* read again with the first record */
    r->keep_item = false;
    return true;
}

/* Scan forward for the first job whose key is key; takes it into c->cur. */
static bool cursor_scan(stg_input_cursor *c, const char *key)
{
    stg_job_spec *j;
    stg_bad_line *b;
    while (stg_input_reader_next(c->r, &j, &b) == STG_OK && (j || b)) {
        if (j && !strcmp(j->key, key)) {
            spec_free(&c->cur);
            c->cur = *j;
            memset(j, 0, sizeof *j);
            return true;
        }
    }
    return false;
}

const stg_job_spec *stg_input_cursor_find(stg_input_cursor *c, int64_t id, const char *key)
{
    if (c->last_id == id && c->cur.key && !strcmp(c->cur.key, key))
        return &c->cur;
    /* Job id's line is the first line with its key (a later one is a
     * repeat), and it comes after the line of every lower id: from the last
     * job found, the first line with the key is the one. A lower id than
     * the last starts again from the top. */
    if (id <= c->last_id && !cursor_rewind(c))
        return NULL;
    bool from_top = c->r->n == 0;
    c->last_id = 0;
    if (!cursor_scan(c, key)) {
        if (from_top || !cursor_rewind(c) || !cursor_scan(c, key))
            return NULL; /* not in this input */
    }
    c->last_id = id;
    return &c->cur;
}

void stg_input_cursor_free(stg_input_cursor *c)
{
    if (!c)
        return;
    spec_free(&c->cur);
    stg_input_reader_free(c->r);
    free(c);
}
