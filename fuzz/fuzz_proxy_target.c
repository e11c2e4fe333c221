/*
 * libFuzzer harness for where the proxy sends a request target
 * (src/proxy/target.c, px_target): dot-segment removal, route matching on
 * a segment boundary, the join onto the upstream base.
 *
 * Input: the request target as a client sends it (NUL-terminated copy of
 * exactly its length). The proxy has routes /a -> http://a.test/base and
 * /a/b -> http://b.test, and the default -> http://d.test/root. Checked:
 * a URL comes back for a clean origin-form target and for nothing with a
 * control byte; it starts with one route's base followed by '/', '?' or
 * the end, so its path is under that base; the path has no "." or ".."
 * segment, however its dots are written ('.', %2e, %2E), so neither
 * libcurl nor the upstream can take it out of the base.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/internal.h"

#include "fuzz_common.h"

static stg_proxy *proxy(void)
{
    static stg_proxy *p;
    static const stg_proxy_route routes[] = {
        {"/a", "http://a.test/base"}, {"/a/b", "http://b.test"}, {"", "http://d.test/root"}};
    if (!p) {
        p = calloc(1, sizeof *p);
        CHECK(p);
        p->cfg.routes = routes;
        p->cfg.n_routes = 3;
        char err[256];
        CHECK(px_routes_init(p, err, sizeof err) == 0);
    }
    return p;
}

/* Is s[0..n) a dot segment, dots written '.', %2e or %2E? */
static bool dot_segment(const char *s, size_t n)
{
    size_t dots = 0;
    for (size_t i = 0; i < n; dots++) {
        if (s[i] == '.')
            i++;
        else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' && (s[i + 2] == 'e' || s[i + 2] == 'E'))
            i += 3;
        else
            return false;
    }
    return dots == 1 || dots == 2;
}

static const char *after_base(const char *url)
{
    static const char *const bases[] = {"http://a.test/base", "http://b.test",
                                        "http://d.test/root"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(bases[i]);
        if (!strncmp(url, bases[i], n) && (url[n] == '/' || url[n] == '?' || !url[n]))
            return url + n;
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *uri = malloc(size + 1);
    CHECK(uri);
    memcpy(uri, data, size);
    uri[size] = '\0';
    size = strlen(uri); /* what MHD would give: a C string */
    bool clean = true;
    for (size_t i = 0; clean && i < size; i++)
        clean = (unsigned char)uri[i] > 0x20 && uri[i] != 0x7f;
    unsigned status = 0;
    char msg[512];
    char *url = px_target(proxy(), uri, &status, msg, sizeof msg);
    if (!clean)
        CHECK(!url);
    if (clean && uri[0] == '/')
        CHECK(url);
    if (url) {
        const char *rest = after_base(url);
        CHECK(rest);
        size_t plen = strcspn(rest, "?");
        for (size_t i = 0; i < plen;) {
            CHECK(rest[i] == '/');
            size_t s = ++i;
            while (i < plen && rest[i] != '/')
                i++;
            CHECK(!dot_segment(rest + s, i - s));
        }
        free(url);
    }
    free(uri);
    return 0;
}
