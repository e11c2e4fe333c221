/*
 * Sharded, chained hash map (see map.h).
 *
 * Invariants: the top bits of a key's hash pick the shard and the low bits
 * its chain, so growing a shard rehashes only that shard; a shard's slots
 * and count are touched only with its mutex held; a shard doubles its
 * chains when it holds more entries than chains.
 */
#include <stdlib.h>
#include <string.h>

#include "server/map.h"

struct srv_map_entry {
    srv_map_entry *next;
    uint64_t hash;
    void *value;
    size_t len;
    unsigned char key[];
};

uint64_t srv_hash64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

/* FNV-1a mixes its low bits poorly for short keys; finish with a
 * murmur3-style avalanche before splitting the hash. */
static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

int srv_map_init(srv_map *m, void (*free_value)(void *))
{
    memset(m, 0, sizeof *m);
    m->free_value = free_value;
    for (int i = 0; i < SRV_MAP_SHARDS; i++) {
        srv_map_shard *s = &m->shard[i];
        pthread_mutex_init(&s->mu, NULL);
        s->nslots = 16;
        s->slots = calloc(s->nslots, sizeof *s->slots);
        if (!s->slots) {
            for (int j = 0; j <= i; j++) {
                free(m->shard[j].slots);
                pthread_mutex_destroy(&m->shard[j].mu);
            }
            return -1;
        }
    }
    return 0;
}

void srv_map_destroy(srv_map *m)
{
    for (int i = 0; i < SRV_MAP_SHARDS; i++) {
        srv_map_shard *s = &m->shard[i];
        for (size_t j = 0; s->slots && j < s->nslots; j++) {
            srv_map_entry *e = s->slots[j];
            while (e) {
                srv_map_entry *next = e->next;
                if (m->free_value && e->value)
                    m->free_value(e->value);
                free(e);
                e = next;
            }
        }
        free(s->slots);
        s->slots = NULL;
        pthread_mutex_destroy(&s->mu);
    }
}

static void grow(srv_map_shard *s)
{
    size_t n = s->nslots * 2;
    srv_map_entry **slots = calloc(n, sizeof *slots);
    if (!slots)
        return; /* keep the longer chains; still correct */
    for (size_t j = 0; j < s->nslots; j++) {
        srv_map_entry *e = s->slots[j];
        while (e) {
            srv_map_entry *next = e->next;
            size_t k = e->hash & (n - 1);
            e->next = slots[k];
            slots[k] = e;
            e = next;
        }
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = n;
}

bool srv_map_acquire(srv_map *m, const void *key, size_t len, srv_map_ref *ref)
{
    uint64_t h = mix(srv_hash64(SRV_HASH_INIT, key, len));
    srv_map_shard *s = &m->shard[h >> 60];
    pthread_mutex_lock(&s->mu);
    for (srv_map_entry *e = s->slots[h & (s->nslots - 1)]; e; e = e->next) {
        if (e->hash == h && e->len == len && !memcmp(e->key, key, len)) {
            ref->shard = s;
            ref->value = &e->value;
            ref->created = false;
            return true;
        }
    }
    srv_map_entry *e = malloc(sizeof *e + len);
    if (!e) {
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    e->hash = h;
    e->value = NULL;
    e->len = len;
    memcpy(e->key, key, len);
    if (s->count >= s->nslots)
        grow(s);
    size_t k = h & (s->nslots - 1);
    e->next = s->slots[k];
    s->slots[k] = e;
    s->count++;
    ref->shard = s;
    ref->value = &e->value;
    ref->created = true;
    return true;
}

void srv_map_release(srv_map_ref *ref)
{
    pthread_mutex_unlock(&ref->shard->mu);
    ref->shard = NULL;
    ref->value = NULL;
}
