/*
 * The engine's timers: a binary min-heap of wake times. Every wait of the
 * engine (backoff, Retry-After, limiter, breaker) is one entry; the loop
 * sleeps in epoll_wait (engine.c) until the earliest one, so no thread ever
 * sleeps per request.
 *
 * Invariants: v[0..n) is a heap ordered by (due_us, seq); every entry's
 * *index equals its position; seq is unique and increasing, so entries with
 * the same due time fire in insertion order.
 */
#include <stdlib.h>

#include "curl/internal.h"
#include "util/grow.h"

static bool before(const stg__timer *a, const stg__timer *b)
{
    return a->due_us < b->due_us || (a->due_us == b->due_us && a->seq < b->seq);
}

static void place(stg__heap *h, size_t i, stg__timer t)
{
    h->v[i] = t;
    *t.index = i;
}

static void sift_up(stg__heap *h, size_t i)
{
    stg__timer t = h->v[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&t, &h->v[parent]))
            break;
        place(h, i, h->v[parent]);
        i = parent;
    }
    place(h, i, t);
}

static void sift_down(stg__heap *h, size_t i)
{
    stg__timer t = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &t))
            break;
        place(h, i, h->v[c]);
        i = c;
    }
    place(h, i, t);
}

void stg__heap_init(stg__heap *h)
{
    h->v = NULL;
    h->n = h->cap = 0;
    h->next_seq = 0;
}

void stg__heap_free(stg__heap *h)
{
    for (size_t i = 0; i < h->n; i++)
        *h->v[i].index = STG__NOT_IN_HEAP;
    free(h->v);
    stg__heap_init(h);
}

bool stg__heap_push(stg__heap *h, int64_t due_us, void *item, size_t *index)
{
    if (!STG__GROW(h->v, h->n, h->cap, 64))
        return false;
    stg__timer t = {due_us, h->next_seq++, item, index};
    h->n++;
    place(h, h->n - 1, t);
    sift_up(h, h->n - 1);
    return true;
}

const stg__timer *stg__heap_top(const stg__heap *h)
{
    return h->n ? &h->v[0] : NULL;
}

void stg__heap_advance(stg__heap *h, size_t i, int64_t due_us)
{
    if (i >= h->n || due_us >= h->v[i].due_us)
        return;
    h->v[i].due_us = due_us;
    sift_up(h, i);
}

void stg__heap_remove(stg__heap *h, size_t i)
{
    if (i >= h->n)
        return;
    *h->v[i].index = STG__NOT_IN_HEAP;
    h->n--;
    if (i == h->n)
        return;
    place(h, i, h->v[h->n]);
    if (i > 0 && before(&h->v[i], &h->v[(i - 1) / 2]))
        sift_up(h, i);
    else
        sift_down(h, i);
}
