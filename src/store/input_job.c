/*
 * Batch input, the job being built (store/input.c has the formats' rules):
 * the URL and secret helpers, the job set and its bad lines, and the steps
 * every format shares to build a job (its headers, class, URL, automatic
 * Idempotency-Key). A job's secrets are known as it is built (url_secret,
 * headers_secret: the core's stagger/redact.h), so nothing later needs to
 * look again; a header value reaches a job only through
 * stg__input_add_header, after the format checked it (util/http_field.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/policy.h>
#include <stagger/redact.h>

#include "util/class_field.h"
#include "util/fnv.h"
#include "util/http_field.h"
#include "store/input_internal.h"
#include "util/grow.h"

/* ---- small helpers ------------------------------------------------------ */

bool stg__store_header_is_secret(const char *name, size_t len)
{
    return stg_redact_header_is_secret(name, len, NULL);
}

bool stg__store_url_valid(const char *url)
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

size_t stg__store_url_shown(const char *url, char *buf, size_t size)
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

bool stg__store_url_is_secret(const char *url)
{
    return stg_redact_url_has_secret(url);
}

bool stg__store_method_idempotent(const char *method)
{
    stg_method m = stg_method_parse(method);
    return m != STG_METHOD_UNKNOWN && (STG_METHODS_IDEMPOTENT & STG_METHOD_BIT(m));
}

/* ---- the job set ---------------------------------------------------------- */

void stg__input_spec_free(stg_job_spec *j)
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

void stg__input_specs_free(stg_job_spec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        stg__input_spec_free(&v[i]);
    free(v);
}

void stg__job_set_free(stg_job_set *set)
{
    if (!set)
        return;
    stg__input_specs_free(set->jobs, set->n);
    for (size_t i = 0; i < set->n_bad; i++)
        free(set->bad[i].message);
    free(set->bad);
    memset(set, 0, sizeof *set);
}

int stg__input_bad(stg_job_set *set, long line, const char *fmt, ...)
{
    if (!STG__GROW(set->bad, set->n_bad, set->cap_bad, 16))
        return STG_ENOMEM;
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

/* ---- building a spec ---------------------------------------------------------- */

char *stg__input_dupn(const char *s, size_t n)
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

int stg__input_add_header(stg_job_spec *j, const char *name, size_t name_len, const char *value)
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

bool stg__input_has_header(const stg_job_spec *j, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < j->n_headers; i++)
        if (!strncasecmp(j->headers[i], name, n) && j->headers[i][n] == ':')
            return true;
    return false;
}

/* Remove j's headers named name (a row's own header replaces one set
 * for every row). */
void stg__input_drop_header(stg_job_spec *j, const char *name)
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
    *h = stg__fnv1a64_bytes(*h, p, n);
    *h = (*h ^ 0xff) * STG__FNV64_PRIME; /* a separator: "a"+"bc" != "ab"+"c" */
}

int stg__input_auto_key(stg_job_spec *j)
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
 * them (batch/submit.c takes them out). NULL, STG__INPUT_CLASS_NOMEM, or why the
 * line is bad. */
const char STG__INPUT_CLASS_NOMEM[] = "out of memory";
const char *stg__input_add_class(stg_job_spec *j, const char *pr, const char *tenant,
                             const char *weight)
{
    if (pr && *pr) {
        int p;
        if (stg_priority_parse(pr, &p) != STG_OK)
            return "\"priority\" must be interactive, normal or batch";
        if (stg__input_has_header(j, STG__PRIORITY_FIELD))
            return "both \"priority\" and a " STG__PRIORITY_FIELD " header";
        const char *name = stg_priority_name(p);
        if (stg__input_add_header(j, STG__PRIORITY_FIELD, strlen(STG__PRIORITY_FIELD), name) !=
            STG_OK)
            return STG__INPUT_CLASS_NOMEM;
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
    if (stg__input_has_header(j, STG__TENANT_FIELD))
        return "both \"tenant\" and a " STG__TENANT_FIELD " header";
    if (stg__input_add_header(j, STG__TENANT_FIELD, strlen(STG__TENANT_FIELD), v) != STG_OK)
        return STG__INPUT_CLASS_NOMEM;
    return NULL;
}
/* Fill url, url_redacted, url_secret. */
int stg__input_set_url(stg_job_spec *j, const char *url)
{
    if (!(j->url = strdup(url)) || !(j->url_redacted = redact(url)))
        return STG_ENOMEM;
    j->url_secret = stg__store_url_is_secret(url);
    if (j->url_secret) {
        size_t n = stg__store_url_shown(url, NULL, 0) + 1;
        if (!(j->url_shown = malloc(n)))
            return STG_ENOMEM;
        stg__store_url_shown(url, j->url_shown, n);
    }
    return STG_OK;
}

int stg__input_push(stg_job_set *set, stg_job_spec *j)
{
    if (!STG__GROW(set->jobs, set->n, set->cap, 256))
        return STG_ENOMEM;
    set->jobs[set->n++] = *j;
    memset(j, 0, sizeof *j);
    return STG_OK;
}
