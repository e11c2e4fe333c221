/*
 * --latency (see latency.h): park each request once for the configured
 * time before it is decided.
 */
#include "server/latency.h"

bool srv_latency_hold(stg_srv *s, struct MHD_Connection *c, bool *done)
{
    if (s->cfg.latency_us <= 0 || *done)
        return false;
    *done = true;
    return srv_park_conn(&s->park, c, srv_mono_us() + s->cfg.latency_us);
}
