/*
 * The proxy's own endpoints, answered without going upstream:
 *   GET /__stagger/metrics  Prometheus text: the engine's metrics with the
 *                           same names as fetch and batch (stg_metrics),
 *                           and the proxy's connection figures;
 *   GET /__stagger/health   {"status": "ok" | "draining", "in_flight": N,
 *                           "requests": N, "client_gone": N,
 *                           "concurrency_limit": N (the learned limit, the
 *                           hosts' sum; 0 with a fixed -j),
 *                           "concurrency_waits": N, "hosts": N (the
 *                           upstream hosts whose state is kept, at most
 *                           --max-hosts), "classes": [{"class":
 *                           "batch", "tenant": "acme" (when one),
 *                           "admitted": N, "waiting": N,
 *                           "wait_ms_avg": F, "wait_ms_max": F}, ...]
 *                           (per priority class and tenant: attempts
 *                           admitted, requests waiting for admission now,
 *                           and their waits, docs/priorities.md)}, 200
 *                           while serving and 503 while draining.
 *   GET /__stagger/         the live page (src/view/live.html) and what it
 *   GET /__stagger/chart.js loads: Chart.js and live.json, the metrics as
 *   GET /__stagger/live.json JSON (stg_metrics_json) with the proxy's own
 *                           counters and the requests waiting now by
 *                           reason; every asset is in the binary, so
 *                           the page needs no network, and like /metrics
 *                           it holds no URL and no header: no secret;
 * Anything else under /__stagger/ is a 404: that prefix is never routed.
 * They answer GET and HEAD only (a 405 with Allow: GET, HEAD otherwise):
 * they change nothing, so a POST or DELETE there is a mistake or a probe.
 * The front logs each answer (front.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "proxy/internal.h"
#ifdef STG_HAVE_VIEW
#include "view/view.h"
#endif

/* ---- the proxy's request-duration histogram ------------------------------ */

static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1,     2.5,  5,     10,   30,  60,   120};
#define N_BOUNDS (sizeof bounds / sizeof bounds[0])

void px_observe_request(stg_proxy *p, int64_t us)
{
    double s = (double)us / 1e6;
    size_t i = 0;
    while (i < N_BOUNDS && s > bounds[i])
        i++;
    pthread_mutex_lock(&p->hist_mu);
    p->hist_le[i]++; /* i == N_BOUNDS: above the last bound */
    p->hist_count++;
    p->hist_sum += s;
    pthread_mutex_unlock(&p->hist_mu);
}

void px_metrics_source(FILE *f, void *proxy)
{
    stg_proxy *p = proxy;
    const char *name = "stagger_proxy_request_duration_seconds";
    fprintf(f, "# HELP %s Requests as their clients saw them, from the head to the answer.\n"
               "# TYPE %s histogram\n", name, name);
    pthread_mutex_lock(&p->hist_mu);
    uint64_t cum = 0;
    for (size_t i = 0; i < N_BOUNDS; i++) {
        cum += p->hist_le[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
            (unsigned long long)p->hist_count, name, p->hist_sum, name,
            (unsigned long long)p->hist_count);
    pthread_mutex_unlock(&p->hist_mu);
    /* Printed on the loop thread (admin answers run there): the engine's
     * to ask. */
    const char *names[16];
    int64_t counts[16];
    size_t n = stg_engine_waiting(p->engine, names, counts, 16);
    fputs("# HELP stagger_requests_waiting Requests waiting now, by what for.\n"
          "# TYPE stagger_requests_waiting gauge\n",
          f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "stagger_requests_waiting{reason=\"%s\"} %lld\n", names[i],
                (long long)counts[i]);
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *type,
                            char *body, size_t len, unsigned *out)
{
    *out = status;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (char *)"", MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result metrics(stg_proxy *p, struct MHD_Connection *c, unsigned *status)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        *status = 500;
        return px_answer_error(c, 500, "out of memory", "internal");
    }
    stg_metrics_print(p->metrics, f);
    pthread_mutex_lock(&p->mu);
    int in_flight = p->in_flight;
    uint64_t requests = p->requests, gone = p->client_gone;
    pthread_mutex_unlock(&p->mu);
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(p->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    fprintf(f,
            "# HELP stagger_proxy_requests_total Requests the proxy received.\n"
            "# TYPE stagger_proxy_requests_total counter\n"
            "stagger_proxy_requests_total %llu\n"
            "# HELP stagger_proxy_client_gone_total Requests whose client hung up first.\n"
            "# TYPE stagger_proxy_client_gone_total counter\n"
            "stagger_proxy_client_gone_total %llu\n"
            "# HELP stagger_proxy_in_flight Requests in the engine now.\n"
            "# TYPE stagger_proxy_in_flight gauge\n"
            "stagger_proxy_in_flight %d\n"
            "# HELP stagger_proxy_connections Open client connections.\n"
            "# TYPE stagger_proxy_connections gauge\n"
            "stagger_proxy_connections %u\n",
            (unsigned long long)requests, (unsigned long long)gone, in_flight,
            di ? di->num_connections : 0);
    fclose(f);
    enum MHD_Result rc = text(c, 200, "text/plain; version=0.0.4", buf, len, status);
    free(buf);
    return rc;
}

/* The engine's rows per class and tenant (stg_engine_class_stats). */
static json_t *classes_json(stg_engine *e)
{
    size_t n = stg_engine_class_stats(e, NULL, 0);
    stg_class_stats *v = n ? calloc(n, sizeof *v) : NULL;
    json_t *a = json_array();
    if (!a || (n && !v)) {
        free(v);
        return a;
    }
    n = stg_engine_class_stats(e, v, n);
    for (size_t i = 0; i < n; i++) {
        const stg_class_stats *c = &v[i];
        json_t *o = json_pack("{s:s,s:I,s:I,s:f,s:f}", "class", stg_priority_name(c->priority),
                              "admitted", (json_int_t)c->admitted, "waiting",
                              (json_int_t)c->waiting, "wait_ms_avg",
                              c->admitted ? (double)c->wait_us / 1e3 / (double)c->admitted : 0.0,
                              "wait_ms_max", (double)c->wait_max_us / 1e3);
        if (o && c->tenant)
            json_object_set_new(o, "tenant", json_string(c->tenant));
        if (o)
            json_array_append_new(a, o);
    }
    free(v);
    return a;
}

static enum MHD_Result health(stg_proxy *p, struct MHD_Connection *c, unsigned *status)
{
    /* The loop thread runs MHD's callbacks: the engine is ours to ask. */
    stg_engine_stats st;
    stg_engine_stats_get(p->engine, &st);
    pthread_mutex_lock(&p->mu);
    bool draining = p->draining;
    json_t *o = json_pack("{s:s,s:i,s:I,s:I,s:i,s:I,s:I}", "status",
                          draining ? "draining" : "ok", "in_flight", p->in_flight, "requests",
                          (json_int_t)p->requests, "client_gone", (json_int_t)p->client_gone,
                          "concurrency_limit", st.concurrency_limit, "concurrency_waits",
                          (json_int_t)st.concurrency_waits, "hosts", (json_int_t)st.hosts);
    pthread_mutex_unlock(&p->mu);
    if (o && json_object_set_new(o, "classes", classes_json(p->engine)) != 0) {
        json_decref(o);
        o = NULL;
    }
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body) {
        *status = 500;
        return px_answer_error(c, 500, "out of memory", "internal");
    }
    enum MHD_Result rc =
        text(c, draining ? 503 : 200, "application/json", body, strlen(body), status);
    free(body);
    return rc;
}

/* ---- the live page ------------------------------------------------------- */

static enum MHD_Result live_json(stg_proxy *p, struct MHD_Connection *c, unsigned *status)
{
    char *m = stg_metrics_json(p->metrics);
    json_t *mj = m ? json_loads(m, 0, NULL) : NULL;
    free(m);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&p->mu);
    json_t *o = mj ? json_pack("{s:f,s:s,s:o,s:{s:i,s:I,s:I}}", "t",
                               (double)ts.tv_sec + ts.tv_nsec / 1e9, "kind", "proxy",
                               "metrics", mj, "proxy", "in_flight", p->in_flight, "requests",
                               (json_int_t)p->requests, "client_gone",
                               (json_int_t)p->client_gone)
                   : NULL;
    pthread_mutex_unlock(&p->mu);
    const char *names[16];
    int64_t counts[16];
    size_t n = stg_engine_waiting(p->engine, names, counts, 16);
    json_t *w = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(w, names[i], json_integer((json_int_t)counts[i]));
    if (o)
        json_object_set_new(o, "waiting", w);
    else
        json_decref(w);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body) {
        *status = 500;
        return px_answer_error(c, 500, "out of memory", "internal");
    }
    enum MHD_Result rc = text(c, 200, "application/json", body, strlen(body), status);
    free(body);
    return rc;
}

/* The page and its script, or NULL when path is neither. */
static const char *live_asset(const char *path, size_t n, size_t *len, const char **type)
{
#ifdef STG_HAVE_VIEW
    char name[32];
    if (n < 11 || n - 11 >= sizeof name)
        return NULL;
    memcpy(name, path + 11, n - 11);
    name[n - 11] = '\0';
    return stg__view_asset(name, len, type);
#else
    (void)path, (void)n, (void)len, (void)type;
    return NULL;
#endif
}

enum MHD_Result px_admin(stg_proxy *p, struct MHD_Connection *c, const char *path,
                         const char *method, unsigned *status)
{
    size_t n = strcspn(path, "?");
    bool metrics_path = n == 18 && !strncmp(path, "/__stagger/metrics", n);
    bool health_path = n == 17 && !strncmp(path, "/__stagger/health", n);
    bool json_path = n == 20 && !strncmp(path, "/__stagger/live.json", n);
    size_t len = 0;
    const char *type = NULL;
    const char *asset = live_asset(path, n, &len, &type);
    if (!metrics_path && !health_path && !json_path && !asset) {
        *status = 404;
        return px_answer_error(c, 404,
                               "unknown /__stagger/ endpoint (metrics, health, live.json, "
                               "the live page at /__stagger/)",
                               "no-route");
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        *status = 405;
        return px_answer_error2(c, 405, "the /__stagger/ endpoints answer GET and HEAD only",
                                "method-not-allowed", "GET, HEAD", false);
    }
    if (asset)
        return text(c, 200, type, (char *)asset, len, status);
    if (json_path)
        return live_json(p, c, status);
    return metrics_path ? metrics(p, c, status) : health(p, c, status);
}
