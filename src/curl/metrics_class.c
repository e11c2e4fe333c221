/*
 * The per class and tenant series of stg_metrics (docs/priorities.md),
 * from the engine's events (stg_event.more->cls):
 *   stagger_class_admitted_total{class,tenant}  attempts admitted
 *   stagger_class_waiting{class,tenant}         requests waiting for
 *                                               admission, as of the
 *                                               latest event of that
 *                                               class and tenant
 *   stagger_class_wait_seconds{class,tenant}    histogram of the admitted
 *                                               attempts' waits for
 *                                               admission
 * class is the priority class's name (interactive, normal, batch), tenant
 * the tenant's name ("" for none). (stagger_attempts_total's class label
 * is an outcome class: another series.)
 *
 * Invariants: at most MAX_ROWS rows (the engine's own cap, STG_CLASS_
 * TENANTS_MAX per class plus "~other", bounds what one engine sends; a
 * metrics object shared by several engines replaces the least recently
 * updated row); tenant names are stg_tenant_check's characters or
 * "~other", and are escaped anyway; the caller (metrics.c) holds the lock.
 */
#include <stdlib.h>
#include <string.h>

#include "curl/metrics_class.h"
#include "util/grow.h"

#define MAX_ROWS (STG_N_PRIORITIES * (STG_CLASS_TENANTS_MAX + 1))

static const double mc_bounds[STG__MC_BOUNDS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                 1,     2.5,  5,     10,   30,  60,   120};

static stg__mc_row *row_of(stg__mc *mc, int priority, const char *tenant)
{
    if (!tenant)
        tenant = "";
    for (size_t i = 0; i < mc->n; i++)
        if (mc->rows[i].priority == priority && !strcmp(mc->rows[i].tenant, tenant)) {
            mc->rows[i].used = ++mc->clock;
            return &mc->rows[i];
        }
    stg__mc_row *r;
    if (mc->n == MAX_ROWS) {
        r = &mc->rows[0];
        for (size_t i = 1; i < mc->n; i++)
            if (mc->rows[i].used < r->used)
                r = &mc->rows[i];
    } else {
        if (!STG__GROW(mc->rows, mc->n, mc->cap, 8))
            return NULL;
        r = &mc->rows[mc->n++];
    }
    memset(r, 0, sizeof *r);
    r->priority = priority;
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    r->used = ++mc->clock;
    return r;
}

void stg__mc_event(stg__mc *mc, const stg_event *ev)
{
    const stg_class_stats *cs = ev->more ? ev->more->cls : NULL;
    if (!cs)
        return;
    stg__mc_row *r = row_of(mc, cs->priority, cs->tenant);
    if (!r)
        return;
    r->waiting = cs->waiting;
    if (ev->type != STG_EVENT_ATTEMPT_START)
        return;
    r->admitted++;
    double s = ev->wait_us > 0 ? (double)ev->wait_us / 1e6 : 0;
    size_t b = 0;
    while (b < STG__MC_BOUNDS && s > mc_bounds[b])
        b++;
    r->le[b]++;
    r->wait_sum += s;
}

/* A family's # HELP and # TYPE lines. */
static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The start of r's series of name: name{class="...",tenant="..."MORE} (the
 * tenant escaped), before its value. */
static void series(FILE *f, const char *name, const stg__mc_row *r, const char *more)
{
    fprintf(f, "%s{class=\"%s\",tenant=\"", name, stg_priority_name(r->priority));
    for (const char *p = r->tenant; *p; p++) {
        if (*p == '\\' || *p == '"')
            fputc('\\', f);
        fputc(*p, f);
    }
    fprintf(f, "\"%s}", more ? more : "");
}

void stg__mc_print(const stg__mc *mc, FILE *f)
{
    if (!mc->n)
        return;
    family(f, "stagger_class_admitted_total", "counter",
           "Attempts admitted, by priority class and tenant.");
    for (size_t i = 0; i < mc->n; i++) {
        series(f, "stagger_class_admitted_total", &mc->rows[i], NULL);
        fprintf(f, " %llu\n", (unsigned long long)mc->rows[i].admitted);
    }
    family(f, "stagger_class_waiting", "gauge",
           "Requests waiting for admission, by priority class and tenant.");
    for (size_t i = 0; i < mc->n; i++) {
        series(f, "stagger_class_waiting", &mc->rows[i], NULL);
        fprintf(f, " %lld\n", (long long)mc->rows[i].waiting);
    }
    family(f, "stagger_class_wait_seconds", "histogram",
           "Waits for admission of the admitted attempts, by priority class and tenant.");
    for (size_t i = 0; i < mc->n; i++) {
        const stg__mc_row *r = &mc->rows[i];
        uint64_t cum = 0;
        char le[48];
        for (size_t b = 0; b <= STG__MC_BOUNDS; b++) {
            cum += r->le[b];
            if (b < STG__MC_BOUNDS)
                snprintf(le, sizeof le, ",le=\"%g\"", mc_bounds[b]);
            else
                snprintf(le, sizeof le, ",le=\"+Inf\"");
            series(f, "stagger_class_wait_seconds_bucket", r, le);
            fprintf(f, " %llu\n", (unsigned long long)cum);
        }
        series(f, "stagger_class_wait_seconds_sum", r, NULL);
        fprintf(f, " %.6f\n", r->wait_sum);
        series(f, "stagger_class_wait_seconds_count", r, NULL);
        fprintf(f, " %llu\n", (unsigned long long)cum);
    }
}

void stg__mc_free(stg__mc *mc)
{
    free(mc->rows);
    memset(mc, 0, sizeof *mc);
}
