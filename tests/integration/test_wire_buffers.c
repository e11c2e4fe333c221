/*
 * libcurl's download buffer chosen by the number on the wire
 * (stg__xfer_buffer_size, src/curl/xfer.c), end to end: WIRE transfers at
 * once from one engine against stg_hostile pattern-body (byte i of a body
 * is i % 251) on 127.0.0.1. What must hold:
 *  - every body arrives whole and byte for byte, also through the 1 KiB
 *    buffers of the transfers that started with more than 256 out;
 *  - libcurl hands the write callback at most its buffer's size at once,
 *    so no more than 256 transfers ever saw a piece larger than 1 KiB
 *    (with libcurl's default for all, most of the WIRE would), and at
 *    least one did (the first ones keep the 16 KiB default).
 * Untimed: nothing here depends on how fast it runs. Needs HOSTILE.
 */
#define _GNU_SOURCE
#if defined(__has_include) && !__has_include(<curl/curl.h>)
#include <stdio.h>
int main(void);
int main(void)
{
    puts("skipped: libstagger-curl is not built (no libcurl)");
    return 77; /* SKIP_RETURN_CODE: ctest reports it skipped */
}
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_all.h"

#include <stagger/curl.h>

#include "curl/internal.h"
#include "integration/engine_helper.h"
#include "integration/hostile_helper.h"

#define WIRE 320
#define BODY 300000

typedef struct sink {
    size_t off, bad, max_piece;
    int restarts, ends;
} sink;

static int sink_fn(stg_body_op op, const void *buf, size_t len, void *data)
{
    sink *s = data;
    if (op == STG_BODY_RESTART) {
        s->restarts++;
        s->off = 0;
        return 0;
    }
    if (op == STG_BODY_END) {
        s->ends++;
        return 0;
    }
    if (op != STG_BODY_DATA)
        return 0;
    s->bad += pattern_bad(s->off, buf, len);
    s->off += len;
    if (len > s->max_piece)
        s->max_piece = len;
    return 0;
}

static void test_many_on_the_wire(void **state)
{
    (void)state;
    server a;
    char size[16];
    snprintf(size, sizeof size, "%d", BODY);
    const char *args[] = {"--size", size, NULL};
    hostile_start(&a, "pattern-body", args);
    stg_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.concurrency = WIRE;
    cfg.seed = 1;
    cfg.policy.max_attempts = 1; /* a retry would hide a bad body */
    cfg.policy.deadline_us = STG_SEC(120);
    stg_engine *e = stg_engine_new(&cfg, NULL);
    assert_non_null(e);
    static sink sinks[WIRE];
    memset(sinks, 0, sizeof sinks);
    done_tally t = {0};
    char url[128];
    for (int i = 0; i < WIRE; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/w/%d", a.port, i);
        stg_request rq;
        memset(&rq, 0, sizeof rq);
        rq.url = url;
        rq.body_sink = sink_fn;
        rq.body_sink_data = &sinks[i];
        assert_int_equal(stg_engine_submit(e, &rq, tally_done, &t, NULL), STG_OK);
    }
    assert_int_equal(stg_engine_drain(e), 0);
    stg_engine_free(e);
    server_stop(&a);
    assert_int_equal(t.done, WIRE);
    assert_int_equal(t.ok_200, WIRE);
    int large = 0;
    for (int i = 0; i < WIRE; i++) {
        assert_int_equal(sinks[i].off, BODY);
        assert_int_equal(sinks[i].bad, 0);
        assert_int_equal(sinks[i].restarts, 0);
        assert_int_equal(sinks[i].ends, 1);
        assert_true(sinks[i].max_piece <= (size_t)STG__XFER_BUF_MAX);
        large += sinks[i].max_piece > (size_t)STG__XFER_BUF_MIN;
    }
    print_message("%d transfers at once: %d saw pieces over 1 KiB (at most %d may)\n", WIRE, large,
                  STG__XFER_BUF_MANY);
    assert_true(large >= 1);
    assert_true(large <= STG__XFER_BUF_MANY);
    server_cleanup(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_many_on_the_wire, stop_leftovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
