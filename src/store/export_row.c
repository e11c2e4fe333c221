/*
 * The export's formats, for every back end (export_row.h): JSONL (a row a
 * line), JSON (one array, a row a line inside it: "[", "\n" row, ",\n"
 * row ..., "\n]\n"), CSV (RFC 4180: a header line, CRLF line ends, quoted
 * fields). JSON is built with jansson.
 *
 * Values: null in JSON is an empty CSV field. finished_at is ISO 8601 UTC
 * with milliseconds ("2026-12-07T05:01:02.345Z"). A body that is UTF-8
 * text is JSON "body" and the CSV field as is; any other body (binary, a
 * NUL, invalid UTF-8) is JSON "body_base64" and CSV "base64:" followed by
 * its base64 (util/base64.h). CSV quoting reads the field's length, never
 * up to a NUL, so a NUL before a comma cannot leave a field unquoted.
 *
 * Invariants: every row has the same columns in the same order (the
 * header's); nothing is written that the row does not carry (the back end
 * chooses what it shows: the store never reads headers or request bodies).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "store/export_row.h"
#include "util/base64.h"

static const char *const COLUMNS =
    "id,job,line,state,status,attempts,error,reason,method,url,file,finished_at,duration_ms";

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

static void iso_time(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03dZ", (int)(ms % 1000));
}

void stg__export_csv_field(FILE *out, const char *s, size_t n)
{
    if (!s)
        return;
    bool quote = n > 0 && (s[0] == ' ' || s[n - 1] == ' ');
    for (size_t i = 0; !quote && i < n; i++)
        quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r' || s[i] == '\0';
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

static void csv_str(FILE *out, const char *s)
{
    fputc(',', out);
    stg__export_csv_field(out, s, s ? strlen(s) : 0);
}

static void csv_int(FILE *out, bool has, int64_t v)
{
    fputc(',', out);
    if (has)
        fprintf(out, "%lld", (long long)v);
}

int stg__export_begin(stg__exporter *x)
{
    x->rows = 0;
    if (x->format == STG_EXPORT_CSV) {
        fputs(COLUMNS, x->out);
        for (size_t i = 0; i < x->n_own; i++)
            fprintf(x->out, ",%s", x->own[i]);
        fputs(x->bodies ? ",body\r\n" : "\r\n", x->out);
    } else if (x->format == STG_EXPORT_JSON) {
        fputc('[', x->out);
    }
    return ferror(x->out) ? STG_EIO : STG_OK;
}

static json_t *jstr(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *jint(bool has, int64_t v)
{
    return has ? json_integer(v) : json_null();
}

static int row_csv(stg__exporter *x, const stg__export_row *r, bool text)
{
    FILE *out = x->out;
    char when[40];
    if (r->has_finished)
        iso_time(r->finished_ms, when, sizeof when);
    stg__export_csv_field(out, r->key, r->key ? strlen(r->key) : 0);
    csv_int(out, true, r->job);
    csv_int(out, r->has_line, r->line);
    csv_str(out, r->state);
    csv_int(out, r->has_status, r->status);
    csv_int(out, true, r->attempts);
    csv_str(out, r->error);
    csv_str(out, r->reason);
    csv_str(out, r->method);
    csv_str(out, r->url);
    csv_str(out, r->file);
    csv_str(out, r->has_finished ? when : NULL);
    csv_int(out, r->has_duration, r->duration_ms);
    for (size_t i = 0; i < x->n_own; i++) {
        const stg__export_val *v = &r->own[i];
        if (v->is_int)
            csv_int(out, !v->is_null, v->i);
        else
            csv_str(out, v->is_null ? NULL : v->s);
    }
    if (x->bodies) {
        fputc(',', out);
        if (r->has_body && text) {
            stg__export_csv_field(out, r->body_len ? r->body : "", r->body_len);
        } else if (r->has_body) {
            char *b = stg__base64_new(r->body, r->body_len);
            if (!b)
                return STG_ENOMEM;
            fputs("base64:", out);
            fputs(b, out);
            free(b);
        }
    }
    fputs("\r\n", out);
    return STG_OK;
}

static int row_json(stg__exporter *x, const stg__export_row *r, bool text)
{
    char when[40];
    if (r->has_finished)
        iso_time(r->finished_ms, when, sizeof when);
    json_t *o = json_object();
    if (!o)
        return STG_ENOMEM;
    json_object_set_new(o, "id", jstr(r->key));
    json_object_set_new(o, "job", json_integer(r->job));
    json_object_set_new(o, "line", jint(r->has_line, r->line));
    json_object_set_new(o, "state", jstr(r->state));
    json_object_set_new(o, "status", jint(r->has_status, r->status));
    json_object_set_new(o, "attempts", json_integer(r->attempts));
    json_object_set_new(o, "error", jstr(r->error));
    json_object_set_new(o, "reason", jstr(r->reason));
    json_object_set_new(o, "method", jstr(r->method));
    json_object_set_new(o, "url", jstr(r->url));
    json_object_set_new(o, "file", jstr(r->file));
    json_object_set_new(o, "finished_at", r->has_finished ? json_string(when) : json_null());
    json_object_set_new(o, "duration_ms", jint(r->has_duration, r->duration_ms));
    for (size_t i = 0; i < x->n_own; i++) {
        const stg__export_val *v = &r->own[i];
        json_object_set_new(o, x->own[i],
                            v->is_int ? jint(!v->is_null, v->i) : jstr(v->is_null ? NULL : v->s));
    }
    if (r->has_body && text) {
        json_object_set_new(o, "body", json_stringn(r->body_len ? r->body : "", r->body_len));
    } else if (r->has_body) {
        char *b = stg__base64_new(r->body, r->body_len);
        if (!b) {
            json_decref(o);
            return STG_ENOMEM;
        }
        json_object_set_new(o, "body_base64", json_string(b));
        free(b);
    }
    int rc = STG_OK;
    if (x->format == STG_EXPORT_JSON && fputs(x->rows ? ",\n" : "\n", x->out) == EOF)
        rc = STG_EIO;
    if (rc == STG_OK && json_dumpf(o, x->out, JSON_COMPACT) != 0)
        rc = STG_EIO;
    if (rc == STG_OK && x->format == STG_EXPORT_JSONL && fputc('\n', x->out) == EOF)
        rc = STG_EIO;
    json_decref(o);
    return rc;
}

int stg__export_write(stg__exporter *x, const stg__export_row *r)
{
    bool text = r->has_body && (!r->body_len || utf8_text(r->body, r->body_len));
    int rc = x->format == STG_EXPORT_CSV ? row_csv(x, r, text) : row_json(x, r, text);
    if (rc == STG_OK && ferror(x->out))
        rc = STG_EIO;
    if (rc == STG_OK)
        x->rows++;
    return rc;
}

int stg__export_end(stg__exporter *x)
{
    if (x->format == STG_EXPORT_JSON && fputs("\n]\n", x->out) == EOF)
        return STG_EIO;
    if (fflush(x->out) != 0 || ferror(x->out))
        return STG_EIO;
    return STG_OK;
}
