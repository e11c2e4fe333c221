/*
 * The TLS options of fetch and batch (see tls.h): one table, one place
 * that turns them into an stg_tls_config, and the few lines the commands
 * print about TLS (-k's warning, -v's connection note, the hint after a
 * certificate that did not verify).
 */
#ifdef STG_HAVE_CURL
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tls.h"

#define T(x) offsetof(cli_tls, x)
const cli_opt cli_tls_opts[] = {
    {CLI_STRING, "cacert", 0, "FILE",
     "trust the CA certificates in FILE (PEM) instead of the\n"
     "system store (default: $CURL_CA_BUNDLE, else\n"
     "$SSL_CERT_DIR / $SSL_CERT_FILE, as curl reads them)",
     T(cacert), NULL, NULL, 0, NULL},
    {CLI_STRING, "capath", 0, "DIR", "trust the CA certificates in DIR (c_rehash'ed)", T(capath),
     NULL, NULL, 0, NULL},
    {CLI_FLAG, "insecure", 'k', NULL,
     "do not verify the server's certificate or name\n(warns; for tests only)", T(insecure), NULL,
     NULL, 0, NULL},
    {CLI_STRING, "cert", 0, "FILE", "client certificate (PEM) for mutual TLS", T(cert), NULL, NULL,
     0, NULL},
    {CLI_STRING, "key", 0, "FILE", "its private key (PEM; default: in --cert's file)", T(key),
     NULL, NULL, 0, NULL},
    CLI_OPT_END,
};
#undef T

int cli_tls_config(cli_tls *t, const char *cmd, const stg_tls_config **out)
{
    *out = &t->cfg;
    memset(&t->cfg, 0, sizeof t->cfg);
    int rc = cli_tls_files_check(cmd, "", t->cacert, t->capath, t->cert, t->key);
    if (rc)
        return rc;
    t->cfg.ca_file = t->cacert;
    t->cfg.ca_path = t->capath;
    t->cfg.cert = t->cert;
    t->cfg.key = t->key;
    t->cfg.insecure = t->insecure;
    t->cfg.ca_from_env = true;
    if (t->insecure)
        fprintf(stderr,
                "stagger %s: warning: --insecure: the server's certificate is not verified; "
                "anyone on the path can pose as the server and read the requests\n",
                cmd);
    return 0;
}

void cli_tls_verbose(const stg_event *ev, FILE *out)
{
    if (ev->type != STG_EVENT_ATTEMPT_END)
        return;
    if (ev->conn_reused) {
        fputs(", reused connection", out);
    } else if (ev->connects > 0) {
        fputs(", new connection", out);
        if (ev->tls_handshake_us > 0)
            fprintf(out, ", TLS handshake %.1f ms", (double)ev->tls_handshake_us / 1000.0);
    }
}

int cli_tls_exit(const stg_result *r, int status)
{
    if (r->action != STG_ACTION_SUCCESS && r->status == 0 && r->error == STG_NET_TLS &&
        r->reason != STG_REASON_CANCELLED)
        return CLI_EXIT_TLS;
    return status;
}

void cli_tls_hint(const stg_result *r, const char *cmd, FILE *out)
{
    if (cli_tls_exit(r, 0) != CLI_EXIT_TLS)
        return;
    switch (r->curl_code) {
    case CURLE_PEER_FAILED_VERIFICATION:
        fprintf(out,
                "stagger %s: give the CA that signed the server's certificate with --cacert "
                "FILE or --capath DIR (or CURL_CA_BUNDLE); -k skips the check, for tests only\n",
                cmd);
        break;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CLIENTCERT:
        fprintf(out, "stagger %s: check --cert and --key (PEM files, the key matching)\n", cmd);
        break;
    case CURLE_SSL_CACERT_BADFILE:
        fprintf(out, "stagger %s: check --cacert / --capath (or CURL_CA_BUNDLE, "
                     "SSL_CERT_FILE, SSL_CERT_DIR): PEM CA certificates\n",
                cmd);
        break;
    default:
        break;
    }
}
#else
typedef int stg_cli_tls_unused;
#endif
