/*
 * Slow bodies (see slowbody.h).
 *
 * Invariants: piece i (0-based, of n) covers bytes [i * piece, (i + 1) *
 * piece) and is released at start + duration * i / (n - 1); the reader is
 * only asked for bytes below len (MHD knows the size).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "server/slowbody.h"

#define SLOW_PIECES 8

typedef struct slow {
    srv_park *park;
    struct MHD_Connection *conn;
    char *body;
    size_t len, piece, pieces;
    int64_t start_us, duration_us;
} slow;

static ssize_t slow_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    slow *s = cls;
    if (pos >= s->len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t idx = (size_t)pos / s->piece;
    int64_t due = s->start_us;
    if (s->pieces > 1)
        due += s->duration_us * (int64_t)idx / (int64_t)(s->pieces - 1);
    if (srv_mono_us() < due) {
        if (!srv_park_conn(s->park, s->conn, due))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        return 0;
    }
    size_t end = (idx + 1) * s->piece;
    if (end > s->len)
        end = s->len;
    size_t n = end - (size_t)pos;
    if (n > max)
        n = max;
    memcpy(buf, s->body + pos, n);
    return (ssize_t)n;
}

static void slow_free(void *cls)
{
    slow *s = cls;
    free(s->body);
    free(s);
}

struct MHD_Response *srv_slow_response(srv_park *park, struct MHD_Connection *c, char *body,
                                       size_t len, int64_t duration_us, int64_t now_us)
{
    slow *s = malloc(sizeof *s);
    if (!s) {
        free(body);
        return NULL;
    }
    s->park = park;
    s->conn = c;
    s->body = body;
    s->len = len;
    s->pieces = len < SLOW_PIECES ? (len ? len : 1) : SLOW_PIECES;
    s->piece = len ? (len + s->pieces - 1) / s->pieces : 1;
    s->pieces = len ? (len + s->piece - 1) / s->piece : 1; /* the last piece is full time */
    s->start_us = now_us;
    s->duration_us = duration_us;
    struct MHD_Response *r = MHD_create_response_from_callback(len, 1024, slow_read, s, slow_free);
    if (!r)
        slow_free(s);
    return r;
}
