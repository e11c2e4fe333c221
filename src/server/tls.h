/*
 * HTTPS for stagger serve: the certificate and key (and, for mutual TLS,
 * the CA that client certificates must chain to) loaded into memory for
 * libmicrohttpd's GnuTLS support, and the check that refuses a request
 * whose connection presented no valid client certificate.
 *
 * Invariants: the PEM buffers are loaded before the daemon starts and
 * freed only after it stopped (libmicrohttpd keeps pointers to them);
 * with a client CA, no request reaches the pipeline (handler.c) unless
 * its connection's client certificate verified against that CA, so a
 * refused request is neither counted as client traffic nor logged: it is
 * counted in `refused` only.
 */
#ifndef STAGGER_SERVER_TLS_H
#define STAGGER_SERVER_TLS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

typedef struct srv_tls {
    bool on;                  /* --tls-cert and --tls-key given */
    char *cert, *key, *trust; /* PEM, NUL-terminated; trust NULL: no client CA */
    _Atomic uint64_t refused; /* requests refused for their client certificate */
} srv_tls;

/* Load cert and key (both or neither: NULL, NULL leaves t off) and the
 * optional client CA. Returns 0, or -1 with a message in err (a file that
 * cannot be read, no TLS in this libmicrohttpd, a client CA without a
 * certificate, or no GnuTLS at build time to verify clients). */
int srv_tls_load(srv_tls *t, const char *cert, const char *key, const char *client_ca, char *err,
                 size_t errlen);
void srv_tls_free(srv_tls *t);

/* The daemon flag and options for t (none when off): writes at most 3
 * option items to out and returns how many. */
unsigned srv_tls_flags(const srv_tls *t);
size_t srv_tls_options(const srv_tls *t, struct MHD_OptionItem *out);

/* The access handler to give libmicrohttpd: with a client CA, one that
 * answers 403 to a request whose connection has no client certificate
 * that verifies, and otherwise passes it to srv_on_request; without, that
 * handler itself. cls is the stg_srv. */
MHD_AccessHandlerCallback srv_tls_handler(const srv_tls *t);

#endif
