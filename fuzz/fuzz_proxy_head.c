/*
 * libFuzzer harness for the proxy's request-head rules and the fields it
 * builds for the upstream (src/proxy/head_check.c, headers.c's
 * px_forward_fields): untrusted bytes from any client. Input: records
 * split by '\n': the method, the version, the request-target, then one
 * field per record, its name up to the first NUL (no NUL: up to the first
 * ':'), its value after it; lengths are passed, never NUL-terminated, and
 * each piece is copied to its own allocation so ASan sees an over-read.
 * Beyond "no crash, no over-read, no leak": what px_head_check accepts
 * holds no non-token name, no CTL but HTAB in a value, at most one Host,
 * never Content-Length with Transfer-Encoding; and no line built for the
 * upstream holds a CR, LF or NUL, names Host, Content-Length,
 * Transfer-Encoding, Connection or a field a Connection field lists, and
 * the last one is Via.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/internal.h"

#include "fuzz_common.h"

#define MAX_FIELDS 64

static char *dup_n(const uint8_t *p, size_t n)
{
    char *s = malloc(n ? n : 1);
    if (s && n)
        memcpy(s, p, n);
    return s;
}

static bool named(const char *line, const char *lower)
{
    size_t n = strlen(lower);
    return !strncasecmp(line, lower, n) && (line[n] == ':' || line[n] == ';');
}

static void check_lines(const px_field *f, size_t nf, char **lines, size_t n)
{
    if (!n || !lines || lines[n] || strcmp(lines[n - 1], "Via: 1.1 stagger"))
        abort();
    for (size_t i = 0; i < n; i++) {
        const char *l = lines[i];
        if (strpbrk(l, "\r\n"))
            abort();
        size_t nl = strcspn(l, ":;");
        if (i == n - 1 || (l[nl] == ':' && !l[nl + 1]))
            continue; /* our Via, and "Name:" (libcurl: send no such field) */
        if (named(l, "host") || named(l, "content-length") || named(l, "transfer-encoding") ||
            named(l, "connection") || named(l, "te") || named(l, "upgrade"))
            abort();
        for (size_t k = 0; k < nf; k++)
            if (f[k].name_len == 10 && !strncasecmp(f[k].name, "connection", 10) &&
                px_conn_lists(f[k].value, f[k].value_len, l, nl))
                abort(); /* a name a Connection field lists went on */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *part[3 + MAX_FIELDS] = {0};
    size_t len[3 + MAX_FIELDS] = {0};
    px_field f[MAX_FIELDS];
    size_t np = 0, nf = 0;
    const uint8_t *p = data, *end = data + size;
    while (p <= end && np < 3 + MAX_FIELDS) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *e = nl ? nl : end;
        len[np] = (size_t)(e - p);
        part[np] = dup_n(p, len[np]);
        if (!part[np])
            goto out;
        np++;
        if (!nl)
            break;
        p = nl + 1;
    }
    for (size_t i = 3; i < np; i++) {
        char *s = part[i];
        char *sep = memchr(s, '\0', len[i]);
        if (!sep)
            sep = memchr(s, ':', len[i]);
        size_t n = sep ? (size_t)(sep - s) : len[i];
        f[nf++] = (px_field){.name = s, .name_len = n, .value = sep ? sep + 1 : s + n,
                             .value_len = sep ? len[i] - n - 1 : 0};
    }
    px_head h = {.method = np > 0 ? part[0] : "", .method_len = np > 0 ? len[0] : 0,
                 .version = np > 1 ? part[1] : "", .version_len = np > 1 ? len[1] : 0,
                 .target = np > 2 ? part[2] : "", .target_len = np > 2 ? len[2] : 0,
                 .fields = f, .n_fields = nf};
    px_verdict v = {0};
    if (!px_head_check(&h, &v)) {
        if (!v.reason || !v.msg || (v.status != 400 && v.status != 501))
            abort();
        goto out;
    }
    size_t hosts = 0, cls = 0, tes = 0;
    for (size_t k = 0; k < nf; k++) {
        if (!stg__http_token(f[k].name, f[k].name_len) || !stg__http_value_ok(f[k].value, f[k].value_len))
            abort();
        hosts += f[k].name_len == 4 && !strncasecmp(f[k].name, "host", 4);
        cls += f[k].name_len == 14 && !strncasecmp(f[k].name, "content-length", 14);
        tes += f[k].name_len == 17 && !strncasecmp(f[k].name, "transfer-encoding", 17);
    }
    if (hosts > 1 || (cls && tes))
        abort();
    char **lines = NULL;
    size_t n = 0;
    char idem[64];
    if (px_forward_fields(f, nf, &lines, &n, idem, sizeof idem) == 0) {
        check_lines(f, nf, lines, n);
        for (size_t i = 0; i < n; i++)
            free(lines[i]);
        free(lines);
    }
out:
    for (size_t i = 0; i < np; i++)
        free(part[i]);
    return 0;
}
