/*
 * Header rewriting, both ways (RFC 9110 §7.6.1: a proxy removes the
 * hop-by-hop fields, those Connection names, and adds Via:
 * this instance's pseudonym, via.c).
 *
 * Upstream: what goes is built from the fields libmicrohttpd parsed and
 * head_check.c accepted (tokens for names, no CTL but HTAB in values: a
 * line can hold no NUL, CR or LF), never from raw bytes; everything
 * end-to-end the client sent goes on unchanged,
 * Authorization and API keys included (they are the program's; they are
 * never logged: the engine's events are redacted and the proxy's own log
 * line has no header in it). Removed: hop-by-hop fields and the names
 * listed by EVERY Connection field (whatever their length), Host (libcurl
 * sets the upstream's), Content-Length and Transfer-Encoding (libcurl
 * frames the body it sends itself), Expect (libcurl must not wait for a
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
 * is rewritten to point at the proxy (target.c); removed: hop-by-hop
 * fields and the names every Connection field of the answer lists, and a
 * field whose name is not a token or whose value holds a CTL (MHD would
 * refuse a CR or LF, and no client should get one: response splitting);
 * Content-Length and Transfer-Encoding are MHD's to set from the body it
 * sends. No field is cut or dropped for its size: the front measures the
 * whole head (px_response_head_size) and answers 502 when MHD could not
 * send it (front.c).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/head_check.h"
#include "proxy/internal.h"
#include "util/assert.h"
#include "util/grow.h"

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

static bool is_name(const char *name, size_t n, const char *lower)
{
    return strlen(lower) == n && !strncasecmp(name, lower, n);
}

/* Every Connection field's value, joined by commas (one list, RFC 9110
 * §5.3). */
typedef struct conn_list {
    char *s;
    size_t len, cap;
    bool oom;
} conn_list;

static void conn_add(conn_list *k, const char *value, size_t m)
{
    if (k->oom)
        return;
    if (!stg__reserve(&k->s, &k->cap, k->len + m + 2, 1, 64)) {
        k->oom = true;
        return;
    }
    if (k->len)
        k->s[k->len++] = ',';
    memcpy(k->s + k->len, value, m);
    k->len += m;
    k->s[k->len] = '\0';
}

static bool hop_by_hop(const char *name, size_t n, const conn_list *conn)
{
    return in_list(name, n, hop) || (conn->len && px_conn_lists(conn->s, conn->len, name, n));
}

typedef struct collect {
    char **lines;
    size_t n, cap;
    bool accept, oom;
} collect;

static void push(collect *k, char *line)
{
    if (!line) {
        k->oom = true;
        return;
    }
    if (k->n + 2 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        char **h = realloc(k->lines, cap * sizeof *h);
        if (!h) {
            free(line);
            k->oom = true;
            return;
        }
        k->lines = h;
        k->cap = cap;
    }
    k->lines[k->n++] = line;
    k->lines[k->n] = NULL;
}

/* "Name: value", or "Name;" (libcurl's way to send an empty value). */
static char *line_of(const px_field *f)
{
    size_t size = f->name_len + f->value_len + 3;
    char *s = malloc(size);
    if (!s)
        return NULL;
    if (f->value_len)
        snprintf(s, size, "%.*s: %.*s", (int)f->name_len, f->name, (int)f->value_len, f->value);
    else
        snprintf(s, size, "%.*s;", (int)f->name_len, f->name);
    return s;
}

int px_forward_fields(const px_field *f, size_t n, char ***lines, size_t *n_lines, char *idem,
                      size_t idem_size)
{
    conn_list conn = {0};
    collect k = {0};
    if (idem_size)
        idem[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (is_name(f[i].name, f[i].name_len, "connection"))
            conn_add(&conn, f[i].value, f[i].value_len);
    k.oom = conn.oom;
    for (size_t i = 0; i < n && !k.oom; i++) {
        const char *name = f[i].name;
        size_t nl = f[i].name_len;
        if (hop_by_hop(name, nl, &conn) || is_name(name, nl, "host") ||
            is_name(name, nl, "content-length") || is_name(name, nl, "expect") ||
            (nl >= 8 && !strncasecmp(name, "stagger-", 8)))
            continue;
        if (is_name(name, nl, "idempotency-key") && f[i].value_len &&
            f[i].value_len < idem_size && !idem[0]) {
            snprintf(idem, idem_size, "%.*s", (int)f[i].value_len, f[i].value);
            continue; /* a longer one (too long for us), or a second: as is */
        }
        if (is_name(name, nl, "accept"))
            k.accept = true;
        push(&k, line_of(&f[i]));
    }
    if (!k.oom && !k.accept)
        push(&k, strdup("Accept:"));
    if (!k.oom)
        push(&k, strdup("Expect:"));
    if (!k.oom)
        push(&k, strdup("Via: 1.1 stagger"));
    free(conn.s);
    if (k.oom) {
        for (size_t i = 0; i < k.n; i++)
            free(k.lines[i]);
        free(k.lines);
        return -1;
    }
    *lines = k.lines;
    *n_lines = k.n;
    return 0;
}

/* ---- the request's fields, from MHD ---------------------------------------- */

typedef struct fields {
    px_field *f;
    size_t n, cap;
    bool oom;
} fields;

static enum MHD_Result gather(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                              const char *value, size_t value_size)
{
    (void)kind;
    fields *k = cls;
    if (!STG__GROW(k->f, k->n, k->cap, 32)) {
        k->oom = true;
        return MHD_NO;
    }
    k->f[k->n++] = (px_field){.name = key ? key : "",
                              .name_len = key ? key_size : 0,
                              .value = value ? value : "",
                              .value_len = value ? value_size : 0};
    return MHD_YES;
}

px_field *px_request_fields(struct MHD_Connection *c, size_t *n)
{
    fields k = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, gather, &k);
    if (k.oom || !k.f) {
        free(k.f);
        k.f = k.oom ? NULL : calloc(1, sizeof *k.f);
        k.n = 0;
    }
    *n = k.n;
    return k.f;
}

/* This proxy's Via value (via.c: its pseudonym), or the plain one when r
 * belongs to no proxy (the unit tests' requests). */
static const char *via_of(const px_req *r)
{
    return r && r->p ? r->p->via : "1.1 stagger";
}

int px_request_headers(px_req *r, const px_field *f, size_t n)
{
    if (px_forward_fields(f, n, &r->hdrs, &r->n_hdrs, r->idem_key, sizeof r->idem_key) != 0)
        return -1;
    /* The Via px_forward_fields adds last becomes this instance's own. */
    STG_ASSERT(r->n_hdrs && !strcmp(r->hdrs[r->n_hdrs - 1], "Via: 1.1 stagger"));
    size_t len = strlen(via_of(r)) + sizeof "Via: ";
    char *via = malloc(len);
    if (!via)
        return -1; /* r->hdrs is freed with r */
    snprintf(via, len, "Via: %s", via_of(r));
    free(r->hdrs[r->n_hdrs - 1]);
    r->hdrs[r->n_hdrs - 1] = via;
    return 0;
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
    struct MHD_Response *resp; /* NULL: measure only */
    const px_req *r;
    conn_list conn;
    size_t bytes;              /* the head's fields on the wire */
} resp_ctx;

static void find_connection(void *ctx, const char *name, size_t n, const char *value, size_t m)
{
    resp_ctx *k = ctx;
    if (is_name(name, n, "connection"))
        conn_add(&k->conn, value, m);
}

static void add_field(void *ctx, const char *name, size_t n, const char *value, size_t m)
{
    resp_ctx *k = ctx;
    /* Out of memory for the Connection list: nothing rather than a field
     * it may have named. */
    if (k->conn.oom || hop_by_hop(name, n, &k->conn) || is_name(name, n, "content-length") ||
        !stg__http_token(name, n) || !stg__http_value_ok(value, m))
        return;
    if (!k->resp && !is_name(name, n, "location")) { /* counting: no copies */
        k->bytes += n + m + 4;
        return;
    }
    char *nb = strndup(name, n), *vb = strndup(value, m);
    char *loc = nb && vb && is_name(name, n, "location") ? px_location(k->r->p, k->r, vb) : NULL;
    if (nb && vb) {
        const char *val = loc ? loc : vb;
        k->bytes += n + strlen(val) + 4; /* ": " and CRLF */
        if (k->resp)
            MHD_add_response_header(k->resp, nb, val);
    }
    free(loc);
    free(vb);
    free(nb);
}

static size_t walk(resp_ctx *k, const char *block, size_t len)
{
    if (block) {
        each_field(block, len, find_connection, k);
        each_field(block, len, add_field, k);
    }
    free(k->conn.s);
    k->bytes += sizeof "Via: \r\n" - 1 + strlen(via_of(k->r));
    if (k->resp)
        MHD_add_response_header(k->resp, "Via", via_of(k->r));
    return k->bytes;
}

size_t px_response_head_size(const px_req *r, const char *block, size_t len)
{
    resp_ctx k = {.r = r};
    return walk(&k, block, len);
}

void px_response_headers(struct MHD_Response *resp, const px_req *r, const char *block,
                         size_t len)
{
    resp_ctx k = {.resp = resp, .r = r};
    walk(&k, block, len);
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
