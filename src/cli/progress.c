/*
 * `stagger batch` progress: the bar on a terminal, plain lines elsewhere.
 *
 * Invariants:
 *  - A bar line is never longer than the terminal's width minus one (the
 *    last column makes some terminals wrap, and a wrapped \r-redrawn line
 *    floods the scrollback). The width is read with TIOCGWINSZ at start and
 *    again after every SIGWINCH (the handler only sets a flag).
 *  - Fields keep their place: each is padded to a width that depends on
 *    the total only, never on a value, so the fields a width shows (most
 *    important first: count, ETA, rate, done, failed, 429 share, deferred,
 *    review, a queue worker's jobs here (or "Redis away", as wide), learned
 *    concurrency; then the bar, in front, when at least MIN_BAR cells fit)
 *    are the same on every redraw, each at one column.
 *  - A queue worker's line shows the whole queue (progress_state.queue):
 *    its rate and ETA are the queue's pace, not this worker's sends.
 *  - The rates are measured over a window of the last 5 s (a ring of
 *    samples of this run's counters), never averaged since the start: the
 *    first redraw already shows the first jobs' rate, and when nothing
 *    finishes for 5 s the rate is 0.
 *  - The ETA is what is left, times the attempts a job takes, over the
 *    attempt rate the client-side limiter allows (a fixed --rate, per host:
 *    the runner sets R times the hosts it has seen), or the recent rate
 *    when that is lower or no fixed limit is known.
 *  - The last line is drawn from the counts read back from the store after
 *    the run, not from the last snapshot: it is the true final state, and
 *    its rate is the report's "jobs/s answered" (given by the runner).
 */
#ifdef STG_HAVE_STORE

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/progress.h"
#include "util/assert.h"

#define WINDOW_US 5000000      /* the rates are measured over the last 5 s */
#define SAMPLE_EVERY_US 100000 /* at most one sample a tenth of a second */
#define MIN_WIDTH 20
#define MAX_BAR 40
#define MIN_BAR 8
#define ETA_W 6                /* "99h59m", the bar's ETA */
#define RATE_W 6               /* "9999.9" */

static volatile sig_atomic_t g_winch;
static struct sigaction g_old_winch;

static void on_winch(int sig)
{
    (void)sig;
    g_winch = 1;
}

static void push_sample(progress *p, int64_t now_us, uint64_t attempts, uint64_t finished);

static int read_width(int fd)
{
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *env = getenv("COLUMNS");
    int cols = env ? atoi(env) : 0;
    return cols > 0 ? cols : 80;
}

void progress_init(progress *p, enum progress_mode mode, FILE *out, double limit_rps,
                   int64_t now_us)
{
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->out = out;
    p->fd = fileno(out);
    p->limit_rps = limit_rps > 0 ? limit_rps : 0;
    push_sample(p, now_us, 0, 0); /* the run's counters start at 0 */
    if (mode == PROGRESS_BAR) {
        p->width = read_width(p->fd);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_winch;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        g_winch = 0;
        sigaction(SIGWINCH, &sa, &g_old_winch);
    }
}

/* A sample of the counters, kept while it can still be a window's start. */
static void push_sample(progress *p, int64_t now_us, uint64_t attempts, uint64_t finished)
{
    if (p->n_samples > 0) {
        const progress_sample *last =
            &p->samples[(p->first + p->n_samples - 1) % PROGRESS_SAMPLES];
        if (now_us - last->t_us < SAMPLE_EVERY_US)
            return; /* a denser history would only shorten the one kept */
    }
    if (p->n_samples == PROGRESS_SAMPLES) {
        p->first = (p->first + 1) % PROGRESS_SAMPLES;
        p->n_samples--;
    }
    progress_sample *x = &p->samples[(p->first + p->n_samples) % PROGRESS_SAMPLES];
    x->t_us = now_us, x->attempts = attempts, x->finished = finished;
    p->n_samples++;
}

/* The rates over the window: from the newest sample at least WINDOW_US
 * old (or the oldest there is) to now. Samples older than that start are
 * dropped. Nothing finished in the window: 0. */
static void update_rates(progress *p, const progress_state *s, int64_t now_us)
{
    while (p->n_samples > 1 &&
           p->samples[(p->first + 1) % PROGRESS_SAMPLES].t_us <= now_us - WINDOW_US) {
        p->first = (p->first + 1) % PROGRESS_SAMPLES;
        p->n_samples--;
    }
    if (p->n_samples > 0) {
        const progress_sample *base = &p->samples[p->first];
        double dt = (double)(now_us - base->t_us) / 1e6;
        if (dt > 0) {
            p->attempt_rps = (double)(s->attempts - base->attempts) / dt;
            p->job_rps = (double)(s->finished - base->finished) / dt;
            p->window_s = dt;
            p->rated = true;
        }
    }
    push_sample(p, now_us, s->attempts, s->finished);
}

double progress_eta(const progress *p, const progress_state *s)
{
    if (s->left <= 0)
        return 0;
    /* Attempts per finished job; the jobs in flight hold one attempt each
     * that has not finished yet. */
    double done = (double)s->attempts - (double)(s->inflight > 0 ? s->inflight : 0);
    double per_job = s->finished > 0 ? done / (double)s->finished : 1;
    if (per_job < 1)
        per_job = 1;
    if (s->queue) /* every worker's jobs: the queue's own pace, whatever this one sends */
        return p->rated && p->job_rps > 0 ? (double)s->left / p->job_rps : -1;
    double rate = p->rated ? p->attempt_rps : 0;
    if (p->limit_rps > 0 && (!(rate > 0) || rate > p->limit_rps))
        rate = p->limit_rps;
    if (!(rate > 0))
        return -1;
    return (double)s->left * per_job / rate;
}

/* The time left ("99 h 59 m" at most); "?" unknown. */
static void fmt_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s >= 360000)
        snprintf(buf, size, "?");
    else if (s < 60)
        snprintf(buf, size, "%.0f s", ceil(s));
    else if (s < 3600)
        snprintf(buf, size, "%d m %02d s", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, size, "%d h %02d m", (int)s / 3600, ((int)s / 60) % 60);
}

/* The same, compact, for the bar: at most ETA_W characters ("99h59m"). */
static void fmt_eta_short(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s >= 360000)
        snprintf(buf, size, "?");
    else if (s < 60)
        snprintf(buf, size, "%.0fs", ceil(s));
    else if (s < 3600)
        snprintf(buf, size, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, size, "%dh%02dm", (int)s / 3600, ((int)s / 60) % 60);
}

static int digits(int64_t n)
{
    int d = 1;
    while (n >= 10)
        n /= 10, d++;
    return d;
}

/* The rate, RATE_W characters wide whatever its value. */
static void fmt_rate(double r, char *buf, size_t size)
{
    if (!(r >= 0))
        r = 0;
    if (r < 9999.95)
        snprintf(buf, size, "%*.1f", RATE_W, r);
    else if (r < 999999.5)
        snprintf(buf, size, "%*.0f", RATE_W, r);
    else
        snprintf(buf, size, "%*s", RATE_W, ">1e6");
}

/* The rate a line shows: during the run, finished jobs per second over the
 * window; on the last line, the figure the report prints. */
static double shown_rate(const progress *p, bool final)
{
    if (final)
        return p->end_rps;
    return p->rated ? p->job_rps : 0;
}

/* The bar's fields, most important first, each padded to a width that
 * depends only on the total (and the concurrency's presence), never on
 * the values: which fields fit a width, and where each one starts, stay
 * the same from the first redraw to the last. */
enum { F_COUNT, F_ETA, F_RATE, F_DONE, F_FAILED, F_429, F_DEFERRED, F_REVIEW, F_HERE, F_CONC,
       F_N };

static int fmt_fields(const progress *p, const progress_state *s, bool final,
                      char f[F_N][48])
{
    int w = digits(s->total > 0 ? s->total : 0);
    char eta[32], rate[32];
    fmt_eta_short(progress_eta(p, s), eta, sizeof eta);
    fmt_rate(shown_rate(p, final), rate, sizeof rate);
    double p429 = s->attempts ? 100.0 * (double)s->status_429 / (double)s->attempts : 0;
    snprintf(f[F_COUNT], 48, "%*lld/%lld", w, (long long)s->ended, (long long)s->total);
    if (final)
        snprintf(f[F_ETA], 48, "%-*s", ETA_W + 4, "finished");
    else
        snprintf(f[F_ETA], 48, "ETA %-*s", ETA_W, eta);
    snprintf(f[F_RATE], 48, "%s jobs/s", rate);
    snprintf(f[F_DONE], 48, "done %*lld", w, (long long)s->done);
    snprintf(f[F_FAILED], 48, "failed %*lld", w, (long long)s->failed);
    if (p429 < 99.95) /* 4 characters either way */
        snprintf(f[F_429], 48, "429 %4.1f%%", p429);
    else
        snprintf(f[F_429], 48, "429 %4.0f%%", p429);
    snprintf(f[F_DEFERRED], 48, "deferred %*lld", w, (long long)s->deferred);
    snprintf(f[F_REVIEW], 48, "review %*lld", w, (long long)s->review);
    /* a queue worker's: its own jobs in flight, or that Redis is away (as
     * wide) */
    int hw = 5 + w > 10 ? 5 + w : 10; /* "here N", "Redis away" */
    char here[32];
    snprintf(here, sizeof here, "here %*d", w, s->here);
    if (s->queue)
        snprintf(f[F_HERE], 48, "%-*s", hw, s->kept ? "Redis away" : here);
    int n = s->queue ? F_HERE + 1 : F_HERE;
    if (s->concurrency > 0) /* a fixed concurrency: not shown */
        snprintf(f[n++], 48, "conc %4d", s->concurrency);
    return n;
}

size_t progress_format(const progress *p, const progress_state *s, bool bar, bool final,
                       int width, char *buf, size_t size)
{
    STG_ASSERT(size > 0);
    if (!bar) { /* the plain lines keep their one format (logs are read by scripts) */
        char eta[48], conc[80] = "", claimed[80] = "";
        if (final)
            snprintf(eta, sizeof eta, "finished");
        else {
            char e[32];
            fmt_eta(progress_eta(p, s), e, sizeof e);
            snprintf(eta, sizeof eta, "ETA %s", e);
        }
        char here[32] = "";
        if (s->queue) /* the queue's claimed jobs, every worker's: how many on this one */
            snprintf(here, sizeof here, "; %d here", s->here);
        if (s->inflight > 0) /* claimed jobs: sending, or waiting for a retry or the limiter */
            snprintf(claimed, sizeof claimed, ", %lld claimed (sending or waiting%s)",
                     (long long)s->inflight, here);
        if (s->concurrency > 0)
            snprintf(conc, sizeof conc, ", at most %d requests at once (learned)",
                     s->concurrency);
        double p429 = s->attempts ? 100.0 * (double)s->status_429 / (double)s->attempts : 0;
        char window[48] = "";
        if (!final)
            snprintf(window, sizeof window, " (last %.0f s)", p->rated ? ceil(p->window_s) : 0);
        return (size_t)snprintf(buf, size,
                                "batch: %lld/%lld ended (done %lld, failed %lld, deferred %lld, "
                                "review %lld), %.1f jobs/s%s, 429 %.1f%%, %s%s%s%s",
                                (long long)s->ended, (long long)s->total, (long long)s->done,
                                (long long)s->failed, (long long)s->deferred,
                                (long long)s->review, shown_rate(p, final), window, p429, eta,
                                claimed, s->queue && s->kept ? ", Redis away: outcomes kept" : "",
                                conc);
    }
    if (width < MIN_WIDTH)
        width = MIN_WIDTH;
    size_t room = (size_t)width - 1;
    if (room >= size)
        room = size - 1;
    char f[F_N][48];
    int nf = fmt_fields(p, s, final, f);
    /* As many fields as fit, in order; then the bar, when MIN_BAR cells
     * still fit (a count field always says as much as a bar). */
    size_t len = 0;
    int n = 0;
    while (n < nf) {
        size_t add = strlen(f[n]) + (n ? 2 : 0);
        if (len + add > room)
            break;
        len += add, n++;
    }
    size_t cells = 0;
    if (n > 0 && len + 3 + MIN_BAR <= room)
        cells = room - len - 3 > MAX_BAR ? MAX_BAR : room - len - 3;
    char *w = buf;
    if (cells) {
        size_t fill = s->total > 0 ? (size_t)((double)cells * (double)s->ended /
                                               (double)s->total)
                                   : cells;
        if (fill > cells)
            fill = cells;
        *w++ = '[';
        for (size_t i = 0; i < cells; i++)
            *w++ = i < fill ? '#' : '.';
        *w++ = ']';
        *w++ = ' ';
    }
    if (n == 0) { /* not even the count fits: cut it */
        size_t tl = strlen(f[F_COUNT]);
        if (tl > room)
            tl = room;
        memcpy(w, f[F_COUNT], tl);
        w[tl] = '\0';
        return (size_t)(w - buf) + tl;
    }
    for (int i = 0; i < n; i++) {
        if (i) {
            *w++ = ' ';
            *w++ = ' ';
        }
        size_t fl = strlen(f[i]);
        memcpy(w, f[i], fl);
        w += fl;
    }
    *w = '\0';
    return (size_t)(w - buf);
}

static void emit(progress *p, const progress_state *s, bool final)
{
    char line[512];
    if (p->mode == PROGRESS_BAR) {
        if (g_winch) {
            g_winch = 0;
            p->width = read_width(p->fd);
        }
        size_t n = progress_format(p, s, true, final, p->width, line, sizeof line);
        STG_ASSERT(n < (size_t)(p->width > MIN_WIDTH ? p->width : MIN_WIDTH));
        fprintf(p->out, "\r%s\033[K", line);
        p->drawn = true;
        if (final) {
            fputc('\n', p->out);
            p->drawn = false;
        }
    } else if (p->mode == PROGRESS_LINES) {
        progress_format(p, s, false, final, 0, line, sizeof line);
        fprintf(p->out, "%s\n", line);
    }
    fflush(p->out);
}

void progress_draw(progress *p, const progress_state *s, int64_t now_us)
{
    update_rates(p, s, now_us);
    if (p->mode != PROGRESS_NONE)
        emit(p, s, false);
}

void progress_final(progress *p, const progress_state *s, double jobs_per_s)
{
    p->end_rps = jobs_per_s;
    if (p->mode != PROGRESS_NONE)
        emit(p, s, true);
}

void progress_clear(progress *p)
{
    if (p->mode == PROGRESS_BAR && p->drawn) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
        p->drawn = false;
    }
}

void progress_end(progress *p)
{
    if (p->drawn) {
        fputc('\n', p->out);
        fflush(p->out);
        p->drawn = false;
    }
    if (p->mode == PROGRESS_BAR)
        sigaction(SIGWINCH, &g_old_winch, NULL);
}

#else
typedef int stg__progress_unused;
#endif
