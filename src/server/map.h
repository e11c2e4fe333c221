/*
 * A sharded hash map from byte-string keys to void * values, shared by the
 * per-client counters (fail-first) and the idempotency store.
 *
 * Each of SRV_MAP_SHARDS shards has its own mutex, so threads that touch
 * different keys rarely contend. srv_map_acquire finds or inserts a key and
 * returns with that key's shard locked: the caller reads or writes the value
 * slot and then calls srv_map_release. Never acquire two keys at once.
 */
#ifndef STAGGER_SERVER_MAP_H
#define STAGGER_SERVER_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_MAP_SHARDS 16

typedef struct srv_map_entry srv_map_entry;

typedef struct srv_map_shard {
    pthread_mutex_t mu;
    srv_map_entry **slots; /* chains; nslots is a power of two */
    size_t nslots, count;
} srv_map_shard;

typedef struct srv_map {
    srv_map_shard shard[SRV_MAP_SHARDS];
    void (*free_value)(void *); /* called on each value at destroy; may be NULL */
} srv_map;

typedef struct srv_map_ref {
    srv_map_shard *shard; /* locked until srv_map_release */
    void **value;         /* the key's value slot; NULL for a new key */
    bool created;         /* the key was inserted by this call */
} srv_map_ref;

/* Returns 0, or -1 when out of memory. */
int srv_map_init(srv_map *m, void (*free_value)(void *));
void srv_map_destroy(srv_map *m);

/* Find key or insert it (value NULL). On success returns true with the
 * shard locked; on allocation failure returns false with nothing locked. */
bool srv_map_acquire(srv_map *m, const void *key, size_t len, srv_map_ref *ref);
void srv_map_release(srv_map_ref *ref);

/* 64-bit FNV-1a, chainable: h = srv_hash64(srv_hash64(SRV_HASH_INIT, a, n), b, m). */
#define SRV_HASH_INIT UINT64_C(0xcbf29ce484222325)
uint64_t srv_hash64(uint64_t h, const void *p, size_t n);

#endif
