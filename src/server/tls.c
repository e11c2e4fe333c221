/*
 * HTTPS for stagger serve (see tls.h): libmicrohttpd's TLS (GnuTLS in
 * Debian's build) with the PEM files read into memory, and mutual TLS.
 *
 * Why the client check is here and not in the handshake: libmicrohttpd's
 * MHD_OPTION_HTTPS_MEM_TRUST makes GnuTLS *request* a client certificate
 * but leaves verifying it to the application (GNUTLS_CERT_REQUEST, not
 * REQUIRE), so each request's connection is verified with
 * gnutls_certificate_verify_peers2 against that trust list before the
 * pipeline sees it. A refusal is a 403 with a JSON body saying why, as an
 * API gateway answers a missing client certificate; the client gets a
 * clear, non-retryable answer instead of a reset it would retry.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef STG_SRV_HAVE_GNUTLS
#include <gnutls/gnutls.h>
#endif

#include "server/internal.h"
#include "server/tls.h"
#include "util/read_all.h"

/* The whole file (at most 64 MiB), NUL-terminated; NULL with errno set. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t len;
    char *buf = stg__read_all(f, (size_t)64 << 20, &len);
    int e = errno;
    fclose(f);
    errno = e;
    return buf;
}

static int load(char **out, const char *path, const char *what, char *err, size_t errlen)
{
    *out = slurp(path);
    if (!*out) {
        snprintf(err, errlen, "cannot read %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    if (!strstr(*out, "-----BEGIN ")) {
        snprintf(err, errlen, "%s %s is not PEM (no -----BEGIN line)", what, path);
        return -1;
    }
    return 0;
}

int srv_tls_load(srv_tls *t, const char *cert, const char *key, const char *client_ca, char *err,
                 size_t errlen)
{
    memset(t, 0, sizeof *t);
    atomic_init(&t->refused, 0);
    if (!cert && !key) {
        if (client_ca) {
            snprintf(err, errlen, "--tls-client-ca needs --tls-cert and --tls-key");
            return -1;
        }
        return 0;
    }
    if (!cert || !key) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        return -1;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "this libmicrohttpd was built without TLS: --tls-cert cannot "
                              "be served");
        return -1;
    }
#ifndef STG_SRV_HAVE_GNUTLS
    if (client_ca) {
        snprintf(err, errlen, "--tls-client-ca needs GnuTLS at build time (libgnutls28-dev)");
        return -1;
    }
#endif
    if (load(&t->cert, cert, "certificate", err, errlen) != 0 ||
        load(&t->key, key, "key", err, errlen) != 0 ||
        (client_ca && load(&t->trust, client_ca, "client CA", err, errlen) != 0)) {
        srv_tls_free(t);
        return -1;
    }
    t->on = true;
    return 0;
}

void srv_tls_free(srv_tls *t)
{
    if (t->key) /* a private key: do not leave it in freed memory */
        memset(t->key, 0, strlen(t->key));
    free(t->cert);
    free(t->key);
    free(t->trust);
    t->cert = t->key = t->trust = NULL;
    t->on = false;
}

unsigned srv_tls_flags(const srv_tls *t)
{
    return t->on ? MHD_USE_TLS : 0;
}

size_t srv_tls_options(const srv_tls *t, struct MHD_OptionItem *out)
{
    if (!t->on)
        return 0;
    size_t n = 0;
    out[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t->cert};
    out[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t->key};
    if (t->trust)
        out[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, t->trust};
    return n;
}

#ifdef STG_SRV_HAVE_GNUTLS
/* The connection presented a certificate that chains to the client CA. */
static bool client_verified(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!ci || !ci->tls_session)
        return false;
    gnutls_session_t ss = (gnutls_session_t)ci->tls_session;
    unsigned n = 0;
    if (gnutls_certificate_type_get(ss) != GNUTLS_CRT_X509 ||
        !gnutls_certificate_get_peers(ss, &n) || n == 0)
        return false;
    unsigned status = 0;
    return gnutls_certificate_verify_peers2(ss, &status) == GNUTLS_E_SUCCESS && status == 0;
}

static enum MHD_Result refuse(struct MHD_Connection *c)
{
    static const char body[] = "{\"error\":\"client certificate required: none was presented, "
                               "or it does not chain to --tls-client-ca\"}";
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_FORBIDDEN, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request_mtls(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_size,
                                       void **con_cls)
{
    stg_srv *s = cls;
    /* First call of a request (the pipeline has no state for it yet). */
    if (!*con_cls && !client_verified(c)) {
        atomic_fetch_add_explicit(&s->tls.refused, 1, memory_order_relaxed);
        return refuse(c);
    }
    return srv_on_request(cls, c, url, method, version, upload_data, upload_size, con_cls);
}
#endif

MHD_AccessHandlerCallback srv_tls_handler(const srv_tls *t)
{
#ifdef STG_SRV_HAVE_GNUTLS
    if (t->on && t->trust)
        return on_request_mtls;
#else
    (void)t;
#endif
    return srv_on_request;
}
