/*
 * Internal: the per class and tenant series of stg_metrics (issue #32,
 * docs/priorities.md), kept apart from metrics.c, which calls these under
 * its own mutex (metrics_class.c has the series and the bounds).
 */
#ifndef STAGGER_CURL_METRICS_CLASS_H
#define STAGGER_CURL_METRICS_CLASS_H

#include <stdint.h>
#include <stdio.h>

#include <stagger/curl.h>

#define STG__MC_BOUNDS 14

typedef struct stg__mc_row {
    int priority;
    char tenant[STG_TENANT_MAX + 2]; /* "" none; "~other" past the cap */
    uint64_t admitted;
    int64_t waiting;
    uint64_t le[STG__MC_BOUNDS + 1]; /* admission waits, non-cumulative, +Inf last */
    double wait_sum;
    uint64_t used; /* LRU clock */
} stg__mc_row;

typedef struct stg__mc {
    stg__mc_row *rows;
    size_t n, cap;
    uint64_t clock;
} stg__mc;

/* Count ev (an engine's event with ev->more->cls; others are ignored). */
void stg__mc_event(stg__mc *mc, const stg_event *ev);
/* The series, Prometheus text (nothing when no event had a class). */
void stg__mc_print(const stg__mc *mc, FILE *f);
void stg__mc_free(stg__mc *mc);

#endif
