/*
 * `stagger proxy`: a local sidecar that sends every request a program
 * makes through stagger's engine (src/proxy). This file parses options and
 * handles signals; the proxy itself is the library.
 *
 * Invariants: the first stdout line is "listening on http://ADDR:PORT",
 * flushed at once (tests and scripts read the port from it); it listens
 * on loopback unless --listen names another address AND --allow-remote is
 * given (then a warning goes to stderr: the proxy adds the program's own
 * credentials to what it forwards); SIGTERM and SIGINT drain (stop
 * accepting, let requests in flight finish within --drain, exit 0), SIGHUP
 * reopens the log; all three are blocked in every thread and taken by the
 * main thread with sigwait, so no work runs in a signal handler.
 *
 * The engine flags (-j, --rate, breaker, budget), the shared limiter and
 * the retry policy are the same tables and builder as batch's
 * (engine_opts.h, limiter.h, cli_policy_all_opts); so are the TLS
 * options for https:// upstreams (tls.h, into stg_engine_config.tls).
 */
#if defined(STG_HAVE_PROXY) && defined(STG_HAVE_CURL)

#include <arpa/inet.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "cli/engine_opts.h"
#include "cli/tls.h"
#include "cli/limiter.h"
#include "proxy/proxy.h"

#define CMD "proxy"
#define PROXY_DEFAULT_DEADLINE_US STG_SEC(600)
#define MAX_ROUTES 64

typedef struct proxy_opts {
    const char *listen;
    bool allow_remote;
    stg_proxy_route routes[MAX_ROUTES];
    size_t n_routes;
    bool forward;
    size_t max_request_body;
    size_t max_buffered;
    bool idem_auto;
    int64_t drain_us;
    int64_t client_timeout_us;
    int64_t head_timeout_us;
    unsigned max_connections;
    unsigned max_hosts;
    size_t max_spool;
    const char *log_path;
    cli_engine_opts eng;
    cli_tls tls;              /* --cacert, --capath, -k, --cert, --key (upstreams) */
    stg_policy policy;
    cli_limiter limiter;
} proxy_opts;

static int add_route(cli_parser *p, proxy_opts *o, const char *prefix, const char *url,
                     const char *val)
{
    if (o->n_routes >= MAX_ROUTES)
        return cli_opt_bad(p, val, "at most 64 routes");
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return cli_opt_bad(p, val, "expected an http:// or https:// URL");
    o->routes[o->n_routes++] = (stg_proxy_route){.prefix = prefix, .upstream = url};
    return 0;
}

static int opt_upstream(cli_parser *p, const cli_opt *opt, void *field, const char *v)
{
    (void)opt;
    return add_route(p, field, "", v, v);
}

static int opt_route(cli_parser *p, const cli_opt *opt, void *field, const char *v)
{
    (void)opt;
    proxy_opts *o = field;
    const char *eq = strchr(v, '=');
    if (!eq || v[0] != '/')
        return cli_opt_bad(p, v, "expected /PREFIX=URL");
    /* The prefix is a copy: argv strings are not ours to cut. */
    char *prefix = strndup(v, (size_t)(eq - v));
    if (!prefix)
        return cli_usage_error(CMD, "out of memory");
    int rc = add_route(p, o, prefix, eq + 1, v);
    if (rc)
        free(prefix);
    return rc;
}

static int opt_idem(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    if (!strcmp(v, "auto"))
        *(bool *)field = true;
    else if (!strcmp(v, "none"))
        *(bool *)field = false;
    else
        return cli_opt_bad(p, v, "expected auto or none");
    return 0;
}

static int opt_drain(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    int64_t d;
    if (!cli_parse_duration(v, &d))
        return cli_opt_bad(p, v, "expected a duration such as 30s (0: do not wait)");
    *(int64_t *)field = d;
    return 0;
}

static int opt_conns(cli_parser *p, const cli_opt *o, void *field, const char *v)
{
    (void)o;
    long long n;
    if (!cli_parse_int(v, 1, 1000000, &n))
        return cli_opt_bad(p, v, "expected a whole number from 1");
    *(unsigned *)field = (unsigned)n;
    return 0;
}

#define F(x) offsetof(proxy_opts, x)
static const cli_opt proxy_table[] = {
    {.kind = CLI_HEADING, .help = "Where"},
    {CLI_STRING, "listen", 0, "ADDR:PORT",
     "where to listen; port 0 picks a free one;\n[::1]:PORT for IPv6",
     F(listen), NULL, NULL, 0, NULL, "127.0.0.1:8080"},
    {CLI_FLAG, "allow-remote", 0, NULL,
     "allow --listen on an address other than loopback\n(prints a warning)",
     F(allow_remote), NULL, NULL, 0, NULL},
    {CLI_FN, "upstream", 0, "URL", "send every request to URL (http:// or https://)", 0,
     opt_upstream, NULL, 0, NULL},
    {CLI_FN, "route", 0, "/PREFIX=URL",
     "send paths under /PREFIX to URL (repeatable; the\nlongest prefix wins)",
     0, opt_route, NULL, 0, NULL},
    {CLI_FLAG, "forward", 0, NULL,
     "forward-proxy mode too: absolute-form http://\ntargets go where they name (CONNECT is "
     "refused)",
     F(forward), NULL, NULL, 0, NULL},
    {.kind = CLI_HEADING, .help = "Requests"},
    {CLI_FN, "max-request-body", 0, "BYTES",
     "request bodies up to this are buffered and can be\nresent; a larger one streams once and is never\nretried",
     F(max_request_body), cli_opt_size, NULL, 0, NULL, "16M"},
    {CLI_FN, "max-spool", 0, "BYTES",
     "answer bodies other than 2xx held at once, all\nrequests together; past it a 502 (each one:\n--max-body)",
     F(max_spool), cli_opt_size, NULL, 0, NULL, "1G"},
    {CLI_FN, "max-request-buffer", 0, "BYTES",
     "request bodies buffered at once, all requests\ntogether; past it a new body streams once and is\n"
     "never retried",
     F(max_buffered), cli_opt_size, NULL, 0, NULL, "256M"},
    {CLI_FN, "idempotency-key", 0, "auto|none",
     "auto: add an Idempotency-Key to POSTs without one,\nso they may be retried",
     F(idem_auto), opt_idem, NULL, 0, NULL, "none"},
    {.kind = CLI_GROUP, .group = cli_engine_opts_table, .off = F(eng), .man = "stagger-batch(1)"},
    {.kind = CLI_HEADING, .help = "TLS to https:// upstreams"},
    {.kind = CLI_GROUP, .group = cli_tls_opts, .off = F(tls), .man = "stagger-fetch(1)"},
    {.kind = CLI_HEADING, .help = "Service"},
    {CLI_FN, "drain", 0, "D",
     "on SIGTERM, let requests in flight finish for up to D,\nthen exit 0",
     F(drain_us), opt_drain, NULL, 0, NULL, "30s"},
    {CLI_FN, "client-timeout", 0, "D", "close an idle client connection after D",
     F(client_timeout_us), cli_opt_positive_duration, NULL, 0, NULL, "30s"},
    {CLI_FN, "head-timeout", 0, "D",
     "a request head must arrive whole within D of the\nconnection's start; near --max-connections, open\n"
     "heads are closed oldest first",
     F(head_timeout_us), cli_opt_positive_duration, NULL, 0, NULL, "10s"},
    {CLI_FN, "max-connections", 0, "N",
     "client connections at once (default: from the\ndescriptor limit)",
     F(max_connections), opt_conns, NULL, 0, NULL},
    {CLI_FN, "max-hosts", 0, "N",
     "upstream hosts whose state (limiter, breaker,\nbudget, metrics series) is kept; past it the\n"
     "least recently used one is forgotten",
     F(max_hosts), opt_conns, NULL, 0, NULL, "1024"},
    {CLI_STRING, "log", 0, "FILE",
     "JSON-lines log: engine events and one line per\nrequest (redacted); SIGHUP reopens it",
     F(log_path), NULL, NULL, 0, NULL},
    CLI_OPT_HELP_ENTRY,
    CLI_OPT_VERSION_ENTRY,
    {.kind = CLI_HEADING, .help = "Shared limit (many processes or machines)"},
    {.kind = CLI_GROUP, .group = cli_limiter_opts, .off = F(limiter), .man = "stagger-batch(1)"},
    {.kind = CLI_GROUP, .group = cli_redis_tls_opts, .off = F(limiter.tls), .man = "stagger-batch(1)"},
    {CLI_FLAG, "share-breaker", 0, NULL,
     "keep the circuit breaker in Redis too, so every\nproxy sees an open breaker at once",
     F(limiter.share_breaker), NULL, NULL, 0, "stagger-batch(1)"},
    {.kind = CLI_HEADING, .help = "Retry policy"},
    {.kind = CLI_GROUP, .group = cli_policy_all_opts, .off = F(policy), .man = "stagger-fetch(1)"},
    {.kind = CLI_HEADING, .help = "Timeouts (per attempt; Stagger-Timeout sets them per request)"},
    {.kind = CLI_GROUP, .group = cli_timeout_opts, .off = F(policy)},
    {.kind = CLI_TEXT, .help = cli_durations_help},
    CLI_OPT_END,
};
#undef F

static const int proxy_exits[] = {CLI_EXIT_OK, CLI_EXIT_FAILED, CLI_EXIT_USAGE, CLI_EXIT_LIMITER,
                                  -1};

/* The policy before the options: the project default with a 10 min
 * deadline (--help shows it; a --preset resets it). */
static void proxy_policy_defaults(stg_policy *p)
{
    p->deadline_us = PROXY_DEFAULT_DEADLINE_US;
}

const cli_command cli_proxy_command = {
    .name = CMD,
    .usage = "usage: stagger proxy --upstream URL [--route /PREFIX=URL]... [options]\n"
             "\n"
             "A local HTTP proxy: point a program's base URL at it and every request\n"
             "it sends goes out paced, retried and shared the stagger way. The program\n"
             "gets the final answer (a 429/503 given back keeps the upstream's\n"
             "Retry-After and rate-limit headers). Control per request with the\n"
             "headers Stagger-Deadline: 20s, Stagger-Retries: 0, Stagger-Priority: low,\n"
             "Stagger-Timeout: 90s (or first-byte=D, idle=D, connect=D, total=D).\n"
             "Defaults fit LLM APIs: a 10-minute deadline, no total time per attempt,\n"
             "5 minutes to the first byte and 2 minutes idle.\n"
             "GET /__stagger/metrics and /__stagger/health describe the proxy.\n",
    .opts = proxy_table,
    .epilogue = "Example:\n"
                "  stagger proxy --listen 127.0.0.1:8080 --upstream https://api.example.com\n"
                "  OPENAI_BASE_URL=http://127.0.0.1:8080/v1 python3 app.py\n",
    .exits = proxy_exits,
    .policy_defaults = proxy_policy_defaults,
};

/* "127.0.0.1:8080", "[::1]:8080", "8080". */
static int parse_listen(const char *s, char *addr, size_t size, unsigned *port, bool *loopback)
{
    const char *colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':')
            return -1;
        snprintf(addr, size, "%.*s", (int)(rb - s - 1), s + 1);
        colon = rb + 1;
    } else if ((colon = strrchr(s, ':'))) {
        snprintf(addr, size, "%.*s", (int)(colon - s), s);
    } else {
        snprintf(addr, size, "127.0.0.1");
        colon = s - 1;
    }
    long long n;
    if (!cli_parse_int(colon + 1, 0, 65535, &n))
        return -1;
    *port = (unsigned)n;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        *loopback = (ntohl(a4.s_addr) >> 24) == 127;
    else if (inet_pton(AF_INET6, addr, &a6) == 1)
        *loopback = IN6_IS_ADDR_LOOPBACK(&a6);
    else
        return -1;
    return 0;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int proxy_run(proxy_opts *o, const char *addr, unsigned port)
{
    stg_proxy_config pc;
    memset(&pc, 0, sizeof pc);
    pc.listen_addr = addr;
    pc.port = port;
    pc.routes = o->routes;
    pc.n_routes = o->n_routes;
    pc.forward = o->forward;
    pc.max_request_body = o->max_request_body;
    pc.max_buffered = o->max_buffered;
    pc.idempotency_auto = o->idem_auto;
    pc.client_timeout_us = o->client_timeout_us;
    pc.head_timeout_us = o->head_timeout_us;
    pc.max_connections = o->max_connections;
    pc.log_path = o->log_path;
    const stg_tls_config *tls;
    int rc = cli_tls_config(&o->tls, "proxy", &tls);
    if (rc)
        return rc;
    rc = cli_engine_config(&o->eng, &o->policy, &o->limiter, &pc.engine);
    if (rc)
        return rc;
    pc.engine.tls = tls; /* the same TLS options as fetch and batch */
    pc.engine.max_hosts = o->max_hosts; /* --forward sees any host: bounded */
    /* --max-body limits what the proxy holds whole (an answer other than
     * 2xx: proxy.h); a 2xx answer streams, so the engine takes any. */
    pc.max_body = o->eng.max_body;
    pc.max_spool = o->max_spool;
    pc.engine.max_body = (size_t)1 << 62;
    if (cli_defaults_probe()) { /* help --defaults: what the proxy would run with */
        const cli_command *c = &cli_proxy_command;
        char listen[160];
        bool v6 = strchr(addr, ':') != NULL;
        snprintf(listen, sizeof listen, "%s%s%s:%u", v6 ? "[" : "", addr, v6 ? "]" : "", port);
        cli_defaults_row(c, "listen", CLI_VAL_STRING, listen);
        cli_defaults_row(c, "max-request-body", CLI_VAL_SIZE, (long long)pc.max_request_body);
        cli_defaults_row(c, "max-spool", CLI_VAL_SIZE, (long long)pc.max_spool);
        cli_defaults_row(c, "max-request-buffer", CLI_VAL_SIZE, (long long)pc.max_buffered);
        cli_defaults_row(c, "idempotency-key", CLI_VAL_STRING, pc.idempotency_auto ? "auto" : "none");
        cli_engine_defaults_rows(c, &pc.engine, pc.max_body);
        cli_defaults_row(c, "drain", CLI_VAL_DURATION, (int64_t)o->drain_us);
        cli_defaults_row(c, "client-timeout", CLI_VAL_DURATION, (int64_t)pc.client_timeout_us);
        cli_defaults_row(c, "head-timeout", CLI_VAL_DURATION, (int64_t)pc.head_timeout_us);
        cli_defaults_row(c, "max-hosts", CLI_VAL_INT, (long long)pc.engine.max_hosts);
        cli_limiter_defaults_rows(c, &o->limiter);
        cli_policy_defaults_rows(c, &pc.engine.policy);
        cli_limiter_close(&o->limiter);
        return CLI_EXIT_OK;
    }

    /* Signals: blocked before any thread starts, so every thread inherits
     * the mask and only sigwait below takes them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_nofile();

    char err[512];
    stg_proxy *p = stg__proxy_new(&pc, err, sizeof err);
    if (!p) {
        fprintf(stderr, "stagger proxy: %s\n", err);
        cli_limiter_close(&o->limiter);
        return CLI_EXIT_FAILED;
    }
    bool v6 = strchr(addr, ':') != NULL;
    printf("listening on http://%s%s%s:%u\n", v6 ? "[" : "", addr, v6 ? "]" : "",
           stg__proxy_port(p));
    fflush(stdout);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            if (stg__proxy_reopen_log(p) != 0)
                fprintf(stderr, "stagger proxy: cannot reopen the log %s\n", o->log_path);
            continue;
        }
        break;
    }
    int left = stg__proxy_drain(p, o->drain_us);
    if (left > 0)
        fprintf(stderr, "stagger proxy: %d request%s still in flight after --drain: cancelled\n",
                left, left == 1 ? "" : "s");
    stg__proxy_free(p);
    cli_limiter_close(&o->limiter);
    return CLI_EXIT_OK;
}

int cli_proxy_main(int argc, char **argv)
{
    proxy_opts o;
    memset(&o, 0, sizeof o);
    /* The program behind the proxy has its own timeout (the OpenAI and
     * Anthropic SDKs: 10 minutes, DEFAULT_TIMEOUT in src/client.ts): a
     * completion that takes minutes must not be cut by ours first.
     * --deadline or a --preset (which resets the policy) replace it. */
    proxy_policy_defaults(&o.policy);
    o.limiter.cmd = CMD;
    cli_engine_opts_init(&o.eng);
    cli_parser parser = {.cmd = &cli_proxy_command, .ctx = &o};
    int prc = cli_parse(&parser, argc, argv);
    int rc = prc;
    if (prc < 0) {
        char addr[128];
        unsigned port = 0;
        bool loopback = true;
        rc = 0;
        /* o.listen: the table's default when not given */
        if (parse_listen(o.listen, addr, sizeof addr, &port, &loopback) != 0)
            rc = cli_usage_error(CMD, "bad value '%s' for --listen: expected ADDR:PORT with a "
                                      "numeric address",
                                 o.listen);
        if (!rc && !loopback && !o.allow_remote)
            rc = cli_usage_error(CMD, "--listen %s is not loopback: add --allow-remote to "
                                      "accept requests from other machines",
                                 addr);
        if (!rc && !loopback)
            fprintf(stderr, "stagger proxy: warning: listening on %s: anyone who can reach it "
                            "sends requests with this proxy's limits (and the upstream "
                            "credentials its clients add)\n",
                    addr);
        if (!rc && !o.n_routes && !o.forward)
            rc = cli_usage_error(CMD, "nothing to proxy to: give --upstream URL, --route "
                                      "/PREFIX=URL or --forward");
        if (!rc)
            rc = cli_engine_opts_check(CMD, &o.eng, &o.limiter);
        stg_policy check;
        if (!rc && stg_policy_resolve(&o.policy, &check) != STG_OK)
            rc = cli_usage_error(CMD, "the retry policy is not valid");
        if (!rc)
            rc = proxy_run(&o, addr, port);
    }
    for (size_t i = 0; i < o.n_routes; i++)
        if (o.routes[i].prefix[0])
            free((char *)o.routes[i].prefix);
    return rc;
}

#endif
