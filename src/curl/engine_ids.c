/*
 * The engine's id -> request map: open addressing with a multiplicative
 * hash, grown at half full, deletion by backward shift (no tombstones).
 *
 * Invariants: every request the engine holds is in the map exactly once
 * (from submit to finish), so an id names at most one live request and a
 * finished id is never found (stg_engine_cancel answers ENOTFOUND).
 */
#include <stdlib.h>
#include <string.h>

#include "curl/engine.h"

/* ---- id map ------------------------------------------------------------ */

static size_t slot_of(uint64_t id, size_t cap)
{
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (cap - 1);
}

static bool map_grow(stg_engine *e)
{
    size_t cap = e->slot_cap ? e->slot_cap * 2 : 256;
    req **s = calloc(cap, sizeof *s);
    if (!s)
        return false;
    for (size_t i = 0; i < e->slot_cap; i++) {
        req *r = e->slots[i];
        if (!r)
            continue;
        size_t j = slot_of(r->id, cap);
        while (s[j])
            j = (j + 1) & (cap - 1);
        s[j] = r;
    }
    free(e->slots);
    e->slots = s;
    e->slot_cap = cap;
    return true;
}

bool stg__eng_map_put(stg_engine *e, req *r)
{
    if ((e->count + 1) * 2 > e->slot_cap && !map_grow(e))
        return false;
    size_t j = slot_of(r->id, e->slot_cap);
    while (e->slots[j])
        j = (j + 1) & (e->slot_cap - 1);
    e->slots[j] = r;
    e->count++;
    return true;
}

size_t stg__eng_map_find(const stg_engine *e, uint64_t id)
{
    if (!e->slot_cap)
        return SIZE_MAX;
    size_t j = slot_of(id, e->slot_cap);
    while (e->slots[j]) {
        if (e->slots[j]->id == id)
            return j;
        j = (j + 1) & (e->slot_cap - 1);
    }
    return SIZE_MAX;
}

void stg__eng_map_del(stg_engine *e, uint64_t id)
{
    size_t i = stg__eng_map_find(e, id);
    if (i == SIZE_MAX)
        return;
    size_t mask = e->slot_cap - 1;
    /* Backward-shift deletion: no tombstones. */
    for (size_t j = (i + 1) & mask; e->slots[j]; j = (j + 1) & mask) {
        size_t k = slot_of(e->slots[j]->id, e->slot_cap);
        bool movable = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            e->slots[i] = e->slots[j];
            i = j;
        }
    }
    e->slots[i] = NULL;
    e->count--;
}
