/*
 * Batch input, the line formats (rules in store/input.c): a URL a line, and
 * a key a line filled into a URL template. A filled key is percent-encoded
 * except RFC 3986 unreserved characters, and a key of dots only is encoded
 * whole, so no key can become a dot segment that walks the path up (the
 * CSV templates use the same rule, store/input_csv.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/http_field.h"
#include "store/input_internal.h"

/* ---- the formats ------------------------------------------------------------ */

int stg__input_url_line(stg_job_set *set, const stg_input_options *o, char *line, long n)
{
    if (!stg__store_url_valid(line))
        return stg__input_bad(set, n, "no URL: expected an absolute http:// or https:// URL");
    stg_job_spec j = {0};
    char key[32];
    snprintf(key, sizeof key, "%ld", n);
    j.line = n;
    if (!(j.key = strdup(key)) || !(j.method = strdup(o->method ? o->method : "GET")) ||
        stg__input_set_url(&j, line) != STG_OK) {
        stg__input_spec_free(&j);
        return STG_ENOMEM;
    }
    if (stg__input_push(set, &j) != STG_OK) {
        stg__input_spec_free(&j);
        return STG_ENOMEM;
    }
    return STG_OK;
}

/* "." and "..", or any key made only of dots, would be a dot segment that
 * curl and servers resolve (/ok/.. is /): such a key is encoded whole. */
bool stg__input_all_dots(const char *key)
{
    if (!*key)
        return false;
    for (; *key; key++)
        if (*key != '.')
            return false;
    return true;
}

/* tpl with every "{}" replaced by key, percent-encoded. NULL when out of
 * memory; the caller frees. */
char *stg__input_fill_key(const char *tpl, const char *key)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t klen = strlen(key), n = 0;
    bool dots = stg__input_all_dots(key);
    for (const char *p = tpl; (p = strstr(p, "{}")); p += 2)
        n++;
    char *out = malloc(strlen(tpl) + n * klen * 3 + 1);
    if (!out)
        return NULL;
    char *w = out;
    for (const char *p = tpl; *p;) {
        if (p[0] == '{' && p[1] == '}') {
            for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
                if (stg__input_unreserved(*k) && !dots) {
                    *w++ = (char)*k;
                } else {
                    *w++ = '%';
                    *w++ = hex[*k >> 4];
                    *w++ = hex[*k & 15];
                }
            }
            p += 2;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return out;
}

int stg__input_key_line(stg_job_set *set, stg__input_keytab *t, const stg_input_options *o,
                        char *line, long n)
{
    if (!stg__http_value_ok(line, strlen(line)))
        return stg__input_bad(set, n, "control character in key");
    stg_job_spec j = {0};
    j.line = n;
    char *url = NULL;
    if (!(j.key = strdup(line)) || !(j.method = strdup(o->method ? o->method : "GET")) ||
        !(url = stg__input_fill_key(o->url_template, line)) ||
        stg__input_set_url(&j, url) != STG_OK) {
        free(url);
        stg__input_spec_free(&j);
        return STG_ENOMEM;
    }
    free(url);
    int r = stg__input_check_repeat(set, t, &j, "key");
    if (r == 0 && stg__input_push(set, &j) == STG_OK)
        return STG_OK;
    stg__input_spec_free(&j);
    return r == 1 ? STG_OK : STG_ENOMEM;
}
