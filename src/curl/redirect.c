/*
 * Redirects as stagger's own hops. libcurl's CURLOPT_FOLLOWLOCATION would
 * send each hop behind the limiter's back and forward every custom header
 * (X-Api-Key, X-Auth-Token, Proxy-Authorization...) to whatever host the
 * Location names; it only drops Authorization and Cookie. So the callers
 * (perform.c, engine_done.c) take the 3xx as an answer, and the next hop is
 * a new attempt that passes the limiter, with these rules.
 *
 * Invariants: a secret header (stg_redact_header_is_secret, plus the
 * caller's extra names) is sent only to the origin (scheme, host, port) of
 * the request's first URL; origins are compared by libcurl's URL parser
 * (CURLU, default ports filled in), never by hand; a URL that does not
 * parse counts as another origin, so a doubt drops the secrets.
 */
#include <string.h>
#include <strings.h>

#include "curl/internal.h"

stg_method stg__redirect_method(int status, stg_method m)
{
    if (status == 303 && m != STG_METHOD_HEAD)
        return STG_METHOD_GET;
    if ((status == 301 || status == 302) && m == STG_METHOD_POST)
        return STG_METHOD_GET;
    return m;
}

/* The origin parts of url (to curl_free), or false if it does not parse. */
static bool origin_of(const char *url, char *part[3])
{
    part[0] = part[1] = part[2] = NULL;
    CURLU *u = curl_url();
    if (!u)
        return false;
    bool ok = curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) ==
                  CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &part[0], 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, &part[1], 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_PORT, &part[2], CURLU_DEFAULT_PORT) == CURLUE_OK;
    curl_url_cleanup(u);
    return ok;
}

bool stg__http_url(const char *url)
{
    char *p[3];
    bool ok = url && origin_of(url, p) &&
              (!strcasecmp(p[0], "http") || !strcasecmp(p[0], "https"));
    if (url)
        for (int i = 0; i < 3; i++)
            curl_free(p[i]);
    return ok;
}

bool stg__cross_origin(const char *a, const char *b)
{
    char *pa[3], *pb[3];
    bool oka = a && origin_of(a, pa), okb = b && origin_of(b, pb);
    bool cross = !oka || !okb || strcasecmp(pa[0], pb[0]) != 0 ||
                 strcasecmp(pa[1], pb[1]) != 0 || strcmp(pa[2], pb[2]) != 0;
    for (int i = 0; i < 3; i++) {
        if (a)
            curl_free(pa[i]);
        if (b)
            curl_free(pb[i]);
    }
    return cross;
}

struct curl_slist *stg__headers_without_secrets(const struct curl_slist *headers,
                                                const char *const *extra, bool *ok)
{
    struct curl_slist *out = NULL;
    *ok = true;
    for (const struct curl_slist *h = headers; h; h = h->next) {
        const char *colon = strchr(h->data, ':');
        const char *semi = strchr(h->data, ';'); /* curl's "Name;" = empty value */
        const char *end = colon ? colon : semi;
        size_t n = end ? (size_t)(end - h->data) : strlen(h->data);
        while (n && (h->data[n - 1] == ' ' || h->data[n - 1] == '\t'))
            n--;
        if (stg_redact_header_is_secret(h->data, n, extra))
            continue;
        struct curl_slist *s = curl_slist_append(out, h->data);
        if (!s) {
            curl_slist_free_all(out);
            *ok = false;
            return NULL;
        }
        out = s;
    }
    return out;
}
