/*
 * Private to the batch input files of src/store (input.c: the reader, its
 * options and the formats' rules; input_job.c, input_repeat.c,
 * input_keys.c, input_jsonl.c, input_csv.c, input_secrets.c,
 * input_cursor.c). Nothing else includes this.
 *
 * The shared contract: a format's line function records exactly one job
 * or one bad line for a line it takes (or nothing for a blank line or a
 * comment), and returns STG_OK, or STG_ENOMEM with nothing half-added.
 */
#ifndef STAGGER_STORE_INPUT_INTERNAL_H
#define STAGGER_STORE_INPUT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "store/store.h"

/* ---- the reader (input.c) ---- */

struct stg_input_reader {
    FILE *f;
    stg_input_options o; /* format becomes the detected one at the first line */
    struct stg__input_keytab *t; /* stg__input_read's repeat table; NULL when streaming */
    char *line;
    size_t cap;
    long n;
    int rc; /* first error: STG_ENOMEM or STG_EIO; sticky */
    bool eof;
    stg_job_set item; /* streaming: the last line's job or bad line */
    bool owns_file; /* opened by stg__input_reader_open: closed by _free */
    /* CSV/TSV: the header row (read at the first record), the id column
     * (-1: none, the line number is the id) and the record being joined. */
    char **cols;
    int ncols, id_col;
    int class_col[3]; /* the priority, tenant and weight columns; -1: none */
    bool header_done;
    char *rec;
    size_t rec_cap;
    bool keep_item; /* item holds a line read before the header at open */
    char err[400];
};

static inline bool stg__input_tabular(stg_input_format f)
{
    return f == STG_INPUT_CSV || f == STG_INPUT_TSV;
}

static inline bool stg__input_alnum(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* RFC 3986 unreserved: kept as is in a filled key or URL column. */
static inline bool stg__input_unreserved(unsigned char c)
{
    return stg__input_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* ---- the job being built (input_job.c) ---- */

void stg__input_spec_free(stg_job_spec *j);
/* The n specs of v, then v. */
void stg__input_specs_free(stg_job_spec *v, size_t n);
/* A bad line: its number and a message that never quotes the line. */
int stg__input_bad(stg_job_set *set, long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
char *stg__input_dupn(const char *s, size_t n);
/* name: value (the value trimmed of blanks), marking headers_secret. */
int stg__input_add_header(stg_job_spec *j, const char *name, size_t name_len,
                          const char *value);
bool stg__input_has_header(const stg_job_spec *j, const char *name);
/* Remove j's headers named name (a row's own header replaces one set
 * for every row). */
void stg__input_drop_header(stg_job_spec *j, const char *name);
/* --idempotency-key auto: the key derived from the id, method, URL, body. */
int stg__input_auto_key(stg_job_spec *j);
/* What stg__input_add_class returns when out of memory. */
extern const char STG__INPUT_CLASS_NOMEM[];
const char *stg__input_add_class(stg_job_spec *j, const char *pr, const char *tenant,
                                 const char *weight);
/* Fill url, url_redacted, url_secret (and url_shown). */
int stg__input_set_url(stg_job_spec *j, const char *url);
/* Move *j into set (j is zeroed). */
int stg__input_push(stg_job_set *set, stg_job_spec *j);

/* ---- repeated ids (input_repeat.c) ---- */

typedef struct stg__input_keytab {
    char **keys; /* borrowed from the specs */
    long *lines;
    size_t cap, n;
} stg__input_keytab;

void stg__input_keytab_free(stg__input_keytab *t);
/* 0: j's key is new (or t is NULL); 1: a repeat, recorded as a bad line;
 * -1: out of memory. */
int stg__input_check_repeat(stg_job_set *set, stg__input_keytab *t, stg_job_spec *j,
                            const char *what);

/* ---- the formats (input_keys.c, input_jsonl.c, input_csv.c) ---- */

bool stg__input_all_dots(const char *key);
/* tpl with every "{}" replaced by key, percent-encoded; NULL: no memory. */
char *stg__input_fill_key(const char *tpl, const char *key);
int stg__input_url_line(stg_job_set *set, const stg_input_options *o, char *line, long n);
int stg__input_key_line(stg_job_set *set, stg__input_keytab *t, const stg_input_options *o,
                        char *line, long n);
const char *stg__input_json_error(const json_error_t *e);
int stg__input_json_line(stg_job_set *set, stg__input_keytab *t, char *line, size_t len,
                         long n);
void stg__input_csv_free_header(stg_input_reader *r);
/* A CSV/TSV record starting at line n: 1 after it, -1 on an error (r->rc,
 * r->err). */
int stg__input_csv_record(stg_input_reader *r, stg_job_set *set, const char *p, size_t len,
                          long n);

#endif /* STAGGER_STORE_INPUT_INTERNAL_H */
