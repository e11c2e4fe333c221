/*
 * The shape of a retry loop on libstagger, with the transport left out: a
 * made-up server answers 429 with Retry-After twice, then 200. Replace
 * fake_request() with your HTTP call; everything else stays.
 *
 * Build (installed): cc retry_loop.c $(pkg-config --cflags --libs stagger)
 */
#include <stdio.h>
#include <time.h>

#include <stagger/stagger.h>

/* A stand-in for the HTTP request: returns the status and fills the
 * response's hints from its headers. */
static int fake_request(int attempt, stg_hints *hints, int64_t wall_now_us)
{
    stg_hints_init(hints);
    if (attempt < 3) {
        const char *h = "Retry-After: 2";
        stg_hints_header_line(hints, h, 14, wall_now_us);
        return 429;
    }
    return 200;
}

static int64_t now_us(clockid_t which)
{
    struct timespec ts;
    clock_gettime(which, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(void)
{
    stg_policy policy;
    if (stg_policy_preset(&policy, "default") != STG_OK)
        return 1;
    stg_rng rng;
    stg_rng_seed(&rng, (uint64_t)now_us(CLOCK_REALTIME)); /* seed once per process */

    stg_retry_state state = {.attempts = 0, .start_us = now_us(CLOCK_MONOTONIC)};
    int64_t virtual_now = state.start_us; /* the example does not really sleep */
    for (;;) {
        state.attempts++;
        stg_hints hints;
        int status = fake_request(state.attempts, &hints, now_us(CLOCK_REALTIME));
        stg_outcome outcome = {.status = status, .method = STG_METHOD_GET, .hints = &hints};
        stg_decision d;
        stg_decide(&policy, &state, &outcome, virtual_now, &rng, &d);
        printf("attempt %d: status %d -> %s", state.attempts, status, stg_action_name(d.action));
        if (d.action != STG_ACTION_RETRY) {
            printf(" (%s)\n", stg_reason_message(d.reason));
            return d.action == STG_ACTION_SUCCESS ? 0 : 1;
        }
        printf(" in %.0f ms (server asked %.0f ms)\n", d.wait_us / 1e3, d.server_wait_us / 1e3);
        virtual_now += d.wait_us; /* a real client sleeps or sets a timer here */
        stg_retry_state_note(&state, &d);
    }
}
