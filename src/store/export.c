/*
 * Export: one row per job, by id, as JSONL (jansson) or CSV (RFC 4180).
 *
 * Columns: id (the job's key), job (its number), line, state, status (last
 * HTTP status, null/empty when none), attempts (over all runs), error,
 * reason, method, url, file (under --out), finished_at (ISO 8601 UTC),
 * duration_ms (the job's last run: claimed to final state; null while
 * unfinished); with bodies, the stored response body: JSON "body" when it
 * is UTF-8 text, else "body_base64"; CSV "body", text as is, other bytes as
 * "base64:...". JSON is one array (a row an element, a line each), JSONL a
 * row a line, CSV RFC 4180 with a header line.
 *
 * The url is the one the user gave (stg_store_url_shown): a stored URL is
 * secret-free by the store's invariant and shown as is (bytes outside
 * printable ASCII percent-encoded); a withheld one (url NULL) is shown
 * from job_urls, written at import with no userinfo and its secret
 * values REDACTED; a database without that table falls back to the fully
 * redacted url_redacted. Never read: headers, the request body.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "store/internal.h"

static bool utf8_text(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t k;
        uint32_t cp;
        if (c == 0)
            return false;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, cp = c & 0x07;
        } else {
            return false;
        }
        if (i + k >= n)
            return false;
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + j] & 0x3f);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k + 1;
    }
    return true;
}

static char *base64(const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    char *w = out;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *w++ = tab[v >> 18], *w++ = tab[(v >> 12) & 63], *w++ = tab[(v >> 6) & 63],
        *w++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *w++ = tab[v >> 18];
        *w++ = tab[(v >> 12) & 63];
        *w++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *w++ = '=';
    }
    *w = '\0';
    return out;
}

static void iso_time(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03dZ", (int)(ms % 1000));
}

static void csv_field(FILE *out, const char *s, size_t n, bool first)
{
    if (!first)
        fputc(',', out);
    if (!s)
        return;
    bool quote = n > 0 && (s[0] == ' ' || s[n - 1] == ' ');
    for (size_t i = 0; !quote && i < n; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!quote) {
        fwrite(s, 1, n, out);
        return;
    }
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            fputc('"', out);
        fputc(s[i], out);
    }
    fputc('"', out);
}

static void csv_str(FILE *out, const char *s, bool first)
{
    csv_field(out, s, s ? strlen(s) : 0, first);
}

static void csv_int(FILE *out, sqlite3_stmt *st, int col)
{
    fputc(',', out);
    if (sqlite3_column_type(st, col) != SQLITE_NULL)
        fprintf(out, "%lld", (long long)sqlite3_column_int64(st, col));
}

static const char *text(sqlite3_stmt *st, int col)
{
    return (const char *)sqlite3_column_text(st, col);
}

static json_t *json_text_or_null(sqlite3_stmt *st, int col)
{
    const char *t = text(st, col);
    return t ? json_string(t) : json_null();
}

static json_t *json_int_or_null(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL
               ? json_null()
               : json_integer(sqlite3_column_int64(st, col));
}

/* The url column's text (see the top): into buf, or NULL. */
static const char *shown_url(sqlite3_stmt *st, char *buf, size_t size)
{
    const char *shown = text(st, 13), *url = text(st, 14);
    if (shown)
        return shown;
    if (url) {
        stg_store_url_shown(url, buf, size);
        return buf;
    }
    return text(st, 9);
}

int stg_store_export(stg_store *s, const stg_export_options *opt, FILE *out)
{
    stg_export_options o = {0};
    if (opt)
        o = *opt;
    bool urls = stg__store_has_table(s, "job_urls");
    char sql[768];
    snprintf(sql, sizeof sql,
             "SELECT j.id, j.key, j.line, j.state, j.last_status, j.attempts, j.last_error, "
             "j.reason, j.method, j.url_redacted, j.response_file, j.finished_at, %s, %s, "
             "j.url, CASE WHEN j.finished_at IS NOT NULL AND j.started_at IS NOT NULL "
             "THEN max(0, j.finished_at - j.started_at) END "
             "FROM jobs j%s%s ORDER BY j.id",
             o.bodies ? "r.body" : "NULL", urls ? "u.shown" : "NULL",
             o.bodies ? " LEFT JOIN responses r ON r.job_id = j.id" : "",
             urls ? " LEFT JOIN job_urls u ON u.job_id = j.id" : "");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return stg__store_fail(s, rc, "cannot read the jobs");
    if (o.format == STG_EXPORT_CSV)
        fprintf(out, "id,job,line,state,status,attempts,error,reason,method,url,file,"
                     "finished_at,duration_ms%s\r\n",
                o.bodies ? ",body" : "");
    else if (o.format == STG_EXPORT_JSON)
        fputc('[', out);
    size_t rows = 0;
    char *ubuf = malloc(16384);
    if (!ubuf) {
        sqlite3_finalize(st);
        return stg__store_error(s, STG_ENOMEM, "out of memory");
    }
    int err = STG_OK;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        stg_job_state js;
        const char *state = text(st, 3);
        if (o.state_mask && (!state || stg_job_state_parse(state, &js) != STG_OK ||
                             !(o.state_mask & (1u << js))))
            continue;
        char when[40] = "";
        bool has_when = sqlite3_column_type(st, 11) != SQLITE_NULL;
        if (has_when)
            iso_time(sqlite3_column_int64(st, 11), when, sizeof when);
        const unsigned char *body = NULL;
        size_t body_len = 0;
        bool has_body = o.bodies && sqlite3_column_type(st, 12) != SQLITE_NULL;
        if (has_body) {
            body = sqlite3_column_blob(st, 12);
            body_len = (size_t)sqlite3_column_bytes(st, 12);
        }
        bool is_text = has_body && (!body_len || utf8_text(body, body_len));
        if (o.format == STG_EXPORT_CSV) {
            csv_str(out, text(st, 1), true);
            csv_int(out, st, 0);
            csv_int(out, st, 2);
            csv_str(out, state, false);
            csv_int(out, st, 4);
            csv_int(out, st, 5);
            csv_str(out, text(st, 6), false);
            csv_str(out, text(st, 7), false);
            csv_str(out, text(st, 8), false);
            csv_str(out, shown_url(st, ubuf, 16384), false);
            csv_str(out, text(st, 10), false);
            csv_str(out, has_when ? when : NULL, false);
            csv_int(out, st, 15);
            if (o.bodies) {
                if (!has_body) {
                    csv_str(out, NULL, false);
                } else if (is_text) {
                    csv_field(out, body_len ? (const char *)body : "", body_len, false);
                } else {
                    char *b = base64(body, body_len);
                    if (!b) {
                        err = STG_ENOMEM;
                        break;
                    }
                    fputs(",base64:", out);
                    fputs(b, out);
                    free(b);
                }
            }
            fputs("\r\n", out);
        } else {
            json_t *row = json_object();
            json_object_set_new(row, "id", json_text_or_null(st, 1));
            json_object_set_new(row, "job", json_integer(sqlite3_column_int64(st, 0)));
            json_object_set_new(row, "line", json_integer(sqlite3_column_int64(st, 2)));
            json_object_set_new(row, "state", json_text_or_null(st, 3));
            json_object_set_new(row, "status", json_int_or_null(st, 4));
            json_object_set_new(row, "attempts", json_integer(sqlite3_column_int64(st, 5)));
            json_object_set_new(row, "error", json_text_or_null(st, 6));
            json_object_set_new(row, "reason", json_text_or_null(st, 7));
            json_object_set_new(row, "method", json_text_or_null(st, 8));
            const char *u = shown_url(st, ubuf, 16384);
            json_object_set_new(row, "url", u ? json_string(u) : json_null());
            json_object_set_new(row, "file", json_text_or_null(st, 10));
            json_object_set_new(row, "finished_at", has_when ? json_string(when) : json_null());
            json_object_set_new(row, "duration_ms", json_int_or_null(st, 15));
            if (has_body && is_text) {
                json_object_set_new(row, "body",
                                    json_stringn(body_len ? (const char *)body : "", body_len));
            } else if (has_body) {
                char *b = base64(body, body_len);
                if (!b) {
                    json_decref(row);
                    err = STG_ENOMEM;
                    break;
                }
                json_object_set_new(row, "body_base64", json_string(b));
                free(b);
            }
            if (o.format == STG_EXPORT_JSON && fputs(rows ? ",\n" : "\n", out) == EOF) {
                json_decref(row);
                err = STG_EIO;
                break;
            }
            int w = json_dumpf(row, out, JSON_COMPACT);
            json_decref(row);
            if (w != 0 || (o.format == STG_EXPORT_JSONL && fputc('\n', out) == EOF)) {
                err = STG_EIO;
                break;
            }
        }
        rows++;
        if (ferror(out)) {
            err = STG_EIO;
            break;
        }
    }
    free(ubuf);
    if (!err && rc != SQLITE_DONE)
        err = stg__store_fail(s, rc, "cannot read the jobs");
    if (!err && o.format == STG_EXPORT_JSON && fputs("\n]\n", out) == EOF)
        err = STG_EIO;
    sqlite3_finalize(st);
    if (!err && (fflush(out) != 0 || ferror(out)))
        err = STG_EIO;
    if (err == STG_EIO)
        stg__store_error(s, STG_EIO, "write error on the export");
    else if (err == STG_ENOMEM)
        stg__store_error(s, STG_ENOMEM, "out of memory");
    return err;
}
