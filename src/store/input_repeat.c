/*
 * Batch input: repeated ids and keys when a whole file is read
 * (stg__input_read). An open-addressing table of the keys seen so far, each
 * with its first line; the keys are borrowed from the set's jobs, so the
 * table lives no longer than the set. A streamed import has no table: the
 * store's UNIQUE index finds repeats there.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fnv.h"
#include "store/input_internal.h"

/* ---- a string -> line table for repeated ids ------------------------------ */

static int keytab_grow(stg__input_keytab *t)
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
        size_t h = (size_t)stg__fnv1a64(t->keys[i]) & (cap - 1);
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
static int keytab_put(stg__input_keytab *t, char *key, long line, long *prev_line)
{
    *prev_line = 0;
    if ((t->n + 1) * 2 > t->cap && keytab_grow(t) != STG_OK)
        return STG_ENOMEM;
    size_t h = (size_t)stg__fnv1a64(key) & (t->cap - 1);
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

void stg__input_keytab_free(stg__input_keytab *t)
{
    free(t->keys);
    free(t->lines);
}


/* Check the key is new; on a repeat records a bad line and returns 1. */
int stg__input_check_repeat(stg_job_set *set, stg__input_keytab *t, stg_job_spec *j,
                            const char *what)
{
    long prev;
    if (!t)
        return 0; /* streaming: the store's UNIQUE index finds repeats */
    if (keytab_put(t, j->key, j->line, &prev) != STG_OK)
        return -1;
    if (prev) {
        if (stg__input_bad(set, j->line, "repeated %s (first on line %ld); skipped", what, prev))
            return -1;
        return 1;
    }
    return 0;
}
