/*
 * `stagger batch` progress on stderr: a one-line bar on a terminal, plain
 * lines elsewhere. Private to the batch runner (batch_run.c) and its tests.
 */
#ifndef STAGGER_CLI_PROGRESS_H
#define STAGGER_CLI_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What one line shows: counts and this run's attempt counters. */
typedef struct progress_state {
    int64_t total, ended, done, failed, deferred, review, inflight, left;
    uint64_t attempts, finished, status_429;
    int concurrency;  /* learned: the hosts' limits summed; 0: fixed (not shown) */
} progress_state;

enum progress_mode { PROGRESS_BAR, PROGRESS_LINES, PROGRESS_NONE };

typedef struct progress {
    enum progress_mode mode;
    FILE *out;
    int fd;                /* out's descriptor: its terminal's width */
    int width;             /* columns; re-read after SIGWINCH */
    double limit_rps;      /* attempts/s the client-side limiter allows the run (--rate
                              times the hosts seen); 0: none known. The runner updates it */
    /* A window of recent rates (no early average): attempts and finished
     * jobs per second, smoothed with a 5 s time constant. */
    int64_t t_us;
    uint64_t attempts, finished;
    double attempt_rps, job_rps;
    bool rated;
    bool drawn;            /* a bar is on the screen (the line is open) */
} progress;

/* Set up p for mode on out; the bar follows the terminal's width (SIGWINCH
 * installed here, restored by progress_end). limit_rps: the fixed rate, 0
 * when the limit is adaptive or none. now_us: a monotonic clock. */
void progress_init(progress *p, enum progress_mode mode, FILE *out, double limit_rps,
                   int64_t now_us);
/* Feed the counters at now_us (updates the rates) and draw one line. */
void progress_draw(progress *p, const progress_state *s, int64_t now_us);
/* The last line: the final state s (read back from the store), no ETA. */
void progress_final(progress *p, const progress_state *s, int64_t now_us);
/* Close an open bar line (a newline) and restore SIGWINCH. */
void progress_end(progress *p);

/* Pure pieces, for the tests: the line for s at width columns (bar mode
 * when bar), never longer than width - 1 characters (the last column
 * would wrap on some terminals), in buf; and the ETA in seconds (-1:
 * unknown) from what is left and the rate the limiter allows. */
size_t progress_format(const progress *p, const progress_state *s, bool bar, bool final,
                       int width, char *buf, size_t size);
double progress_eta(const progress *p, const progress_state *s);

#endif
