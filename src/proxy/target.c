/*
 * Where a request goes. Reverse mode: the longest route prefix that
 * matches the path on a segment boundary ("/v1" takes "/v1", "/v1/x" and
 * "/v1?q", never "/v1x") maps it onto its upstream base, query kept byte
 * for byte (the target is the raw one MHD's URI callback saw, never
 * unescaped and re-escaped). Forward mode: an absolute-form http:// target
 * is the URL itself. https:// cannot be forwarded (that needs CONNECT,
 * whose tunnel stagger cannot see into): such a target and CONNECT get a
 * 4xx that says to use reverse mode.
 *
 * Invariants: a URL built here starts with http:// or https:// and holds
 * no CR, LF, space or other control byte (the engine refuses those, and a
 * target with them is a 400 here).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/internal.h"

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
