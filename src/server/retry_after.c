/*
 * Retry-After on responses (see retry_after.h).
 *
 * Invariants: the header is added at most once per response; the wall
 * clock (CLOCK_REALTIME) is read only to build the date form.
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include <stagger/hints.h>

#include "server/retry_after.h"

int64_t srv_ceil_seconds(int64_t us)
{
    if (us <= 0)
        return 0;
    return (us + 999999) / 1000000;
}

int64_t srv_retry_after_add(struct MHD_Response *r, stg_srv_retry_after mode, int64_t wait_us,
                            int64_t min_s)
{
    if (mode == STG_SRV_RA_NONE)
        return -1;
    if (wait_us < min_s * 1000000)
        wait_us = min_s * 1000000;
    char val[64];
    int64_t secs = srv_ceil_seconds(wait_us);
    if (mode == STG_SRV_RA_DATE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wall_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        int64_t at = srv_ceil_seconds(wall_us + wait_us);
        if (stg_http_date_format(at, val, sizeof val) == 0)
            snprintf(val, sizeof val, "%" PRId64, secs);
    } else {
        snprintf(val, sizeof val, "%" PRId64, secs);
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, val);
    return secs;
}
