/*
 * The engine's classes and tenants (engine_class.h): a row of figures per
 * (class, tenant) its requests named, for stg_engine_class_stats, the
 * events (stg_event.more->cls) and so metrics, logs, the proxy's health.
 *
 * Invariants: a row lives as long as the engine (requests point at it);
 * at most STG_CLASS_TENANTS_MAX rows with a tenant per class, the others
 * sharing the class's "~other" row, so memory is bounded whatever names
 * callers send; the fallback rows (out of memory) are counted as rows only
 * once something used them.
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"

#define OTHER "~other"

void stg__classes_init(stg__classes *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < STG_N_PRIORITIES; i++)
        c->fallback[i].st.priority = STG_PRIORITY_MIN + i;
}

void stg__classes_free(stg__classes *c)
{
    for (int i = 0; i < STG_N_PRIORITIES; i++) {
        stg__class_row *r = c->head[i];
        while (r) {
            stg__class_row *n = r->next;
            free(r);
            r = n;
        }
        c->head[i] = NULL;
    }
}

static stg__class_row *find(stg__class_row *r, const char *tenant)
{
    for (; r; r = r->next)
        if (!strcmp(r->tenant, tenant))
            return r;
    return NULL;
}

stg__class_row *stg__classes_row(stg__classes *c, int priority, const char *tenant)
{
    if (priority < STG_PRIORITY_MIN || priority > STG_PRIORITY_MAX)
        priority = STG_PRIORITY_NORMAL;
    int ci = STG_PRIORITY_INDEX(priority);
    if (!tenant)
        tenant = "";
    c->seen[ci] = true;
    if (*tenant)
        c->tenants = true;
    stg__class_row *r = find(c->head[ci], tenant);
    if (r)
        return r;
    if (*tenant && c->n[ci] >= STG_CLASS_TENANTS_MAX) {
        tenant = OTHER;
        if ((r = find(c->head[ci], tenant)))
            return r;
    }
    r = calloc(1, sizeof *r);
    if (!r)
        return &c->fallback[ci];
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    r->st.priority = priority;
    r->st.tenant = *tenant ? r->tenant : NULL;
    /* Appended: rows keep the order they were made in. */
    stg__class_row **pp = &c->head[ci];
    while (*pp)
        pp = &(*pp)->next;
    *pp = r;
    if (*tenant && strcmp(tenant, OTHER))
        c->n[ci]++;
    c->rows++;
    return r;
}

size_t stg__classes_copy(const stg__classes *c, stg_class_stats *out, size_t max)
{
    size_t n = 0;
    for (int i = 0; i < STG_N_PRIORITIES; i++) {
        for (const stg__class_row *r = c->head[i]; r; r = r->next, n++)
            if (n < max)
                out[n] = r->st;
        const stg_class_stats *fb = &c->fallback[i].st;
        if (fb->admitted || fb->waiting) {
            if (n < max)
                out[n] = *fb;
            n++;
        }
    }
    return n;
}

size_t stg_engine_class_stats(const stg_engine *e, stg_class_stats *out, size_t max)
{
    if (!e)
        return 0;
    return stg__classes_copy(&e->classes, out, max);
}
