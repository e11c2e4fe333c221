/*
 * --capacity N --service-time D: a server that handles N requests at once
 * and queues the rest, so that latency grows with what is queued while
 * throughput stays at N / D (the slow server a learned concurrency is for).
 *
 * The queue is virtual: N workers each know when they are next free; an
 * admitted request takes the earliest, starts at max(now, free) and is
 * answered at start + D. Its connection is parked (park.h) until then, so
 * no thread waits. FIFO order follows from taking the earliest worker
 * under one lock at arrival.
 *
 * Invariants: n == 0 means off (no delay, nothing counted); every free
 * time only grows; in_system counts requests between admit and leave and
 * max_in_system is its peak (the client's concurrency as this server saw it).
 */
#ifndef STAGGER_SERVER_CAPACITY_H
#define STAGGER_SERVER_CAPACITY_H

#include <pthread.h>
#include <stdint.h>

typedef struct srv_capacity {
    pthread_mutex_t mu;
    int n;
    int64_t service_us;
    int64_t *free_at;
    int64_t in_system, max_in_system;
} srv_capacity;

/* Returns 0, or -1 when out of memory (then off). n == 0: off. Either
 * way srv_capacity_free is to be called. */
int srv_capacity_init(srv_capacity *c, int n, int64_t service_us);
void srv_capacity_free(srv_capacity *c);
/* A request admitted at now_us: the instant its answer is due. */
int64_t srv_capacity_admit(srv_capacity *c, int64_t now_us);
/* An admitted request was answered (or its client left). */
void srv_capacity_leave(srv_capacity *c);
void srv_capacity_stats(srv_capacity *c, int64_t *in_system, int64_t *max_in_system);

#endif
