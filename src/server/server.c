/*
 * Server lifecycle: configuration defaults, starting libmicrohttpd with the
 * options that keep replies prompt, and an orderly stop.
 *
 * Why these options: a retry client's timing is only meaningful against a
 * server that answers at once, so accepted sockets get TCP_NODELAY (no
 * ~40 ms Nagle/delayed-ACK stall on keep-alive replies), the listen backlog
 * is 4096 (bursts of connects are not dropped into SYN retransmits), work
 * runs on a pool of epoll threads, and faults that withhold an answer park
 * their connection (MHD_suspend_connection) instead of blocking a thread.
 *
 * HTTPS (tls.c): the same daemon with MHD_USE_TLS and the PEM files in
 * memory; every accepted connection is counted (connections_opened in
 * /__stats), so a test can check from the server's side that a client
 * kept its connections (and its TLS handshakes) down to its concurrency.
 *
 * Invariants: the park ticker is running before the daemon starts and is
 * shut down (every parked connection resumed) before MHD_stop_daemon, as
 * libmicrohttpd requires; the request log is closed and the stats file
 * written only after the daemon has stopped, so both are complete.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/internal.h"

#define LOG_FLUSH_US 200000

void stg__srv_config_init(stg_srv_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->bind = "127.0.0.1";
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->threads = n < 1 ? 1 : n > 16 ? 16 : (unsigned)n;
    cfg->limit_status = 429;
    cfg->retry_after = STG_SRV_RA_SECONDS;
    cfg->fail_retry_after_s = 1;
    cfg->slow_body_us = 1000000;
    cfg->service_time_us = 50000;
    cfg->seed = 1;
    cfg->log_format = STG_SRV_LOG_JSONL;
    cfg->max_body = 1u << 20;
    cfg->ai_default_max_tokens = 1024;
    cfg->ai_output_tokens = 16;
}

unsigned stg__srv_port(const stg_srv *s)
{
    return s->port;
}

/* --capacity in the stats: its settings, in the system now and the peak. */
static int capacity_stats(stg_srv *s, json_t *doc)
{
    if (!s->cap.n)
        return json_object_set_new(doc, "capacity", json_null());
    int64_t now = 0, peak = 0;
    srv_capacity_stats(&s->cap, &now, &peak);
    return json_object_set_new(doc, "capacity",
                               json_pack("{s:i,s:I,s:I,s:I}", "n", s->cap.n, "service_us",
                                         (json_int_t)s->cap.service_us, "in_system",
                                         (json_int_t)now, "max_in_system", (json_int_t)peak));
}

json_t *srv_stats_document(stg_srv *s)
{
    json_t *doc = srv_stats_json(&s->stats, srv_mono_us() - s->start_us);
    if (!doc)
        return NULL;
    json_t *limit = s->limit.on ? json_pack("{s:f,s:I,s:i}", "rate", s->limit.rate, "burst",
                                            (json_int_t)s->limit.burst, "status",
                                            (int)s->cfg.limit_status)
                                : json_null();
    unsigned conns = 0;
    if (s->mhd) {
        const union MHD_DaemonInfo *di =
            MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        conns = di ? di->num_connections : 0;
    }
    uint64_t opened = atomic_load_explicit(&s->conns_opened, memory_order_relaxed);
    uint64_t refused = atomic_load_explicit(&s->tls.refused, memory_order_relaxed);
    if (json_object_set_new(doc, "limit", limit) != 0 ||
        json_object_set_new(doc, "connections", json_integer(conns)) != 0 ||
        json_object_set_new(doc, "connections_opened", json_integer((json_int_t)opened)) != 0 ||
        json_object_set_new(doc, "tls", json_boolean(s->tls.on)) != 0 ||
        json_object_set_new(doc, "tls_client_refused", json_integer((json_int_t)refused)) != 0 ||
        capacity_stats(s, doc) != 0) {
        json_decref(doc);
        return NULL;
    }
    if (srv_extras_json(s, doc) != 0) { /* early retries, dialect */
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* TCP_NODELAY on every accepted connection, and count it. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    stg_srv *s = cls;
    (void)socket_context;
    if (code != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    atomic_fetch_add_explicit(&s->conns_opened, 1, memory_order_relaxed);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    int one = 1;
    setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void flush_log(void *arg)
{
    srv_reqlog_flush(arg);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Tear down whatever was set up; safe on a partly started server. */
static void destroy(stg_srv *s, bool stats_ok, bool idem_ok, bool clients_ok, bool log_ok)
{
    srv_park_shutdown(&s->park);
    if (s->mhd)
        MHD_stop_daemon(s->mhd);
    if (log_ok)
        srv_reqlog_close(&s->log);
    srv_extras_destroy(s);
    if (idem_ok)
        srv_idem_destroy(&s->idem);
    if (clients_ok)
        srv_clients_destroy(&s->clients);
    srv_faults_destroy(&s->faults);
    srv_tls_free(&s->tls);
    srv_capacity_free(&s->cap);
    if (stats_ok)
        srv_stats_destroy(&s->stats);
    free(s->bind_copy);
    free(s->log_copy);
    free(s->stats_copy);
    free(s);
}

stg_srv *stg__srv_start(const stg_srv_config *cfg, char *err, size_t errlen)
{
    stg_srv *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    bool cap_ok = srv_capacity_init(&s->cap, cfg->capacity, cfg->service_time_us) == 0;
    s->bind_copy = dup_or_null(cfg->bind ? cfg->bind : "127.0.0.1");
    s->log_copy = dup_or_null(cfg->log_path);
    s->stats_copy = dup_or_null(cfg->stats_path);
    s->cfg.bind = s->bind_copy;
    s->cfg.log_path = s->log_copy;
    s->cfg.stats_path = s->stats_copy;
    s->start_us = srv_mono_us();
    srv_faults_init(&s->faults, &s->cfg);
    atomic_init(&s->conns_opened, 0);
    s->cfg.tls_cert = s->cfg.tls_key = s->cfg.tls_client_ca = NULL; /* read below, not kept */
    if (srv_tls_load(&s->tls, cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca, err, errlen) !=
        0) {
        free(s->bind_copy);
        free(s->log_copy);
        free(s->stats_copy);
        free(s);
        return NULL;
    }

    bool stats_ok = srv_stats_init(&s->stats) == 0;
    bool clients_ok = stats_ok && srv_clients_init(&s->clients, cfg->fail_first) == 0;
    bool idem_ok = clients_ok && srv_idem_init(&s->idem) == 0;
    if (!idem_ok || !s->bind_copy || !cap_ok) {
        snprintf(err, errlen, "out of memory");
        destroy(s, stats_ok, false, clients_ok, false);
        return NULL;
    }
    if (srv_limit_init(&s->limit, cfg->rate, cfg->burst, s->start_us) != 0) {
        snprintf(err, errlen, "invalid rate %g or burst %lld", cfg->rate, (long long)cfg->burst);
        destroy(s, true, true, true, false);
        return NULL;
    }
    if (srv_extras_init(s, err, errlen) != 0) {
        destroy(s, true, true, true, false);
        return NULL;
    }
    bool ai = cfg->dialect && (!strcmp(cfg->dialect, "openai") || !strcmp(cfg->dialect, "anthropic"));
    if (srv_reqlog_open(&s->log, s->cfg.log_path, cfg->log_format, ai, err, errlen) != 0) {
        destroy(s, true, true, true, true);
        return NULL;
    }

    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     srv_tls_flags(&s->tls);
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, s->cfg.bind, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)cfg->port);
    } else if (inet_pton(AF_INET6, s->cfg.bind, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--bind needs a numeric IPv4 or IPv6 address, not '%s'",
                 s->cfg.bind);
        destroy(s, true, true, true, true);
        return NULL;
    }

    /* As many connections as file descriptors allow (the CLI raises the
     * soft limit), minus some for the log, epoll and ITC descriptors. */
    struct rlimit rl;
    rlim_t nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    unsigned conn_limit = nofile == RLIM_INFINITY || nofile > 60100 ? 60000
                          : nofile > 1100                         ? (unsigned)(nofile - 100)
                                                                  : 1000;

    if (srv_park_start(&s->park, flush_log, &s->log, LOG_FLUSH_US) != 0) {
        snprintf(err, errlen, "cannot start a thread");
        destroy(s, true, true, true, true);
        return NULL;
    }

    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &ss},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, conn_limit, NULL},
        /* Request line + headers must fit: a 64 KiB header gets 431. */
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 32 * 1024, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, 120, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)srv_on_completed, s},
        {cfg->threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
         cfg->threads > 1 ? cfg->threads : 0, NULL},
        {MHD_OPTION_END, 0, NULL}, /* the TLS options go here and after */
        {MHD_OPTION_END, 0, NULL},
        {MHD_OPTION_END, 0, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    size_t used = 0;
    while (opts[used].option != MHD_OPTION_END)
        used++;
    srv_tls_options(&s->tls, &opts[used]);
    errno = 0;
    s->mhd = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, srv_tls_handler(&s->tls), s,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!s->mhd) {
        int e = errno;
        snprintf(err, errlen, "cannot listen on %s port %u%s%s", s->cfg.bind, cfg->port,
                 e ? ": " : "", e ? strerror(e) : "");
        destroy(s, true, true, true, true);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    return s;
}

/* Write the stats document to path through a temporary file and rename, so
 * a reader never sees half a file. */
static int write_stats(stg_srv *s, const char *path)
{
    json_t *doc = srv_stats_document(s);
    if (!doc)
        return -1;
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    int rc = -1;
    if (tmp) {
        snprintf(tmp, n, "%s.tmp", path);
        if (json_dump_file(doc, tmp, JSON_INDENT(2)) == 0 && rename(tmp, path) == 0)
            rc = 0;
        else
            remove(tmp);
        free(tmp);
    }
    json_decref(doc);
    return rc;
}

int stg__srv_stop(stg_srv *s)
{
    if (!s)
        return 0;
    srv_park_shutdown(&s->park);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    srv_reqlog_flush(&s->log);
    srv_extras_print(s);
    int rc = 0;
    if (s->cfg.stats_path && write_stats(s, s->cfg.stats_path) != 0) {
        fprintf(stderr, "stagger serve: cannot write stats file %s: %s\n", s->cfg.stats_path,
                strerror(errno));
        rc = -1;
    }
    destroy(s, true, true, true, true);
    return rc;
}
