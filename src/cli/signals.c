/*
 * SIGINT and SIGTERM for a batch run (the database's and the queue's): the
 * first one sets cli_stop_signal and the run stops at its next step,
 * putting what is in flight back; the handler is reset at once
 * (SA_RESETHAND), so a second one kills (the next run recovers, or the
 * queue hands the jobs to other workers). SIGPIPE is ignored while a run
 * goes: a closed pipe is a write error, reported, not a death. The
 * handler only sets a flag (async-signal-safe). fetch keeps its own (it
 * fires a cancel token), proxy and serve wait for signals with sigwait.
 */
#include <signal.h>
#include <string.h>

#include "cli/cli.h"

volatile sig_atomic_t cli_stop_signal;

static void on_stop(int sig)
{
    cli_stop_signal = sig;
}

void cli_stop_signals_catch(void)
{
    cli_stop_signal = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESETHAND; /* a second signal kills */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void cli_stop_signals_release(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}
