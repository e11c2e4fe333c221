/*
 * One blocking connection to one Redis server, plain TCP or TLS, of
 * stagger's own: hiredis supplies the protocol (redisFormatCommandArgv
 * to write a command, redisReader to parse replies, freeReplyObject);
 * the socket, the timeouts and TLS (OpenSSL) are here.
 *
 * Why not redisContext: Debian 12's hiredis (0.14) has no TLS, and the
 * managed Redis services teams use require it. The reader and the
 * formatter are hiredis's public, stable API, so the wire format stays
 * hiredis's while the transport is ours. It also gives Cluster one place
 * to open a connection to another node.
 *
 * Invariants:
 *  - Every wait is bounded: connecting and the TLS handshake by the
 *    connect timeout (in total), each wait for the socket to become
 *    readable or writable during a command by the command timeout.
 *  - A write can never raise SIGPIPE in the process (plain: MSG_NOSIGNAL;
 *    TLS: SIGPIPE blocked in the calling thread and a pending one consumed
 *    before unblocking, the technique libpq uses).
 *  - TLS verifies the server's certificate chain and its name (or IP
 *    address) unless stg_redis_tls.insecure; TLS 1.2 at least.
 *  - Messages name the server ("Redis at HOST:PORT ...") and never contain
 *    a command's arguments (so never the password given to AUTH).
 *  - After an error the connection is unusable: free it.
 *
 * Not thread-safe: one user at a time (the owners lock around it).
 */
#ifndef STG_REDIS_RCONN_H
#define STG_REDIS_RCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include <stagger/redis.h>

typedef struct stg__rconn stg__rconn;

/* What went wrong on a connection. */
typedef enum stg__rconn_err {
    STG__RC_OK = 0,
    STG__RC_TIMEOUT = 1,  /* the server did not answer (or accept) in time */
    STG__RC_CLOSED = 2,   /* the server closed or reset the connection */
    STG__RC_IO = 3,       /* another socket error (refused, unreachable, ...) */
    STG__RC_TLS = 4,      /* TLS: handshake, verification, an alert */
    STG__RC_PROTOCOL = 5, /* a reply hiredis's reader could not parse */
    STG__RC_NOMEM = 6
} stg__rconn_err;

/* Connect to host:port (TLS when tls; t may be NULL: system CA store, no
 * client certificate), waiting at most connect_us in total; later waits
 * for the socket are bounded by command_us each. where is "HOST:PORT" for
 * messages (copied). NULL on failure, with *err and why (one line, e.g.
 * "cannot connect to Redis at 127.0.0.1:6379: Connection refused" or "TLS
 * handshake with Redis at h:6380 failed: certificate verify failed
 * (self-signed certificate in certificate chain)"). */
stg__rconn *stg__rconn_open(const char *host, int port, const char *where, bool tls,
                            const stg_redis_tls *t, int64_t connect_us, int64_t command_us,
                            stg__rconn_err *err, char *why, size_t why_len);

void stg__rconn_free(stg__rconn *c); /* accepts NULL */

/* Queue one command (argv[i] of lens[i] bytes; lens NULL: strlen) for the
 * next stg__rconn_reply. false: out of memory (the connection is then in
 * error). */
bool stg__rconn_append(stg__rconn *c, int argc, const char *const *argv, const size_t *lens);

/* Send what is queued, then read one reply. NULL on failure (see
 * stg__rconn_error). An error reply is a reply (type REDIS_REPLY_ERROR).
 * The caller frees the reply with freeReplyObject. */
redisReply *stg__rconn_reply(stg__rconn *c);

/* append + reply. */
redisReply *stg__rconn_command(stg__rconn *c, int argc, const char *const *argv,
                               const size_t *lens);

/* The connection's error (STG__RC_OK if none) and its text (without
 * "Redis at ...": "Connection reset by peer", "certificate required"). */
stg__rconn_err stg__rconn_error(const stg__rconn *c, const char **text);

/* Whether the node on c is a primary (ROLE answers "master"). false on an
 * I/O failure too (stg__rconn_error says). */
bool stg__rconn_is_primary(stg__rconn *c);

/* Whether OpenSSL is built in (rediss:// works). */
bool stg__rconn_have_tls(void);

#endif
