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
    memset(s, 0, sizeof *s);
    const char *bin = getenv("HOSTILE");
    if (!bin)
        fail_msg("HOSTILE is not set");
    snprintf(s->dir, sizeof s->dir, "/tmp/stg_ho_XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
    char out[96];
    snprintf(out, sizeof out, "%s/out", s->dir);
    const char *argv[24] = {bin, "--mode", mode, "--log", s->log};
    int n = 5;
    for (int i = 0; args && args[i] && n < 22; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    live_add(s->pid);
    for (int i = 0; i < 500 && !s->port; i++) {
        FILE *f = fopen(out, "r");
        char line[128] = "";
        if (f) {
            if (fgets(line, sizeof line, f) && strchr(line, '\n'))
                sscanf(line, "listening on http://127.0.0.1:%d", &s->port);
            fclose(f);
        }
        if (!s->port)
            usleep(20000);
    }
    if (!s->port)
        fail_msg("stg_hostile did not start");
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
