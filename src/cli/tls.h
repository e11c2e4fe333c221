/*
 * The TLS options of the commands that send HTTPS requests (fetch, batch,
 * and the proxy's upstream side), declared once: --cacert, --capath,
 * -k/--insecure, --cert, --key, as curl spells them. A command adds
 * cli_tls_opts as a group of its option table (its field a cli_tls) and
 * calls cli_tls_config before the first request; the result goes into
 * stg_call_config.tls or stg_engine_config.tls.
 *
 * Invariants: the files named are checked readable before anything is
 * sent (a typo is a usage error, not a transport failure after the
 * request left); -k always says on stderr that verification is off; the
 * CA environment (CURL_CA_BUNDLE, SSL_CERT_DIR, SSL_CERT_FILE) is read as
 * the curl tool reads it (stg_tls_config.ca_from_env), so a user who set
 * it for curl gets the same trust here.
 */
#ifndef STAGGER_CLI_TLS_H
#define STAGGER_CLI_TLS_H

#ifdef STG_HAVE_CURL
#include <stdio.h>

#include <stagger/curl.h>

#include "cli/opt.h"

typedef struct cli_tls {
    const char *cacert, *capath, *cert, *key; /* argv strings */
    bool insecure;
    stg_tls_config cfg; /* built by cli_tls_config */
} cli_tls;

/* --cacert, --capath, -k/--insecure, --cert, --key: an option-table group
 * whose field is the cli_tls. */
extern const cli_opt cli_tls_opts[];

/* Check t's options and build t->cfg; *out becomes &t->cfg. Warns on
 * stderr for -k ("stagger CMD: warning: ..."). Returns 0, or
 * CLI_EXIT_USAGE after one line (a file that cannot be read, --key
 * without --cert). */
int cli_tls_config(cli_tls *t, const char *cmd, const stg_tls_config **out);

/* For -v: append to the current line what connection an ATTEMPT_END used
 * (", new connection, TLS handshake 2.1 ms", ", reused connection"). */
void cli_tls_verbose(const stg_event *ev, FILE *out);

/* The exit status for a result that ended on a TLS failure (error TLS:
 * a certificate that did not verify, a TLS refusal): CLI_EXIT_TLS;
 * otherwise status unchanged. */
int cli_tls_exit(const stg_result *r, int status);

/* One line on stderr for people when r ended on a TLS failure: what to
 * do about it (--cacert, --capath, --cert; -k for tests). */
void cli_tls_hint(const stg_result *r, const char *cmd, FILE *out);
#endif

#endif
