/*
 * Batch input, CSV and TSV (rules in store/input.c's top comment; one
 * record's syntax in store/csv.c): the header row, the templates that name
 * its columns ({name} in the URL, body, -H values and --idempotency-key),
 * a record joined over the lines of a quoted field (at most MAX_RECORD
 * bytes), and a row made into a job. Every placeholder names a column,
 * checked once at the header: a row never sends a literal "{naem}".
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/csv.h"
#include "util/http_field.h"
#include "store/input_internal.h"
#include "util/grow.h"

/* ---- CSV and TSV: templates that name columns ------------------------------- */

static bool name_char(int c)
{
    return stg__input_alnum(c) || c == '_' || c == '-' || c == '.';
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
        bool dots = encode && stg__input_all_dots(v);
        for (const unsigned char *k = (const unsigned char *)v; *k; k++) {
            if (mode == FILL_JSON && (*k == '"' || *k == '\\')) {
                *w++ = '\\';
                *w++ = (char)*k;
            } else if (mode == FILL_JSON && *k < 0x20) {
                w += sprintf(w, "\\u%04x", *k);
            } else if (!encode || (stg__input_unreserved(*k) && !dots)) {
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

void stg__input_csv_free_header(stg_input_reader *r)
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
        if (!f[i][0] || !stg__http_value_ok(f[i], strlen(f[i]))) {
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
        for (int k = 0; k < 3; k++) /* a job's class (stg__input_add_class) */
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
        return stg__input_bad(set, n, "%d fields, the header has %d", nf, r->ncols);
    char numkey[32];
    snprintf(numkey, sizeof numkey, "%ld", n);
    const char *key = r->id_col >= 0 ? f[r->id_col] : numkey;
    if (!key[0])
        return stg__input_bad(set, n, "empty id");
    if (!stg__http_value_ok(key, strlen(key)))
        return stg__input_bad(set, n, "control character in the id");
    stg_job_spec j = {0};
    j.line = n;
    size_t ulen;
    char *url = fill_columns(r->o.url_template, r->cols, r->ncols, f, FILL_URL, &ulen);
    const char *method = r->o.method ? r->o.method : r->o.body_template ? "POST" : "GET";
    int rc = STG_ENOMEM;
    if (!url || !(j.key = strdup(key)) || !(j.method = strdup(method)))
        goto out;
    if (!stg__store_url_valid(url)) {
        rc = stg__input_bad(set, n, "the filled URL is not an absolute http:// or https:// URL");
        goto out;
    }
    if (stg__input_set_url(&j, url) != STG_OK)
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
            rc = stg__input_bad(set, n, "the filled --json-body is not valid JSON (%s)",
                         stg__input_json_error(&je));
            goto out;
        }
        if (stg__input_add_header(&j, "Content-Type", 12, "application/json") != STG_OK)
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
        if (!stg__http_value_ok(val, strlen(val))) {
            free(line);
            rc = stg__input_bad(set, n, "header %.*s: a control character in the filled value",
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
            if (stg__input_has_header(&j, "Content-Type") && nlen == 12 &&
                !strncasecmp(tpl, "Content-Type", 12))
                stg__input_drop_header(&j, "Content-Type"); /* the row's own wins */
            hrc = stg__input_add_header(&j, tpl, nlen, val);
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
        if (!kl || !stg__http_value_ok(ik, kl)) {
            free(ik);
            rc = stg__input_bad(set, n, "--idempotency-key: the filled key is empty or has a "
                                 "control character");
            goto out;
        }
        free(j.idempotency_key);
        j.idempotency_key = ik;
    }
    const char *cv[3];
    for (int k = 0; k < 3; k++)
        cv[k] = r->class_col[k] >= 0 ? f[r->class_col[k]] : NULL;
    const char *cwhy = stg__input_add_class(&j, cv[0], cv[1], cv[2]);
    if (cwhy) {
        rc = cwhy == STG__INPUT_CLASS_NOMEM ? STG_ENOMEM : stg__input_bad(set, n, "%s", cwhy);
        goto out;
    }
    int rep = stg__input_check_repeat(set, r->t, &j, "id");
    if (rep < 0)
        goto out;
    rc = rep == 1 || stg__input_push(set, &j) == STG_OK ? STG_OK : STG_ENOMEM;
out:
    free(url);
    stg__input_spec_free(&j);
    return rc;
}

#define MAX_RECORD ((size_t)1 << 20) /* a CSV record's bytes (an unclosed quote stops here) */

static bool rec_append(stg_input_reader *r, size_t *rl, const char *p, size_t n, bool nl)
{
    if (!stg__reserve(&r->rec, &r->rec_cap, *rl + n + 2, 1, 256))
        return false;
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
int stg__input_csv_record(stg_input_reader *r, stg_job_set *set, const char *p, size_t len,
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
        rc = stg__input_bad(set, n, "record longer than 1 MiB (a quote that is never closed?)");
    else if (memchr(r->rec, '\0', rl))
        rc = stg__input_bad(set, n, "NUL byte in the record");
    else {
        char **f;
        const char *why;
        int nf = stg__csv_split(r->rec, rl, sep, &f, &why);
        if (nf == -2)
            goto nomem;
        if (nf == -1) {
            rc = stg__input_bad(set, n, "bad %s: %s", sep == ',' ? "CSV" : "TSV", why);
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

