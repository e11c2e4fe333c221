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
 *
 * TLS (stg__classify_text): libcurl reports a TLS handshake that the peer
 * reset or closed with the same code as a real TLS failure
 * (CURLE_SSL_CONNECT_ERROR), so its message tells them apart. A reset or a
 * close is what a transport fault looks like from inside a handshake (an
 * overloaded proxy, a server restarting): RESET, retried when the method
 * may repeat, like any reset. A certificate that did not verify, a CA or
 * client certificate file libcurl cannot load, and an alert the server
 * sent (it refused our certificate, or ours is missing: under TLS 1.3 that
 * arrives on the first read, CURLE_RECV_ERROR) are the same on every
 * attempt: TLS and deterministic, so no policy retries them, and the note
 * says which it was. Reset wins over alert: a reset carries no alert.
 *
 * Never processed (stg__never_processed, RFC 9113 §8.7): an HTTP/2 stream
 * the server refused (RST_STREAM REFUSED_STREAM) or left above a GOAWAY's
 * last-stream-id (nghttp2 closes those as REFUSED_STREAM). libcurl 7.88
 * (lib/http2.c) shows it in one of two ways, both without an answer byte
 * and without an error message (it calls no failf on them): its own
 * resend (http2_handle_stream_close -> Curl_retry_request), which xfer.c
 * refuses and marks refused_stream; or, when the refusal ends the
 * session (a GOAWAY with nothing left to do), CURLE_HTTP2 from
 * h2_process_pending_input or http2_send (should_close_session with the
 * stream's error set). Every other CURLE_HTTP2 comes with a message
 * (nghttp2_session_mem_recv failed, ...), and a stream reset with another
 * code is CURLE_HTTP2_STREAM "not closed cleanly: <error>": those may have
 * been processed and keep their class. The one case libcurl does not let
 * us tell apart: a RST_STREAM with another error code that arrives just
 * as the session ends is reported the same way.
 */
#include <string.h>

#include "curl/internal.h"
#include "util/assert.h"

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

static bool has(const char *text, const char *word)
{
    return text && strstr(text, word) != NULL;
}

/* A handshake the peer ended at the transport level (OpenSSL's and GnuTLS'
 * words for it, as libcurl passes them on). */
static bool transport_words(const char *e)
{
    return has(e, "reset by peer") || has(e, "SSL_ERROR_SYSCALL") ||
           has(e, "unexpected eof") || has(e, "Broken pipe") ||
           has(e, "The TLS connection was non-properly terminated") ||
           has(e, "Error in the push function") || has(e, "Error in the pull function");
}

static stg_net_error tls_class(CURLcode code, const char *errbuf, bool *deterministic,
                               const char **note)
{
    switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        *deterministic = true;
        *note = "TLS: the server's certificate did not verify (never retried)";
        return STG_NET_TLS;
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE:
        *deterministic = true;
        *note = "TLS: the CA certificates cannot be loaded (not retried)";
        return STG_NET_TLS;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CLIENTCERT:
        *deterministic = true;
        *note = "TLS: the client certificate or key cannot be used (not retried)";
        return STG_NET_TLS;
    case CURLE_SSL_CONNECT_ERROR:
        if (transport_words(errbuf)) {
            *note = "TLS handshake reset or closed by the peer (a transport fault, retried "
                    "when the request may repeat)";
            return STG_NET_RESET;
        }
        if (has(errbuf, "alert")) {
            *deterministic = true;
            *note = "TLS: the server refused the handshake (not retried)";
        } else {
            *note = "TLS handshake failed";
        }
        return STG_NET_TLS;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        if (!transport_words(errbuf) && has(errbuf, "alert")) {
            /* TLS 1.3: a refused or missing client certificate is an alert
             * on the first read after the handshake. */
            *deterministic = true;
            *note = "TLS: the server refused the connection (a TLS alert: a client "
                    "certificate missing or not accepted?) (not retried)";
            return STG_NET_TLS;
        }
        return stg_curl_classify(code, 1);
    default:
        return stg_curl_classify(code, 1);
    }
}

stg_net_error stg__classify_text(CURLcode code, int64_t connect_time_us, const char *errbuf,
                                 bool *deterministic, const char **note)
{
    *deterministic = false;
    *note = "";
#if LIBCURL_VERSION_NUM >= 0x080600
    if (code == CURLE_TOO_LARGE) {
        *deterministic = true;
        return STG_NET_OTHER;
    }
#endif
    /* libcurl < 8.6 reports its response-header limit as a receive error
     * with this text: the server's answer, not a broken connection. */
    if (code == CURLE_RECV_ERROR && has(errbuf, "Too large response headers")) {
        *deterministic = true;
        return STG_NET_OTHER;
    }
    stg_net_error e = stg_curl_classify(code, connect_time_us);
    if (e == STG_NET_TLS || e == STG_NET_RESET) {
        stg_net_error t = tls_class(code, errbuf, deterministic, note);
        STG_ASSERT(e == STG_NET_TLS || t == e || t == STG_NET_TLS);
        return t;
    }
    return e;
}

bool stg__never_processed(CURLcode code, long http, bool sent_h2, bool refused_stream,
                          const char *errbuf)
{
    if (http > 0 || !sent_h2)
        return false;
    if (refused_stream)
        return true;
    return code == CURLE_HTTP2 && !(errbuf && *errbuf);
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
    int64_t wait;
    if (status == 503 && stg_hints_server_wait(h, &wait)) {
        /* Unavailable until a stated time: a hold, not a congestion cut,
         * as for the engine's own limiter (stg_adaptive_on_hold). */
        sh->on_response(sh->ctx, key, ticket, false, wait > hold ? wait : hold);
        return;
    }
    sh->on_response(sh->ctx, key, ticket, stg__throttled(status, h), hold);
}
