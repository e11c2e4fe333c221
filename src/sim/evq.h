/*
 * Event queue: a calendar queue of 64-bit keys.
 *
 * An event is one integer: key = time << 26 | who, time in virtual
 * microseconds (0 <= time < 2^38, about 76 hours; later times are clamped
 * to SIM_EVQ_TMAX, past every scenario's horizon) and who < 2^26 (the
 * scenario encodes the client and the event kind in it). Events come out in
 * key order: earlier time first, equal times by `who`. So the order of
 * simultaneous events is a fixed function of the events themselves, never
 * of how they were inserted, and runs are reproducible bit for bit.
 *
 * Structure. Time is cut into slices of slice_us. The events of the
 * current slice are sorted once (radix sort) into a run that is consumed in
 * order; an event pushed into the current slice after that goes to a small
 * 4-ary heap beside the run ("side"), and the earliest is the smaller of the
 * two heads. Events of the next SIM_EVQ_SLOTS - 1 slices are appended,
 * unsorted, to one array per slice (a ring); later events go to a 4-ary heap
 * ("far"). When run and side are used up, the next non-empty slice (its
 * ring array, taken over without copying, plus the far events of that slice)
 * becomes the run. A retry storm schedules each client's next attempt
 * hundreds of milliseconds ahead: in one big heap every new key would sink
 * through all levels (a cache miss each); here it is an append, and the
 * ordering work is a linear-time sort of memory that is read in order.
 * The total order is the same as one big heap's.
 *
 * Memory: arrays grow by doubling and are kept when drained, so once warm
 * the hot loop never allocates. Not thread-safe; one queue per run.
 */
#ifndef STAGGER_SIM_EVQ_H
#define STAGGER_SIM_EVQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_EVQ_WHO_BITS 26
#define SIM_EVQ_WHO_MAX ((UINT32_C(1) << SIM_EVQ_WHO_BITS) - 1)
#define SIM_EVQ_TMAX ((INT64_C(1) << 38) - 1)
#define SIM_EVQ_SLOTS 4096 /* ring slots (a power of two) */
#define SIM_EVQ_DEFAULT_SLICE_US 1000

typedef uint64_t sim_ev;

/* A growable array of events; as a heap, 4-ary with the minimum at [0]. */
typedef struct sim_evarr {
    sim_ev *v;
    size_t n, cap;
} sim_evarr;

typedef struct sim_evq {
    sim_evarr run;           /* sorted events of slice `cur`, from `head` */
    size_t head;
    sim_evarr side;          /* heap: pushed into slice `cur` since sorting */
    sim_evarr tmp;           /* scratch of the radix sort */
    sim_evarr far;           /* heap: events at least SLOTS slices ahead */
    sim_evarr *ring;         /* [SIM_EVQ_SLOTS] unsorted, by slice % SLOTS */
    size_t ring_n;           /* events in the ring */
    int64_t slice_us;
    int64_t cur;             /* current slice number */
    size_t n;                /* events in all */
    bool oom;                /* a push failed: the queue lost an event */
} sim_evq;

/* Set up an empty queue with room for cap events in the current slice and
 * slices slice_us long (<= 0: SIM_EVQ_DEFAULT_SLICE_US). Returns 0, or
 * -1 when out of memory (then sim_evq_free is still safe). */
int sim_evq_init(sim_evq *q, size_t cap, int64_t slice_us);
/* Free everything. Accepts a zeroed queue. */
void sim_evq_free(sim_evq *q);
/* Bytes held by the queue's arrays. */
size_t sim_evq_bytes(const sim_evq *q);

static inline sim_ev sim_ev_make(int64_t t, uint32_t who)
{
    if (t < 0)
        t = 0;
    if (t > SIM_EVQ_TMAX)
        t = SIM_EVQ_TMAX;
    return (uint64_t)t << SIM_EVQ_WHO_BITS | (who & SIM_EVQ_WHO_MAX);
}

static inline int64_t sim_ev_time(sim_ev e)
{
    return (int64_t)(e >> SIM_EVQ_WHO_BITS);
}

static inline uint32_t sim_ev_who(sim_ev e)
{
    return (uint32_t)(e & SIM_EVQ_WHO_MAX);
}

static inline bool sim_evq_empty(const sim_evq *q)
{
    return q->n == 0;
}

/* Insert an event. Returns 0, or -1 when out of memory. */
int sim_evq_push(sim_evq *q, int64_t t, uint32_t who);

/* The earliest event, left in the queue: returns false when empty. May
 * move the next slice into the front (hence not const). */
bool sim_evq_peek(sim_evq *q, sim_ev *e);

/* Remove the earliest event; call only right after a successful peek. */
void sim_evq_pop(sim_evq *q);

/* Pop, then push (one sift when the new event falls in the current
 * slice). Call only right after a successful peek. Returns 0 or -1. */
int sim_evq_replace_top(sim_evq *q, int64_t t, uint32_t who);

#endif
