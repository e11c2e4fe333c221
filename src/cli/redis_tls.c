/*
 * The TLS options of the Redis connections (see redis_tls.h): one table,
 * and the checks made before anything connects.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/redis_tls.h"

#define T(x) offsetof(cli_redis_tls, x)
const cli_opt cli_redis_tls_opts[] = {
    {CLI_STRING, "redis-cacert", 0, "FILE",
     "rediss://: trust the CA certificates in FILE (PEM)\n"
     "for Redis instead of the system store",
     T(cacert), NULL, NULL, 0, NULL},
    {CLI_STRING, "redis-capath", 0, "DIR",
     "rediss://: trust the CA certificates in DIR\n(c_rehash'ed) for Redis",
     T(capath), NULL, NULL, 0, NULL},
    {CLI_STRING, "redis-cert", 0, "FILE",
     "rediss://: client certificate (PEM) for Redis\n(mutual TLS, tls-auth-clients)",
     T(cert), NULL, NULL, 0, NULL},
    {CLI_STRING, "redis-key", 0, "FILE",
     "its private key (PEM; default: in --redis-cert's file)", T(key), NULL, NULL, 0, NULL},
    {CLI_FLAG, "redis-insecure", 0, NULL,
     "rediss://: do not verify Redis's certificate or name\n(warns; for tests only)",
     T(insecure), NULL, NULL, 0, NULL},
    {CLI_STRING, "redis-sentinel", 0, "HOST:PORT[,HOST:PORT...]",
     "ask these Redis Sentinels where the primary is at\neach connection (it moves with a failover);\nthe URL's host is then not used",
     T(sentinels), NULL, NULL, 0, NULL},
    {CLI_STRING, "redis-sentinel-master", 0, "NAME",
     "the primary's name in Sentinel (with --redis-sentinel)", T(sentinel_master), NULL, NULL,
     0, NULL},
    CLI_OPT_END,
};
#undef T

int cli_redis_tls_config(cli_redis_tls *t, const char *cmd, const char *url)
{
    if (!t->sentinels != !t->sentinel_master)
        return cli_usage_error(cmd, "--redis-sentinel and --redis-sentinel-master go together");
    t->had_url |= url != NULL;
    if (t->sentinels && !t->had_url)
        return cli_usage_error(cmd, "--redis-sentinel applies to --limiter or --queue");
    bool any = t->cacert || t->capath || t->cert || t->key || t->insecure;
    if (!any)
        return 0;
    bool tls_url = url && strncasecmp(url, "rediss://", 9) == 0;
    if (t->checked && !tls_url)
        return 0; /* checked against the other URL (the queue's, rediss://) */
    if (!tls_url)
        return cli_usage_error(cmd, "--redis-cacert, --redis-capath, --redis-cert, --redis-key "
                                    "and --redis-insecure apply to a rediss:// URL (TLS) in "
                                    "--limiter or --queue");
    int rc = cli_tls_files_check(cmd, "redis-", t->cacert, t->capath, t->cert, t->key);
    if (rc)
        return rc;
#ifdef STG_HAVE_REDIS
    memset(&t->cfg, 0, sizeof t->cfg);
    t->cfg.ca_file = t->cacert;
    t->cfg.ca_path = t->capath;
    t->cfg.cert = t->cert;
    t->cfg.key = t->key;
    t->cfg.insecure = t->insecure;
#endif
    if (t->insecure && !t->checked)
        fprintf(stderr,
                "stagger %s: warning: --redis-insecure: Redis's certificate is not verified; "
                "anyone on the path can pose as Redis and read the password and the jobs\n",
                cmd);
    t->checked = true;
    return 0;
}
