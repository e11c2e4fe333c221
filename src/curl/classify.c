/*
 * CURLcode -> stg_net_error: the transport outcome in the terms the retry
 * decision (stg_decide) and the breaker understand; and an answer in the
 * terms a learning limiter understands (throttled? quota spent?).
 *
 * Invariants: pure; every CURLcode maps to exactly one class; CURLE_OK is
 * STG_NET_NONE and nothing else is. A timeout counts as a CONNECT_TIMEOUT
 * only when no connection was made (CURLINFO_CONNECT_TIME == 0) and no
 * byte of the request was sent: then the request provably never left,
 * which lets stg_decide retry even a POST. CONNECT_TIME is 0 on a kept
 * connection too, so attempt.c passes a nonzero time once
 * CURLINFO_REQUEST_SIZE says bytes left.
 */
#include "curl/internal.h"

stg_net_error stg_curl_classify(CURLcode code, int64_t connect_time_us)
{
    switch (code) {
    case CURLE_OK:
        return STG_NET_NONE;
    case CURLE_COULDNT_CONNECT:
        return STG_NET_CONNECT_REFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return connect_time_us <= 0 ? STG_NET_CONNECT_TIMEOUT : STG_NET_TIMEOUT;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return STG_NET_RESET;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return STG_NET_DNS;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_PEER_FAILED_VERIFICATION: /* = CURLE_SSL_CACERT in old headers */
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return STG_NET_TLS;
    default:
        return STG_NET_OTHER;
    }
}

bool stg__throttled(int status, const stg_hints *h)
{
    return stg_status_throttled(status, h); /* the policy's rule (529, 403 limits too) */
}

void stg__shared_report(const stg_shared_limiter *sh, const char *key, int64_t ticket, int status,
                        const stg_hints *h)
{
    if (!sh || !sh->acquire || !sh->on_response || status <= 0)
        return;
    int64_t hold = h->remaining == 0 && h->reset_us > 0 ? h->reset_us : 0;
    sh->on_response(sh->ctx, key, ticket, stg__throttled(status, h), hold);
}
