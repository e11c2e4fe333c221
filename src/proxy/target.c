/*
 * Where a request goes. Reverse mode: the longest route prefix that
 * matches the path on a segment boundary ("/v1" takes "/v1", "/v1/x" and
 * "/v1?q", never "/v1x") maps it onto its upstream base, query kept byte
 * for byte (the target is the raw one MHD's URI callback saw, never
 * unescaped and re-escaped), dot segments ("." and "..", dots written
 * %2e too) resolved first (RFC 3986 §5.2.4), so the path that goes
 * upstream is always under the chosen route's base. Forward mode: an
 * absolute-form http:// target is the URL itself. https:// cannot be forwarded (that needs CONNECT,
 * whose tunnel stagger cannot see into): such a target and CONNECT get a
 * 4xx that says to use reverse mode.
 *
 * Redirects go back through the proxy: a Location that names a routed
 * upstream (its origin, under the route's base path) is rewritten to the
 * proxy's own address (the Host the client used) and that route's prefix,
 * so a program that follows it comes back here and its next hop is paced
 * and retried too. A Location on any other origin is passed unchanged (it
 * is not ours to proxy); a relative one is resolved against the upstream
 * URL first (RFC 9110 §10.2.2), because the client would resolve it
 * against the proxy's URL, where the path means something else. URLs are
 * parsed by libcurl's URL API, never by hand.
 *
 * Invariants: a URL built here starts with http:// or https:// and holds
 * no dot segment in a routed path, and no CR, LF, space or other control byte (the engine refuses those, and a
 * target with them is a 400 here).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "proxy/internal.h"
#include "util/assert.h"

static bool clean(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            return false;
    return true;
}

static bool http_url(const char *s)
{
    return !strncasecmp(s, "http://", 7) || !strncasecmp(s, "https://", 8);
}

static char *trim_slash(const char *s)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '/')
        n--;
    return strndup(s, n);
}

/* scheme, host (lower-cased), port (explicit) and path of an absolute
 * http(s) URL, each malloc'd; path without its trailing '/' when strip. */
typedef struct url_parts {
    char *scheme, *host, *port, *path, *query, *fragment;
} url_parts;

static void parts_free(url_parts *u)
{
    curl_free(u->scheme);
    curl_free(u->host);
    curl_free(u->port);
    curl_free(u->path);
    curl_free(u->query);
    curl_free(u->fragment);
    memset(u, 0, sizeof *u);
}

static bool parts_of(CURLU *h, url_parts *u, bool strip)
{
    memset(u, 0, sizeof *u);
    if (curl_url_get(h, CURLUPART_SCHEME, &u->scheme, 0) != CURLUE_OK ||
        curl_url_get(h, CURLUPART_HOST, &u->host, 0) != CURLUE_OK ||
        curl_url_get(h, CURLUPART_PORT, &u->port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(h, CURLUPART_PATH, &u->path, 0) != CURLUE_OK) {
        parts_free(u);
        return false;
    }
    curl_url_get(h, CURLUPART_QUERY, &u->query, 0);
    curl_url_get(h, CURLUPART_FRAGMENT, &u->fragment, 0);
    for (char *c = u->scheme; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    for (char *c = u->host; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    if (strip) {
        size_t n = strlen(u->path);
        while (n && u->path[n - 1] == '/')
            u->path[--n] = '\0';
    }
    return true;
}

/* The parts of a route's base, kept as plain strings in the route. */
static bool route_parts(px_route *r)
{
    CURLU *h = curl_url();
    url_parts u;
    bool ok = h && curl_url_set(h, CURLUPART_URL, r->base, 0) == CURLUE_OK &&
              parts_of(h, &u, true);
    curl_url_cleanup(h);
    if (!ok)
        return false;
    r->scheme = strdup(u.scheme);
    r->host = strdup(u.host);
    r->port = strdup(u.port);
    r->path = strdup(u.path);
    parts_free(&u);
    return r->scheme && r->host && r->port && r->path;
}

int px_routes_init(stg_proxy *p, char *err, size_t errsize)
{
    p->routes = calloc(p->cfg.n_routes ? p->cfg.n_routes : 1, sizeof *p->routes);
    if (!p->routes) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < p->cfg.n_routes; i++) {
        const stg_proxy_route *rt = &p->cfg.routes[i];
        const char *pre = rt->prefix ? rt->prefix : "";
        if (*pre && *pre != '/') {
            snprintf(err, errsize, "route prefix '%s' must start with '/'", pre);
            return -1;
        }
        if (!rt->upstream || !http_url(rt->upstream) || !clean(rt->upstream) ||
            strchr(rt->upstream, '?') || strchr(rt->upstream, '#')) {
            snprintf(err, errsize, "upstream must be an http:// or https:// URL without a query");
            return -1;
        }
        px_route *r = &p->routes[p->n_routes++];
        r->prefix = trim_slash(pre);
        r->base = trim_slash(rt->upstream);
        if (!r->prefix || !r->base) {
            snprintf(err, errsize, "out of memory");
            return -1;
        }
        if (!route_parts(r)) {
            snprintf(err, errsize, "upstream '%s' is not a URL libcurl can parse", rt->upstream);
            return -1;
        }
        for (size_t j = 0; j + 1 < p->n_routes; j++)
            if (!strcmp(p->routes[j].prefix, r->prefix)) {
                snprintf(err, errsize, "route prefix '%s' given twice", pre);
                return -1;
            }
    }
    return 0;
}

void px_routes_free(stg_proxy *p)
{
    for (size_t i = 0; i < p->n_routes; i++) {
        free(p->routes[i].prefix);
        free(p->routes[i].base);
        free(p->routes[i].scheme);
        free(p->routes[i].host);
        free(p->routes[i].port);
        free(p->routes[i].path);
    }
    free(p->routes);
    p->routes = NULL;
    p->n_routes = 0;
}

/* Does prefix match uri on a segment boundary? */
static bool matches(const char *prefix, const char *uri)
{
    size_t n = strlen(prefix);
    if (strncmp(prefix, uri, n) != 0)
        return false;
    char c = uri[n];
    return c == '\0' || c == '/' || c == '?';
}

static char *route_url(const stg_proxy *p, const char *uri, unsigned *status, char *msg,
                       size_t msgsize);

/* Is seg[0..n) "." or ".." (each dot may be written %2e or %2E)? Returns
 * how many dots, or 0. */
static int dots(const char *seg, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; k++) {
        if (seg[i] == '.')
            i++;
        else if (n - i >= 3 && seg[i] == '%' && seg[i + 1] == '2' && (seg[i + 2] | 0x20) == 'e')
            i += 3;
        else
            return 0;
        if (k == 2)
            return 0;
    }
    return k;
}

/* path[0..n) (starting with '/') with its dot segments removed, as RFC
 * 3986 §5.2.4 does ("/a/./b/../c" is "/a/c", "/.." is "/"), the other
 * segments byte for byte; malloc'd, NULL when out of memory. Done before
 * a route is chosen, so what goes upstream is under the route's base:
 * libcurl would otherwise resolve "/a/../secret" after the join, onto
 * the base's parent, and an upstream would resolve "%2e%2e" itself. */
static char *remove_dots(const char *path, size_t n)
{
    char *out = malloc(n + 2);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        STG_ASSERT(path[i] == '/');
        size_t s = ++i;
        while (i < n && path[i] != '/')
            i++;
        int d = dots(path + s, i - s);
        if (d == 2) /* drop the last output segment */
            while (o > 0 && out[--o] != '/')
                ;
        if (d) {
            if (i == n) /* "/a/.." ends as "/": the segment it named is a directory */
                out[o++] = '/';
            continue;
        }
        out[o++] = '/';
        memcpy(out + o, path + s, i - s);
        o += i - s;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

char *px_target(const stg_proxy *p, const char *uri, unsigned *status, char *msg, size_t msgsize)
{
    *status = 400;
    if (!clean(uri)) {
        snprintf(msg, msgsize, "bad request target");
        return NULL;
    }
    if (http_url(uri)) {
        if (!strncasecmp(uri, "https://", 8)) {
            snprintf(msg, msgsize,
                     "stagger proxy cannot forward https:// targets (it would need CONNECT, "
                     "and cannot see inside TLS): use reverse mode, --upstream https://HOST, "
                     "and point the program's base URL at the proxy");
            return NULL;
        }
        if (!p->cfg.forward) {
            snprintf(msg, msgsize,
                     "absolute-form target: this proxy runs in reverse mode (start it with "
                     "--forward for forward-proxy mode)");
            return NULL;
        }
        return strdup(uri);
    }
    if (uri[0] != '/') {
        snprintf(msg, msgsize, "bad request target");
        return NULL;
    }
    size_t plen = strcspn(uri, "?"); /* the query is kept byte for byte */
    char *norm = remove_dots(uri, plen);
    size_t nlen = norm ? strlen(norm) : 0;
    char *path = norm ? realloc(norm, nlen + strlen(uri + plen) + 1) : NULL;
    if (!path) {
        free(norm);
        *status = 500;
        snprintf(msg, msgsize, "out of memory");
        return NULL;
    }
    strcpy(path + nlen, uri + plen);
    char *url = route_url(p, path, status, msg, msgsize);
    free(path);
    return url;
}

/* The upstream URL of an origin-form target without dot segments. */
static char *route_url(const stg_proxy *p, const char *uri, unsigned *status, char *msg,
                       size_t msgsize)
{
    const px_route *best = NULL;
    for (size_t i = 0; i < p->n_routes; i++)
        if (matches(p->routes[i].prefix, uri) &&
            (!best || strlen(p->routes[i].prefix) > strlen(best->prefix)))
            best = &p->routes[i];
    if (!best) {
        *status = 404;
        snprintf(msg, msgsize, "no route for this path (see --route and --upstream)");
        return NULL;
    }
    const char *rest = uri + strlen(best->prefix);
    size_t n = strlen(best->base) + strlen(rest) + 2;
    char *url = malloc(n);
    if (!url) {
        *status = 500;
        snprintf(msg, msgsize, "out of memory");
        return NULL;
    }
    /* "/v1?q" with prefix "/v1": base + "/?q" keeps a path for the query. */
    snprintf(url, n, "%s%s%s", best->base, *rest == '?' ? "/" : "", rest);
    return url;
}

/* The route whose upstream holds the URL u (same scheme, host and port,
 * path under the route's base path on a segment boundary; the longest
 * base path wins), or NULL. */
static const px_route *route_of(const stg_proxy *p, const url_parts *u)
{
    const px_route *best = NULL;
    for (size_t i = 0; i < p->n_routes; i++) {
        const px_route *r = &p->routes[i];
        size_t n = strlen(r->path);
        if (strcmp(r->scheme, u->scheme) || strcmp(r->host, u->host) || strcmp(r->port, u->port) ||
            strncmp(r->path, u->path, n) || (u->path[n] && u->path[n] != '/'))
            continue;
        if (!best || n > strlen(best->path))
            best = r;
    }
    return best;
}

/* "http://" + the proxy's address as the client named it + prefix + the
 * path below the route's base, query and fragment kept. */
static char *via_proxy(const stg_proxy *p, const px_req *r, const px_route *rt, const url_parts *u)
{
    char self[128];
    const char *host = r->host;
    if (!host || !*host || !clean(host)) {
        const char *a = p->cfg.listen_addr ? p->cfg.listen_addr : "127.0.0.1";
        snprintf(self, sizeof self, strchr(a, ':') ? "[%s]:%u" : "%s:%u", a, p->port);
        host = self;
    }
    const char *rest = u->path + strlen(rt->path);
    size_t n = strlen(host) + strlen(rt->prefix) + strlen(rest) + 16 +
               (u->query ? strlen(u->query) + 1 : 0) + (u->fragment ? strlen(u->fragment) + 1 : 0);
    char *out = malloc(n);
    if (!out)
        return NULL;
    snprintf(out, n, "http://%s%s%s%s%s%s%s", host, rt->prefix,
             !*rt->prefix && !*rest ? "/" : rest, u->query ? "?" : "", u->query ? u->query : "",
             u->fragment ? "#" : "", u->fragment ? u->fragment : "");
    STG_ASSERT(!strncmp(out, "http://", 7));
    return out;
}

char *px_location(const stg_proxy *p, const px_req *r, const char *loc)
{
    if (!r->url || !r->uri || r->uri[0] != '/' || !loc || !*loc)
        return NULL; /* forward mode: the client resolves against its own target */
    CURLU *h = curl_url();
    if (!h)
        return NULL;
    char *out = NULL;
    url_parts u;
    bool absolute = http_url(loc);
    if (curl_url_set(h, CURLUPART_URL, r->url, 0) == CURLUE_OK &&
        curl_url_set(h, CURLUPART_URL, loc, 0) == CURLUE_OK && parts_of(h, &u, false)) {
        const px_route *rt = route_of(p, &u);
        if (rt) {
            out = via_proxy(p, r, rt, &u);
        } else if (!absolute) {
            /* On the upstream, outside every route: the client must get
             * there itself, so it gets the absolute URL. */
            char *abs = NULL;
            if (curl_url_get(h, CURLUPART_URL, &abs, 0) == CURLUE_OK && abs)
                out = strdup(abs);
            curl_free(abs);
        }
        parts_free(&u);
    }
    curl_url_cleanup(h);
    return out;
}
