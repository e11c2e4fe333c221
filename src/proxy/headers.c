/*
 * Header rewriting, both ways (RFC 9110 §7.6.1: a proxy removes the
 * hop-by-hop fields, those Connection names, and adds Via).
 *
 * Upstream: everything end-to-end the client sent goes on unchanged,
 * Authorization and API keys included (they are the program's; they are
 * never logged: the engine's events are redacted and the proxy's own log
 * line has no header in it). Removed: hop-by-hop fields and the names
 * Connection lists, Host (libcurl sets the upstream's), Content-Length
 * (libcurl sets it from the body), Expect (libcurl must not wait for a
 * 100), Proxy-Authorization (meant for a proxy, and no upstream's
 * business), Stagger-* (ours: control.c) and Idempotency-Key (given to
 * the engine, which sends it and knows the request may be retried).
 * libcurl's own defaults are switched off when the client did not send
 * the field ("Accept:" removes the Accept libcurl would add), so the upstream
 * sees what the program sent.
 *
 * Downstream: the answer's end-to-end fields go to the program unchanged
 * (Retry-After, RateLimit-*, X-RateLimit-*, Set-Cookie...), so its own
 * logic still works, except a Location back onto a routed upstream, which
 * is rewritten to point at the proxy (target.c); Content-Length and Transfer-Encoding are MHD's to
 * set from the body it sends.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/internal.h"

static const char *const hop[] = {"connection", "keep-alive", "proxy-connection", "te",
                                  "trailer", "transfer-encoding", "upgrade",
                                  "proxy-authenticate", "proxy-authorization", NULL};

static bool in_list(const char *name, size_t n, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strlen(list[i]) == n && !strncasecmp(list[i], name, n))
            return true;
    return false;
}

/* Is name one of the tokens of a Connection value? */
static bool named_by(const char *conn, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = conn; s && *s;) {
        s += strspn(s, " \t,");
        size_t k = strcspn(s, " \t,");
        if (k == n && !strncasecmp(s, name, n))
            return true;
        s += k;
    }
    return false;
}

static bool hop_by_hop(const char *name, size_t n, const char *conn)
{
    if (in_list(name, n, hop))
        return true;
    if (!conn)
        return false;
    char tmp[128];
    if (n >= sizeof tmp)
        return false;
    memcpy(tmp, name, n);
    tmp[n] = '\0';
    return named_by(conn, tmp);
}

typedef struct collect {
    px_req *r;
    const char *conn;
    bool accept, oom;
    size_t cap;
} collect;

static bool push(collect *k, char *line)
{
    px_req *r = k->r;
    if (!line)
        return false;
    if (r->n_hdrs + 2 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        char **h = realloc(r->hdrs, cap * sizeof *h);
        if (!h) {
            free(line);
            return false;
        }
        r->hdrs = h;
        k->cap = cap;
    }
    r->hdrs[r->n_hdrs++] = line;
    r->hdrs[r->n_hdrs] = NULL;
    return true;
}

static char *join(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s: %s", name, value);
    return s;
}

static enum MHD_Result one(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
    (void)kind;
    collect *k = cls;
    size_t n = strlen(name);
    if (!value)
        value = "";
    if (strpbrk(value, "\r\n"))
        return MHD_YES; /* MHD never gives one; the engine would refuse it */
    if (hop_by_hop(name, n, k->conn) || !strcasecmp(name, "host") ||
        !strcasecmp(name, "content-length") || !strcasecmp(name, "expect") ||
        !strncasecmp(name, "stagger-", 8))
        return MHD_YES;
    if (!strcasecmp(name, "idempotency-key")) {
        if (*value && strlen(value) < sizeof k->r->idem_key)
            snprintf(k->r->idem_key, sizeof k->r->idem_key, "%s", value);
        else if (*value && !push(k, join(name, value))) /* too long for us: as is */
            k->oom = true;
        return MHD_YES;
    }
    if (!strcasecmp(name, "accept"))
        k->accept = true;
    /* "Name;" is libcurl's way to send a header with an empty value. */
    char *line = *value ? join(name, value) : NULL;
    if (!*value && (line = malloc(n + 2)))
        snprintf(line, n + 2, "%s;", name);
    if (!push(k, line))
        k->oom = true;
    return MHD_YES;
}

int px_request_headers(px_req *r, struct MHD_Connection *c)
{
    collect k = {.r = r};
    k.conn = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connection");
    MHD_get_connection_values(c, MHD_HEADER_KIND, one, &k);
    if (!k.oom && !k.accept)
        k.oom = !push(&k, strdup("Accept:"));
    if (!k.oom)
        k.oom = !push(&k, strdup("Expect:"));
    if (!k.oom)
        k.oom = !push(&k, strdup("Via: 1.1 stagger"));
    if (!r->hdrs && !k.oom) {
        r->hdrs = calloc(1, sizeof *r->hdrs);
        k.oom = !r->hdrs;
    }
    return k.oom ? -1 : 0;
}

/* Walk the lines of a raw header block: fn(name, n, value, m) per field. */
static void each_field(const char *block, size_t len,
                       void (*fn)(void *ctx, const char *name, size_t n, const char *value,
                                  size_t m),
                       void *ctx)
{
    const char *end = block + len, *s = block;
    bool first = true;
    while (s < end) {
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        const char *le = eol ? eol : end;
        const char *t = le;
        if (t > s && t[-1] == '\r')
            t--;
        if (!first && t > s) {
            const char *colon = memchr(s, ':', (size_t)(t - s));
            if (colon && colon > s) {
                const char *v = colon + 1;
                while (v < t && (*v == ' ' || *v == '\t'))
                    v++;
                const char *ve = t;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                    ve--;
                fn(ctx, s, (size_t)(colon - s), v, (size_t)(ve - v));
            }
        }
        first = false;
        s = eol ? eol + 1 : end;
    }
}

typedef struct resp_ctx {
    struct MHD_Response *resp;
    const px_req *r;
    char conn[256];
} resp_ctx;

static void find_connection(void *ctx, const char *name, size_t n, const char *value, size_t m)
{
    resp_ctx *k = ctx;
    if (n == 10 && !strncasecmp(name, "connection", 10) && m < sizeof k->conn)
        snprintf(k->conn, sizeof k->conn, "%.*s", (int)m, value);
}

static void add_field(void *ctx, const char *name, size_t n, const char *value, size_t m)
{
    resp_ctx *k = ctx;
    if (hop_by_hop(name, n, k->conn[0] ? k->conn : NULL) ||
        (n == 14 && !strncasecmp(name, "content-length", 14)) || n >= 256 || m >= 16384)
        return;
    char nb[256];
    memcpy(nb, name, n);
    nb[n] = '\0';
    char *vb = strndup(value, m);
    if (!vb)
        return;
    char *loc = n == 8 && !strncasecmp(name, "location", 8) ? px_location(k->r->p, k->r, vb) : NULL;
    MHD_add_response_header(k->resp, nb, loc ? loc : vb);
    free(loc);
    free(vb);
}

void px_response_headers(struct MHD_Response *resp, const px_req *r, const char *block,
                         size_t len)
{
    resp_ctx k = {.resp = resp, .r = r};
    if (block) {
        each_field(block, len, find_connection, &k);
        each_field(block, len, add_field, &k);
    }
    MHD_add_response_header(resp, "Via", "1.1 stagger");
}

int px_block_status(const char *block, size_t len)
{
    if (!block || len < 12 || strncmp(block, "HTTP/", 5) != 0)
        return 0;
    const char *sp = memchr(block, ' ', len);
    if (!sp || (size_t)(sp - block) + 4 > len)
        return 0;
    int st = 0;
    for (int i = 1; i <= 3; i++) {
        if (sp[i] < '0' || sp[i] > '9')
            return 0;
        st = st * 10 + (sp[i] - '0');
    }
    return st;
}

typedef struct len_ctx {
    int64_t n;
} len_ctx;

static void find_length(void *ctx, const char *name, size_t n, const char *value, size_t m)
{
    len_ctx *k = ctx;
    if (n != 14 || strncasecmp(name, "content-length", 14) || !m || m > 18)
        return;
    int64_t v = 0;
    for (size_t i = 0; i < m; i++) {
        if (value[i] < '0' || value[i] > '9')
            return;
        v = v * 10 + (value[i] - '0');
    }
    k->n = v;
}

int64_t px_block_length(const char *block, size_t len)
{
    len_ctx k = {.n = -1};
    if (block)
        each_field(block, len, find_length, &k);
    return k.n;
}
