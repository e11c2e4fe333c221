/*
 * Idempotency store and keyless-duplicate counter (see idem.h).
 *
 * Invariants: a stored answer is immutable once its key's lock is
 * released; requests are compared by a 64-bit hash of method, path and body
 * (a false match needs a 64-bit collision).
 */
#include <stdlib.h>
#include <string.h>

#include "server/idem.h"

typedef struct stored {
    uint64_t req_hash;
    unsigned status;
    size_t len;
    char body[];
} stored;

int srv_idem_init(srv_idem *d)
{
    if (srv_map_init(&d->keys, free) != 0)
        return -1;
    if (srv_map_init(&d->seen, NULL) != 0) {
        srv_map_destroy(&d->keys);
        return -1;
    }
    return 0;
}

void srv_idem_destroy(srv_idem *d)
{
    srv_map_destroy(&d->keys);
    srv_map_destroy(&d->seen);
}

static uint64_t hash3(const char *a, const char *b, const void *body, size_t len)
{
    uint64_t h = srv_hash64(SRV_HASH_INIT, a, strlen(a) + 1);
    h = srv_hash64(h, b, strlen(b) + 1);
    return srv_hash64(h, body, len);
}

bool srv_idem_repeat(srv_idem *d, const char *client, const char *path, const void *body,
                     size_t len)
{
    uint64_t h = hash3(client, path, body, len);
    srv_map_ref ref;
    if (!srv_map_acquire(&d->seen, &h, sizeof h, &ref))
        return false;
    bool again = !ref.created;
    srv_map_release(&ref);
    return again;
}

static char *dup_bytes(const char *p, size_t n)
{
    char *q = malloc(n + 1);
    if (q) {
        if (n)
            memcpy(q, p, n);
        q[n] = '\0';
    }
    return q;
}

void srv_idem_answer(srv_idem *d, const char *key, const char *method, const char *path,
                     const void *body, size_t len, srv_produce_fn produce, void *arg,
                     srv_answer *out)
{
    uint64_t h = hash3(method, path, body, len);
    memset(out, 0, sizeof *out);
    srv_map_ref ref;
    if (!srv_map_acquire(&d->keys, key, strlen(key), &ref)) {
        produce(arg, out); /* out of memory: answer without storing */
        return;
    }
    stored *s = *ref.value;
    if (s) {
        if (s->req_hash == h) {
            out->status = s->status;
            out->body = dup_bytes(s->body, s->len);
            out->len = out->body ? s->len : 0;
            out->replayed = true;
        } else {
            static const char msg[] =
                "{\"error\":\"Idempotency-Key reused for a different request\"}";
            out->status = 422;
            out->body = dup_bytes(msg, sizeof msg - 1);
            out->len = out->body ? sizeof msg - 1 : 0;
        }
        srv_map_release(&ref);
        return;
    }
    produce(arg, out);
    s = malloc(sizeof *s + out->len + 1);
    if (s) {
        s->req_hash = h;
        s->status = out->status;
        s->len = out->len;
        if (out->len)
            memcpy(s->body, out->body, out->len);
        s->body[out->len] = '\0';
        *ref.value = s;
    }
    srv_map_release(&ref);
}
