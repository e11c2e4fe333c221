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
 *   stagger_class_*{class,tenant}          admitted, waiting, wait for
 *                                          admission per priority class and
 *                                          tenant (metrics_class.c)
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
#include <unistd.h>

#include "curl/internal.h"
#include "curl/metrics_class.h"

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
    uint64_t used;  /* the metrics' clock at its latest update */
} breaker_host;

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
    if (m->n_hosts == m->cap_hosts) {
        size_t cap = m->cap_hosts ? m->cap_hosts * 2 : 8;
        breaker_host *v = realloc(m->hosts, cap * sizeof *v);
        if (!v)
            return NULL;
        m->hosts = v;
        m->cap_hosts = cap;
    }
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
    if (ev->concurrency_limit > 0 && ev->type != STG_EVENT_BREAKER) {
        breaker_host *h = host_slot(m, ev->host);
        if (h)
            h->conc_limit = ev->concurrency_limit;
    }
    switch (ev->type) {
    case STG_EVENT_ATTEMPT_END:
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
        break;
    case STG_EVENT_SUCCESS:
        m->successes++;
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

static void print_histo(FILE *f, const char *name, const char *help, const histo *h)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < N_BOUNDS; i++) {
        cum += h->le[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
    fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
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
    fputs("# HELP stagger_give_ups_total Requests given up, by reason.\n"
          "# TYPE stagger_give_ups_total counter\n",
          f);
    for (int r = 0; r < N_REASONS; r++)
        if (m->give_ups[r])
            fprintf(f, "stagger_give_ups_total{reason=\"%s\"} %llu\n",
                    stg_reason_name((stg_reason)r), (unsigned long long)m->give_ups[r]);
    fputs("# HELP stagger_waits_total Waits that are not retries (a request waiting for an "
          "open breaker), by reason.\n# TYPE stagger_waits_total counter\n",
          f);
    for (int r = 0; r < N_REASONS; r++)
        if (m->retries_other[r])
            fprintf(f, "stagger_waits_total{reason=\"%s\"} %llu\n",
                    stg_reason_name((stg_reason)r), (unsigned long long)m->retries_other[r]);
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
        fputs("stagger_breaker_state{host=", f);
        label(f, m->hosts[i].host);
        fprintf(f, "} %d\n", m->hosts[i].state);
    }
    fputs("# HELP stagger_breaker_transitions_total Breaker state changes per host, by new "
          "state.\n# TYPE stagger_breaker_transitions_total counter\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++)
        for (int s = 0; s < 3 && m->hosts[i].breaker; s++) {
            fputs("stagger_breaker_transitions_total{host=", f);
            label(f, m->hosts[i].host);
            fprintf(f, ",to=\"%s\"} %llu\n", stg_breaker_state_name((stg_breaker_state)s),
                    (unsigned long long)m->hosts[i].to[s]);
        }
    fputs("# HELP stagger_concurrency_limit The concurrency limit each host learned "
          "(requests at once).\n# TYPE stagger_concurrency_limit gauge\n",
          f);
    for (size_t i = 0; i < m->n_hosts; i++) {
        if (m->hosts[i].conc_limit <= 0)
            continue;
        fputs("stagger_concurrency_limit{host=", f);
        label(f, m->hosts[i].host);
        fprintf(f, "} %d\n", m->hosts[i].conc_limit);
    }
    fprintf(f,
            "# HELP stagger_never_processed_total Attempts the server never processed "
            "(HTTP/2 REFUSED_STREAM or GOAWAY), sent again.\n"
            "# TYPE stagger_never_processed_total counter\n"
            "stagger_never_processed_total %llu\n",
            (unsigned long long)m->never_processed);
    stg__mc_print(&m->classes, f);
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
