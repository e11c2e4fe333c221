/*
 * Live metrics (see metrics_live.h): the same stg_metrics (src/curl/
 * metrics.c, the stagger_* names) as the file written at exit, so a scrape
 * during a run and the file after it agree on every name.
 *
 * Invariants:
 *  - stg_metrics is behind its own mutex: the writer thread and the
 *    listener's threads read it while the run's thread feeds it events;
 *    nothing here touches the run's state.
 *  - The file is rewritten with stg_metrics_write (temp file, fsync,
 *    rename): a textfile collector never reads half of it. The thread
 *    sleeps on a condition variable (CLOCK_MONOTONIC), so stop never waits
 *    out an interval.
 *  - The listener binds the address given and nothing else (127.0.0.1
 *    when only a port is given), answers GET (and HEAD) /metrics, the
 *    live page / with its /chart.js (in the binary: src/view) and
 *    /live.json, and 404 elsewhere; metrics hold no URL and no header
 *    (metrics.c), nor does the batch's part (counts), so nothing secret
 *    can be served.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "cli/cli.h"
#include "cli/metrics_live.h"
#include "util/assert.h"
#include "util/clock.h"

/* HOST:PORT or PORT into sa; false when HOST is not an IPv4 address. */
static bool parse_addr(const char *s, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    const char *colon = strrchr(s, ':');
    char host[64] = "127.0.0.1";
    if (colon) {
        size_t n = (size_t)(colon - s);
        if (n >= sizeof host)
            return false;
        memcpy(host, s, n);
        host[n] = '\0';
        if (!strcmp(host, "localhost"))
            strcpy(host, "127.0.0.1");
    }
    sa->sin_port = htons((uint16_t)atoi(colon ? colon + 1 : s));
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}


static int opt_interval(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(v, &d) || d < STG_MS(100))
        return cli_opt_bad(p, v, "expected a duration of at least 100ms, such as 10s");
    ((cli_metrics_opts *)field)->interval_us = d;
    return 0;
}

static int opt_listen(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    const char *colon = strrchr(v, ':');
    const char *port = colon ? colon + 1 : v;
    long long n;
    struct sockaddr_in sa;
    if (!cli_parse_int(port, 0, 65535, &n) || (colon && colon == v) || !parse_addr(v, &sa))
        return cli_opt_bad(p, v, "expected IPv4-ADDRESS:PORT such as 127.0.0.1:9464, or a PORT");
    ((cli_metrics_opts *)field)->listen = v;
    return 0;
}

const cli_opt cli_metrics_live_opts[] = {
    {CLI_FN, "metrics-interval", 0, "D",
     "rewrite the --metrics file every D during the run", 0, opt_interval, NULL,
     0, NULL, "10s"},
    {CLI_FN, "metrics-listen", 0, "HOST:PORT",
     "serve the same metrics at http://HOST:PORT/metrics\nand a live page at "
     "http://HOST:PORT/ during the run\n(a PORT alone: 127.0.0.1; 0: any free port,\n"
     "printed on stderr)",
     0, opt_listen, NULL, 0, NULL},
    CLI_OPT_END,
};

#ifdef STG_HAVE_CURL

#include <pthread.h>
#include <time.h>
#include <jansson.h>
#ifdef STG_HAVE_VIEW
#include "view/view.h"
#endif
#ifdef STG_HAVE_SERVER
#include <microhttpd.h>
#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif
#endif

struct cli_metrics_live {
    stg_metrics *m;
    const char *path;
    int64_t interval_us;
    const char *cmd;
    pthread_t thread;
    bool thread_on, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    void *(*extra)(void *data);
    void *extra_data;
#ifdef STG_HAVE_SERVER
    struct MHD_Daemon *mhd;
#endif
};

void cli_metrics_live_extra(cli_metrics_live *l, void *(*fn)(void *data), void *data)
{
    if (!l)
        return;
    l->extra = fn;
    l->extra_data = data;
}

/* live.json: the metrics and the extra part; a string to free, or NULL. */
static char *live_json(cli_metrics_live *l)
{
    char *m = stg_metrics_json(l->m);
    json_t *mj = m ? json_loads(m, 0, NULL) : NULL;
    free(m);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_t *o = mj ? json_pack("{s:f,s:s,s:o}", "t", (double)ts.tv_sec + ts.tv_nsec / 1e9,
                               "kind", l->cmd, "metrics", mj)
                   : NULL;
    json_t *x = o && l->extra ? l->extra(l->extra_data) : NULL;
    if (x)
        json_object_set_new(o, "batch", x);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static void *writer(void *arg)
{
    cli_metrics_live *l = arg;
    pthread_mutex_lock(&l->mu);
    bool warned = false;
    while (!l->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (l->interval_us % 1000000) * 1000;
        ts.tv_sec += (time_t)(l->interval_us / 1000000 + ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT)
            ;
        if (l->stop)
            break;
        pthread_mutex_unlock(&l->mu);
        if (stg_metrics_write(l->m, l->path) != STG_OK && !warned) {
            fprintf(stderr, "stagger %s: cannot write metrics to %s (will try again)\n", l->cmd,
                    l->path);
            warned = true;
        }
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

#ifdef STG_HAVE_SERVER
static mhd_result answer(void *cls, struct MHD_Connection *c, const char *url,
                         const char *method, const char *version, const char *upload,
                         size_t *upload_len, void **state)
{
    (void)version, (void)upload, (void)state;
    cli_metrics_live *l = cls;
    if (*upload_len) {
        *upload_len = 0; /* a body is not ours to read */
        return MHD_YES;
    }
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    char *text = NULL;
    size_t len = 0;
    unsigned code = MHD_HTTP_NOT_FOUND;
    const char *type = "text/plain; version=0.0.4; charset=utf-8";
#ifdef STG_HAVE_VIEW
    const char *asset = get && url[0] == '/' ? stg__view_asset(url + 1, &len, &type) : NULL;
    if (asset) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(len, (void *)asset, MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, "Content-Type", type);
        mhd_result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
#endif
    if (get && !strcmp(url, "/live.json")) {
        text = live_json(l);
        len = text ? strlen(text) : 0;
        code = text ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR;
        type = "application/json";
    } else if (get && !strcmp(url, "/metrics")) {
        FILE *f = open_memstream(&text, &len);
        if (f && stg_metrics_print(l->m, f) == STG_OK && fclose(f) == 0) {
            code = MHD_HTTP_OK;
        } else {
            if (f)
                fclose(f);
            code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        }
    }
    if (code != MHD_HTTP_OK) {
        free(text);
        text = strdup(code == MHD_HTTP_NOT_FOUND ? "not found: try /metrics, or / (the live page)\n"
                                                 : "error\n");
        len = text ? strlen(text) : 0;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, text ? text : "", text ? MHD_RESPMEM_MUST_FREE
                                                                    : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            code == MHD_HTTP_OK ? type : "text/plain; charset=utf-8");
    mhd_result rc = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return rc;
}

static int start_listener(cli_metrics_live *l, const char *addr)
{
    struct sockaddr_in sa;
    if (!parse_addr(addr, &sa)) {
        fprintf(stderr, "stagger %s: --metrics-listen %s: expected an IPv4 address and a port\n",
                l->cmd, addr);
        return CLI_EXIT_USAGE;
    }
    l->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                              answer, l, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                              MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!l->mhd) {
        fprintf(stderr, "stagger %s: --metrics-listen %s: cannot listen there (%s)\n", l->cmd,
                addr, strerror(errno ? errno : EADDRINUSE));
        return CLI_EXIT_FAILED;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_BIND_PORT);
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    unsigned port = info ? (unsigned)info->port : (unsigned)ntohs(sa.sin_port);
    fprintf(stderr, "stagger %s: metrics on http://%s:%u/metrics\n", l->cmd, ip, port);
#ifdef STG_HAVE_VIEW
    fprintf(stderr, "stagger %s: live page on http://%s:%u/\n", l->cmd, ip, port);
#endif
    fflush(stderr);
    return 0;
}
#else
static int start_listener(cli_metrics_live *l, const char *addr)
{
    (void)addr;
    fprintf(stderr, "stagger %s: --metrics-listen needs a build with libmicrohttpd\n", l->cmd);
    return CLI_EXIT_USAGE;
}
#endif

int cli_metrics_live_start(const char *cmd, const cli_metrics_opts *o, stg_metrics *m,
                           const char *path, cli_metrics_live **out)
{
    *out = NULL;
    bool file = path && strcmp(path, "-");
    if (!file && !o->listen)
        return 0;
    cli_metrics_live *l = calloc(1, sizeof *l);
    if (!l) {
        fprintf(stderr, "stagger %s: out of memory\n", cmd);
        return CLI_EXIT_FAILED;
    }
    l->m = m, l->path = path, l->cmd = cmd;
    l->interval_us = o->interval_us; /* the table's default unless given */
    STG_ASSERT(l->interval_us > 0);
    pthread_mutex_init(&l->mu, NULL);
    stg__cond_init_mono(&l->cv);
    int ex = o->listen ? start_listener(l, o->listen) : 0;
    if (!ex && file) {
        if (pthread_create(&l->thread, NULL, writer, l) != 0) {
            fprintf(stderr, "stagger %s: cannot start the metrics writer\n", cmd);
            ex = CLI_EXIT_FAILED;
        } else {
            l->thread_on = true;
        }
    }
    if (ex) {
        cli_metrics_live_stop(l);
        return ex;
    }
    *out = l;
    return 0;
}

void cli_metrics_live_stop(cli_metrics_live *l)
{
    if (!l)
        return;
    if (l->thread_on) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
#ifdef STG_HAVE_SERVER
    if (l->mhd)
        MHD_stop_daemon(l->mhd);
#endif
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

#endif
