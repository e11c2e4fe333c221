/*
 * `stagger batch` progress: the bar on a terminal, plain lines elsewhere.
 *
 * Invariants:
 *  - A bar line is never longer than the terminal's width minus one (the
 *    last column makes some terminals wrap, and a wrapped \r-redrawn line
 *    floods the scrollback): fields are dropped, least useful first, and
 *    what still does not fit is cut. The width is read with TIOCGWINSZ at
 *    start and again after every SIGWINCH (the handler only sets a flag).
 *  - The ETA is what is left, times the attempts a job takes, over the
 *    attempt rate the client-side limiter allows (a fixed --rate, per host:
 *    the runner sets R times the hosts it has seen), or the
 *    recent rate when that is lower or no fixed limit is known; the recent
 *    rate is smoothed over a few seconds, never an average since the
 *    start (which a slow start or a burst would skew for the whole run).
 *  - The last line is drawn from the counts read back from the store after
 *    the run, not from the last snapshot: it is the true final state.
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

#define RATE_TAU_S 5.0 /* smoothing time constant of the recent rates */
#define MIN_WIDTH 20
#define MAX_BAR 40

static volatile sig_atomic_t g_winch;
static struct sigaction g_old_winch;

static void on_winch(int sig)
{
    (void)sig;
    g_winch = 1;
}

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
    p->t_us = now_us;
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

static void update_rates(progress *p, const progress_state *s, int64_t now_us)
{
    double dt = (double)(now_us - p->t_us) / 1e6;
    if (dt < (p->rated ? 0.2 : 1.0)) /* the first second is the burst, not the rate */
        return;
    double ar = (double)(s->attempts - p->attempts) / dt;
    double jr = (double)(s->finished - p->finished) / dt;
    if (!p->rated) {
        p->attempt_rps = ar, p->job_rps = jr;
        p->rated = true;
    } else {
        double a = 1 - exp(-dt / RATE_TAU_S);
        p->attempt_rps += a * (ar - p->attempt_rps);
        p->job_rps += a * (jr - p->job_rps);
    }
    p->attempts = s->attempts, p->finished = s->finished, p->t_us = now_us;
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
    double rate = p->rated ? p->attempt_rps : 0;
    if (p->limit_rps > 0 && (!(rate > 0) || rate > p->limit_rps))
        rate = p->limit_rps;
    if (!(rate > 0))
        return -1;
    return (double)s->left * per_job / rate;
}

static void fmt_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 360000)
        snprintf(buf, size, "?");
    else if (s < 60)
        snprintf(buf, size, "%.0f s", ceil(s));
    else if (s < 3600)
        snprintf(buf, size, "%d m %02d s", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, size, "%d h %02d m", (int)s / 3600, ((int)s / 60) % 60);
}

/* The text after the bar at a level of detail (0 most, 4 least). */
static void fmt_text(const progress *p, const progress_state *s, bool final, int level,
                     char *buf, size_t size)
{
    char eta[32], tail[80], conc[32] = "";
    fmt_eta(progress_eta(p, s), eta, sizeof eta);
    if (s->concurrency > 0) /* a learned concurrency: where it stands */
        snprintf(conc, sizeof conc, "conc %d  ", s->concurrency);
    if (final)
        snprintf(tail, sizeof tail, "%sfinished", level == 0 ? conc : "");
    else
        snprintf(tail, sizeof tail, "%sETA %s", level == 0 ? conc : "", eta);
    double p429 = s->attempts ? 100.0 * (double)s->status_429 / (double)s->attempts : 0;
    double rps = p->rated ? p->attempt_rps : 0;
    switch (level) {
    case 0:
        snprintf(buf, size,
                 "%lld/%lld  done %lld  failed %lld  deferred %lld  review %lld  %.1f req/s  "
                 "429 %.1f%%  %s",
                 (long long)s->ended, (long long)s->total, (long long)s->done,
                 (long long)s->failed, (long long)s->deferred, (long long)s->review, rps, p429,
                 tail);
        break;
    case 1:
        snprintf(buf, size,
                 "%lld/%lld  done %lld  failed %lld  deferred %lld  %.1f req/s  429 %.1f%%  %s",
                 (long long)s->ended, (long long)s->total, (long long)s->done,
                 (long long)s->failed, (long long)(s->deferred + s->review), rps, p429, tail);
        break;
    case 2:
        snprintf(buf, size, "%lld/%lld  %.1f req/s  %s", (long long)s->ended,
                 (long long)s->total, rps, tail);
        break;
    case 3:
        snprintf(buf, size, "%lld/%lld  %s", (long long)s->ended, (long long)s->total,
                 final ? "finished" : eta);
        break;
    default:
        snprintf(buf, size, "%lld/%lld", (long long)s->ended, (long long)s->total);
        break;
    }
}

size_t progress_format(const progress *p, const progress_state *s, bool bar, bool final,
                       int width, char *buf, size_t size)
{
    STG_ASSERT(size > 0);
    char text[256];
    if (!bar) { /* the plain lines keep their one format (logs are read by scripts) */
        char eta[32];
        fmt_eta(final ? 0 : progress_eta(p, s), eta, sizeof eta);
        char conc[40] = "";
        if (s->concurrency > 0)
            snprintf(conc, sizeof conc, ", concurrency %d", s->concurrency);
        double p429 = s->attempts ? 100.0 * (double)s->status_429 / (double)s->attempts : 0;
        return (size_t)snprintf(buf, size,
                                "batch: %lld/%lld ended (done %lld, failed %lld, deferred %lld, "
                                "review %lld), %lld in flight, %.1f req/s, 429 %.1f%%, ETA %s%s",
                                (long long)s->ended, (long long)s->total, (long long)s->done,
                                (long long)s->failed, (long long)s->deferred,
                                (long long)s->review, (long long)s->inflight,
                                p->rated ? p->attempt_rps : 0, p429, eta, conc);
    }
    if (width < MIN_WIDTH)
        width = MIN_WIDTH;
    size_t room = (size_t)width - 1;
    if (room >= size)
        room = size - 1;
    for (int level = 0; level <= 4; level++) {
        fmt_text(p, s, final, level, text, sizeof text);
        size_t tl = strlen(text);
        if (tl + 2 + 1 + 8 > room) /* "[" 8 cells "] " text */
            continue;
        size_t cells = room - tl - 3;
        if (cells > MAX_BAR)
            cells = MAX_BAR;
        size_t fill = s->total > 0 ? (size_t)((double)cells * (double)s->ended /
                                               (double)s->total)
                                   : cells;
        if (fill > cells)
            fill = cells;
        char *w = buf;
        *w++ = '[';
        for (size_t i = 0; i < cells; i++)
            *w++ = i < fill ? '#' : '.';
        *w++ = ']';
        *w++ = ' ';
        memcpy(w, text, tl + 1);
        return (size_t)(w - buf) + tl;
    }
    for (int level = 0; level <= 4; level++) {
        fmt_text(p, s, final, level, text, sizeof text);
        if (strlen(text) <= room || level == 4)
            break;
    }
    size_t tl = strlen(text);
    if (tl > room)
        tl = room;
    memcpy(buf, text, tl);
    buf[tl] = '\0';
    return tl;
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

void progress_final(progress *p, const progress_state *s, int64_t now_us)
{
    update_rates(p, s, now_us);
    if (p->mode != PROGRESS_NONE)
        emit(p, s, true);
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
