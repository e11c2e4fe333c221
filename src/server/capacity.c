/*
 * The virtual worker pool of --capacity (see capacity.h). A linear scan of
 * N free times per request: N is a test server's capacity (tens), far
 * cheaper than the request it models.
 */
#include <stdlib.h>

#include "server/capacity.h"
#include "util/assert.h"

int srv_capacity_init(srv_capacity *c, int n, int64_t service_us)
{
    c->n = n > 0 ? n : 0;
    c->service_us = service_us > 0 ? service_us : 0;
    c->free_at = NULL;
    c->in_system = c->max_in_system = 0;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        abort(); /* only on a system out of resources: nothing to free yet */
    if (c->n && !(c->free_at = calloc((size_t)c->n, sizeof *c->free_at))) {
        c->n = 0; /* the mutex stays: srv_capacity_free is always safe */
        return -1;
    }
    return 0;
}

void srv_capacity_free(srv_capacity *c)
{
    free(c->free_at);
    c->free_at = NULL;
    pthread_mutex_destroy(&c->mu);
}

int64_t srv_capacity_admit(srv_capacity *c, int64_t now_us)
{
    if (!c->n)
        return now_us;
    pthread_mutex_lock(&c->mu);
    int k = 0;
    for (int i = 1; i < c->n; i++)
        if (c->free_at[i] < c->free_at[k])
            k = i;
    int64_t start = c->free_at[k] > now_us ? c->free_at[k] : now_us;
    int64_t due = start + c->service_us;
    STG_ASSERT(due >= c->free_at[k]);
    c->free_at[k] = due;
    if (++c->in_system > c->max_in_system)
        c->max_in_system = c->in_system;
    pthread_mutex_unlock(&c->mu);
    return due;
}

void srv_capacity_leave(srv_capacity *c)
{
    if (!c->n)
        return;
    pthread_mutex_lock(&c->mu);
    c->in_system--;
    STG_ASSERT(c->in_system >= 0);
    pthread_mutex_unlock(&c->mu);
}

void srv_capacity_stats(srv_capacity *c, int64_t *in_system, int64_t *max_in_system)
{
    pthread_mutex_lock(&c->mu);
    *in_system = c->in_system;
    *max_in_system = c->max_in_system;
    pthread_mutex_unlock(&c->mu);
}
