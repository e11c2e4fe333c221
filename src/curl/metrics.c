/*
 * Prometheus text-format metrics collected from events:
 *   stagger_attempts_total{class}          attempts by outcome class: 1xx, 2xx,
 *                                          3xx, 4xx, quota (429), 5xx,
 *                                          outage (503), error (no response)
 *   stagger_retries_total{reason,cause}    retries scheduled; cause is the
 *                                          status or the transport error
 *   stagger_give_ups_total{reason}         requests given up, by reason
 *   stagger_waits_total{reason}            other waits (for an open breaker)
 *   stagger_successes_total                requests that succeeded
 *   stagger_retry_wait_seconds             histogram of retry waits
 *   stagger_limiter_wait_seconds           histogram of client-side limiter
 *                                          waits
 *   stagger_attempt_duration_seconds       histogram of attempt durations
 *   stagger_breaker_state{host}            0 closed, 1 open, 2 half-open
 *   stagger_breaker_transitions_total{host,to}
 *   stagger_connections_opened_total       connections the attempts opened
 *                                          (libcurl's NUM_CONNECTS)
 *   stagger_connections_reused_total       attempts sent on a kept connection
 *   stagger_tls_handshakes_total           TLS handshakes made
 *   stagger_tls_handshake_seconds          histogram of their durations
 *   stagger_concurrency_limit{host}        the host's learned concurrency
 *                                          limit, as its latest event had it
 *                                          (hosts that learn one only)
 *   stagger_never_processed_total          attempts the server never
 *                                          processed (HTTP/2 REFUSED_STREAM,
 *                                          GOAWAY), sent again by stagger
 *   stagger_host_attempts_total{host,class} the attempts again, per host
 *   stagger_wait_seconds{reason}           histogram of the waits that ended
 *                                          (WAITED events: measured, by what
 *                                          for): its _sum per reason is the
 *                                          time requests spent waiting for it,
 *                                          and its rate the mean number of
 *                                          requests waiting for it
 *   stagger_request_duration_seconds       histogram of whole requests (their
 *                                          final events), submit to end
 *   stagger_attempts_in_flight             attempts on the wire now
 *   stagger_learned_rate{host}             the rate a host learned (req/s),
 *                                          as its latest event had it
 *   stagger_class_*{class,tenant}          admitted, waiting, wait for
 *                                          admission per priority class and
 *                                          tenant (metrics_class.c)
 *   stagger_quota_limit{host,key,unit}     with stg_metrics_set_quotas: each
 *   stagger_quota_remaining{host,key,unit} quota as the server announced it
 *   stagger_quota_reset_seconds{...}       (limit, remaining, time to reset)
 *   stagger_quota_reserved{host,key,unit}  beside the units stagger holds
 *                                          reserved for sends in flight
 *   stagger_quota_answers_total{host,key,  the answers to the sends that
 *     unit,outcome}                        spent each quota (stg_quota_tally):
 *                                          admitted, refused
 * Then what the sources added with stg_metrics_add_source print (the
 * batch's jobs by state, the proxy's own series).
 * With keep-alive, connections_opened stays at the concurrency while the
 * attempts grow: one handshake per connection, not per request.
 * stg_metrics_write() follows the node_exporter textfile convention: write
 * PATH.tmp.PID, fsync, rename over PATH, so a scraper never reads half a
 * file.
 *
 * The per-host series (breaker state and transitions, concurrency limit)
 * are kept for at most max_hosts hosts (stg_metrics_set_max_hosts, 1024 by
 * default): a new host past it replaces the least recently updated one,
 * whose series disappear (a forward proxy sees endless hosts).
 *
 * Invariants: only counts, durations, reasons, status numbers, error class
 * names and limiter/breaker keys (hosts) are kept: no URL, no header, so
 * nothing secret; label values are escaped as the format requires; all
 * state is behind one mutex; n_hosts <= max_hosts.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "curl/internal.h"
#include "curl/metrics_class.h"
#include "util/clock.h" /* the engine's default clock (env.c): a quota's reset, for display */
#include "util/grow.h"

#define N_CLASSES 8
static const char *const class_names[N_CLASSES] = {"1xx",   "2xx", "3xx",    "4xx",
                                                   "quota", "5xx", "outage", "error"};

static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                1,     2.5,  5,     10,   30,  60,   120};
#define N_BOUNDS (sizeof bounds / sizeof bounds[0])

typedef struct histo {
    uint64_t le[N_BOUNDS]; /* non-cumulative; summed when printed */
    uint64_t count;
    double sum;
} histo;

#define N_REASONS 32
#define N_STATUS 600
#define N_ERRORS 8

typedef struct breaker_host {
    char *host;
    bool breaker;   /* a breaker event named it */
    int state;
    uint64_t to[3];
    int conc_limit; /* > 0: it learns its concurrency; the latest limit */
    double rate;    /* > 0: it learns its rate; the latest (req/s) */
    uint64_t attempts[N_CLASSES];
    uint64_t used;  /* the metrics' clock at its latest update */
} breaker_host;

/* What a WAITED event can name (stg_event_more.waited_for), in order. */
static const char *const wait_names[] = {"slot",        "limiter", "quota",   "pace",
                                         "concurrency", "breaker", "backoff", "budget"};
#define N_WAITS (sizeof wait_names / sizeof wait_names[0])

#define MAX_SOURCES 4

#define DEFAULT_MAX_HOSTS 1024

struct stg_metrics {
    pthread_mutex_t mu;
    uint64_t attempts[N_CLASSES];
    uint64_t retries_status[N_STATUS];
    uint64_t retries_error[N_ERRORS];
    uint64_t retries_other[N_REASONS];
    uint64_t give_ups[N_REASONS];
    uint64_t successes;
    uint64_t connects, reused, handshakes, never_processed;
    histo wait, limiter, duration, handshake;
    histo waited[N_WAITS], request;
    int64_t in_flight;
    struct {
        stg_metrics_source_fn fn;
        void *data;
    } src[MAX_SOURCES];
    size_t n_src;
    stg_quota *quotas; /* not owned; thread-safe itself (stg_metrics_set_quotas) */
    breaker_host *hosts;
    size_t n_hosts, cap_hosts, max_hosts;
    uint64_t clock; /* counts host updates: the LRU order */
    stg__mc classes; /* per class and tenant (metrics_class.c) */
};

stg_metrics *stg_metrics_new(void)
{
    stg_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return NULL;
    }
    m->max_hosts = DEFAULT_MAX_HOSTS;
    return m;
}

void stg_metrics_free(stg_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_hosts; i++)
        free(m->hosts[i].host);
    free(m->hosts);
    stg__mc_free(&m->classes);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(histo *h, int64_t us)
{
    double s = (double)us / 1e6;
    for (size_t i = 0; i < N_BOUNDS; i++)
        if (s <= bounds[i]) {
            h->le[i]++;
            break;
        }
    h->count++;
    h->sum += s;
}

static int class_index(int status, stg_net_error err)
{
    const char *c = stg__status_class(status, err);
    for (int i = 0; i < N_CLASSES; i++)
        if (!strcmp(c, class_names[i]))
            return i;
    return N_CLASSES - 1;
}

void stg_metrics_set_max_hosts(stg_metrics *m, size_t n)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->max_hosts = n ? n : DEFAULT_MAX_HOSTS;
    while (m->n_hosts > m->max_hosts) { /* the least recently updated go */
        size_t old = 0;
        for (size_t i = 1; i < m->n_hosts; i++)
            if (m->hosts[i].used < m->hosts[old].used)
                old = i;
        free(m->hosts[old].host);
        m->hosts[old] = m->hosts[--m->n_hosts];
    }
    pthread_mutex_unlock(&m->mu);
}

static breaker_host *host_slot(stg_metrics *m, const char *host)
{
    if (!host)
        host = "";
    for (size_t i = 0; i < m->n_hosts; i++)
        if (!strcmp(m->hosts[i].host, host)) {
            m->hosts[i].used = ++m->clock;
            return &m->hosts[i];
        }
    if (m->n_hosts >= m->max_hosts) { /* the least recently updated one's slot */
        size_t old = 0;
        for (size_t i = 1; i < m->n_hosts; i++)
            if (m->hosts[i].used < m->hosts[old].used)
                old = i;
        char *copy = strdup(host);
        if (!copy)
            return NULL;
        breaker_host *b = &m->hosts[old];
        free(b->host);
        memset(b, 0, sizeof *b);
        b->host = copy;
        b->used = ++m->clock;
        return b;
    }
    if (!STG__GROW(m->hosts, m->n_hosts, m->cap_hosts, 8))
        return NULL;
    char *copy = strdup(host);
    if (!copy)
        return NULL;
    breaker_host *b = &m->hosts[m->n_hosts++];
    memset(b, 0, sizeof *b);
    b->host = copy;
    b->used = ++m->clock;
    return b;
}

void stg_metrics_event(const stg_event *ev, void *metrics)
{
    stg_metrics *m = metrics;
    if (!m || !ev)
        return;
    pthread_mutex_lock(&m->mu);
    stg__mc_event(&m->classes, ev);
    double rate = ev->more ? ev->more->learned_rate : 0;
    if ((ev->concurrency_limit > 0 || rate > 0 || ev->type == STG_EVENT_ATTEMPT_END) &&
        ev->type != STG_EVENT_BREAKER) {
        breaker_host *h = host_slot(m, ev->host);
        if (h && ev->concurrency_limit > 0)
            h->conc_limit = ev->concurrency_limit;
        if (h && rate > 0)
            h->rate = rate;
        if (h && ev->type == STG_EVENT_ATTEMPT_END)
            h->attempts[class_index(ev->status, ev->error)]++;
    }
    switch (ev->type) {
    case STG_EVENT_WAITED:
        for (size_t i = 0; ev->more && ev->more->waited_for && i < N_WAITS; i++)
            if (!strcmp(ev->more->waited_for, wait_names[i]))
                observe(&m->waited[i], ev->wait_us);
        break;
    case STG_EVENT_ATTEMPT_END:
        m->in_flight--;
        m->attempts[class_index(ev->status, ev->error)]++;
        m->never_processed += ev->never_processed;
        observe(&m->duration, ev->duration_us);
        m->connects += ev->connects > 0 ? (uint64_t)ev->connects : 0;
        m->reused += ev->conn_reused;
        if (ev->tls_handshake_us > 0) {
            m->handshakes++;
            observe(&m->handshake, ev->tls_handshake_us);
        }
        break;
    case STG_EVENT_WAIT:
        if (ev->reason == STG_REASON_RETRY_STATUS && ev->status > 0 && ev->status < N_STATUS)
            m->retries_status[ev->status]++;
        else if (ev->reason == STG_REASON_RETRY_ERROR && (unsigned)ev->error < N_ERRORS)
            m->retries_error[ev->error]++;
        else if ((unsigned)ev->reason < N_REASONS)
            m->retries_other[ev->reason]++; /* e.g. waiting for a breaker */
        if (ev->reason == STG_REASON_RETRY_STATUS || ev->reason == STG_REASON_RETRY_ERROR)
            observe(&m->wait, ev->wait_us);
        break;
    case STG_EVENT_GIVE_UP:
        if ((unsigned)ev->reason < N_REASONS)
            m->give_ups[ev->reason]++;
        observe(&m->request, ev->duration_us);
        break;
    case STG_EVENT_SUCCESS:
        m->successes++;
        observe(&m->request, ev->duration_us);
        break;
    case STG_EVENT_LIMITER_WAIT:
        observe(&m->limiter, ev->wait_us);
        break;
    case STG_EVENT_BREAKER: {
        breaker_host *b = host_slot(m, ev->host);
        if (b && (unsigned)ev->breaker_to < 3) {
            b->breaker = true;
            b->state = (int)ev->breaker_to;
            b->to[ev->breaker_to]++;
        }
        break;
    }
    case STG_EVENT_ATTEMPT_START:
        m->in_flight++;
        break;
    }
    pthread_mutex_unlock(&m->mu);
}

/* A label value with \, " and newline escaped. */
static void label(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '"')
            fputs("\\\"", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* The start of a series of one host: NAME{host="HOST" (escaped); the
 * caller writes the other labels, the closing brace and the value. */
static void host_series(FILE *f, const char *name, const char *host)
{
    fprintf(f, "%s{host=", name);
    label(f, host);
}

/* One histogram's series; lab: its labels ("reason=\"x\"," form, or ""). */
static void histo_series(FILE *f, const char *name, const char *lab, const histo *h)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < N_BOUNDS; i++) {
        cum += h->le[i];
        fprintf(f, "%s_bucket{%sle=\"%g\"} %llu\n", name, lab, bounds[i],
                (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, lab, (unsigned long long)h->count);
    size_t n = strlen(lab);
    if (n) /* without the trailing comma */
        fprintf(f, "%s_sum{%.*s} %.6f\n%s_count{%.*s} %llu\n", name, (int)n - 1, lab, h->sum,
                name, (int)n - 1, lab, (unsigned long long)h->count);
    else
        fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
                (unsigned long long)h->count);
}

static void print_histo(FILE *f, const char *name, const char *help, const histo *h)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    histo_series(f, name, "", h);
}

/* A counter by stg_reason: its series with a count above 0. */
static void print_by_reason(FILE *f, const char *name, const char *help,
                            const uint64_t n[N_REASONS])
{
    fprintf(f, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int r = 0; r < N_REASONS; r++)
        if (n[r])
            fprintf(f, "%s{reason=\"%s\"} %llu\n", name, stg_reason_name((stg_reason)r),
                    (unsigned long long)n[r]);
}

/* ---- the quotas (stg_metrics_set_quotas) --------------------------------- */

typedef struct quota_print {
    FILE *f;
    int which; /* 0 limit, 1 remaining, 2 reset, 3 reserved, 4 answers */
} quota_print;

static void quota_line(const char *host, const stg_quota_view *v, void *data)
{
    quota_print *qp = data;
    static const char *const names[] = {"stagger_quota_limit", "stagger_quota_remaining",
                                        "stagger_quota_reset_seconds", "stagger_quota_reserved"};
    if (qp->which == 4) { /* a counter, by outcome */
        for (int o = 0; o < 2; o++) {
            fputs("stagger_quota_answers_total{host=", qp->f);
            label(qp->f, host);
            fputs(",key=", qp->f);
            label(qp->f, v->key);
            fputs(",unit=", qp->f);
            label(qp->f, v->unit);
            fprintf(qp->f, ",outcome=\"%s\"} %lld\n", o ? "refused" : "admitted",
                    (long long)(o ? v->refused : v->admitted));
        }
        return;
    }
    double x = qp->which == 0   ? (double)v->limit
               : qp->which == 1 ? (double)v->told_remaining
               : qp->which == 2 ? (v->reset_in_us < 0 ? -1 : (double)v->reset_in_us / 1e6)
                                : (double)v->inflight;
    if (x < 0)
        return; /* not known */
    fprintf(qp->f, "%s{host=", names[qp->which]);
    label(qp->f, host);
    fputs(",key=", qp->f);
    label(qp->f, v->key);
    fputs(",unit=", qp->f);
    label(qp->f, v->unit);
    fprintf(qp->f, "} %.6g\n", x);
}

static void print_quotas(const stg_metrics *m, FILE *f)
{
    static const char *const head[] = {
        "# HELP stagger_quota_limit Each quota's limit as the server announced it.\n"
        "# TYPE stagger_quota_limit gauge\n",
        "# HELP stagger_quota_remaining Each quota's remaining count as the server last "
        "announced it.\n# TYPE stagger_quota_remaining gauge\n",
        "# HELP stagger_quota_reset_seconds Time until each quota's announced reset.\n"
        "# TYPE stagger_quota_reset_seconds gauge\n",
        "# HELP stagger_quota_reserved Units of each quota stagger holds reserved for sends "
        "not answered yet.\n# TYPE stagger_quota_reserved gauge\n",
        "# HELP stagger_quota_answers_total Answers to the sends that spent each quota: "
        "admitted, or refused (429, 503, 529).\n# TYPE stagger_quota_answers_total counter\n"};
    int64_t now = stg__clock_mono_us();
    for (int w = 0; w < 5; w++) {
        fputs(head[w], f);
        quota_print qp = {f, w};
        if (m->quotas)
            stg_quota_each(m->quotas, now, quota_line, &qp);
    }
}

void stg_metrics_set_quotas(stg_metrics *m, stg_quota *q)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->quotas = q;
    pthread_mutex_unlock(&m->mu);
}

/* The waits by what for, the whole requests, the attempts per host, the
 * learned rates (issue #36: where the time goes). */
static void print_where_time_goes(const stg_metrics *m, FILE *f)
{
    fputs("# HELP stagger_wait_seconds Waits that ended, measured, by what the request "
          "waited for (slot, limiter, quota, pace, concurrency, breaker, backoff, budget).\n"
          "# TYPE stagger_wait_seconds histogram\n",
          f);
    for (size_t i = 0; i < N_WAITS; i++) {
        char lab[64];
        snprintf(lab, sizeof lab, "reason=\"%s\",", wait_names[i]);
        histo_series(f, "stagger_wait_seconds", lab, &m->waited[i]);
    }
    print_histo(f, "stagger_request_duration_seconds",
                "Whole requests, from submit to their end (every attempt and wait).",
                &m->request);
    fprintf(f,
            "# HELP stagger_attempts_in_flight Attempts on the wire now.\n"
            "# TYPE stagger_attempts_in_flight gauge\nstagger_attempts_in_flight %lld\n",
            (long long)m->in_flight);
    fputs("# HELP stagger_host_attempts_total Attempts by upstream host (the limit key) and "
          "outcome class.\n# TYPE stagger_host_attempts_total counter\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++)
        for (int c = 0; c < N_CLASSES; c++) {
            if (!m->hosts[i].attempts[c])
                continue;
            host_series(f, "stagger_host_attempts_total", m->hosts[i].host);
            fprintf(f, ",class=\"%s\"} %llu\n", class_names[c],
                    (unsigned long long)m->hosts[i].attempts[c]);
        }
    fputs("# HELP stagger_learned_rate The rate each host learned (requests per second).\n"
          "# TYPE stagger_learned_rate gauge\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++) {
        if (m->hosts[i].rate <= 0)
            continue;
        host_series(f, "stagger_learned_rate", m->hosts[i].host);
        fprintf(f, "} %.3f\n", m->hosts[i].rate);
    }
}

static void print_all(const stg_metrics *m, FILE *f)
{
    fputs("# HELP stagger_attempts_total Attempts by outcome class (quota = 429, outage = 503, "
          "error = no HTTP response).\n# TYPE stagger_attempts_total counter\n",
          f);
    for (int i = 0; i < N_CLASSES; i++)
        fprintf(f, "stagger_attempts_total{class=\"%s\"} %llu\n", class_names[i],
                (unsigned long long)m->attempts[i]);
    fputs("# HELP stagger_retries_total Retries scheduled, by reason and cause (status or "
          "transport error).\n# TYPE stagger_retries_total counter\n",
          f);
    for (int s = 0; s < N_STATUS; s++)
        if (m->retries_status[s])
            fprintf(f, "stagger_retries_total{reason=\"retry_status\",cause=\"%d\"} %llu\n", s,
                    (unsigned long long)m->retries_status[s]);
    for (int e = 0; e < N_ERRORS; e++)
        if (m->retries_error[e])
            fprintf(f, "stagger_retries_total{reason=\"retry_error\",cause=\"%s\"} %llu\n",
                    stg_net_error_name((stg_net_error)e), (unsigned long long)m->retries_error[e]);
    print_by_reason(f, "stagger_give_ups_total", "Requests given up, by reason.", m->give_ups);
    print_by_reason(f, "stagger_waits_total",
                    "Waits that are not retries (a request waiting for an open breaker), by "
                    "reason.",
                    m->retries_other);
    fprintf(f, "# HELP stagger_successes_total Requests that succeeded.\n"
               "# TYPE stagger_successes_total counter\nstagger_successes_total %llu\n",
            (unsigned long long)m->successes);
    print_histo(f, "stagger_retry_wait_seconds", "Waits before retries.", &m->wait);
    print_histo(f, "stagger_limiter_wait_seconds", "Waits imposed by the client-side limiter.",
                &m->limiter);
    print_histo(f, "stagger_attempt_duration_seconds", "Durations of attempts.", &m->duration);
    fprintf(f,
            "# HELP stagger_connections_opened_total Connections opened by attempts.\n"
            "# TYPE stagger_connections_opened_total counter\n"
            "stagger_connections_opened_total %llu\n"
            "# HELP stagger_connections_reused_total Attempts sent on a kept connection.\n"
            "# TYPE stagger_connections_reused_total counter\n"
            "stagger_connections_reused_total %llu\n"
            "# HELP stagger_tls_handshakes_total TLS handshakes made (one per new https "
            "connection).\n"
            "# TYPE stagger_tls_handshakes_total counter\n"
            "stagger_tls_handshakes_total %llu\n",
            (unsigned long long)m->connects, (unsigned long long)m->reused,
            (unsigned long long)m->handshakes);
    print_histo(f, "stagger_tls_handshake_seconds", "Durations of TLS handshakes.",
                &m->handshake);
    fputs("# HELP stagger_breaker_state Circuit breaker state per host (0 closed, 1 open, "
          "2 half-open).\n# TYPE stagger_breaker_state gauge\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++) {
        if (!m->hosts[i].breaker)
            continue;
        host_series(f, "stagger_breaker_state", m->hosts[i].host);
        fprintf(f, "} %d\n", m->hosts[i].state);
    }
    fputs("# HELP stagger_breaker_transitions_total Breaker state changes per host, by new "
          "state.\n# TYPE stagger_breaker_transitions_total counter\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++)
        for (int s = 0; s < 3 && m->hosts[i].breaker; s++) {
            host_series(f, "stagger_breaker_transitions_total", m->hosts[i].host);
            fprintf(f, ",to=\"%s\"} %llu\n", stg_breaker_state_name((stg_breaker_state)s),
                    (unsigned long long)m->hosts[i].to[s]);
        }
    fputs("# HELP stagger_concurrency_limit The concurrency limit each host learned "
          "(requests at once).\n# TYPE stagger_concurrency_limit gauge\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++) {
        if (m->hosts[i].conc_limit <= 0)
            continue;
        host_series(f, "stagger_concurrency_limit", m->hosts[i].host);
        fprintf(f, "} %d\n", m->hosts[i].conc_limit);
    }
    fprintf(f,
            "# HELP stagger_never_processed_total Attempts the server never processed "
            "(HTTP/2 REFUSED_STREAM or GOAWAY), sent again.\n"
            "# TYPE stagger_never_processed_total counter\n"
            "stagger_never_processed_total %llu\n",
            (unsigned long long)m->never_processed);
    /* More series: one call each (the waits, the quotas; a per-class or
     * per-tenant view, in a file of its own, is one more line here). */
    print_where_time_goes(m, f);
    stg__mc_print(&m->classes, f);
    print_quotas(m, f);
    for (size_t i = 0; i < m->n_src; i++)
        m->src[i].fn(f, m->src[i].data);
}

int stg_metrics_add_source(stg_metrics *m, stg_metrics_source_fn fn, void *data)
{
    if (!m || !fn)
        return STG_EINVAL;
    pthread_mutex_lock(&m->mu);
    int rc = m->n_src < MAX_SOURCES ? STG_OK : STG_ENOMEM;
    if (rc == STG_OK) {
        m->src[m->n_src].fn = fn;
        m->src[m->n_src++].data = data;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int stg_metrics_print(const stg_metrics *m, FILE *out)
{
    if (!m || !out)
        return STG_EINVAL;
    stg_metrics *mm = (stg_metrics *)m; /* the mutex, not the data, changes */
    pthread_mutex_lock(&mm->mu);
    print_all(m, out);
    pthread_mutex_unlock(&mm->mu);
    return ferror(out) ? STG_EIO : STG_OK;
}

int stg_metrics_write(const stg_metrics *m, const char *path)
{
    if (!m || !path)
        return STG_EINVAL;
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return STG_ENOMEM;
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(tmp);
        return STG_EIO;
    }
    int rc = stg_metrics_print(m, f);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = STG_EIO;
    if (fclose(f) != 0)
        rc = STG_EIO;
    if (rc == STG_OK && rename(tmp, path) != 0)
        rc = STG_EIO;
    if (rc != STG_OK)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* ---- the same as JSON (the live pages) ------------------------------------ */

static json_t *classes_json(const uint64_t *n)
{
    json_t *o = json_object();
    for (int c = 0; c < N_CLASSES; c++)
        json_object_set_new(o, class_names[c], json_integer((json_int_t)n[c]));
    return o;
}

static void quota_json(const char *host, const stg_quota_view *v, void *data)
{
    json_array_append_new(
        data, json_pack("{s:s,s:s,s:s,s:f,s:I,s:I,s:I,s:I,s:f,s:I,s:I}", "host", host, "key",
                        v->key,
                        "unit", v->unit, "window_s",
                        v->window_us < 0 ? -1.0 : (double)v->window_us / 1e6, "limit",
                        (json_int_t)v->limit, "remaining", (json_int_t)v->told_remaining,
                        "estimate", (json_int_t)v->estimate, "reserved",
                        (json_int_t)v->inflight, "reset_s",
                        v->reset_in_us < 0 ? -1.0 : (double)v->reset_in_us / 1e6, "admitted",
                        (json_int_t)v->admitted, "refused", (json_int_t)v->refused));
}

static json_t *to_json(const stg_metrics *m)
{
    json_t *hosts = json_object();
    for (size_t i = 0; i < m->n_hosts; i++) {
        const breaker_host *h = &m->hosts[i];
        json_t *o = json_pack("{s:o,s:f,s:i}", "attempts", classes_json(h->attempts),
                              "learned_rate", h->rate, "concurrency_limit", h->conc_limit);
        if (h->breaker)
            json_object_set_new(o, "breaker", json_string(stg_breaker_state_name(
                                                  (stg_breaker_state)h->state)));
        json_object_set_new(hosts, h->host, o);
    }
    json_t *waits = json_object();
    for (size_t i = 0; i < N_WAITS; i++)
        json_object_set_new(waits, wait_names[i],
                            json_pack("{s:I,s:f}", "count", (json_int_t)m->waited[i].count,
                                      "seconds", m->waited[i].sum));
    json_t *retries = json_object(), *give_ups = json_object();
    uint64_t by_status = 0, by_error = 0;
    for (int s = 0; s < N_STATUS; s++)
        by_status += m->retries_status[s];
    for (int e = 0; e < N_ERRORS; e++)
        by_error += m->retries_error[e];
    json_object_set_new(retries, "retry_status", json_integer((json_int_t)by_status));
    json_object_set_new(retries, "retry_error", json_integer((json_int_t)by_error));
    for (int r = 0; r < N_REASONS; r++) {
        if (m->retries_other[r])
            json_object_set_new(retries, stg_reason_name((stg_reason)r),
                                json_integer((json_int_t)m->retries_other[r]));
        if (m->give_ups[r])
            json_object_set_new(give_ups, stg_reason_name((stg_reason)r),
                                json_integer((json_int_t)m->give_ups[r]));
    }
    json_t *quotas = json_array();
    if (m->quotas)
        stg_quota_each(m->quotas, stg__clock_mono_us(), quota_json, quotas);
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:{s:I,s:f}}", "quotas", quotas,
                     "attempts",
                     classes_json(m->attempts), "hosts", hosts, "waits", waits, "retries",
                     retries, "give_ups", give_ups, "successes", (json_int_t)m->successes,
                     "in_flight", (json_int_t)m->in_flight, "requests", "count",
                     (json_int_t)m->request.count, "seconds", m->request.sum);
}

char *stg_metrics_json(const stg_metrics *m)
{
    if (!m)
        return NULL;
    stg_metrics *mm = (stg_metrics *)m; /* the mutex, not the data, changes */
    pthread_mutex_lock(&mm->mu);
    json_t *o = to_json(m);
    pthread_mutex_unlock(&mm->mu);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}
