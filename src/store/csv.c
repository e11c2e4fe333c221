/*
 * One CSV or TSV record into fields (see csv.h). No Debian library fits:
 * libcsv (the one packaged C reader) has had no upstream release since
 * 2013 and is a callback push parser that would own the input loop; a
 * record is small and the grammar is RFC 4180's few rules, so this is a
 * strict reader of one record held in memory, fuzzed (fuzz/fuzz_csv.c).
 *
 * Invariants: strict, never guessing: a stray quote is an error, not data
 * (a lenient reader would shift every later column of the row and send a
 * value as the wrong parameter); a field is always a NUL-terminated copy
 * with no NUL inside; the record is read left to right once, and nothing
 * outside rec[0..len) is touched.
 */
#include <stdlib.h>
#include <string.h>

#include "store/csv.h"
#include "util/assert.h"

bool stg__csv_open_quote(const char *rec, size_t len, char sep)
{
    if (sep != ',')
        return false;
    /* Only a field that starts with a quote is quoted: a stray quote in an
     * unquoted field is the split's error, and must not swallow the lines
     * after it into this record. */
    size_t i = 0;
    for (;;) {
        if (i < len && rec[i] == '"') {
            for (i++;; i++) {
                if (i >= len)
                    return true;
                if (rec[i] == '"') {
                    if (i + 1 < len && rec[i + 1] == '"')
                        i++;
                    else
                        break;
                }
            }
        }
        while (i < len && rec[i] != sep)
            i++;
        if (i >= len)
            return false;
        i++;
    }
}

void stg__csv_free(char **fields, int n)
{
    if (!fields)
        return;
    for (int i = 0; i < n; i++)
        free(fields[i]);
    free(fields);
}

typedef struct splitter {
    char **f;
    int n, cap;
} splitter;

static int push(splitter *s, const char *p, size_t n, bool quoted)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        char **f = realloc(s->f, (size_t)cap * sizeof *f);
        if (!f)
            return -2;
        s->f = f, s->cap = cap;
    }
    char *d = malloc(n + 1);
    if (!d)
        return -2;
    /* A quoted field holds "" pairs: each is one quote. */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        d[w++] = p[i];
        if (quoted && p[i] == '"')
            i++; /* the second quote of the pair */
    }
    d[w] = '\0';
    s->f[s->n++] = d;
    return 0;
}

int stg__csv_split(const char *rec, size_t len, char sep, char ***fields, const char **why)
{
    splitter s = {0};
    *fields = NULL;
    *why = NULL;
    if (memchr(rec, '\0', len)) {
        *why = "NUL byte in the record";
        return -1;
    }
    size_t i = 0;
    int rc = 0;
    for (;;) {
        size_t start = i, n;
        bool quoted = sep == ',' && i < len && rec[i] == '"';
        if (quoted) {
            start = ++i;
            for (;;) {
                if (i >= len) {
                    *why = "a quoted field is not closed";
                    rc = -1;
                    goto out;
                }
                if (rec[i] == '"') {
                    if (i + 1 < len && rec[i + 1] == '"') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i++;
            }
            n = i - start;
            i++; /* the closing quote */
            if (i < len && rec[i] != sep) {
                *why = "text after a closing quote (quote the whole field)";
                rc = -1;
                goto out;
            }
        } else {
            while (i < len && rec[i] != sep) {
                if (sep == ',' && rec[i] == '"') {
                    *why = "a quote inside an unquoted field (quote the field, double the quote)";
                    rc = -1;
                    goto out;
                }
                i++;
            }
            n = i - start;
        }
        if ((rc = push(&s, rec + start, n, quoted)) != 0)
            goto out;
        if (i >= len)
            break;
        STG_ASSERT(rec[i] == sep);
        i++; /* the separator: a field follows, maybe empty */
    }
out:
    if (rc != 0) {
        stg__csv_free(s.f, s.n);
        return rc;
    }
    *fields = s.f;
    return s.n;
}
