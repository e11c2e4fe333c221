/*
 * fetch -w/--write-out (see writeout.h): curl's variables, with the same
 * names and formats (http_code as three digits, times in seconds with six
 * decimals, %{json} an object of them all), from the stg_result and the
 * easy handle after the call.
 *
 * Deliberate differences from curl, in stagger-fetch(1): %{time_total} is
 * the whole call (every attempt and every wait between them), since that
 * is what a caller of a polite client waits; the other time_* and size_*
 * are the last attempt's, as libcurl reports them; %{num_retries} counts
 * the retries the policy made (a redirect hop is not one), and
 * %{num_attempts}, %{reason} are stagger's own. The URLs are redacted
 * (writeout.h).
 *
 * Invariants: every variable is in vars[] once, which %{json}, the parser
 * and the check all walk, so the three cannot disagree; %{json} is written
 * by jansson.
 */
#ifdef STG_HAVE_CURL

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "cli/writeout.h"

enum kind { K_STR, K_INT, K_CODE, K_SECS };

enum id {
    V_CURL, /* read from libcurl: the row's info, by its type */
    V_ERRORMSG,
    V_EXITCODE,
    V_FILENAME,
    V_HTTP_CODE,
    V_RESPONSE_CODE,
    V_HTTP_VERSION,
    V_NUM_ATTEMPTS,
    V_NUM_HEADERS,
    V_NUM_REDIRECTS,
    V_NUM_RETRIES,
    V_REASON,
    V_TIME_TOTAL,
    V_URL,
    V_URL_EFFECTIVE,
};

static const struct {
    const char *name;
    enum kind kind;
    enum id id;
    CURLINFO info; /* V_CURL */
} vars[] = {
    {"content_type", K_STR, V_CURL, CURLINFO_CONTENT_TYPE},
    {"errormsg", K_STR, V_ERRORMSG, CURLINFO_NONE},
    {"exitcode", K_INT, V_EXITCODE, CURLINFO_NONE},
    {"filename_effective", K_STR, V_FILENAME, CURLINFO_NONE},
    {"http_code", K_CODE, V_HTTP_CODE, CURLINFO_NONE},
    {"http_version", K_STR, V_HTTP_VERSION, CURLINFO_NONE},
    {"local_ip", K_STR, V_CURL, CURLINFO_LOCAL_IP},
    {"local_port", K_INT, V_CURL, CURLINFO_LOCAL_PORT},
    {"method", K_STR, V_CURL, CURLINFO_EFFECTIVE_METHOD},
    {"num_attempts", K_INT, V_NUM_ATTEMPTS, CURLINFO_NONE},
    {"num_connects", K_INT, V_CURL, CURLINFO_NUM_CONNECTS},
    {"num_headers", K_INT, V_NUM_HEADERS, CURLINFO_NONE},
    {"num_redirects", K_INT, V_NUM_REDIRECTS, CURLINFO_NONE},
    {"num_retries", K_INT, V_NUM_RETRIES, CURLINFO_NONE},
    {"reason", K_STR, V_REASON, CURLINFO_NONE},
    {"remote_ip", K_STR, V_CURL, CURLINFO_PRIMARY_IP},
    {"remote_port", K_INT, V_CURL, CURLINFO_PRIMARY_PORT},
    {"response_code", K_CODE, V_RESPONSE_CODE, CURLINFO_NONE},
    {"scheme", K_STR, V_CURL, CURLINFO_SCHEME},
    {"size_download", K_INT, V_CURL, CURLINFO_SIZE_DOWNLOAD_T},
    {"size_header", K_INT, V_CURL, CURLINFO_HEADER_SIZE},
    {"size_request", K_INT, V_CURL, CURLINFO_REQUEST_SIZE},
    {"size_upload", K_INT, V_CURL, CURLINFO_SIZE_UPLOAD_T},
    {"speed_download", K_INT, V_CURL, CURLINFO_SPEED_DOWNLOAD_T},
    {"speed_upload", K_INT, V_CURL, CURLINFO_SPEED_UPLOAD_T},
    {"time_appconnect", K_SECS, V_CURL, CURLINFO_APPCONNECT_TIME_T},
    {"time_connect", K_SECS, V_CURL, CURLINFO_CONNECT_TIME_T},
    {"time_namelookup", K_SECS, V_CURL, CURLINFO_NAMELOOKUP_TIME_T},
    {"time_pretransfer", K_SECS, V_CURL, CURLINFO_PRETRANSFER_TIME_T},
    {"time_starttransfer", K_SECS, V_CURL, CURLINFO_STARTTRANSFER_TIME_T},
    {"time_total", K_SECS, V_TIME_TOTAL, CURLINFO_NONE},
    {"url", K_STR, V_URL, CURLINFO_NONE},
    {"url_effective", K_STR, V_URL_EFFECTIVE, CURLINFO_NONE},
};

#define N_VARS (sizeof vars / sizeof vars[0])

typedef struct value {
    const char *s; /* K_STR */
    long long i;   /* K_INT, K_CODE; K_SECS in microseconds */
} value;

static const char *info_str(CURL *easy, CURLINFO what)
{
    char *s = NULL;
    if (!easy || curl_easy_getinfo(easy, what, &s) != CURLE_OK || !s)
        return "";
    return s;
}

static long long info_long(CURL *easy, CURLINFO what)
{
    long l = 0;
    if (!easy || curl_easy_getinfo(easy, what, &l) != CURLE_OK)
        return 0;
    return l;
}

static long long info_off(CURL *easy, CURLINFO what)
{
    curl_off_t o = 0;
    if (!easy || curl_easy_getinfo(easy, what, &o) != CURLE_OK)
        return 0;
    return (long long)o;
}

/* Header lines of the last response, the status line excluded (curl). */
static long long header_count(const stg_result *r)
{
    long long n = 0;
    if (!r || !r->headers)
        return 0;
    for (const char *p = r->headers; (p = strchr(p, '\n')); p++)
        n++;
    return n > 2 ? n - 2 : 0; /* the status line and the blank line */
}

/* The value of vars[i]. */
static void get(size_t i, const cli_writeout_vars *v, value *out)
{
    CURL *e = v->res ? v->easy : NULL;
    const stg_result *r = v->res;
    out->s = "";
    out->i = 0;
    switch (vars[i].id) {
    case V_CURL: {
        CURLINFO what = vars[i].info;
        if ((what & CURLINFO_TYPEMASK) == CURLINFO_STRING)
            out->s = info_str(e, what);
        else if ((what & CURLINFO_TYPEMASK) == CURLINFO_OFF_T)
            out->i = info_off(e, what);
        else
            out->i = info_long(e, what);
        break;
    }
    case V_ERRORMSG:
        out->s = r ? r->error_text : "";
        break;
    case V_EXITCODE:
        out->i = v->exitcode;
        break;
    case V_FILENAME:
        out->s = v->filename ? v->filename : "";
        break;
    case V_HTTP_CODE:
    case V_RESPONSE_CODE:
        out->i = r ? r->status : 0;
        break;
    case V_HTTP_VERSION: {
        long hv = (long)info_long(e, CURLINFO_HTTP_VERSION);
        out->s = hv == CURL_HTTP_VERSION_1_0   ? "1"
                 : hv == CURL_HTTP_VERSION_1_1 ? "1.1"
                 : hv == CURL_HTTP_VERSION_2_0 ? "2"
                 : hv == CURL_HTTP_VERSION_3   ? "3"
                                               : "0";
        break;
    }
    case V_NUM_ATTEMPTS:
        out->i = r ? r->attempts : 0;
        break;
    case V_NUM_HEADERS:
        out->i = header_count(r);
        break;
    case V_NUM_REDIRECTS:
        out->i = v->redirects;
        break;
    case V_NUM_RETRIES:
        out->i = v->retries;
        break;
    case V_REASON:
        out->s = r ? stg_reason_name(r->reason) : "";
        break;
    case V_TIME_TOTAL:
        out->i = r ? r->elapsed_us : 0;
        break;
    case V_URL:
        out->s = v->url ? v->url : "";
        break;
    case V_URL_EFFECTIVE:
        out->s = r && r->final_url ? r->final_url : v->url ? v->url : "";
        break;
    }
}

static int lookup(const char *name, size_t n)
{
    for (size_t i = 0; i < N_VARS; i++)
        if (strlen(vars[i].name) == n && !strncmp(vars[i].name, name, n))
            return (int)i;
    return -1;
}

static void print_var(size_t i, const cli_writeout_vars *v, FILE *out)
{
    value val;
    get(i, v, &val);
    switch (vars[i].kind) {
    case K_STR:
        fputs(val.s, out);
        break;
    case K_INT:
        fprintf(out, "%lld", val.i);
        break;
    case K_CODE:
        fprintf(out, "%03lld", val.i);
        break;
    case K_SECS:
        fprintf(out, "%lld.%06lld", val.i / 1000000, val.i % 1000000);
        break;
    }
}

static void print_json(const cli_writeout_vars *v, FILE *out)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < N_VARS; i++) {
        value val;
        get(i, v, &val);
        json_t *j = vars[i].kind == K_STR    ? json_string(val.s)
                    : vars[i].kind == K_SECS ? json_real((double)val.i / 1e6)
                                             : json_integer(val.i);
        json_object_set_new(o, vars[i].name, j ? j : json_null());
    }
    if (o)
        json_dumpf(o, out, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
    json_decref(o);
}

/* The value of response header name (n bytes) of the last response. */
static void print_header(const cli_writeout_vars *v, const char *name, size_t n, FILE *out)
{
    const stg_result *r = v->res;
    if (!r || !r->headers)
        return;
    for (const char *line = r->headers; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > n && line[n] == ':' && !strncasecmp(line, name, n)) {
            const char *val = line + n + 1;
            size_t vn = len - n - 1;
            while (vn && (*val == ' ' || *val == '\t'))
                val++, vn--;
            while (vn && (val[vn - 1] == '\r' || val[vn - 1] == ' '))
                vn--;
            fwrite(val, 1, vn, out);
            return;
        }
        line = nl ? nl + 1 : line + len;
    }
}

/* One pass over fmt; with v NULL only the check (returns -1 at an unknown
 * name, copied to bad). */
static int walk(const char *fmt, const cli_writeout_vars *v, FILE *out, FILE *err, char *bad,
                size_t badlen)
{
    FILE *to = out;
    for (const char *p = fmt; *p; p++) {
        if (*p == '\\' && p[1] && strchr("nrt\\", p[1])) {
            p++;
            if (v)
                fputc(*p == 'n' ? '\n' : *p == 'r' ? '\r' : *p == 't' ? '\t' : '\\', to);
            continue;
        }
        if (*p == '%' && p[1] == '%') {
            p++;
            if (v)
                fputc('%', to);
            continue;
        }
        bool header = *p == '%' && !strncmp(p + 1, "header{", 7);
        if (*p != '%' || (p[1] != '{' && !header)) {
            if (v)
                fputc(*p, to);
            continue;
        }
        const char *name = p + (header ? 8 : 2), *end = strchr(name, '}');
        if (!end) { /* curl prints an unterminated %{ as is */
            if (v)
                fputs(p, to);
            break;
        }
        size_t n = (size_t)(end - name);
        p = end;
        if (header) {
            if (v)
                print_header(v, name, n, to);
            continue;
        }
        int i = -1;
        bool json = n == 4 && !strncmp(name, "json", 4);
        bool sw_out = n == 6 && !strncmp(name, "stdout", 6);
        bool sw_err = n == 6 && !strncmp(name, "stderr", 6);
        if (!json && !sw_out && !sw_err && (i = lookup(name, n)) < 0) {
            if (!v) {
                snprintf(bad, badlen, "%.*s", (int)(n < 60 ? n : 60), name);
                return -1;
            }
            continue;
        }
        if (!v)
            continue;
        if (sw_out || sw_err)
            to = sw_out ? out : err;
        else if (json)
            print_json(v, to);
        else
            print_var((size_t)i, v, to);
    }
    return 0;
}

int cli_writeout_check(const char *fmt, char *bad, size_t badlen)
{
    return walk(fmt, NULL, NULL, NULL, bad, badlen);
}

void cli_writeout(const char *fmt, const cli_writeout_vars *v, FILE *out, FILE *err)
{
    walk(fmt, v, out, err, NULL, 0);
    fflush(out);
    fflush(err);
}

#else
typedef int stg__writeout_unused;
#endif
