/*
 * Internal: the engine's table of classes and tenants (engine_class.c):
 * one stg_class_stats row per (class, tenant) its requests named, which
 * the requests point at (req.crow) and the events carry (stg_event.more->cls).
 */
#ifndef STAGGER_CURL_ENGINE_CLASS_H
#define STAGGER_CURL_ENGINE_CLASS_H

#include <stdbool.h>
#include <stddef.h>

#include <stagger/curl.h>

typedef struct stg__class_row {
    stg_class_stats st;              /* st.tenant points at tenant, or NULL */
    char tenant[STG_TENANT_MAX + 2]; /* "~other" past the cap */
    struct stg__class_row *next;
} stg__class_row;

typedef struct stg__classes {
    stg__class_row *head[STG_N_PRIORITIES];
    size_t n[STG_N_PRIORITIES]; /* rows with a tenant, per class */
    size_t rows;
    /* Without memory for a new row, the class's request counts here. */
    stg__class_row fallback[STG_N_PRIORITIES];
    /* Classes (by index) any request named, engine-wide, and whether one
     * named a tenant: once a class other than normal or a tenant is seen,
     * the engine orders admissions (engine_admit.c: a fixed rate paced,
     * slots left to the higher classes); an engine of normal requests
     * without tenants keeps its old behaviour exactly. */
    bool seen[STG_N_PRIORITIES];
    bool tenants;
} stg__classes;

void stg__classes_init(stg__classes *c);
void stg__classes_free(stg__classes *c);
/* The row of (priority, tenant) (NULL or "": none), made at its first
 * request; never NULL (the class's fallback row when out of memory). */
stg__class_row *stg__classes_row(stg__classes *c, int priority, const char *tenant);
/* Rows in the engine's order, up to max into out; returns the count. */
size_t stg__classes_copy(const stg__classes *c, stg_class_stats *out, size_t max);
/* A request of a class other than normal, or with a tenant, was seen. */
static inline bool stg__classes_mixed(const stg__classes *c)
{
    for (int i = 0; i < STG_N_PRIORITIES; i++)
        if (c->seen[i] && i != STG_PRIORITY_INDEX(STG_PRIORITY_NORMAL))
            return true;
    return c->tenants;
}

#endif
