/*
 * The exit statuses of every `stagger` subcommand: one table, so that a
 * number means the same thing in fetch, batch, plan, serve and sim, and a
 * script can test `$? = 3` without knowing which subcommand ran. Generated
 * from one X-macro (as libstagger's errors): the enum, `stagger help
 * --exit-codes` (which tests/integration/test_cli_options.sh compares with
 * stagger(1)) and the "Exit status" line of each --help.
 *
 * Invariants: numbers are never reused for another meaning; a subcommand
 * uses only numbers from this table (each lists its own in cli_command.exits).
 * X(NAME, number, word for --help, meaning for stagger help --exit-codes).
 */
#ifndef STAGGER_CLI_EXIT_H
#define STAGGER_CLI_EXIT_H

#include <stdio.h>

#define CLI_EXIT_MAP(X)                                                                            \
    X(OK, 0, "ok", "success: the final answer was 1xx-3xx, every job is done")                     \
    X(FAILED, 1, "failed",                                                                         \
      "failed for good: an HTTP error that is not retried, jobs that failed, or a local "          \
      "error (out of memory, an output that cannot be written, a server that cannot start)")       \
    X(USAGE, 2, "bad usage", "bad usage: one line on standard error, nothing was sent")            \
    X(LEFT, 3, "incomplete",                                                                       \
      "not done, may succeed later: a retryable answer (429, 503) when retries ran out or "        \
      "the server asked for a longer wait; jobs deferred or in review")                            \
    X(DB, 4, "database", "database problem: locked, read-only, full, another job set")             \
    X(INPUT, 5, "input", "input unreadable or empty, or bad lines with --strict")                  \
    X(LIMITER, 6, "limiter", "the shared limiter (--limiter) is unreachable or was lost")        \
    X(TRANSPORT, 7, "transport", "no HTTP answer: refused, reset, timeout, DNS, TLS")              \
    X(DEADLINE, 8, "deadline", "the deadline (--deadline) passed")                                 \
    X(TRUNCATED, 9, "truncated", "a response body was larger than --max-body")                     \
    X(TLS, 10, "tls",                                                                              \
      "TLS failure, not retried: the server's certificate did not verify (see --cacert), "         \
      "a CA or client certificate file unusable, or the server refused the TLS connection")        \
    X(SIGINT, 130, "interrupted", "interrupted by SIGINT (Ctrl-C)")                                \
    X(SIGTERM, 143, "terminated", "stopped by SIGTERM")

enum cli_exit {
#define CLI_EXIT_ENUM(name, num, word, text) CLI_EXIT_##name = num,
    CLI_EXIT_MAP(CLI_EXIT_ENUM)
#undef CLI_EXIT_ENUM
};

/* The --help word of an exit status ("interrupted"); "?" if unknown. */
const char *cli_exit_word(int status);

/* "Exit status: 0 ok; 1 failed; ...": the statuses in list (ending -1). */
void cli_exit_help(const int *list, FILE *out);

/* "NUMBER\tMEANING" per status, the whole table. */
void cli_exit_dump(FILE *out);

#endif
