/*
 * Text output of a run: an aligned table for people, CSV, and JSON lines
 * (one object per row, written with jansson). Every figure is the mean over
 * the trials; with more than one trial the table shows "mean ±sd" and CSV
 * and JSON carry KEY_sd beside KEY.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fleet.h"
#include "metrics.h"

typedef struct metric_desc {
    const char *key;
    const char *label;
    int decimals;
    double scale; /* table shows value * scale (success_rate in %) */
} metric_desc;

static const metric_desc descs[] = {
    {"calls", "calls", 0, 1},
    {"total_ms", "total ms", 0, 1},
    {"max_in_window", "max in W", 1, 1},
    {"peak_rps", "peak/s", 0, 1},
    {"throttled", "429s", 0, 1},
    {"early", "early", 0, 1},
    {"failed", "failed", 0, 1},
    {"ratio", "x ideal", 2, 1},
    {"mean_ms", "mean ms", 0, 1},
    {"p99_ms", "p99 ms", 0, 1},
    {"success_rate", "success %", 1, 100},
    {"p50_ms", "p50 ms", 1, 1},
    {"throughput_rps", "req/s", 0, 1},
    {"limit", "limit", 0, 1},
    {"limit_mean", "settled", 1, 1},
    {"max_at_server", "at server", 0, 1},
    {"admitted_rps", "adm/s", 1, 1},
    {"bound_excess", "over bound", 0, 1},
    {"interactive_rps", "inter/s", 1, 1},
    {"normal_rps", "normal/s", 1, 1},
    {"batch_rps", "batch/s", 1, 1},
    {"jain_interactive", "J inter", 3, 1},
    {"jain_normal", "J normal", 3, 1},
    {"jain_batch", "J batch", 3, 1},
    {"interactive_p50_ms", "inter p50 ms", 1, 1},
    {"interactive_p99_ms", "inter p99 ms", 1, 1},
    {"redis_ops_s", "Redis ops/s", 0, 1},
    {"redis_busy", "Redis busy %", 2, 100},
    {"lapsed", "lapsed", 0, 1},
    {"refused", "refused", 0, 1},
};

static const metric_desc *desc_of(const char *key)
{
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++)
        if (!strcmp(descs[i].key, key))
            return &descs[i];
    static const metric_desc fallback = {"", "", 2, 1};
    return &fallback;
}

/* Table label of a metric in a scenario. */
static void label_of(const sim_results *r, const char *key, char *buf, size_t size)
{
    const sim_opts *o = &r->opts;
    if (!strcmp(key, "max_in_window"))
        snprintf(buf, size, "max in %g ms", (double)o->window_us / 1e3);
    else if (!strcmp(key, "total_ms") && o->scenario == SIM_QUOTA)
        snprintf(buf, size, "drain ms");
    else if (!strcmp(key, "total_ms") && o->scenario == SIM_STORM)
        snprintf(buf, size, "done ms");
    else if (!strcmp(key, "failed") && o->scenario == SIM_STORM)
        snprintf(buf, size, "failed jobs");
    else
        snprintf(buf, size, "%s", desc_of(key)->label);
}

static void format_stat(const sim_stat *s, int decimals, double scale, bool spread, char *buf,
                        size_t size)
{
    double m = sim_stat_mean(s) * scale;
    if (spread)
        snprintf(buf, size, "%.*f ±%.*f", decimals, m, decimals, sim_stat_sd(s) * scale);
    else
        snprintf(buf, size, "%.*f", decimals, m);
}

static double ms(int64_t us)
{
    return (double)us / 1e3;
}

static void print_header(FILE *f, const sim_results *r)
{
    sim_opts resolved = r->opts;
    const sim_opts *o = &resolved;
    stg_policy_resolve(&r->opts.policy, &resolved.policy);
    char legs[96];
    snprintf(legs, sizeof legs, "legs |N(%g ms, %g ms)|, server %g ms", ms(o->delay.mean_us),
             ms(o->delay.sd_us), ms(o->server_us));
    char who[48];
    if (o->nclients > 1)
        snprintf(who, sizeof who, "%d to %d", o->clients[0], o->clients[o->nclients - 1]);
    else
        snprintf(who, sizeof who, "%d", o->clients[0]);
    char ra[64];
    if (o->retry_after_us > 0)
        snprintf(ra, sizeof ra, "429 + Retry-After %g s", (double)o->retry_after_us / 1e6);
    else
        snprintf(ra, sizeof ra, "429 without Retry-After");
    if (o->error_rate > 0)
        snprintf(ra + strlen(ra), sizeof ra - strlen(ra), ", %g%% 503s", o->error_rate * 100);
    fprintf(f, "%s: ", sim_scenario_name(o->scenario));
    switch (o->scenario) {
    case SIM_HERD:
        fprintf(f, "%s clients start together; 429 for each one's first %d attempts, then 200;\n"
                   "  base %g ms, %d attempts, deadline %g s; %s\n",
                who, o->fail_first, ms(o->policy.backoff.base_us),
                o->policy.max_attempts, (double)o->policy.deadline_us / 1e6, legs);
        break;
    case SIM_QUOTA:
        fprintf(f, "%s clients x %d requests share %g/s (burst %lld); %s;\n"
                   "  backoff %s, base %g ms; %s\n",
                who, o->requests, o->limit_rps, (long long)o->burst, ra,
                sim_strategy_name(o->strategies[0]), ms(o->policy.backoff.base_us), legs);
        break;
    case SIM_STORM:
        fprintf(f, "%d jobs against %g/s (burst %lld), ideal %g s; %s;\n"
                   "  base %g ms, %d retries; client bucket %g/s burst %lld; %s\n",
                o->requests, o->limit_rps, (long long)o->burst, o->requests / o->limit_rps, ra,
                ms(o->policy.backoff.base_us), o->policy.max_attempts - 1,
                o->client_share * o->limit_rps, (long long)o->client_burst, legs);
        break;
    case SIM_LOAD:
        fprintf(f, "%s concurrent requests against %g/s (burst %lld); %s;\n"
                   "  deadline %g s, %d retries, base %g ms, cap %g s; %s\n",
                who, o->limit_rps, (long long)o->burst, ra,
                (double)o->policy.deadline_us / 1e6, o->policy.max_attempts - 1,
                ms(o->policy.backoff.base_us), (double)o->policy.backoff.cap_us / 1e6, legs);
        break;
    case SIM_SLOW:
        fprintf(f, "%d jobs against a server handling %d at once, %g ms each (%g/s), the rest "
                   "queued;\n  fixed: %s in flight; adaptive: the learned concurrency, at most "
                   "that; %s\n",
                o->requests, o->capacity, ms(o->server_us),
                o->capacity * 1e6 / (double)o->server_us, who, legs);
        break;
    case SIM_FLEET: {
        const sim_fleet_opts *fl = &o->fleet;
        fprintf(f, "%s processes share %g/s (burst %lld) through one Redis key: legs |N(%g ms, "
                   "%g ms)|,\n  %g us per script call, one at a time; leases of %g ms; waits up "
                   "to %g s; %g s measured\n",
                who, o->limit_rps, (long long)o->burst, ms(fl->redis_leg.mean_us),
                ms(fl->redis_leg.sd_us), (double)fl->redis_op_us, ms(fl->lease_us),
                (double)fl->max_wait_us / 1e6, (double)fl->duration_us / 1e6);
        double mix = 0;
        for (int c = 0; c < STG_N_PRIORITIES; c++)
            mix += fl->mix[c];
        fprintf(f, "  classes:");
        for (int c = 0; c < STG_N_PRIORITIES; c++) {
            fprintf(f, "%s %s %.0f%% of them, ", c ? ";" : "", stg_priority_name(c - 1),
                    100 * fl->mix[c] / mix);
            if (fl->offered[c] < 0)
                fprintf(f, "backlogged (next %g ms after a send)", ms(o->server_us));
            else
                fprintf(f, "Poisson %g/s", fl->offered[c] * o->limit_rps);
        }
        fprintf(f, "\n  tenants:");
        for (int t = 0; t < fl->ntenants; t++)
            fprintf(f, "%s %s (weight %g, %g of each class)", t ? "," : "", fl->tenants[t].name,
                    fl->tenants[t].weight, fl->tenants[t].share);
        fprintf(f, "; floor %g%%\n", 100 * fl->floor);
        break;
    }
    default:
        fprintf(f, "one OCC write per client to one row; base %g ms, cap %g ms; %s\n",
                ms(o->policy.backoff.base_us), ms(o->policy.backoff.cap_us), legs);
        break;
    }
    if (o->scenario != SIM_HERD && o->scenario != SIM_CONTENTION && o->scenario != SIM_SLOW &&
        o->scenario != SIM_FLEET) {
        fprintf(f, "  peak/s = most arrivals in any %g ms window, per second", ms(o->window_us));
        if (o->peak_after_us > 0)
            fprintf(f, ", from t = %g s", (double)o->peak_after_us / 1e6);
        fputc('\n', f);
    }
    if (o->use_budget || o->use_breaker) {
        fprintf(f, " ");
        if (o->use_budget) {
            stg_budget b;
            stg_budget_init(&b, &o->budget);
            fprintf(f, " one retry budget of %g tokens;", stg_budget_tokens(&b));
        }
        if (o->use_breaker)
            fprintf(f, " one breaker, %d failures in a row open it for %g s;",
                    o->breaker.consecutive_failures ? o->breaker.consecutive_failures
                                                    : STG_BREAKER_DEFAULT_CONSECUTIVE,
                    (double)(o->breaker.open_us ? o->breaker.open_us
                                                : STG_BREAKER_DEFAULT_OPEN_US) / 1e6);
        fputc('\n', f);
    }
    fprintf(f, "  seed %llu, %d trial%s%s\n\n", (unsigned long long)o->seed, o->trials,
            o->trials == 1 ? "" : "s", o->trials > 1 ? " (mean ±sd)" : "");
}

#define MAX_COLS (SIM_MAX_METRICS + SIM_MAX_ROUNDS + 4)
#define CELL 40

/* A table of cells, printed aligned: the first `left` columns to the left. */
typedef struct table {
    int ncols, nrows, left;
    char (*cells)[MAX_COLS][CELL]; /* nrows + 1 (header) */
} table;

static int table_print(FILE *f, const table *t)
{
    int w[MAX_COLS] = {0};
    for (int r = 0; r <= t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            int len = (int)strlen(t->cells[r][c]);
            /* "±" is two bytes but one column */
            if (strstr(t->cells[r][c], "±"))
                len--;
            if (len > w[c])
                w[c] = len;
        }
    for (int r = 0; r <= t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r][c];
            int len = (int)strlen(s) - (strstr(s, "±") ? 1 : 0);
            int pad = w[c] - len;
            if (c > 0)
                fputs("  ", f);
            if (c < t->left) {
                fputs(s, f);
                if (c + 1 < t->ncols)
                    fprintf(f, "%*s", pad, "");
            } else {
                fprintf(f, "%*s%s", pad, "", s);
            }
        }
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* Contention sweeps: one pivot table per metric, clients down, strategies
 * across. */
static int print_pivot(FILE *f, const sim_results *r, const char *key, const char *title)
{
    const sim_opts *o = &r->opts;
    table t = {.ncols = 1 + o->nstrategies, .nrows = o->nclients, .left = 0};
    t.cells = calloc((size_t)t.nrows + 1, sizeof *t.cells);
    if (!t.cells)
        return -1;
    fprintf(f, "%s\n", title);
    snprintf(t.cells[0][0], CELL, "clients");
    for (int s = 0; s < o->nstrategies; s++)
        snprintf(t.cells[0][1 + s], CELL, "%s", sim_strategy_name(o->strategies[s]));
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        int p = (int)(i / (size_t)o->nstrategies), s = (int)(i % (size_t)o->nstrategies);
        snprintf(t.cells[1 + p][0], CELL, "%d", row->clients);
        const sim_stat *st = sim_row_metric(row, key);
        if (st)
            snprintf(t.cells[1 + p][1 + s], CELL, "%.0f", sim_stat_mean(st));
    }
    int rc = table_print(f, &t);
    free(t.cells);
    fputc('\n', f);
    return rc;
}

/* fleet: one line per point and policy, then admissions per second per
 * class and tenant. */
static int print_fleet(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    const sim_fleet_opts *fl = &o->fleet;
    const sim_row *first = &r->rows[0];
    bool spread = o->trials > 1;
    table t = {.nrows = (int)r->nrows, .left = 2};
    t.cells = calloc(r->nrows + 1, sizeof *t.cells);
    if (!t.cells)
        return -1;
    int c = 0;
    snprintf(t.cells[0][c++], CELL, "clients");
    snprintf(t.cells[0][c++], CELL, "policy");
    for (int m = 0; m < first->nmetrics; m++)
        label_of(r, first->m[m].key, t.cells[0][c++], CELL);
    t.ncols = c;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        char(*cell)[CELL] = t.cells[i + 1];
        c = 0;
        snprintf(cell[c++], CELL, "%d", row->clients);
        snprintf(cell[c++], CELL, "%s", sim_fleet_policy_name(row->mode));
        for (int m = 0; m < first->nmetrics && m < row->nmetrics; m++) {
            const metric_desc *d = desc_of(row->m[m].key);
            format_stat(&row->m[m].s, d->decimals, d->scale, spread, cell[c++], CELL);
        }
    }
    int rc = table_print(f, &t);
    free(t.cells);
    if (rc != 0)
        return -1;
    fprintf(f, "\nadmissions/s per class and tenant (processes); fair: in proportion to the "
               "weight\n");
    t = (table){.nrows = (int)r->nrows * STG_N_PRIORITIES, .left = 3};
    t.cells = calloc((size_t)t.nrows + 1, sizeof *t.cells);
    if (!t.cells)
        return -1;
    c = 0;
    snprintf(t.cells[0][c++], CELL, "clients");
    snprintf(t.cells[0][c++], CELL, "policy");
    snprintf(t.cells[0][c++], CELL, "class");
    for (int k = 0; k < fl->ntenants; k++)
        snprintf(t.cells[0][c++], CELL, "%.24s w%g", fl->tenants[k].name, fl->tenants[k].weight);
    t.ncols = c;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        for (int cl = 0; cl < STG_N_PRIORITIES && row->fleet; cl++) {
            char(*cell)[CELL] = t.cells[1 + i * STG_N_PRIORITIES + (size_t)cl];
            c = 0;
            snprintf(cell[c++], CELL, "%d", row->clients);
            snprintf(cell[c++], CELL, "%s", sim_fleet_policy_name(row->mode));
            snprintf(cell[c++], CELL, "%s", stg_priority_name(cl - 1));
            for (int k = 0; k < fl->ntenants; k++)
                snprintf(cell[c++], CELL, "%.1f (%d)", sim_stat_mean(&row->fleet->rps[cl][k]),
                         row->fleet->clients[cl][k]);
        }
    }
    rc = table_print(f, &t);
    free(t.cells);
    fprintf(f, "\nover bound: sends beyond burst + rate * t; J: Jain's index over the tenants' "
               "admissions / weight;\ninter p50/p99: interactive wait from wanting a request "
               "to sending it\n");
    return rc || ferror(f) ? -1 : 0;
}

int sim_print_table(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    if (r->nrows == 0)
        return 0;
    print_header(f, r);
    if (o->scenario == SIM_CONTENTION && o->nclients > 1) {
        if (print_pivot(f, r, "calls", "calls (writes), mean per trial:") != 0 ||
            print_pivot(f, r, "total_ms", "completion time (ms), mean per trial:") != 0)
            return -1;
        return ferror(f) ? -1 : 0;
    }
    if (o->scenario == SIM_FLEET)
        return print_fleet(f, r);
    bool spread = o->trials > 1;
    bool show_clients = o->nclients > 1;
    bool show_mode = o->scenario == SIM_QUOTA;
    const sim_row *first = &r->rows[0];
    table t = {.nrows = (int)r->nrows};
    t.cells = calloc(r->nrows + 1, sizeof *t.cells);
    if (!t.cells)
        return -1;
    int c = 0;
    if (show_clients)
        snprintf(t.cells[0][c++], CELL, "clients");
    snprintf(t.cells[0][c++], CELL, "strategy");
    if (show_mode)
        snprintf(t.cells[0][c++], CELL, "retry-after");
    t.left = c;
    for (int m = 0; m < first->nmetrics; m++)
        label_of(r, first->m[m].key, t.cells[0][c++], CELL);
    for (int k = 0; k < first->nrounds; k++)
        snprintf(t.cells[0][c++], CELL, k == 0 ? "span r0 ms" : "r%d", k);
    t.ncols = c;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        char(*cell)[CELL] = t.cells[i + 1];
        c = 0;
        if (show_clients)
            snprintf(cell[c++], CELL, "%d", row->clients);
        snprintf(cell[c++], CELL, "%s", sim_strategy_name(row->strategy));
        if (show_mode)
            snprintf(cell[c++], CELL, "%s",
                     stg_retry_after_mode_name((stg_retry_after_mode)row->mode));
        for (int m = 0; m < first->nmetrics && m < row->nmetrics; m++) {
            const metric_desc *d = desc_of(row->m[m].key);
            format_stat(&row->m[m].s, d->decimals, d->scale, spread, cell[c++], CELL);
        }
        for (int k = 0; k < first->nrounds && k < row->nrounds; k++)
            format_stat(&row->rounds[k], 1, 1, spread, cell[c++], CELL);
    }
    int rc = table_print(f, &t);
    free(t.cells);
    if (first->nrounds > 0)
        fprintf(f, "\nspan rK: first to last arrival of round K (r0: first attempts, rK: K-th "
                   "retry)\n");
    if (o->scenario == SIM_HERD)
        fprintf(f, "max in W: retries only (round 0, the first attempts, all start "
                   "together)\n");
    if (o->scenario == SIM_QUOTA)
        fprintf(f, "\nearly: retries sent before the Retry-After had passed\n");
    return rc || ferror(f) ? -1 : 0;
}

/* ---- CSV ---------------------------------------------------------------- */

int sim_write_csv(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    if (r->nrows == 0)
        return 0;
    const sim_row *first = &r->rows[0];
    fprintf(f, "scenario,strategy,retry_after,clients,trials,seed");
    for (int m = 0; m < first->nmetrics; m++)
        fprintf(f, ",%s,%s_sd", first->m[m].key, first->m[m].key);
    for (int k = 0; k < first->nrounds; k++)
        fprintf(f, ",round%d_span_ms,round%d_span_sd_ms", k, k);
    fputc('\n', f);
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        fprintf(f, "%s,%s,%s,%d,%d,%llu", sim_scenario_name(row->scenario),
                row->scenario == SIM_FLEET ? sim_fleet_policy_name(row->mode)
                                           : sim_strategy_name(row->strategy),
                row->mode >= 0 ? stg_retry_after_mode_name((stg_retry_after_mode)row->mode) : "",
                row->clients, o->trials, (unsigned long long)o->seed);
        for (int m = 0; m < first->nmetrics && m < row->nmetrics; m++)
            fprintf(f, ",%.6g,%.6g", sim_stat_mean(&row->m[m].s), sim_stat_sd(&row->m[m].s));
        for (int k = 0; k < first->nrounds && k < row->nrounds; k++)
            fprintf(f, ",%.6g,%.6g", sim_stat_mean(&row->rounds[k]),
                    sim_stat_sd(&row->rounds[k]));
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

/* ---- JSON --------------------------------------------------------------- */

/* A mean as a JSON number: integers stay integers when every trial was
 * whole (calls, 429s), others are reals. */
static json_t *num(double v)
{
    if (v == floor(v) && fabs(v) < 9e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static char *key_sd(const char *key, char *buf, size_t size)
{
    snprintf(buf, size, "%s_sd", key);
    return buf;
}

/* fleet: "classes": {"interactive": {"tenants": {"a": {"weight", "processes",
 * "admitted_rps"}}}, ...}. */
static int fleet_json(json_t *j, const sim_opts *o, const sim_row *row)
{
    const sim_fleet_opts *fl = &o->fleet;
    json_t *classes = json_object();
    if (!classes || json_object_set_new(j, "classes", classes) != 0)
        return -1;
    for (int c = 0; c < STG_N_PRIORITIES; c++) {
        json_t *cj = json_object(), *tj = json_object();
        if (!cj || !tj || json_object_set_new(classes, stg_priority_name(c - 1), cj) != 0 ||
            json_object_set_new(cj, "tenants", tj) != 0) {
            json_decref(tj);
            return -1;
        }
        for (int t = 0; t < fl->ntenants; t++) {
            json_t *e = json_object();
            if (!e || json_object_set_new(tj, fl->tenants[t].name, e) != 0)
                return -1;
            json_object_set_new(e, "weight", num(fl->tenants[t].weight));
            json_object_set_new(e, "processes", json_integer(row->fleet->clients[c][t]));
            json_object_set_new(e, "admitted_rps", num(sim_stat_mean(&row->fleet->rps[c][t])));
        }
    }
    return 0;
}

int sim_write_json(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        json_t *j = json_object();
        if (!j)
            return -1;
        json_object_set_new(j, "scenario", json_string(sim_scenario_name(row->scenario)));
        json_object_set_new(j, "strategy", json_string(sim_strategy_name(row->strategy)));
        if (row->scenario == SIM_FLEET) {
            json_object_del(j, "strategy");
            json_object_set_new(j, "policy", json_string(sim_fleet_policy_name(row->mode)));
        } else if (row->mode >= 0)
            json_object_set_new(
                j, "retry_after",
                json_string(stg_retry_after_mode_name((stg_retry_after_mode)row->mode)));
        json_object_set_new(j, "clients", json_integer(row->clients));
        json_object_set_new(j, "trials", json_integer(o->trials));
        json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
        if (row->scenario != SIM_CONTENTION && row->scenario != SIM_FLEET)
            json_object_set_new(j, "window_ms", num(ms(o->window_us)));
        for (int m = 0; m < row->nmetrics; m++) {
            char buf[64];
            json_object_set_new(j, row->m[m].key, num(sim_stat_mean(&row->m[m].s)));
            if (o->trials > 1)
                json_object_set_new(j, key_sd(row->m[m].key, buf, sizeof buf),
                                    json_real(sim_stat_sd(&row->m[m].s)));
        }
        if (row->fleet && fleet_json(j, o, row) != 0) {
            json_decref(j);
            return -1;
        }
        if (row->nrounds > 0) {
            json_t *a = json_array(), *sd = json_array();
            for (int k = 0; k < row->nrounds; k++) {
                json_array_append_new(a, json_real(sim_stat_mean(&row->rounds[k])));
                json_array_append_new(sd, json_real(sim_stat_sd(&row->rounds[k])));
            }
            json_object_set_new(j, "round_spans_ms", a);
            if (o->trials > 1)
                json_object_set_new(j, "round_spans_sd_ms", sd);
            else
                json_decref(sd);
        }
        char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        json_decref(j);
        if (!s)
            return -1;
        fprintf(f, "%s\n", s);
        free(s);
    }
    return ferror(f) ? -1 : 0;
}
