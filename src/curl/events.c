/*
 * Event helpers and the fan-out sink: one on_event callback feeding several
 * sinks (logger, metrics, a -v printer).
 *
 * Invariants: an event handed to a sink is never modified by the fan-out;
 * sinks run in the order they were added.
 */
#include <string.h>

#include "curl/internal.h"

void stg__event_init(stg_event *ev, stg_event_type type, uint64_t id, int64_t now_us,
                     int64_t wall_us)
{
    memset(ev, 0, sizeof *ev);
    ev->type = type;
    ev->request_id = id;
    ev->now_us = now_us;
    ev->wall_us = wall_us;
    ev->retry_after_us = STG_UNKNOWN;
    ev->error = STG_NET_NONE;
}

const char *stg__status_class(int status, stg_net_error err)
{
    if (err != STG_NET_NONE || status <= 0)
        return "error";
    if (status == 429)
        return "quota";
    if (status == 503)
        return "outage";
    if (status < 200)
        return "1xx";
    if (status < 300)
        return "2xx";
    if (status < 400)
        return "3xx";
    if (status < 500)
        return "4xx";
    return "5xx";
}

const char *stg_event_type_name(stg_event_type t)
{
    switch (t) {
    case STG_EVENT_ATTEMPT_START: return "attempt_start";
    case STG_EVENT_ATTEMPT_END: return "attempt_end";
    case STG_EVENT_WAIT: return "wait";
    case STG_EVENT_GIVE_UP: return "give_up";
    case STG_EVENT_SUCCESS: return "success";
    case STG_EVENT_BREAKER: return "breaker";
    case STG_EVENT_LIMITER_WAIT: return "limiter_wait";
    case STG_EVENT_WAITED: return "waited";
    }
    return "unknown";
}

void stg_event_fanout_cb(const stg_event *ev, void *fanout)
{
    const stg_event_fanout *f = fanout;
    if (!f)
        return;
    for (int i = 0; i < f->n && i < 4; i++)
        if (f->fn[i])
            f->fn[i](ev, f->data[i]);
}
