/*
 * The engine's per-key state: a token bucket (FIXED) or adaptive limiter
 * (ADAPTIVE), a retry budget and a circuit breaker, created on first use
 * of a key. Keys are the URL's host[:port] by default, or the request's
 * limit_key, so several hosts can share one limit.
 *
 * Bounded (stg_engine_config.max_hosts, 1024 by default): past the cap a
 * new key first forgets the least recently used host that no request in
 * the engine holds (refs), as the quotas forget theirs (core/quota.c), so
 * a forward proxy that sees endless hosts keeps a bounded table. A
 * forgotten key that comes back starts afresh: its limiter relearns, its
 * breaker is closed.
 *
 * Invariants: a key maps to at most one host at a time; hosts never move
 * in memory; a host is forgotten only inside stg__hosts_get (a submit),
 * and one with refs > 0 is never freed before the engine is;
 * a host's primitives are initialised from the engine config exactly once
 * and destroyed exactly once; every host is in the LRU list once.
 *
 * The servers' quotas (stg_engine_config.quotas) are not per host here but
 * one stg_quota for the table, keyed by the same key: it has its own
 * bounded per-key map (include/stagger/quota.h), so a host forgotten there
 * is relearned from the next answer.
 */
#include <stdlib.h>
#include <string.h>

#include "curl/internal.h"
#include "util/assert.h"
#include "util/fnv.h"

void stg__hosts_init(stg__hosts *t)
{
    t->b = NULL;
    t->cap = t->n = 0;
    t->max = 0;
    t->lru.head = t->lru.tail = NULL;
    t->quota = NULL;
}

stg_quota *stg__hosts_quota(stg__hosts *t)
{
    if (!t->quota)
        t->quota = stg_quota_new(NULL, NULL);
    return t->quota;
}

static void host_free(stg__host *h)
{
    if (h->has_breaker)
        stg_breaker_destroy(&h->breaker);
    if (h->has_adaptive)
        stg_adaptive_destroy(&h->adaptive);
    stg_cost_model_free(h->cost_model);
    if (h->pace_fq)
        stg__fq_free(h->pace_fq);
    if (h->conc_fq)
        stg__fq_free(h->conc_fq);
    free(h->pace_fq);
    free(h->conc_fq);
    for (stg__quota_q *q = h->quota_qs, *next; q; q = next) {
        next = q->next;
        stg__eng_quota_q_free(q);
    }
    free(h->key);
    free(h);
}

void stg__hosts_free(stg__hosts *t)
{
    for (size_t i = 0; i < t->cap; i++) {
        stg__host *h = t->b[i];
        while (h) {
            stg__host *next = h->next;
            host_free(h);
            h = next;
        }
    }
    free(t->b);
    stg_quota_free(t->quota);
    stg__hosts_init(t);
}

static void on_breaker_change(void *data, stg_breaker_state from, stg_breaker_state to,
                              int64_t now_us)
{
    stg__host *h = data;
    if (h->n_changes < (int)(sizeof h->changes / sizeof h->changes[0]))
        h->changes[h->n_changes++] = (stg__host_change){from, to, now_us};
    if (h->user_change)
        h->user_change(h->user_data, from, to, now_us);
}

/* Set up h's primitives from cfg. Returns STG_OK or an error. */
static int host_setup(stg__host *h, const stg_engine_config *cfg, int64_t now_us)
{
    if (cfg->limiter == STG_LIMITER_FIXED) {
        stg_bucket_config bc = {.rate = cfg->rate, .burst = cfg->burst};
        if (stg_bucket_init(&h->bucket, &bc, now_us) != STG_OK)
            return STG_EINVAL;
        h->has_bucket = true;
    } else if (cfg->limiter == STG_LIMITER_ADAPTIVE) {
        int rc = stg_adaptive_init(&h->adaptive, &cfg->adaptive, now_us);
        if (rc != STG_OK)
            return rc;
        h->has_adaptive = true;
    } else if (cfg->limiter != STG_LIMITER_NONE) {
        return STG_EINVAL;
    }
    if (cfg->budget) {
        if (stg_budget_init(&h->budget, &cfg->budget_config) != STG_OK)
            return STG_EINVAL;
        h->has_budget = true;
    }
    if (cfg->breaker) {
        stg_breaker_config bc = cfg->breaker_config;
        h->user_change = bc.on_change;
        h->user_data = bc.data;
        bc.on_change = on_breaker_change;
        bc.data = h;
        int rc = stg_breaker_init(&h->breaker, &bc);
        if (rc != STG_OK)
            return rc;
        h->has_breaker = true;
    }
    return stg__eng_conc_host_init(h, cfg, now_us);
}

int stg__hosts_check_config(const stg_engine_config *cfg, int64_t now_us)
{
    stg__host *h = calloc(1, sizeof *h);
    if (!h)
        return STG_ENOMEM;
    int rc = host_setup(h, cfg, now_us);
    host_free(h);
    return rc;
}

static bool grow(stg__hosts *t)
{
    size_t cap = t->cap ? t->cap * 2 : 16;
    stg__host **b = calloc(cap, sizeof *b);
    if (!b)
        return false;
    for (size_t i = 0; i < t->cap; i++) {
        stg__host *h = t->b[i];
        while (h) {
            stg__host *next = h->next;
            size_t j = (size_t)(stg__fnv1a64(h->key) & (cap - 1));
            h->next = b[j];
            b[j] = h;
            h = next;
        }
    }
    free(t->b);
    t->b = b;
    t->cap = cap;
    return true;
}

/* Forget the least recently used host no request holds, if any. */
static void forget_one(stg__hosts *t)
{
    stg__link *l = t->lru.tail;
    while (l && STG__OWNER(l, stg__host, lru)->refs > 0)
        l = l->prev;
    if (!l)
        return;
    stg__host *h = STG__OWNER(l, stg__host, lru);
    STG_ASSERT(!h->pace_head && (!h->pace_fq || !h->pace_fq->n) && (!h->conc_fq || !h->conc_fq->n) &&
               !h->quota_qs && h->conc_out == 0 && h->q_alive == 0);
    stg__host **pp = &t->b[stg__fnv1a64(h->key) & (t->cap - 1)];
    while (*pp != h)
        pp = &(*pp)->next;
    *pp = h->next;
    stg__list_unlink(&t->lru, &h->lru);
    host_free(h);
    t->n--;
}

stg__host *stg__hosts_get(stg__hosts *t, const char *key, const stg_engine_config *cfg,
                          int64_t now_us, int *err)
{
    if (t->cap) {
        for (stg__host *h = t->b[stg__fnv1a64(key) & (t->cap - 1)]; h; h = h->next)
            if (!strcmp(h->key, key)) {
                if (t->lru.head != &h->lru) {
                    stg__list_unlink(&t->lru, &h->lru);
                    stg__list_push_front(&t->lru, &h->lru);
                }
                return h;
            }
    }
    if (t->n >= (t->max ? t->max : STG__DEFAULT_MAX_HOSTS))
        forget_one(t);
    if (t->n + 1 > t->cap && !grow(t)) {
        *err = STG_ENOMEM;
        return NULL;
    }
    stg__host *h = calloc(1, sizeof *h);
    if (!h || !(h->key = strdup(key))) {
        free(h);
        *err = STG_ENOMEM;
        return NULL;
    }
    int rc = host_setup(h, cfg, now_us);
    if (rc != STG_OK) {
        host_free(h);
        *err = rc;
        return NULL;
    }
    size_t j = (size_t)(stg__fnv1a64(key) & (t->cap - 1));
    h->next = t->b[j];
    t->b[j] = h;
    stg__list_push_front(&t->lru, &h->lru);
    t->n++;
    return h;
}
