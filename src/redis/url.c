/*
 * Parsing of redis:// and rediss:// (TLS) URLs and fallback specs, and their
 * redacted form.
 *
 * Input is untrusted (a command-line flag): every length is checked before
 * a copy, every part is bounded by the fixed buffers of stg_redis_url, and
 * every error is a static message that never quotes the password.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into out (cap bytes including the NUL). */
static int decode(const char *s, size_t n, char *out, size_t cap, const char *what_long,
                  const char **why)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n) {
                *why = "bad percent-escape in redis URL (want %XX)";
                return STG_EPARSE;
            }
            int h = hexval((unsigned char)s[i + 1]), lo = hexval((unsigned char)s[i + 2]);
            if (h < 0 || lo < 0) {
                *why = "bad percent-escape in redis URL (want %XX)";
                return STG_EPARSE;
            }
            c = h * 16 + lo;
            if (c == 0) {
                *why = "%00 is not allowed in a redis URL";
                return STG_EPARSE;
            }
            i += 2;
        }
        if (o + 1 >= cap) {
            *why = what_long;
            return STG_ERANGE;
        }
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return STG_OK;
}

/* Parse digits s[0..n) as a decimal in [lo, hi]. */
static int number(const char *s, size_t n, long lo, long hi, long *out)
{
    if (n == 0 || n > 9)
        return n == 0 ? STG_EPARSE : STG_ERANGE;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return STG_EPARSE;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return STG_ERANGE;
    *out = v;
    return STG_OK;
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int parse(const char *url, stg_redis_url *out, const char **why)
{
    memset(out, 0, sizeof *out);
    out->port = STG_REDIS_DEFAULT_PORT;
    const char *p;
    if (strncasecmp(url, "rediss://", 9) == 0) {
        out->tls = true;
        p = url + 9;
    } else if (strncasecmp(url, "redis://", 8) == 0) {
        p = url + 8;
    } else {
        *why = "redis URL must start with redis:// or rediss:// (TLS) "
               "(redis://HOST[:PORT][/[DB/]KEY])";
        return STG_EPARSE;
    }
    for (const char *q = p; *q; q++) {
        if (*q == '?' || *q == '#') {
            *why = "query strings and fragments are not supported in a redis URL";
            return STG_EPARSE;
        }
        if ((unsigned char)*q <= ' ' || *q == 0x7f) {
            *why = "spaces and control characters are not allowed in a redis URL "
                   "(percent-encode them)";
            return STG_EPARSE;
        }
    }
    const char *auth_end = strchr(p, '/');
    if (!auth_end)
        auth_end = p + strlen(p);

    /* userinfo: up to the last '@' of the authority */
    const char *at = NULL;
    for (const char *q = p; q < auth_end; q++)
        if (*q == '@')
            at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (!colon) {
            *why = "redis URL userinfo must be ':PASSWORD@' or 'USER:PASSWORD@'";
            return STG_EPARSE;
        }
        int rc = decode(p, (size_t)(colon - p), out->user, sizeof out->user,
                        "redis URL user name too long", why);
        if (rc != STG_OK)
            return rc;
        rc = decode(colon + 1, (size_t)(at - colon - 1), out->password, sizeof out->password,
                    "redis URL password too long", why);
        if (rc != STG_OK)
            return rc;
        if (out->password[0] == '\0') {
            *why = "redis URL has an empty password";
            return STG_EPARSE;
        }
        p = at + 1;
    }

    /* host[:port] */
    const char *host = p, *host_end, *port = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(auth_end - p));
        if (!rb) {
            *why = "redis URL: '[' without ']' around an IPv6 address";
            return STG_EPARSE;
        }
        host = p + 1;
        host_end = rb;
        if (rb + 1 < auth_end) {
            if (rb[1] != ':') {
                *why = "redis URL: expected ':PORT' after ']'";
                return STG_EPARSE;
            }
            port = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        host_end = colon ? colon : auth_end;
        if (colon)
            port = colon + 1;
        for (const char *q = host; q < host_end; q++) {
            if (!(isalnum((unsigned char)*q) || *q == '.' || *q == '-' || *q == '_')) {
                *why = "redis URL host may contain only letters, digits, '.', '-', '_' "
                       "(IPv6 in [brackets])";
                return STG_EPARSE;
            }
        }
    }
    if (host_end == host) {
        *why = "redis URL has no host (redis://HOST[:PORT][/[DB/]KEY])";
        return STG_EPARSE;
    }
    if ((size_t)(host_end - host) > STG_REDIS_HOST_MAX) {
        *why = "redis URL host too long";
        return STG_ERANGE;
    }
    memcpy(out->host, host, (size_t)(host_end - host));
    out->host[host_end - host] = '\0';
    if (port) {
        long v;
        int rc = number(port, (size_t)(auth_end - port), 1, 65535, &v);
        if (rc != STG_OK) {
            *why = rc == STG_ERANGE ? "redis URL port must be 1-65535"
                                    : "redis URL port must be a number (1-65535)";
            return rc;
        }
        out->port = (int)v;
    }

    /* [/[DB/]KEY] */
    if (*auth_end == '/') {
        const char *path = auth_end + 1;
        const char *slash = strchr(path, '/');
        if (slash && all_digits(path, (size_t)(slash - path))) {
            long v;
            if (number(path, (size_t)(slash - path), 0, STG_REDIS_DB_MAX, &v) != STG_OK) {
                *why = "redis URL database number out of range (0-9999)";
                return STG_ERANGE;
            }
            out->db = (int)v;
            path = slash + 1;
        }
        int rc = decode(path, strlen(path), out->key, sizeof out->key,
                        "redis URL key too long (at most 255 bytes)", why);
        if (rc != STG_OK)
            return rc;
    }
    return STG_OK;
}

int stg_redis_url_parse(const char *url, stg_redis_url *out, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (!url || !out) {
        *why = "no redis URL given";
        return STG_EINVAL;
    }
    int rc = parse(url, out, why);
    if (rc != STG_OK)
        memset(out->password, 0, sizeof out->password);
    return rc;
}

int stg_redis_url_format(const stg_redis_url *u, char *buf, size_t len)
{
    if (!u || !buf)
        return -1;
    bool v6 = strchr(u->host, ':') != NULL;
    const char *auth_sep = u->password[0] ? "@" : "";
    char auth[STG_REDIS_USER_MAX + 8];
    if (u->password[0])
        snprintf(auth, sizeof auth, "%s:***", u->user);
    else
        auth[0] = '\0';
    char db[16] = "";
    if (u->db != 0)
        snprintf(db, sizeof db, "%d/", u->db);
    return snprintf(buf, len, "%s://%s%s%s%s%s:%d/%s%s", u->tls ? "rediss" : "redis", auth, auth_sep, v6 ? "[" : "",
                    u->host, v6 ? "]" : "", u->port, db, u->key);
}

int stg_redis_fallback_parse(const char *spec, double *share, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    if (!spec || !share) {
        *why = "no fallback given";
        return STG_EINVAL;
    }
    if (strcmp(spec, "none") == 0) {
        *share = 0;
        return STG_OK;
    }
    if (strncmp(spec, "local:", 6) != 0) {
        *why = "fallback must be 'local:SHARE' (SHARE in (0, 1], e.g. local:0.25) or 'none'";
        return STG_EPARSE;
    }
    const char *s = spec + 6;
    if (!(isdigit((unsigned char)s[0]) || (s[0] == '.' && isdigit((unsigned char)s[1])))) {
        *why = "fallback SHARE must be a decimal number in (0, 1], e.g. local:0.25";
        return STG_EPARSE;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || errno != 0 || !isfinite(v)) {
        *why = "fallback SHARE must be a decimal number in (0, 1], e.g. local:0.25";
        return STG_EPARSE;
    }
    if (!(v > 0.0 && v <= 1.0)) {
        *why = "fallback SHARE must be in (0, 1] (each process's fraction of the rate)";
        return STG_ERANGE;
    }
    *share = v;
    return STG_OK;
}

int stg__redis_interval_ns(double rate, int64_t *interval_ns)
{
    if (!(rate > 0.0) || !(rate <= STG_BUCKET_RATE_MAX))
        return STG_EINVAL;
    double t = ceil(1e9 / rate);
    if (!(t <= (double)STG_REDIS_SPAN_MAX_NS))
        return STG_EINVAL;
    *interval_ns = (int64_t)t;
    return STG_OK;
}
