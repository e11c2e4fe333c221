/*
 * The Stagger-Priority and Stagger-Tenant field values (issue #32,
 * docs/priorities.md), written once (header-only, pure) for every place
 * that reads them: the proxy's request headers (proxy/control.c) and a
 * batch job's stored headers (batch/submit.c; store/input.c writes a
 * JSONL job's or CSV row's priority/tenant/weight as these fields, so a
 * resumed run keeps them).
 *
 *   Stagger-Priority: interactive | normal | batch   (also high, low)
 *   Stagger-Tenant: NAME[;w=WEIGHT]
 *
 * NAME as stg_tenant_check (1..64 of [A-Za-z0-9._:-]); WEIGHT a number
 * > 0 and <= 1e6; blanks around ';' and '=' allowed.
 *
 * Invariant: total on any NUL-terminated input; on false the outputs are
 * untouched.
 */
#ifndef STG_UTIL_CLASS_FIELD_H
#define STG_UTIL_CLASS_FIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <stagger/priority.h>

#define STG__PRIORITY_FIELD "Stagger-Priority"
#define STG__TENANT_FIELD "Stagger-Tenant"

static inline const char *stg__field_blanks(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* s a Stagger-Tenant value: the name into name[size] (size > 64 holds
 * every name), the weight into *weight (0: not given). */
static inline bool stg__tenant_field_parse(const char *s, char *name, size_t size, double *weight)
{
    s = stg__field_blanks(s);
    const char *semi = strchr(s, ';');
    const char *end = semi ? semi : s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t n = (size_t)(end - s);
    if (n == 0 || n >= size || n > STG_TENANT_MAX)
        return false;
    char buf[STG_TENANT_MAX + 1];
    memcpy(buf, s, n);
    buf[n] = 0;
    if (stg_tenant_check(buf, NULL) != STG_OK)
        return false;
    double w = 0;
    if (semi) {
        const char *p = stg__field_blanks(semi + 1);
        if (*p != 'w' && *p != 'W')
            return false;
        p = stg__field_blanks(p + 1);
        if (*p++ != '=')
            return false;
        p = stg__field_blanks(p);
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return false; /* no sign, no "inf", no "nan" */
        char *e = NULL;
        w = strtod(p, &e);
        if (e == p || !(w > 0) || w > 1e6 || *stg__field_blanks(e))
            return false;
    }
    memcpy(name, buf, n + 1);
    *weight = w;
    return true;
}

#endif
