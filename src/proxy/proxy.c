/*
 * The proxy's life: listen, start the engine and watcher threads, drain
 * on SIGTERM, stop, and the log (engine events and one "proxy" line per
 * answered request, JSON lines, redacted; reopened on SIGHUP).
 *
 * Invariants: the listening address is loopback unless the caller chose
 * another (the CLI warns); shutdown resumes every suspended connection
 * while the loop still runs MHD (MHD must not be stopped with one
 * suspended), then ends the loop (its last pass cancels what is left in
 * the engine and lets MHD see the resumed connections), and only then
 * calls MHD_stop_daemon, from this thread, once no other one runs MHD;
 * MHD_quiesce_daemon (a drain) is the loop's to call, like every MHD call
 * but MHD_resume_connection; log lines never hold a header, a query value or URL
 * userinfo (stg_redact_url, and the engine's events are redacted).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "proxy/internal.h"
#include "util/clock.h"

int64_t px_mono_us(void)
{
    return stg__clock_mono_us();
}

static FILE *open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    FILE *f = fdopen(fd, "a");
    if (!f)
        close(fd);
    else
        setvbuf(f, NULL, _IOLBF, 0);
    return f;
}

void px_log_event(const stg_event *ev, void *data)
{
    stg_proxy *p = data;
    stg_metrics_event(ev, p->metrics);
    if (!p->cfg.log_path)
        return; /* no --log: no logger, ever (a reopen needs a path) */
    pthread_mutex_lock(&p->log_mu);
    if (p->logger)
        stg_log_event(ev, p->logger);
    pthread_mutex_unlock(&p->log_mu);
}

void px_log_request(stg_proxy *p, const px_req *r, int client_status)
{
    if (!r->why || strcmp(r->why, "admin")) /* the proxy's own pages are not requests */
        px_observe_request(p, px_mono_us() - r->start_us);
    if (!p->cfg.log_path)
        return;
    char url[2048];
    stg_redact_url(r->url ? r->url : "", url, sizeof url);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32], iso[64];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(iso, sizeof iso, "%s.%06ldZ", when, ts.tv_nsec / 1000);
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:s,s:f}", "ts", iso, "event", "proxy",
                          "method",
                          r->method ? r->method : "", "url", url, "status", client_status,
                          "attempts", r->attempts, "reason",
                          r->why ? r->why : stg_reason_name(r->reason), /* the front's own */
                          "duration_ms", (double)(px_mono_us() - r->start_us) / 1000.0);
    if (o) { /* its class and tenant (Stagger-Priority, Stagger-Tenant) */
        json_object_set_new(o, "class", json_string(stg_priority_name(r->priority)));
        if (r->tenant[0])
            json_object_set_new(o, "tenant", json_string(r->tenant));
    }
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!line)
        return;
    pthread_mutex_lock(&p->log_mu);
    if (p->log)
        fprintf(p->log, "%s\n", line);
    pthread_mutex_unlock(&p->log_mu);
    free(line);
}

int stg__proxy_reopen_log(stg_proxy *p)
{
    if (!p || !p->cfg.log_path)
        return 0;
    FILE *f = open_log(p->cfg.log_path);
    if (!f)
        return -1;
    stg_logger *l = stg_logger_new(f);
    if (!l) {
        fclose(f);
        return -1;
    }
    pthread_mutex_lock(&p->log_mu);
    stg_logger *old_l = p->logger;
    FILE *old_f = p->log;
    p->logger = l;
    p->log = f;
    pthread_mutex_unlock(&p->log_mu);
    stg_logger_free(old_l);
    if (old_f)
        fclose(old_f);
    return 0;
}

unsigned stg__proxy_port(const stg_proxy *p)
{
    return p ? p->port : 0;
}

static unsigned conn_limit(unsigned want)
{
    if (want)
        return want;
    struct rlimit rl;
    rlim_t nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    /* Each client connection may hold an upstream one: half the descriptors. */
    if (nofile == RLIM_INFINITY || nofile > 120200)
        return 60000;
    return nofile > 2200 ? (unsigned)((nofile - 200) / 2) : 1000;
}

static int listen_addr(const char *addr, unsigned port, struct sockaddr_storage *ss,
                       unsigned *flags)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        return 0;
    }
    if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        *flags |= MHD_USE_IPv6;
        return 0;
    }
    return -1;
}

stg_proxy *stg__proxy_new(const stg_proxy_config *cfg, char *err, size_t errsize)
{
    stg_proxy *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errsize, "out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    p->watch_fd = -1;
    p->mhd_fd = -1;
    p->max_request_body = cfg->max_request_body ? cfg->max_request_body
                                                : PX_DEFAULT_MAX_REQUEST_BODY;
    p->max_body = cfg->max_body ? cfg->max_body : PX_DEFAULT_MAX_BODY;
    p->max_spool = cfg->max_spool ? cfg->max_spool : PX_DEFAULT_MAX_SPOOL;
    p->max_buffered = cfg->max_buffered ? cfg->max_buffered : PX_DEFAULT_MAX_BUFFERED;
    p->head_timeout_us = cfg->head_timeout_us > 0 ? cfg->head_timeout_us : PX_DEFAULT_HEAD_TIMEOUT;
    px_via_init(p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->log_mu, NULL);
    pthread_mutex_init(&p->hist_mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (px_routes_init(p, err, errsize) != 0)
        goto fail;
    if (!p->n_routes && !cfg->forward) {
        snprintf(err, errsize, "nothing to proxy to: give --upstream, --route or --forward");
        goto fail;
    }
    p->metrics = stg_metrics_new();
    if (p->metrics) { /* as many host series as the engine keeps hosts */
        stg_metrics_set_max_hosts(p->metrics, cfg->engine.max_hosts);
        stg_metrics_add_source(p->metrics, px_metrics_source, p);
    }
    p->watch_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!p->metrics || p->watch_fd < 0) {
        snprintf(err, errsize, "out of memory or descriptors");
        goto fail;
    }
    if (cfg->log_path) {
        p->log = open_log(cfg->log_path);
        p->logger = p->log ? stg_logger_new(p->log) : NULL;
        if (!p->logger) {
            snprintf(err, errsize, "cannot open the log %s: %s", cfg->log_path, strerror(errno));
            goto fail;
        }
    }
    stg_engine_config ec = cfg->engine;
    ec.on_event = px_log_event;
    ec.event_data = p;
    int erc = STG_OK;
    p->engine = stg_engine_new(&ec, &erc);
    if (!p->engine) {
        snprintf(err, errsize, "cannot create the engine: %s", stg_strerror(erc));
        goto fail;
    }
    stg_metrics_set_quotas(p->metrics, stg_engine_quotas(p->engine)); /* the live page's */

    struct sockaddr_storage ss;
    /* External epoll mode: the loop thread (relay.c) runs MHD. */
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_SUPPRESS_DATE_NO_CLOCK;
    const char *addr = cfg->listen_addr ? cfg->listen_addr : "127.0.0.1";
    if (listen_addr(addr, cfg->port, &ss, &flags) != 0) {
        snprintf(err, errsize, "--listen needs a numeric IPv4 or IPv6 address, not '%s'", addr);
        goto fail;
    }
    p->conn_limit = conn_limit(cfg->max_connections);
    int64_t idle = cfg->client_timeout_us > 0 ? cfg->client_timeout_us : STG_SEC(30);
    unsigned idle_s = (unsigned)((idle + 999999) / 1000000);
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &ss},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, p->conn_limit, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, PX_CONN_POOL, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, idle_s ? idle_s : 1, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)px_uri_cb, p},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)px_on_completed, p},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)px_conn_notify, p},
        {MHD_OPTION_END, 0, NULL},
    };
    errno = 0;
    p->mhd = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, px_on_request, p,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!p->mhd) {
        int e = errno;
        snprintf(err, errsize, "cannot listen on %s port %u%s%s", addr, cfg->port,
                 e ? ": " : "", e ? strerror(e) : "");
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(p->mhd, MHD_DAEMON_INFO_BIND_PORT);
    p->port = di ? di->port : cfg->port;
    const union MHD_DaemonInfo *ei = MHD_get_daemon_info(p->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    p->mhd_fd = ei ? ei->epoll_fd : -1;
    if (p->mhd_fd < 0) {
        snprintf(err, errsize, "libmicrohttpd has no epoll descriptor");
        goto fail;
    }
    if (pthread_create(&p->engine_thread, NULL, px_engine_main, p) != 0) {
        snprintf(err, errsize, "cannot start a thread");
        goto fail;
    }
    p->engine_started = true;
    if (pthread_create(&p->watch_thread, NULL, px_watch_main, p) != 0) {
        snprintf(err, errsize, "cannot start a thread");
        goto fail;
    }
    p->watch_started = true;
    return p;
fail:
    stg__proxy_free(p);
    return NULL;
}

/* Every request still waiting gets cancelled and its connection resumed
 * (it then closes). Returns how many exchanges were open. p->mu held. */
static int cancel_all_locked(stg_proxy *p)
{
    int n = p->open;
    while (p->watch_head) {
        px_req *r = p->watch_head;
        if (!r->client_gone) {
            r->client_gone = true;
            p->client_gone++;
        }
        if (r->submitted && !r->engine_done)
            px_cmd_push(p, PX_CANCEL, r);
        px_resume_locked(r);
    }
    return n;
}

/* Wait on p->cv for at most ms. p->mu held. */
static void timed_wait(stg_proxy *p, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

int stg__proxy_drain(stg_proxy *p, int64_t drain_us)
{
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    p->draining = true;
    pthread_mutex_unlock(&p->mu);
    int64_t until = px_mono_us() + (drain_us > 0 ? drain_us : 0);
    pthread_mutex_lock(&p->mu);
    p->quiesce = true; /* no new connections: the loop thread owns MHD */
    pthread_mutex_unlock(&p->mu);
    px_wake(p);
    pthread_mutex_lock(&p->mu);
    while (p->engine_started && !p->quiesced) /* within one pass: woken */
        timed_wait(p, 50);
    while (p->open > 0 && px_mono_us() < until)
        timed_wait(p, 50);
    int left = p->open > 0 ? cancel_all_locked(p) : 0;
    pthread_mutex_unlock(&p->mu);
    px_wake(p);
    return left;
}

void stg__proxy_free(stg_proxy *p)
{
    if (!p)
        return;
    if (p->engine_started) {
        pthread_mutex_lock(&p->mu);
        p->draining = true;
        cancel_all_locked(p);
        pthread_mutex_unlock(&p->mu);
        px_wake(p);
        /* Let the cancels finish, so no connection is suspended again. */
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < 200 && (p->in_flight > 0 || p->watch_head); i++) {
            cancel_all_locked(p);
            pthread_mutex_unlock(&p->mu);
            px_wake(p);
            usleep(10000);
            pthread_mutex_lock(&p->mu);
        }
        pthread_mutex_unlock(&p->mu);
    }
    if (p->engine_started) {
        pthread_mutex_lock(&p->mu);
        p->stopping = true;
        pthread_mutex_unlock(&p->mu);
        px_wake(p);
        pthread_join(p->engine_thread, NULL);
    }
    if (p->mhd) /* the loop has ended: nobody else runs MHD now */
        MHD_stop_daemon(p->mhd);
    if (p->watch_started) {
        pthread_mutex_lock(&p->mu);
        p->watch_stop = true;
        pthread_mutex_unlock(&p->mu);
        uint64_t one = 1;
        ssize_t w = write(p->watch_fd, &one, sizeof one);
        (void)w;
        pthread_join(p->watch_thread, NULL);
    }
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n_cmds; i++)
        if (p->cmds[i].r)
            px_unref_locked(p->cmds[i].r);
    pthread_mutex_unlock(&p->mu);
    free(p->cmds);
    stg_metrics_set_quotas(p->metrics, NULL); /* the engine's, freed next */
    stg_engine_free(p->engine);
    stg_metrics_free(p->metrics);
    stg_logger_free(p->logger);
    if (p->log)
        fclose(p->log);
    if (p->watch_fd >= 0)
        close(p->watch_fd);
    px_routes_free(p);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->log_mu);
    pthread_mutex_destroy(&p->hist_mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
