/*
 * Charts as self-contained SVG (no scripts, no external fonts or files).
 *
 *  herd, quota, storm, load   arrivals at the server over time, one panel
 *                             per row (strategy, mode, workers);
 *                             quota/storm/load on one time axis, in
 *                             requests per second with the server's limit
 *                             dashed; herd each panel on its own time axis
 *                             (a 12 s row beside a 1 s one squashed it), its
 *                             "max in W" said to leave out round 0 (the
 *                             first attempts, all at t = 0 by design).
 *  contention                 calls and completion time against the number
 *                             of clients, one line per strategy.
 *  fleet                      fairness, the interactive wait and Redis's
 *                             load against the number of processes, one
 *                             line per policy (the same panels).
 * The series come from each row's first trial (sim_row.bins).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define W 960
#define ML 78 /* left margin (y labels) */
#define MR 24
#define PANEL_H 118
#define PANEL_GAP 40

static const char *const strategy_colors[SIM_N_STRATEGIES] = {
    "#7f7f7f", /* none */
    "#d62728", /* fixed */
    "#ff7f0e", /* exponential */
    "#1f77b4", /* full */
    "#9467bd", /* equal */
    "#2ca02c", /* decorrelated */
    "#8c564b", /* pct */
    "#e377c2", /* additive */
    "#17becf", /* bucket */
    "#bcbd22", /* adaptive */
};
static const char *const policy_colors[SIM_FLEET_N_POLICIES] = {"#d62728", "#1f77b4",
                                                                  "#2ca02c"};
static const char *const mode_colors[4] = {"#1f77b4", "#2ca02c", "#d62728", "#7f7f7f"};

static const char *row_color(const sim_row *row)
{
    if (row->mode >= 0 && row->mode < 4)
        return mode_colors[row->mode == STG_RETRY_AFTER_EXACT   ? 2
                           : row->mode == STG_RETRY_AFTER_HONOR ? 1
                           : row->mode == STG_RETRY_AFTER_CAP   ? 0
                                                                : 3];
    return (unsigned)row->strategy < SIM_N_STRATEGIES ? strategy_colors[row->strategy] : "#000";
}

static void row_label(const sim_results *r, const sim_row *row, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "%s", sim_strategy_name(row->strategy));
    if (row->mode >= 0 && n < size)
        n += (size_t)snprintf(buf + n, size - n, ", Retry-After %s",
                              stg_retry_after_mode_name((stg_retry_after_mode)row->mode));
    if (r->opts.nclients > 1 && n < size)
        snprintf(buf + n, size - n, ", %d %s", row->clients,
                 r->opts.scenario == SIM_STORM ? "workers" : "clients");
}

static double mean_of(const sim_row *row, const char *key)
{
    const sim_stat *s = sim_row_metric(row, key);
    return s ? sim_stat_mean(s) : 0.0;
}

/* What a "peak" counts: the busiest window, scaled to a second, and the
 * instant from which it is counted when the start is left out. */
static void peak_what(const sim_opts *o, char *buf, size_t size)
{
    int n = snprintf(buf, size, "busiest %g ms", (double)o->window_us / 1e3);
    if (o->peak_after_us > 0 && n > 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ", counted from t = %g s", (double)o->peak_after_us / 1e6);
}

/* The row's key figures (means over its trials), shown beside its panel. */
static void row_summary(const sim_results *r, const sim_row *row, char *buf, size_t size)
{
    const sim_opts *o = &r->opts;
    char what[64];
    peak_what(o, what, sizeof what);
    switch (o->scenario) {
    case SIM_HERD:
        snprintf(buf, size,
                 "max %.3g retries in %g ms (round 0 left out) · all done %.0f ms · %.0f calls",
                 mean_of(row, "max_in_window"), (double)o->window_us / 1e3,
                 mean_of(row, "total_ms"), mean_of(row, "calls"));
        break;
    case SIM_QUOTA:
        snprintf(buf, size,
                 "peak %.0f/s (%s) · %.0f calls, %.0f × 429, %.0f early · drained %.1f s",
                 mean_of(row, "peak_rps"), what, mean_of(row, "calls"), mean_of(row, "throttled"),
                 mean_of(row, "early"), mean_of(row, "total_ms") / 1e3);
        break;
    case SIM_STORM:
        snprintf(buf, size,
                 "peak %.0f/s (%s) · done %.1f s (%.2f× ideal) · %.0f calls, %.0f × 429 · "
                 "%.0f failed",
                 mean_of(row, "peak_rps"), what, mean_of(row, "total_ms") / 1e3,
                 mean_of(row, "ratio"),
                 mean_of(row, "calls"), mean_of(row, "throttled"), mean_of(row, "failed"));
        break;
    default:
        snprintf(buf, size, "mean %.0f ms, p99 %.0f ms · %.1f%% in deadline · %.0f calls",
                 mean_of(row, "mean_ms"), mean_of(row, "p99_ms"),
                 100 * mean_of(row, "success_rate"), mean_of(row, "calls"));
        break;
    }
}

/* Legend entries name what the colour stands for: the strategy, or the
 * Retry-After mode (quota). */
static void legend_label(const sim_results *r, const sim_row *row, char *buf, size_t size)
{
    (void)r;
    if (row->mode >= 0)
        snprintf(buf, size, "Retry-After %s",
                 stg_retry_after_mode_name((stg_retry_after_mode)row->mode));
    else
        snprintf(buf, size, "%s", sim_strategy_name(row->strategy));
}

/* A "nice" tick step for an axis from 0 to max with about `want` ticks. */
static double nice_step(double max, int want)
{
    if (!(max > 0))
        return 1;
    double raw = max / want;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    return nice * p;
}

static void fmt_num(double v, char *buf, size_t size)
{
    if (fabs(v) >= 10000 && fmod(v, 1000) == 0)
        snprintf(buf, size, "%gk", v / 1000);
    else
        snprintf(buf, size, "%g", v);
}

/* A panel's horizontal grid lines, x_left to x_right, with their values
 * left of it: 0 to ymax every ystep, y_bottom the 0 line, height ymax's
 * distance above it. */
static void y_grid(FILE *f, int x_left, int x_right, int y_bottom, double height, double ymax,
                   double ystep)
{
    for (double v = 0; v <= ymax + 1e-9; v += ystep) {
        double y = y_bottom - v / ymax * height;
        char t[32];
        fmt_num(v, t, sizeof t);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">%s</text>\n",
                x_left, y, x_right, y, x_left - 6, y + 4, t);
    }
}

static void header(FILE *f, int h, const char *title, const char *subtitle)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
            "font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
            "<text x=\"%d\" y=\"24\" font-size=\"17\" font-weight=\"bold\">%s</text>\n"
            "<text x=\"%d\" y=\"42\" fill=\"#444\">%s</text>\n",
            W, h, W, h, ML, title, ML, subtitle);
}

/* ---- arrivals over time ------------------------------------------------- */

static int arrivals_chart(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    bool rate = o->scenario != SIM_HERD;
    int64_t bin = r->nrows ? r->rows[0].bin_us : o->bin_us;
    size_t maxbins = 1;
    double ymax = 1;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        if (row->nbins > maxbins)
            maxbins = row->nbins;
        for (size_t b = 0; b < row->nbins; b++) {
            double y = rate ? row->bins[b] * 1e6 / (double)row->bin_us : row->bins[b];
            if (y > ymax)
                ymax = y;
        }
    }
    if (rate && o->limit_rps * 1.1 > ymax)
        ymax = o->limit_rps * 1.1;
    double xmax_s = (double)maxbins * (double)bin / 1e6;
    double xstep = nice_step(xmax_s, 10);
    xmax_s = ceil(xmax_s / xstep - 1e-9) * xstep;
    double ystep = nice_step(ymax, 3);
    ymax = ceil(ymax / ystep - 1e-9) * ystep;

    /* Legend: one swatch per row, wrapped; laid out first to size the
     * picture. */
    int lx = ML, ly = 62;
    int legx[512], legy[512];
    bool shown[512] = {false};
    for (size_t i = 0; i < r->nrows && i < 512; i++) {
        char lab[96];
        shown[i] = true;
        for (size_t j = 0; j < i; j++)
            if (shown[j] && !strcmp(row_color(&r->rows[j]), row_color(&r->rows[i])))
                shown[i] = false;
        if (!shown[i])
            continue;
        legend_label(r, &r->rows[i], lab, sizeof lab);
        int wlab = 22 + 7 * (int)strlen(lab) + 18;
        if (lx + wlab > W - MR && lx > ML) {
            lx = ML;
            ly += 16;
        }
        legx[i] = lx;
        legy[i] = ly;
        lx += wlab;
    }
    int top = ly + 22;
    int h = top + (int)r->nrows * (PANEL_H + PANEL_GAP) + 40;
    char title[160], sub[256], ylab[64], trials[96];
    if (o->trials > 1)
        snprintf(trials, sizeof trials, "seed %llu; curves: first trial, figures: mean of %d",
                 (unsigned long long)o->seed, o->trials);
    else
        snprintf(trials, sizeof trials, "seed %llu", (unsigned long long)o->seed);
    snprintf(title, sizeof title, "stagger sim %s: arrivals at the server over time",
             sim_scenario_name(o->scenario));
    if (rate)
        snprintf(sub, sizeof sub,
                 "requests per second (%g ms bins); dashed: the server's limit, %g/s; %s",
                 (double)bin / 1e3, o->limit_rps, trials);
    else
        snprintf(sub, sizeof sub,
                 "arrivals per %g ms bin, each panel on its own time axis; clients refused %d "
                 "times each, base %g ms; %s",
                 (double)bin / 1e3, o->fail_first,
                 (double)o->policy.backoff.base_us / 1e3, trials);
    snprintf(ylab, sizeof ylab, rate ? "requests/s" : "arrivals");
    header(f, h, title, sub);
    for (size_t i = 0; i < r->nrows && i < 512; i++) {
        char lab[96];
        if (!shown[i])
            continue;
        legend_label(r, &r->rows[i], lab, sizeof lab);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">%s</text>\n",
                legx[i], legy[i] - 9, row_color(&r->rows[i]), legx[i] + 19, legy[i], lab);
    }

    double pw = W - ML - MR;
    double shared_xmax_s = xmax_s, shared_xstep = xstep;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_row *row = &r->rows[i];
        xmax_s = shared_xmax_s, xstep = shared_xstep;
        if (!rate) { /* herd: this row's own time axis */
            xmax_s = (double)(row->nbins ? row->nbins : 1) * (double)bin / 1e6;
            xstep = nice_step(xmax_s, 10);
            xmax_s = ceil(xmax_s / xstep - 1e-9) * xstep;
        }
        int y0 = top + (int)i * (PANEL_H + PANEL_GAP) + 18;
        int y1 = y0 + PANEL_H;
        char lab[96];
        row_label(r, row, lab, sizeof lab);
        char sum[192];
        row_summary(r, row, sum, sizeof sum);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\" fill=\"%s\">%s</text>"
                   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#333\">%s</text>\n",
                ML, y0 - 8, row_color(row), lab, W - MR, y0 - 8, sum);
        y_grid(f, ML, W - MR, y1, PANEL_H, ymax, ystep);
        fprintf(f, "<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\" "
                   "fill=\"#444\">%s</text>\n",
                16, (y0 + y1) / 2, ylab);
        /* the series as a filled step path */
        fprintf(f, "<path fill=\"%s\" fill-opacity=\"0.35\" stroke=\"%s\" stroke-width=\"1\" "
                   "d=\"M%d,%d",
                row_color(row), row_color(row), ML, y1);
        for (size_t b = 0; b < row->nbins; b++) {
            double v = rate ? row->bins[b] * 1e6 / (double)row->bin_us : row->bins[b];
            double xa = ML + (double)b * (double)bin / 1e6 / xmax_s * pw;
            double xb = ML + (double)(b + 1) * (double)bin / 1e6 / xmax_s * pw;
            double y = y1 - v / ymax * PANEL_H;
            fprintf(f, " L%.1f,%.1f L%.1f,%.1f", xa, y, xb, y);
        }
        double xe = ML + (double)row->nbins * (double)bin / 1e6 / xmax_s * pw;
        fprintf(f, " L%.1f,%d Z\"/>\n", xe, y1);
        if (rate) {
            double y = y1 - o->limit_rps / ymax * PANEL_H;
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
                       "stroke-dasharray=\"5,4\"/>\n",
                    ML, y, W - MR, y);
        }
        /* axes and x ticks */
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>"
                   "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n",
                ML, y0, ML, y1, ML, y1, W - MR, y1);
        for (double v = 0; v <= xmax_s + 1e-9; v += xstep) {
            double x = ML + v / xmax_s * pw;
            char t[32];
            fmt_num(v, t, sizeof t);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\"/>"
                       "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">%s</text>\n",
                    x, y1, x, y1 + 4, x, y1 + 16, t);
        }
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">time (s)</text>\n",
            ML + pw / 2, h - 8);
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}

/* ---- contention, fleet: metric vs clients -------------------------------- */

/* A line's colour: its policy (fleet) or its strategy. */
static const char *series_color(const sim_results *r, const sim_row *row)
{
    if (r->opts.scenario == SIM_FLEET)
        return (unsigned)row->mode < SIM_FLEET_N_POLICIES ? policy_colors[row->mode] : "#000";
    return (unsigned)row->strategy < SIM_N_STRATEGIES ? strategy_colors[row->strategy] : "#000";
}

static void line_chart(FILE *f, const sim_results *r, const char *key, const char *ytitle,
                       int x0, int y0, int pw, int ph)
{
    const sim_opts *o = &r->opts;
    int cmin = o->clients[0], cmax = o->clients[0];
    for (int p = 0; p < o->nclients; p++) {
        if (o->clients[p] < cmin)
            cmin = o->clients[p];
        if (o->clients[p] > cmax)
            cmax = o->clients[p];
    }
    double ymax = 1;
    for (size_t i = 0; i < r->nrows; i++) {
        const sim_stat *s = sim_row_metric(&r->rows[i], key);
        if (s && sim_stat_mean(s) > ymax)
            ymax = sim_stat_mean(s);
    }
    double ystep = nice_step(ymax, 5);
    ymax = ceil(ymax / ystep - 1e-9) * ystep;
    double xlo = 0, xhi = cmax;
    double xstep = nice_step(xhi - xlo, 6);
    xhi = ceil(xhi / xstep - 1e-9) * xstep;
    int y1 = y0 + ph;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s</text>\n", x0, y0 - 10, ytitle);
    y_grid(f, x0, x0 + pw, y1, ph, ymax, ystep);
    for (double v = xlo; v <= xhi + 1e-9; v += xstep) {
        double x = x0 + (v - xlo) / (xhi - xlo) * pw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">%g</text>\n",
                x, y1, x, y1 + 4, x, y1 + 17, v);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>"
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n",
            x0, y0, x0, y1, x0, y1, x0 + pw, y1);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">clients</text>\n", x0 + pw / 2,
            y1 + 34);
    /* rows are point-major: the lines are the rows of one point */
    size_t ns = r->nrows / (size_t)o->nclients;
    for (size_t s = 0; s < ns; s++) {
        const char *color = series_color(r, &r->rows[s]);
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
        for (size_t i = s; i < r->nrows; i += ns) {
            const sim_stat *st = sim_row_metric(&r->rows[i], key);
            double v = st ? sim_stat_mean(st) : 0;
            double x = x0 + (r->rows[i].clients - xlo) / (xhi - xlo) * pw;
            fprintf(f, "%s%.1f,%.1f", i == s ? "" : " ", x, y1 - v / ymax * ph);
        }
        fprintf(f, "\"/>\n");
        for (size_t i = s; i < r->nrows; i += ns) {
            const sim_stat *st = sim_row_metric(&r->rows[i], key);
            double v = st ? sim_stat_mean(st) : 0;
            double x = x0 + (r->rows[i].clients - xlo) / (xhi - xlo) * pw;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", x,
                    y1 - v / ymax * ph, color);
        }
    }
}

static int contention_chart(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    int h = 470;
    char sub[256];
    snprintf(sub, sizeof sub,
             "one optimistic-concurrency write per client; legs |N(%g ms, %g ms)|; base %g ms, "
             "cap %g ms; mean of %d trial%s, seed %llu",
             (double)o->delay.mean_us / 1e3, (double)o->delay.sd_us / 1e3,
             (double)o->policy.backoff.base_us / 1e3, (double)o->policy.backoff.cap_us / 1e3,
             o->trials, o->trials == 1 ? "" : "s", (unsigned long long)o->seed);
    header(f, h, "stagger sim contention: work and time against the number of clients", sub);
    int lx = ML, ly = 66;
    for (int s = 0; s < o->nstrategies; s++) {
        const char *name = sim_strategy_name(o->strategies[s]);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                lx, ly - 4, lx + 18, ly - 4, strategy_colors[o->strategies[s]], lx + 23, ly, name);
        lx += 40 + 7 * (int)strlen(name);
    }
    int pw = (W - ML - MR - 90) / 2;
    line_chart(f, r, "calls", "calls (writes) per run", ML, 110, pw, 290);
    line_chart(f, r, "total_ms", "completion time (ms)", ML + pw + 90, 110, pw, 290);
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}

static int fleet_chart(FILE *f, const sim_results *r)
{
    const sim_opts *o = &r->opts;
    int h = 820;
    char sub[256];
    double over = 0;
    for (size_t i = 0; i < r->nrows; i++)
        over += mean_of(&r->rows[i], "bound_excess");
    snprintf(sub, sizeof sub,
             "processes share %g/s (burst %lld) through one Redis key, leases of %g ms; "
             "sends over the bound: %g; seed %llu",
             o->limit_rps, (long long)o->burst, (double)o->fleet.lease_us / 1e3, over,
             (unsigned long long)o->seed);
    header(f, h, "stagger sim fleet: fairness, waits and Redis load against the number of "
                 "processes", sub);
    int lx = ML, ly = 66;
    for (int p = 0; p < o->fleet.npolicies; p++) {
        const char *name = sim_fleet_policy_name(o->fleet.policies[p]);
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                lx, ly - 4, lx + 18, ly - 4, policy_colors[o->fleet.policies[p]], lx + 23, ly,
                name);
        lx += 40 + 7 * (int)strlen(name);
    }
    int pw = (W - ML - MR - 90) / 2, ph = 260;
    line_chart(f, r, "jain_normal", "Jain's index, normal class", ML, 110, pw, ph);
    line_chart(f, r, "jain_batch", "Jain's index, batch class", ML + pw + 90, 110, pw, ph);
    line_chart(f, r, "interactive_p99_ms", "interactive admission wait p99 (ms)", ML,
               110 + ph + 90, pw, ph);
    line_chart(f, r, "redis_ops_s", "Redis script calls per second", ML + pw + 90, 110 + ph + 90,
               pw, ph);
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}

int sim_write_svg(FILE *f, const sim_results *r)
{
    if (r->opts.scenario == SIM_FLEET)
        return fleet_chart(f, r);
    if (r->opts.scenario == SIM_CONTENTION)
        return contention_chart(f, r);
    return arrivals_chart(f, r);
}
