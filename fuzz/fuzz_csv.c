/*
 * libFuzzer harness for the CSV/TSV record reader (src/store/csv.c) and
 * the CSV/TSV batch input (input.c with a header and templates). The first
 * byte picks CSV or TSV and the reader under test; the rest is the input.
 * Checked:
 *   - a split returns at least one field or -1 with a reason; fields hold
 *     no NUL; a record that splits has no quoted field left open;
 *   - CSV round trip: the fields written back with every field quoted
 *     split again into the same fields;
 *   - the input reader: STG_OK, STG_EINVAL (the header does not fit the
 *     templates) or STG_ENOMEM; every job's URL is valid and starts with
 *     the template's fixed prefix; jobs + bad lines <= lines read;
 *   - the URL an export shows (url_shown: the template has a token
 *     parameter, so every job's URL is secret) keeps the prefix, has the
 *     token's value REDACTED (an empty one stays empty), and no userinfo
 *     or fragment;
 *   - with the first byte's bit 2: a JSON body template (json_body), a -H
 *     template and an idempotency-key template (issue #37): every job's
 *     body parses as JSON, it has Content-Type: application/json and the
 *     filled header, whose value and the key hold no CR, LF or NUL.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/csv.h"
#include "store/store.h"

#include "fuzz_common.h"

static void round_trip(char **f, int n)
{
    size_t cap = 1;
    for (int i = 0; i < n; i++)
        cap += strlen(f[i]) * 2 + 3;
    char *rec = malloc(cap), *w = rec;
    if (!rec)
        return;
    for (int i = 0; i < n; i++) {
        if (i)
            *w++ = ',';
        *w++ = '"';
        for (const char *p = f[i]; *p; p++) {
            if (*p == '"')
                *w++ = '"';
            *w++ = *p;
        }
        *w++ = '"';
    }
    char **g;
    const char *why;
    int m = stg__csv_split(rec, (size_t)(w - rec), ',', &g, &why);
    CHECK(m == n);
    for (int i = 0; i < n; i++)
        CHECK(!strcmp(f[i], g[i]));
    stg__csv_free(g, m);
    free(rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char sep = data[0] & 1 ? '\t' : ',';
    bool reader = data[0] & 2, rows = data[0] & 4;
    data++, size--;
    if (!reader) {
        char **f;
        const char *why;
        int n = stg__csv_split((const char *)data, size, sep, &f, &why);
        CHECK(n >= 1 || (n == -1 && why) || n == -2);
        if (n < 1)
            return 0;
        CHECK(!stg__csv_open_quote((const char *)data, size, sep));
        if (sep == ',')
            round_trip(f, n);
        stg__csv_free(f, n);
        return 0;
    }
    stg_input_options o = {.format = sep == ',' ? STG_INPUT_CSV : STG_INPUT_TSV,
                           .url_template = "http://h.test/p/{id}?a={a}&token={t}",
                           .body_template = "{\"b\": \"{b}\"}"};
    static const char *const htpl[] = {"X-Row: r-{a}-{b}"};
    if (rows) {
        o.json_body = true;
        o.header_templates = htpl;
        o.n_header_templates = 1;
        o.idempotency_key = "k-{a}";
    }
    FILE *fp = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    if (!fp)
        return 0;
    stg_job_set set;
    char err[400];
    int rc = stg__input_read(fp, &o, &set, err, sizeof err);
    fclose(fp);
    CHECK(rc == STG_OK || rc == STG_EINVAL || rc == STG_ENOMEM);
    if (rc != STG_OK)
        return 0;
    CHECK(set.n + set.n_bad <= (size_t)set.lines);
    for (size_t i = 0; i < set.n; i++) {
        const stg_job_spec *j = &set.jobs[i];
        CHECK(j->key && j->key[0] && stg__store_url_valid(j->url));
        CHECK(!strncmp(j->url, "http://h.test/p/", 16));
        CHECK(j->body && !strncmp(j->body, "{\"b\": \"", 7));
        CHECK(!strcmp(j->method, "POST"));
        CHECK(j->url_secret && j->url_shown);
        CHECK(!strncmp(j->url_shown, "http://h.test/p/", 16));
        const char *tok = strstr(j->url_shown, "&token=");
        CHECK(tok && (!strcmp(tok, "&token=REDACTED") || !strcmp(tok, "&token=")));
        CHECK(!strchr(j->url_shown, '#') && !strchr(j->url_shown, '@'));
        if (!rows)
            continue;
        json_error_t je;
        json_t *b = json_loadb(j->body, j->body_len, JSON_DECODE_ANY, &je);
        CHECK(b != NULL);
        json_decref(b);
        bool ct = false, xr = false;
        for (size_t h = 0; h < j->n_headers; h++) {
            ct |= !strcmp(j->headers[h], "Content-Type: application/json");
            xr |= !strncmp(j->headers[h], "X-Row: r-", 9);
            CHECK(!strpbrk(j->headers[h], "\r\n"));
        }
        CHECK(ct && xr);
        CHECK(j->idempotency_key && !strncmp(j->idempotency_key, "k-", 2) &&
              !strpbrk(j->idempotency_key, "\r\n"));
    }
    stg__job_set_free(&set);
    return 0;
}
