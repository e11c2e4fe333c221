/*
 * Calendar event queue (see evq.h).
 *
 * Invariants: run[head..] is sorted and, with side, holds exactly the
 * events of slices <= cur; every event of ring slot j has a slice s with
 * cur < s < cur + SLOTS and s % SLOTS == j; every event of `far` has slice
 * > cur (it may be closer than SLOTS by now: both the ring slot and the far
 * heap are drained when a slice becomes current). Hence the smaller of
 * run[head] and side[0] is the minimum of all.
 */
#include <stdlib.h>
#include <string.h>

#include "evq.h"
#include "util/grow.h"

static int arr_reserve(sim_evarr *a, size_t need)
{
    return stg__reserve(&a->v, &a->cap, need, sizeof *a->v, 16) ? 0 : -1;
}

static int arr_append(sim_evarr *a, sim_ev e)
{
    if (a->n == a->cap && arr_reserve(a, a->n + 1) != 0)
        return -1;
    a->v[a->n++] = e;
    return 0;
}

/* ---- 4-ary heap on a sim_evarr ----------------------------------------- */

static void heap_sift_down(sim_evarr *a, size_t i, sim_ev e)
{
    sim_ev *h = a->v;
    size_t n = a->n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c + 4 <= n) {
            size_t b01 = h[c + 1] < h[c] ? c + 1 : c;
            size_t b23 = h[c + 3] < h[c + 2] ? c + 3 : c + 2;
            size_t best = h[b23] < h[b01] ? b23 : b01;
            if (h[best] >= e)
                break;
            h[i] = h[best];
            i = best;
            continue;
        }
        if (c < n) {
            size_t best = c;
            for (size_t k = c + 1; k < n; k++)
                if (h[k] < h[best])
                    best = k;
            if (h[best] < e) {
                h[i] = h[best];
                i = best;
            }
        }
        break;
    }
    h[i] = e;
}

static int heap_push(sim_evarr *a, sim_ev e)
{
    if (a->n == a->cap && arr_reserve(a, a->n + 1) != 0)
        return -1;
    size_t i = a->n++;
    sim_ev *h = a->v;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (h[p] <= e)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
    return 0;
}

static void heap_pop(sim_evarr *a)
{
    sim_ev last = a->v[--a->n];
    if (a->n > 0)
        heap_sift_down(a, 0, last);
}

/* ---- sorting a slice ---------------------------------------------------- */

#define RADIX_BITS 11
#define RADIX (1u << RADIX_BITS)

static void insertion_sort(sim_ev *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        sim_ev x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Quicksort (median of three, insertion sort below 24), recursing into the
 * smaller part so the depth stays below log2(n). */
static void quick_sort(sim_ev *v, size_t n)
{
    while (n >= 24) {
        size_t m = n / 2;
        if (v[m] < v[0]) {
            sim_ev t = v[m]; v[m] = v[0]; v[0] = t;
        }
        if (v[n - 1] < v[0]) {
            sim_ev t = v[n - 1]; v[n - 1] = v[0]; v[0] = t;
        }
        if (v[n - 1] < v[m]) {
            sim_ev t = v[n - 1]; v[n - 1] = v[m]; v[m] = t;
        }
        sim_ev pivot = v[m];
        size_t i = 0, j = n - 1;
        for (;;) {
            while (v[i] < pivot)
                i++;
            while (pivot < v[j])
                j--;
            if (i >= j)
                break;
            sim_ev t = v[i]; v[i] = v[j]; v[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= pivot <= [j + 1, n) */
        size_t left = j + 1;
        if (left < n - left) {
            quick_sort(v, left);
            v += left;
            n -= left;
        } else {
            quick_sort(v + left, n - left);
            n = left;
        }
    }
    insertion_sort(v, n);
}

/* Sort a->v[0..n) ascending: a quicksort for up to a few thousand keys
 * (the usual slice), else an LSD radix sort of key - min over the bits
 * where keys differ (passes in which every key has the same digit are
 * skipped). tmp is scratch of the same size. */
static int sort_keys(sim_evarr *a, sim_evarr *tmp)
{
    size_t n = a->n;
    sim_ev *v = a->v;
    if (n < 4096) {
        quick_sort(v, n);
        return 0;
    }
    if (arr_reserve(tmp, n) != 0)
        return -1;
    sim_ev lo = v[0], hi = v[0];
    for (size_t i = 1; i < n; i++) {
        if (v[i] < lo)
            lo = v[i];
        if (v[i] > hi)
            hi = v[i];
    }
    uint64_t span = hi - lo;
    int bits = 0;
    while (bits < 64 && (span >> bits) != 0)
        bits++;
    sim_ev *src = v, *dst = tmp->v;
    size_t count[RADIX];
    for (int shift = 0; shift < bits; shift += RADIX_BITS) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[((src[i] - lo) >> shift) & (RADIX - 1)]++;
        if (count[((src[0] - lo) >> shift) & (RADIX - 1)] == n)
            continue; /* one digit for all: nothing to do */
        size_t sum = 0;
        for (size_t d = 0; d < RADIX; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[((src[i] - lo) >> shift) & (RADIX - 1)]++] = src[i];
        sim_ev *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) {
        /* the sorted keys are in tmp: swap the buffers */
        sim_ev *t = a->v;
        size_t c = a->cap;
        a->v = tmp->v;
        a->cap = tmp->cap;
        tmp->v = t;
        tmp->cap = c;
    }
    return 0;
}

/* ---- the queue ---------------------------------------------------------- */

int sim_evq_init(sim_evq *q, size_t cap, int64_t slice_us)
{
    memset(q, 0, sizeof *q);
    q->slice_us = slice_us > 0 ? slice_us : SIM_EVQ_DEFAULT_SLICE_US;
    q->ring = calloc(SIM_EVQ_SLOTS, sizeof *q->ring);
    if (!q->ring || arr_reserve(&q->run, cap ? cap : 1) != 0)
        return -1;
    return 0;
}

void sim_evq_free(sim_evq *q)
{
    if (q->ring)
        for (size_t j = 0; j < SIM_EVQ_SLOTS; j++)
            free(q->ring[j].v);
    free(q->ring);
    free(q->run.v);
    free(q->side.v);
    free(q->tmp.v);
    free(q->far.v);
    memset(q, 0, sizeof *q);
}

size_t sim_evq_bytes(const sim_evq *q)
{
    size_t b = (q->run.cap + q->side.cap + q->tmp.cap + q->far.cap) * sizeof(sim_ev);
    if (q->ring) {
        b += SIM_EVQ_SLOTS * sizeof *q->ring;
        for (size_t j = 0; j < SIM_EVQ_SLOTS; j++)
            b += q->ring[j].cap * sizeof(sim_ev);
    }
    return b;
}

static int64_t slice_of(const sim_evq *q, sim_ev e)
{
    return sim_ev_time(e) / q->slice_us;
}

static int place(sim_evq *q, sim_ev e)
{
    int64_t s = slice_of(q, e);
    if (s <= q->cur)
        return heap_push(&q->side, e);
    if (s < q->cur + SIM_EVQ_SLOTS) {
        if (arr_append(&q->ring[(size_t)s & (SIM_EVQ_SLOTS - 1)], e) != 0)
            return -1;
        q->ring_n++;
        return 0;
    }
    return heap_push(&q->far, e);
}

int sim_evq_push(sim_evq *q, int64_t t, uint32_t who)
{
    if (place(q, sim_ev_make(t, who)) != 0) {
        q->oom = true;
        return -1;
    }
    q->n++;
    return 0;
}

/* Make the next non-empty slice current (run and side are empty). */
static int advance(sim_evq *q)
{
    q->run.n = 0;
    q->head = 0;
    while (q->run.n == 0) {
        if (q->ring_n == 0) {
            if (q->far.n == 0)
                return 0;
            int64_t s = slice_of(q, q->far.v[0]);
            q->cur = s > q->cur ? s : q->cur + 1;
        } else {
            q->cur++;
        }
        sim_evarr *a = &q->ring[(size_t)q->cur & (SIM_EVQ_SLOTS - 1)];
        if (a->n > 0) {
            /* take the slot's array over; the slot gets the empty run's */
            sim_evarr t = q->run;
            q->run = *a;
            *a = t;
            a->n = 0;
            q->ring_n -= q->run.n;
        }
        while (q->far.n > 0 && slice_of(q, q->far.v[0]) <= q->cur) {
            if (arr_append(&q->run, q->far.v[0]) != 0)
                return -1;
            heap_pop(&q->far);
        }
    }
    return sort_keys(&q->run, &q->tmp);
}

/* Whether the earliest event is run[head] (else side[0]); some event must
 * be in run or side. */
static bool min_in_run(const sim_evq *q)
{
    return q->head < q->run.n && (q->side.n == 0 || q->run.v[q->head] < q->side.v[0]);
}

bool sim_evq_peek(sim_evq *q, sim_ev *e)
{
    if (q->n == 0)
        return false;
    if (q->head == q->run.n && q->side.n == 0 && (advance(q) != 0 || q->run.n == 0)) {
        q->oom = true;
        return false;
    }
    *e = min_in_run(q) ? q->run.v[q->head] : q->side.v[0];
    return true;
}

void sim_evq_pop(sim_evq *q)
{
    if (min_in_run(q))
        q->head++;
    else
        heap_pop(&q->side);
    q->n--;
}

int sim_evq_replace_top(sim_evq *q, int64_t t, uint32_t who)
{
    sim_ev e = sim_ev_make(t, who);
    if (!min_in_run(q) && slice_of(q, e) <= q->cur) {
        heap_sift_down(&q->side, 0, e);
        return 0;
    }
    sim_evq_pop(q);
    return sim_evq_push(q, t, who);
}
