/*
 * Splitting a URL into scheme, userinfo, host, port, path, query and
 * fragment (core/url.h), for redaction and limiter keys. Not a validator:
 * it never rejects, it marks what cannot be trusted (bad_authority).
 *
 * Invariants: every range written lies inside the input and the ranges
 * follow each other in URL order (asserted at the end); ASCII rules only,
 * no locale-dependent ctype call, no allocation.
 */
#include <stdint.h>
#include <string.h>

#include "core/internal.h"
#include "core/url.h"

static bool scheme_char(char c)
{
    return stg__is_alpha(c) || stg__is_digit(c) || c == '+' || c == '-' || c == '.';
}

/* host[:port] after the userinfo, in u[h, end). */
static void split_host_port(const char *u, size_t h, size_t end, stg__url_parts *p)
{
    size_t colon = SIZE_MAX;
    if (h < end && u[h] == '[') {
        const char *close = memchr(u + h, ']', end - h);
        if (!close) {
            p->bad_authority = true;
            return;
        }
        size_t c = (size_t)(close - u);
        p->host = h;
        p->host_len = c + 1 - h;
        if (c + 1 < end) {
            if (u[c + 1] != ':') {
                p->bad_authority = true;
                return;
            }
            colon = c + 1;
        }
    } else {
        for (size_t i = h; i < end; i++)
            if (u[i] == ':') {
                if (colon != SIZE_MAX) {
                    p->bad_authority = true; /* two colons outside brackets */
                    return;
                }
                colon = i;
            }
        p->host = h;
        p->host_len = (colon == SIZE_MAX ? end : colon) - h;
    }
    if (colon != SIZE_MAX) {
        p->has_port = true;
        p->port = colon + 1;
        p->port_len = end - colon - 1;
        for (size_t i = p->port; i < end; i++)
            if (!stg__is_digit(u[i])) {
                p->bad_authority = true;
                return;
            }
    }
}

static void split_authority(const char *u, size_t a, size_t end, stg__url_parts *p)
{
    p->has_authority = true;
    /* Userinfo ends at the LAST '@' of the authority: '@' is not allowed
     * unencoded in a host, and a careless password may contain one. */
    size_t at = SIZE_MAX;
    for (size_t i = a; i < end; i++)
        if (u[i] == '@')
            at = i;
    size_t h = a;
    if (at != SIZE_MAX) {
        p->has_userinfo = true;
        p->userinfo = a;
        p->userinfo_len = at - a;
        h = at + 1;
    }
    split_host_port(u, h, end, p);
}

void stg__url_split(const char *u, stg__url_parts *p)
{
    memset(p, 0, sizeof *p);
    if (!u)
        return;
    size_t n = strlen(u), i = 0, j = 0;
    if (stg__is_alpha(u[0])) {
        j = 1;
        while (scheme_char(u[j]))
            j++;
    }
    bool authority = false;
    if (j > 0 && u[j] == ':' && u[j + 1] == '/' && u[j + 2] == '/') {
        p->has_scheme = true;
        p->scheme = 0;
        p->scheme_len = j;
        i = j + 3;
        authority = true;
    } else if (u[0] == '/' && u[1] == '/') {
        i = 2; /* network-path reference: //host/path */
        authority = true;
    } else if (u[0] != '/' && u[0] != '?' && u[0] != '#' && u[0] != '\0') {
        authority = true; /* no scheme: "host[:port]/path", as curl reads it */
    }
    if (authority) {
        size_t end = i;
        while (end < n && u[end] != '/' && u[end] != '?' && u[end] != '#')
            end++;
        split_authority(u, i, end, p);
        i = end;
    }
    p->path = i;
    while (i < n && u[i] != '?' && u[i] != '#')
        i++;
    p->path_len = i - p->path;
    if (i < n && u[i] == '?') {
        p->has_query = true;
        p->query = ++i;
        while (i < n && u[i] != '#')
            i++;
        p->query_len = i - p->query;
    }
    if (i < n && u[i] == '#') {
        p->has_fragment = true;
        p->fragment = i + 1;
        p->fragment_len = n - i - 1;
    }
    STG_ASSERT(p->path + p->path_len <= n);
    STG_ASSERT(!p->has_query || (p->query >= p->path + p->path_len && p->query + p->query_len <= n));
    STG_ASSERT(!p->has_fragment || p->fragment + p->fragment_len == n);
    STG_ASSERT(!p->has_authority || p->bad_authority || p->host + p->host_len <= p->path);
}
