/*
 * Batch input: the secrets of needs_input jobs (a URL with a secret query
 * value, a secret header), held in memory for a run whose input cannot be
 * read again (stdin), never written to the database. Ids are added in
 * increasing order, so a find is a search by halves.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/assert.h"
#include "store/input_internal.h"
#include "util/grow.h"

/* ---- the secrets of needs_input jobs ---------------------------------------------- */

int stg__input_secrets_add(stg_input_secrets *s, int64_t id, stg_job_spec *j)
{
    STG_ASSERT(s->n == 0 || id > s->ids[s->n - 1]); /* find() searches by halves */
    size_t ids_cap = s->cap; /* ids and jobs grow together: s->cap is both */
    if (!STG__GROW(s->ids, s->n, ids_cap, 64) || !STG__GROW(s->jobs, s->n, s->cap, 64))
        return STG_ENOMEM;
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
    stg__input_spec_free(j); /* method, body, ...: in the database already */
    s->ids[s->n++] = id;
    return STG_OK;
}

const stg_job_spec *stg__input_secrets_find(const stg_input_secrets *s, int64_t id,
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

void stg__input_secrets_free(stg_input_secrets *s)
{
    if (!s)
        return;
    stg__input_specs_free(s->jobs, s->n);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

