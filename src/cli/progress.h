/*
 * `stagger batch` progress on stderr: a one-line bar on a terminal, plain
 * lines elsewhere. Private to the batch run's loop (batch_run.c: a
 * database's run and a queue worker's) and its tests.
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
    /* A worker of the Redis work queue (batch_queue.c): the counts are the
     * whole queue's, finished is the jobs the queue ended since this worker
     * began (its rate and the ETA are the queue's), here the jobs in flight
     * on this worker, kept: Redis is away and its outcomes are kept. */
    bool queue;
    int here;
    bool kept;
} progress_state;

enum progress_mode { PROGRESS_BAR, PROGRESS_LINES, PROGRESS_NONE };

/* The counters at one time (the ring behind the recent rates). */
typedef struct progress_sample {
    int64_t t_us;
    uint64_t attempts, finished;
} progress_sample;

#define PROGRESS_SAMPLES 64 /* one a tenth of a second at most: 6.4 s > the 5 s window */

typedef struct progress {
    enum progress_mode mode;
    FILE *out;
    int fd;                /* out's descriptor: its terminal's width */
    int width;             /* columns; re-read after SIGWINCH */
    double limit_rps;      /* attempts/s the client-side limiter allows the run (--rate
                              times the hosts seen); 0: none known. The runner updates it */
    /* The recent rates: attempts and finished jobs per second over the
     * last 5 s (window_s: the span measured, shorter at the start), from a
     * ring of samples of this run's counters; never an average since the
     * start, 0 when nothing finished in the window. */
    progress_sample samples[PROGRESS_SAMPLES];
    int first, n_samples;
    double attempt_rps, job_rps, window_s;
    bool rated;
    double end_rps;        /* the last line's figure: the report's jobs/s */
    bool drawn;            /* a bar is on the screen (the line is open) */
} progress;

/* Set up p for mode on out; the bar follows the terminal's width (SIGWINCH
 * installed here, restored by progress_end). limit_rps: the fixed rate, 0
 * when the limit is adaptive or none. now_us: a monotonic clock. */
void progress_init(progress *p, enum progress_mode mode, FILE *out, double limit_rps,
                   int64_t now_us);
/* Feed the counters at now_us (updates the rates) and draw one line. */
void progress_draw(progress *p, const progress_state *s, int64_t now_us);
/* The last line: the final state s (read back from the store), "finished"
 * and jobs_per_s, the rate the report prints (jobs answered over the runs'
 * wall time), so the two agree. */
void progress_final(progress *p, const progress_state *s, double jobs_per_s);
/* Erase an open bar line, so that a message can take its place (the next
 * draw puts the bar back under it). */
void progress_clear(progress *p);
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
