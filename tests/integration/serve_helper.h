/*
 * The C integration tests' handle on `stagger serve`: start it on a free
 * loopback port (the port read from its first stdout line, written to a
 * file so the server never blocks on a pipe), stop it, count lines of its
 * request log. Include after cmocka. Only 127.0.0.1 is used.
 */
#ifndef STG_TEST_SERVE_HELPER_H
#define STG_TEST_SERVE_HELPER_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


typedef struct server {
    pid_t pid;
    int port;
    char dir[64];
    char log[96];
} server;

/* Servers still running: a failed assertion leaves a test early, and the
 * teardown stops what it left behind. */
static pid_t live[8];

static inline void live_add(pid_t pid)
{
    for (int i = 0; i < 8; i++)
        if (!live[i]) {
            live[i] = pid;
            return;
        }
}

static inline void live_del(pid_t pid)
{
    for (int i = 0; i < 8; i++)
        if (live[i] == pid)
            live[i] = 0;
}

static inline int stop_leftovers(void **state)
{
    (void)state;
    for (int i = 0; i < 8; i++)
        if (live[i] > 0) {
            kill(live[i], SIGTERM);
            waitpid(live[i], NULL, 0);
            live[i] = 0;
        }
    return 0;
}

static inline int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The one way a test starts a server: fork and exec argv (argv[0] the
 * binary) with stdout to s->dir/out (a file, so the server never blocks
 * on a pipe), and read the port from its first line, "listening on
 * http(s)://127.0.0.1:PORT" (up to 10 s; a hang guard). s->dir and s->log
 * are set by the caller; what names the server goes in the failure. */
static inline void proc_start(server *s, const char *const *argv, const char *what)
{
    char out[96];
    snprintf(out, sizeof out, "%s/out", s->dir);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    live_add(s->pid);
    for (int i = 0; i < 500 && !s->port; i++) {
        FILE *f = fopen(out, "r");
        char line[128] = "";
        if (f) {
            if (fgets(line, sizeof line, f) && strchr(line, '\n'))
                if (sscanf(line, "listening on http://127.0.0.1:%d", &s->port) != 1)
                    sscanf(line, "listening on https://127.0.0.1:%d", &s->port); /* --tls-* */
            fclose(f);
        }
        if (!s->port)
            usleep(20000);
    }
    if (!s->port)
        fail_msg("%s did not start", what);
}

/* A scratch directory from template (/tmp/stg_xx_XXXXXX) for s, its log
 * file in it. */
static inline void proc_dir(server *s, const char *template)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", template);
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->log, sizeof s->log, "%s/log", s->dir);
}

/* Start `stagger serve --port 0 --log DIR/log ARGS...`. */
static inline void server_start(server *s, const char *const *args)
{
    const char *bin = getenv("STAGGER");
    if (!bin)
        fail_msg("STAGGER is not set");
    proc_dir(s, "/tmp/stg_it_XXXXXX");
    const char *argv[40] = {bin, "serve", "--bind", "127.0.0.1", "--port", "0", "--threads", "2",
                            "--log", s->log};
    int n = 10;
    for (int i = 0; args && args[i] && n < 38; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    proc_start(s, argv, "stagger serve");
}

/* Stop the server; its log is complete afterwards. */
static inline void server_stop(server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int st;
        waitpid(s->pid, &st, 0);
        live_del(s->pid);
        s->pid = 0;
    }
}

static inline void server_cleanup(server *s)
{
    server_stop(s);
    char path[128];
    snprintf(path, sizeof path, "%s/out", s->dir);
    unlink(path);
    unlink(s->log);
    rmdir(s->dir);
}

/* Lines of the server log containing needle. */
static inline int log_count(const server *s, const char *needle)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

static inline void url_of(const server *s, const char *path, char *buf, size_t size)
{
    snprintf(buf, size, "http://127.0.0.1:%d%s", s->port, path);
}

#endif
