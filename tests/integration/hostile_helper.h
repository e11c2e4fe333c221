/*
 * The C integration tests' handle on stg_hostile (tests/hostile/hostile.c):
 * start it on a free loopback port with a request log, read what reached it.
 * Include after serve_helper.h (it reuses its `server` record and the
 * leftover-process list, so the teardown stops it too). Only 127.0.0.1.
 */
#ifndef STG_TEST_HOSTILE_HELPER_H
#define STG_TEST_HOSTILE_HELPER_H

#include "integration/serve_helper.h"

/* Start `$HOSTILE --mode MODE --log DIR/log ARGS...`; the port is read from
 * its first stdout line, as for stagger serve. */
static inline void hostile_start(server *s, const char *mode, const char *const *args)
{
    const char *bin = getenv("HOSTILE");
    if (!bin)
        fail_msg("HOSTILE is not set");
    proc_dir(s, "/tmp/stg_ho_XXXXXX");
    const char *argv[24] = {bin, "--mode", mode, "--log", s->log};
    int n = 5;
    for (int i = 0; args && args[i] && n < 22; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    proc_start(s, argv, "stg_hostile");
}

/* Requests that reached the server ("REQ " lines of its log). */
static inline int hostile_requests(const server *s)
{
    return log_count(s, "REQ ");
}

/* Lines of its log starting with prefix, compared case-insensitively (a
 * header: "H x-api-key:"). */
static inline int hostile_lines(const server *s, const char *prefix)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    size_t k = strlen(prefix);
    while (fgets(line, sizeof line, f))
        if (!strncasecmp(line, prefix, k))
            n++;
    fclose(f);
    return n;
}

#endif
