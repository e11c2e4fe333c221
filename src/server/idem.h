/*
 * Idempotency: replaying the first answer to a repeated POST or PATCH with
 * the same Idempotency-Key, and counting POST/PATCH requests repeated
 * WITHOUT a key (same client id, path and body seen before) as
 * duplicates_without_key: the requests a careless client re-sends although
 * the server may already have acted on them.
 *
 * Invariants: only answers produced by a route (after every gate admitted
 * the request) are stored, never a 429/503 refusal or a fault; a key is
 * bound to its first request (method, path, body): reusing it for a
 * different request answers 422 and stores nothing. Producing the first
 * answer happens under the key's lock, so concurrent repeats wait for it
 * and then replay it. Everything is kept until the server stops.
 */
#ifndef STAGGER_SERVER_IDEM_H
#define STAGGER_SERVER_IDEM_H

#include <stdbool.h>
#include <stddef.h>

#include "server/map.h"

/* An answer: status and a malloc'd body owned by whoever holds it. */
typedef struct srv_answer {
    unsigned status;
    char *body;
    size_t len;
    bool replayed; /* copied from an earlier request with the same key */
} srv_answer;

typedef void (*srv_produce_fn)(void *arg, srv_answer *out);

typedef struct srv_idem {
    srv_map keys; /* Idempotency-Key -> stored answer */
    srv_map seen; /* hash(client, path, body) of keyless POST/PATCH */
} srv_idem;

int srv_idem_init(srv_idem *d);
void srv_idem_destroy(srv_idem *d);

/* A keyless POST/PATCH: record it; true when the same (client, path, body)
 * was seen before. Thread-safe. */
bool srv_idem_repeat(srv_idem *d, const char *client, const char *path, const void *body,
                     size_t len);

/* A POST/PATCH with a key: the first time, produce(arg, out) and store a
 * copy; for a repeat of the same request, a copy of the stored answer with
 * out->replayed set; for a different request with the same key, 422.
 * Thread-safe. */
void srv_idem_answer(srv_idem *d, const char *key, const char *method, const char *path,
                     const void *body, size_t len, srv_produce_fn produce, void *arg,
                     srv_answer *out);

#endif
