/*
 * Batch input read again: the cursor finds a needs_input job's secrets by
 * its id and key in the input file (a run after the import), holding one
 * line and the last job found. Ids grow with lines, so a run that asks in
 * id order reads the file once; a lower id rewinds.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/input_internal.h"

/* ---- re-reading the input: the cursor ------------------------------------------------ */

struct stg_input_cursor {
    stg_input_reader *r;
    stg_input_format format; /* the options' format, for a rewind's detection */
    int64_t last_id;         /* id of cur; 0: none yet */
    stg_job_spec cur;        /* the last job found (owned) */
};

int stg__input_cursor_open(const char *path, const stg_input_options *opt,
                          stg_input_cursor **out, char *err, size_t errlen)
{
    *out = NULL;
    stg_input_cursor *c = calloc(1, sizeof *c);
    if (!c) {
        if (err)
            snprintf(err, errlen, "out of memory");
        return STG_ENOMEM;
    }
    int rc = stg__input_reader_open(path, opt, &c->r, err, errlen);
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
    stg__input_csv_free_header(r); /* read again with the first record */
    r->keep_item = false;
    return true;
}

/* Scan forward for the first job whose key is key; takes it into c->cur. */
static bool cursor_scan(stg_input_cursor *c, const char *key)
{
    stg_job_spec *j;
    stg_bad_line *b;
    while (stg__input_reader_next(c->r, &j, &b) == STG_OK && (j || b)) {
        if (j && !strcmp(j->key, key)) {
            stg__input_spec_free(&c->cur);
            c->cur = *j;
            memset(j, 0, sizeof *j);
            return true;
        }
    }
    return false;
}

const stg_job_spec *stg__input_cursor_find(stg_input_cursor *c, int64_t id, const char *key)
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

void stg__input_cursor_free(stg_input_cursor *c)
{
    if (!c)
        return;
    stg__input_spec_free(&c->cur);
    stg__input_reader_free(c->r);
    free(c);
}

