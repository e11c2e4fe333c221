/*
 * What a request head must be for `stagger proxy` to forward it: well-formed
 * HTTP/1.1 (RFC 9112 §2.2, §3, §5, §6, §7; RFC 9110 §5.1, §5.5, §5.6.2), so
 * that the proxy and whatever reads its request upstream can never disagree
 * on where a request ends (request smuggling: CL.TE, TE.CL, TE.TE).
 *
 * The front is libmicrohttpd 0.9.75 (Debian 12), which is lenient. Before
 * the access handler runs it has, on the raw bytes (connection.c):
 *   - ended lines at CRLF or at a bare LF; a bare CR stays in the line;
 *   - refused a request line without a space, a version other than
 *     HTTP/1.x (400 or 505), a header line without a colon (400), a head
 *     over the connection's pool (431);
 *   - kept the name as written up to the colon (whitespace before it
 *     included: `Transfer-Encoding : chunked` gives the name
 *     "Transfer-Encoding "), skipped spaces and tabs after the colon;
 *   - glued an obs-fold continuation line (one starting with SP or HTAB)
 *     onto the NAME of the field before it (`X-Fold: a` + `\tTE: chunked`
 *     becomes the field "X-FoldTE: chunked" = "a");
 *   - cut a name or value at a NUL (it stores them as C strings);
 *   - read the body by the FIRST Transfer-Encoding field (exactly
 *     "chunked": chunked; any other value: until the connection closes)
 *     or else the FIRST Content-Length (1*DIGIT, else 400; too large 413),
 *     ignoring every later one;
 *   - kept a space inside the request-target (it looks for the version
 *     from the end of the line).
 * Most of that is no error to MHD; so here, on its parsed view (the method,
 * the version, the raw target from the URI callback and every field with
 * its length, from MHD_get_connection_values_n), px_head_check refuses:
 *   400 a method that is not a token; 501 one longer than PX_METHOD_MAX;
 *   400 a version other than HTTP/1.0 or HTTP/1.x;
 *   400 a target that is empty or holds a CTL, SP or DEL (a bare CR);
 *   400 a field name that is not a token: whitespace before the colon,
 *       an obs-fold glued on, a byte 0x00-0x20, 0x7F-0xFF or a delimiter;
 *   400 a field value with a CTL other than HTAB (a bare CR, 0x01, DEL);
 *   400 HTTP/1.1 without Host, or with several Host fields, or a Host that
 *       is not uri-host[:port] characters (RFC 9112 §3.2);
 *   400 a Content-Length that is not 1*DIGIT, or several that differ;
 *   400 Transfer-Encoding with Content-Length (§6.3: a proxy MUST NOT
 *       forward both; we refuse instead), in HTTP/1.0 (§6.1), or whose
 *       coding list (every Transfer-Encoding field joined) does not end in
 *       chunked, holds chunked twice or is not a list of tokens;
 *   501 a list that ends in chunked but holds another coding (gzip, ...):
 *       only chunked is implemented.
 * MHD_OPTION_STRICT_FOR_CLIENT stays at 0: in 0.9.75, 1 refuses only an
 * HTTP/1.1 request without Host and a space in the target, and -1 only
 * whitespace before a colon (1 and -1 exclude each other); we refuse all
 * three here, with an answer and a reason in the log, where MHD would
 * refuse the space in the target by closing without an answer, and both
 * before our handler, where the log cannot say why. (A newer
 * libmicrohttpd's MHD_OPTION_CLIENT_DISCIPLINE_LVL checks raw bytes we
 * cannot see: worth turning on with it.)
 * The front answers a refusal with Connection: close (MHD then drops the
 * rest of the connection's bytes, the body and anything after it), logs
 * it, and forwards nothing.
 *
 * What is left, because we never see the raw bytes: an obs-fold whose
 * continuation is only whitespace, or only token characters, leaves a
 * valid name (`X-A: v` + `\tB` reaches us as "X-AB" = "v"), and a NUL cuts
 * a value ("a\0b" reaches us as "a"; RFC 9110 §5.5 wants the message
 * refused or the NUL replaced by SP, but MHD cuts before we see it).
 * Neither can become a framing difference: MHD frames the body by the
 * same parsed fields we check (so MHD and we agree on where the request
 * ends), what goes upstream is built from these parsed, checked strings
 * (headers.c), never from raw bytes, so it holds no NUL, CR or LF, and
 * the upstream's framing is libcurl's own (Content-Length from the body
 * MHD read), never the client's. A bare LF ending a line is accepted, as
 * RFC 9112 §2.2 allows.
 *
 * Invariants: pure (no I/O, no allocation, no global state); reads only
 * the bytes h points at, within the lengths given; a reason is one of the
 * static tokens below.
 */
#include "proxy/head_check.h"

#include <string.h>
#include <strings.h>

static bool refuse(px_verdict *v, unsigned status, const char *reason, const char *msg)
{
    if (v) {
        v->status = status;
        v->reason = reason;
        v->msg = msg;
    }
    return false;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* The next member of a comma-separated list in s[*i..n): its bounds,
 * OWS trimmed. Returns false at the end. An empty member is returned
 * empty (start == end). */
static bool next_member(const char *s, size_t n, size_t *i, size_t *start, size_t *end)
{
    if (*i > n)
        return false;
    size_t a = *i;
    while (a < n && is_ws(s[a]))
        a++;
    size_t b = a;
    while (b < n && s[b] != ',')
        b++;
    *i = b + 1; /* past the comma, or n + 1 at the end */
    size_t e = b;
    while (e > a && is_ws(s[e - 1]))
        e--;
    *start = a;
    *end = e;
    return true;
}

bool px_conn_lists(const char *conn, size_t m, const char *name, size_t n)
{
    size_t i = 0, a, b;
    while (next_member(conn, m, &i, &a, &b))
        if (b - a == n && n && !strncasecmp(conn + a, name, n))
            return true;
    return false;
}

static bool name_is(const px_field *f, const char *lower)
{
    size_t n = strlen(lower);
    return f->name_len == n && !strncasecmp(f->name, lower, n);
}

/* field-value: no CTL but HTAB (RFC 9110 §5.5: field-vchar, SP, HTAB,
 * obs-text). */
/* Host = uri-host [ ":" port ] (RFC 3986 reg-name, IP-literal, IPv4):
 * unreserved, pct-encoded, sub-delims, ':' and the brackets. Empty is
 * allowed (RFC 9112 §3.2: a target without authority). */
static bool host_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c && strchr("-._~%!$&'()*+,;=:[]", c));
        if (!ok)
            return false;
    }
    return true;
}

/* 1*DIGIT, leading zeros skipped into *digits / *nd. */
static bool length_ok(const char *s, size_t n, const char **digits, size_t *nd)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    while (n > 1 && *s == '0')
        s++, n--;
    *digits = s;
    *nd = n;
    return true;
}

/* The Transfer-Encoding fields, joined as one list (RFC 9110 §5.3). */
static bool coding_check(const px_head *h, px_verdict *v)
{
    size_t members = 0, chunked = 0;
    bool last_chunked = false;
    for (size_t k = 0; k < h->n_fields; k++) {
        const px_field *f = &h->fields[k];
        if (!name_is(f, "transfer-encoding"))
            continue;
        size_t i = 0, a, b;
        while (next_member(f->value, f->value_len, &i, &a, &b)) {
            const char *m = f->value + a;
            size_t len = b - a;
            /* transfer-coding = token *( OWS ";" OWS transfer-parameter ) */
            size_t tok = 0;
            while (tok < len && stg__http_tchar((unsigned char)m[tok]))
                tok++;
            if (!tok || (tok < len && !is_ws(m[tok]) && m[tok] != ';'))
                return refuse(v, 400, "bad-transfer-encoding",
                              "Transfer-Encoding is not a list of transfer codings");
            members++;
            last_chunked = tok == len && tok == 7 && !strncasecmp(m, "chunked", 7);
            chunked += last_chunked;
        }
    }
    if (!members)
        return refuse(v, 400, "bad-transfer-encoding", "Transfer-Encoding is empty");
    if (!last_chunked || chunked > 1)
        return refuse(v, 400, "te-not-chunked",
                      "Transfer-Encoding does not end in chunked (once): the body's length "
                      "cannot be known (RFC 9112 6.3)");
    if (members > 1)
        return refuse(v, 501, "te-unsupported",
                      "a transfer coding other than chunked is not implemented");
    return true;
}

bool px_head_check(const px_head *h, px_verdict *v)
{
    if (!stg__http_token(h->method, h->method_len))
        return refuse(v, 400, "bad-method", "the method is not a token (RFC 9110 5.6.2)");
    if (h->method_len > PX_METHOD_MAX)
        return refuse(v, 501, "method-too-long", "no method that long is implemented");
    bool v10 = h->version_len == 8 && !memcmp(h->version, "HTTP/1.0", 8);
    if (h->version_len != 8 || memcmp(h->version, "HTTP/1.", 7) || h->version[7] < '0' ||
        h->version[7] > '9')
        return refuse(v, 400, "bad-version", "the version is not HTTP/1.x");
    if (!h->target_len)
        return refuse(v, 400, "bad-target", "the request-target is empty");
    for (size_t i = 0; i < h->target_len; i++) {
        unsigned char c = (unsigned char)h->target[i];
        if (c <= 0x20 || c == 0x7f)
            return refuse(v, 400, "bad-target",
                          "the request-target holds a space or a control character");
    }
    size_t hosts = 0, lengths = 0, codings = 0;
    const char *len_digits = NULL;
    size_t len_nd = 0;
    for (size_t k = 0; k < h->n_fields; k++) {
        const px_field *f = &h->fields[k];
        if (!stg__http_token(f->name, f->name_len))
            return refuse(v, 400, "bad-field-name",
                          "a field name is not a token (RFC 9110 5.1): whitespace before the "
                          "colon, a folded line (obs-fold) or a byte outside the token set");
        if (!stg__http_value_ok(f->value, f->value_len))
            return refuse(v, 400, "bad-field-value",
                          "a field value holds a control character (RFC 9110 5.5)");
        if (name_is(f, "host")) {
            if (++hosts > 1)
                return refuse(v, 400, "several-hosts", "more than one Host field (RFC 9112 3.2)");
            if (!host_ok(f->value, f->value_len))
                return refuse(v, 400, "bad-host", "Host is not host[:port] (RFC 9112 3.2)");
        } else if (name_is(f, "content-length")) {
            const char *d;
            size_t nd;
            if (!length_ok(f->value, f->value_len, &d, &nd))
                return refuse(v, 400, "bad-content-length",
                              "Content-Length is not a number (1*DIGIT)");
            if (lengths++ && (nd != len_nd || memcmp(d, len_digits, nd)))
                return refuse(v, 400, "several-content-lengths",
                              "Content-Length fields that differ (RFC 9112 6.3)");
            len_digits = d;
            len_nd = nd;
        } else if (name_is(f, "transfer-encoding")) {
            codings++;
        }
    }
    if (!v10 && !hosts)
        return refuse(v, 400, "no-host", "an HTTP/1.1 request without Host (RFC 9112 3.2)");
    if (codings && lengths)
        return refuse(v, 400, "cl-and-te",
                      "Content-Length together with Transfer-Encoding (RFC 9112 6.3)");
    if (codings && v10)
        return refuse(v, 400, "te-in-http10", "Transfer-Encoding in HTTP/1.0 (RFC 9112 6.1)");
    if (codings && !coding_check(h, v))
        return false;
    return true;
}
