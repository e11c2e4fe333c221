/*
 * Batch input, JSONL: one request object a line (the fields and their rules
 * are in store/input.c's top comment). Parsed by jansson with duplicate keys
 * refused; a bad line's message never quotes the line (it may hold a
 * secret). One line makes one job or one bad line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <stagger/policy.h>
#include <stagger/quota.h>

#include "util/http_field.h"
#include "store/input_internal.h"

/* A JSONL header, name[0..n) and its value: NULL when it may be a job's
 * header, else the bad line's message in buf. */
static const char *header_bad(const char *name, size_t n, const char *val, size_t vlen,
                              char *buf, size_t size)
{
    if (!stg__http_token(name, n))
        return "bad header: invalid name (an RFC 9110 token, nothing before the colon)";
    if (!stg__http_value_ok(val, vlen))
        return "bad header: CR, LF, NUL or another control character in a value";
    const char *why = stg__http_batch_refused(name, n);
    if (!why)
        return NULL;
    snprintf(buf, size, "bad header: %.*s %s; batch input may not set it", (int)n, name, why);
    return buf;
}


/* A JSONL "cost" object as a Stagger-Cost value ("tokens=1200, requests=1"),
 * checked by the core's parser. STG_EPARSE or STG_ERANGE when it is not
 * one. */
static int cost_value(json_t *cost, char *buf, size_t size)
{
    if (!json_is_object(cost) || json_object_size(cost) == 0)
        return STG_EPARSE;
    if (json_object_size(cost) > STG_QUOTA_COSTS_MAX)
        return STG_ERANGE;
    size_t len = 0;
    const char *unit;
    json_t *v;
    json_object_foreach(cost, unit, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return STG_EPARSE;
        int w = snprintf(buf + len, size - len, "%s%s=%" JSON_INTEGER_FORMAT, len ? ", " : "",
                         unit, json_integer_value(v));
        if (w < 0 || (size_t)w >= size - len)
            return STG_ERANGE;
        len += (size_t)w;
    }
    stg_quota_cost c[STG_QUOTA_COSTS_MAX];
    size_t n = 0;
    return stg_quota_cost_parse(buf, len, c, STG_QUOTA_COSTS_MAX, &n);
}


const char *stg__input_json_error(const json_error_t *e)
{
    switch (json_error_code(e)) {
    case json_error_premature_end_of_input:
        return "bad JSON: the line ends inside a value";
    case json_error_end_of_input_expected:
        return "bad JSON: text after the object";
    case json_error_invalid_utf8:
        return "bad JSON: invalid UTF-8";
    case json_error_duplicate_key:
        return "bad JSON: a key appears twice";
    case json_error_null_character:
    case json_error_null_byte_in_key:
        return "bad JSON: NUL character";
    case json_error_numeric_overflow:
        return "bad JSON: number out of range";
    default:
        return "bad JSON: invalid syntax";
    }
}

/* JSONL: returns STG_OK (a job or a bad line recorded) or STG_ENOMEM. */
int stg__input_json_line(stg_job_set *set, stg__input_keytab *t, char *line, size_t len, long n)
{
    json_error_t jerr;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o)
        return stg__input_bad(set, n, "%s (column %d)", stg__input_json_error(&jerr), jerr.column);
    int rc = STG_OK;
    stg_job_spec j = {0};
    j.line = n;
    char numkey[32], why[200];
#define BAD(...)                                                                               \
    do {                                                                                       \
        rc = stg__input_bad(set, n, __VA_ARGS__);                                              \
        goto out;                                                                              \
    } while (0)
#define NOMEM()                                                                                \
    do {                                                                                       \
        rc = STG_ENOMEM;                                                                       \
        goto out;                                                                              \
    } while (0)
    if (!json_is_object(o))
        BAD("not a JSON object");
    json_t *url = json_object_get(o, "url");
    if (!url)
        BAD("no URL: \"url\" is missing");
    if (!json_is_string(url) || !stg__store_url_valid(json_string_value(url)))
        BAD("no URL: \"url\" is not an absolute http:// or https:// URL");
    json_t *id = json_object_get(o, "id");
    if (!id || json_is_null(id)) {
        snprintf(numkey, sizeof numkey, "%ld", n);
        if (!(j.key = strdup(numkey)))
            NOMEM();
    } else if (json_is_string(id) && json_string_length(id) > 0) {
        /* As in a key file: the id is printed in reports and logs, where a
         * line break would forge a line. */
        if (!stg__http_value_ok(json_string_value(id), json_string_length(id)))
            BAD("\"id\" has a CR, LF, NUL or another control character");
        if (!(j.key = strdup(json_string_value(id))))
            NOMEM();
    } else if (json_is_integer(id)) {
        snprintf(numkey, sizeof numkey, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        if (!(j.key = strdup(numkey)))
            NOMEM();
    } else {
        BAD("\"id\" must be a non-empty string or an integer");
    }
    json_t *body = json_object_get(o, "body");
    bool json_body = false;
    if (body && !json_is_null(body)) {
        if (json_is_string(body)) {
            j.body_len = json_string_length(body);
            if (!(j.body = stg__input_dupn(json_string_value(body), j.body_len)))
                NOMEM();
        } else {
            if (!(j.body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)))
                NOMEM();
            j.body_len = strlen(j.body);
            json_body = true;
        }
    }
    json_t *method = json_object_get(o, "method");
    if (method && !json_is_null(method)) {
        const char *m = json_is_string(method) ? json_string_value(method) : NULL;
        if (m && stg_method_parse(m) == STG_METHOD_CONNECT)
            BAD("method CONNECT is not supported");
        if (!m || stg_method_parse(m) == STG_METHOD_UNKNOWN) {
            bool printable = m && strlen(m) <= 16;
            printable = printable && stg__http_token(m, strlen(m));
            if (printable)
                BAD("unknown method '%s' (methods are case-sensitive: GET, POST, ...)", m);
            BAD("unknown method");
        }
        if (!(j.method = strdup(m)))
            NOMEM();
    } else if (!(j.method = strdup(j.body ? "POST" : "GET"))) {
        NOMEM();
    }
    json_t *hdrs = json_object_get(o, "headers");
    if (hdrs && json_is_object(hdrs)) {
        const char *name;
        json_t *v;
        json_object_foreach(hdrs, name, v)
        {
            if (!json_is_string(v))
                BAD("header values must be strings");
            size_t nlen = strlen(name);
            const char *val = json_string_value(v);
            const char *bad = header_bad(name, nlen, val, json_string_length(v), why,
                                         sizeof why);
            if (bad)
                BAD("%s", bad);
            if (nlen == 15 && !strncasecmp(name, "Idempotency-Key", 15)) {
                free(j.idempotency_key);
                if (!(j.idempotency_key = strdup(val)))
                    NOMEM();
                continue;
            }
            if (stg__input_add_header(&j, name, nlen, val) != STG_OK)
                NOMEM();
        }
    } else if (hdrs && json_is_array(hdrs)) {
        size_t i;
        json_t *v;
        json_array_foreach(hdrs, i, v)
        {
            const char *h = json_is_string(v) ? json_string_value(v) : NULL;
            const char *colon = h ? strchr(h, ':') : NULL;
            if (!colon || colon == h)
                BAD("bad header: expected \"Name: value\" strings");
            size_t nlen = (size_t)(colon - h);
            const char *bad = header_bad(h, nlen, colon + 1,
                                         json_string_length(v) - nlen - 1, why, sizeof why);
            if (bad)
                BAD("%s", bad);
            if (nlen == 15 && !strncasecmp(h, "Idempotency-Key", 15)) {
                const char *val = colon + 1;
                while (*val == ' ' || *val == '\t')
                    val++;
                free(j.idempotency_key);
                if (!(j.idempotency_key = strdup(val)))
                    NOMEM();
                continue;
            }
            if (stg__input_add_header(&j, h, nlen, colon + 1) != STG_OK)
                NOMEM();
        }
    } else if (hdrs && !json_is_null(hdrs)) {
        BAD("\"headers\" must be an object or an array of \"Name: value\" strings");
    }
    json_t *ik = json_object_get(o, "idempotency_key");
    if (ik && !json_is_null(ik)) {
        if (!json_is_string(ik) || json_string_length(ik) == 0)
            BAD("\"idempotency_key\" must be a non-empty string");
        if (!stg__http_value_ok(json_string_value(ik), json_string_length(ik)))
            BAD("\"idempotency_key\" has a CR, LF, NUL or another control character");
        free(j.idempotency_key);
        if (!(j.idempotency_key = strdup(json_string_value(ik))))
            NOMEM();
    }
    json_t *cost = json_object_get(o, "cost");
    if (cost && !json_is_null(cost)) {
        char cv[STG_QUOTA_COSTS_MAX * 48];
        int crc = cost_value(cost, cv, sizeof cv);
        if (crc != STG_OK)
            BAD("%s", crc == STG_ERANGE ? "\"cost\" has too many units or too large an amount"
                                       : "\"cost\" must be an object {\"unit\": amount}, "
                                         "amounts non-negative integers");
        if (stg__input_has_header(&j, STG_QUOTA_COST_HEADER))
            BAD("both \"cost\" and a " STG_QUOTA_COST_HEADER " header");
        if (stg__input_add_header(&j, STG_QUOTA_COST_HEADER, strlen(STG_QUOTA_COST_HEADER),
                                  cv) != STG_OK)
            NOMEM();
    }
    json_t *jp = json_object_get(o, "priority"), *jt = json_object_get(o, "tenant");
    json_t *jw = json_object_get(o, "weight");
    if ((jp && !json_is_null(jp) && !json_is_string(jp)) ||
        (jt && !json_is_null(jt) && !json_is_string(jt)) ||
        (jw && !json_is_null(jw) && !json_is_number(jw)))
        BAD("\"priority\" and \"tenant\" must be strings, \"weight\" a number");
    char wv[40] = "";
    if (jw && json_is_number(jw))
        snprintf(wv, sizeof wv, "%.17g", json_number_value(jw));
    const char *cwhy = stg__input_add_class(&j, json_string_value(jp), json_string_value(jt), wv);
    if (cwhy == STG__INPUT_CLASS_NOMEM)
        NOMEM();
    if (cwhy)
        BAD("%s", cwhy);
    if (json_body && !stg__input_has_header(&j, "Content-Type") &&
        stg__input_add_header(&j, "Content-Type", 12, "application/json") != STG_OK)
        NOMEM();
    if (stg__input_set_url(&j, json_string_value(url)) != STG_OK)
        NOMEM();
    int r = stg__input_check_repeat(set, t, &j, "id");
    if (r < 0)
        NOMEM();
    if (r == 0) {
        if (stg__input_push(set, &j) != STG_OK)
            NOMEM();
    }
out:
#undef BAD
#undef NOMEM
    stg__input_spec_free(&j);
    json_decref(o);
    return rc;
}

