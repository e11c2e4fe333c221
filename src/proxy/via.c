/*
 * Via, and the loops it reveals. Each proxy instance names itself with a
 * pseudonym of its own, "1.1 stagger-<8 hex digits>" (RFC 9110 §7.6.3
 * allows a pseudonym for the received-by part), random at start, and adds
 * it to what it sends both ways. A request whose Via already holds that
 * pseudonym has been through this very proxy: it was pointed at itself
 * (an --upstream or a --forward target that is the proxy's own address,
 * or a longer cycle through other proxies), and forwarding it again would
 * go round until the connections run out. It is answered 508 Loop
 * Detected at once (front.c, begin), with Stagger-Error: loop-detected.
 *
 * Invariants: p->via is set once, before the proxy listens, and read-only
 * afterwards; a request is refused only for its own proxy's pseudonym, so
 * chains of distinct stagger proxies still work.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "proxy/internal.h"

void px_via_init(stg_proxy *p)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        /* No entropy yet: the clock and the address still differ between
         * two proxies on one machine. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint32_t)ts.tv_nsec ^ (uint32_t)(uintptr_t)p ^ (uint32_t)ts.tv_sec;
    }
    snprintf(p->via, sizeof p->via, "1.1 stagger-%08x", (unsigned)v);
}

typedef struct scan {
    const char *name; /* "stagger-xxxxxxxx" */
    bool found;
} scan;

/* Does one Via field value ("1.1 a, HTTP/1.0 b (comment), ...") name us
 * as a received-by? */
static bool names(const char *value, const char *name)
{
    size_t n = strlen(name);
    for (const char *s = value; *s;) {
        size_t k = strcspn(s, ",");
        /* protocol, whitespace, received-by, then anything */
        const char *e = s + k, *t = s;
        while (t < e && (*t == ' ' || *t == '\t'))
            t++;
        while (t < e && *t != ' ' && *t != '\t')
            t++;
        while (t < e && (*t == ' ' || *t == '\t'))
            t++;
        if ((size_t)(e - t) >= n && !strncasecmp(t, name, n) &&
            (t + n == e || t[n] == ' ' || t[n] == '\t'))
            return true;
        s = *e ? e + 1 : e;
    }
    return false;
}

static enum MHD_Result each(void *cls, enum MHD_ValueKind kind, const char *key,
                            const char *value)
{
    (void)kind;
    scan *k = cls;
    if (key && value && !strcasecmp(key, "via") && names(value, k->name)) {
        k->found = true;
        return MHD_NO; /* found: stop */
    }
    return MHD_YES;
}

bool px_via_loop(const stg_proxy *p, struct MHD_Connection *c)
{
    scan k = {.name = p->via + 4}; /* past "1.1 " */
    MHD_get_connection_values(c, MHD_HEADER_KIND, each, &k);
    return k.found;
}
